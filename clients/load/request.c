// request.c: ModelInferRequest encoding with protobuf-c. The message points
// at the tensors' own bytes (protobuf-c packs from there), so the only copy
// is the packed buffer, made once per run.
#include "clients/load/request.h"

#include <stdlib.h>

#include "grpc_service.pb-c.h"

int ld_request_encode(const char *model, const char *version, const ld_tensor *in, size_t n, uint8_t **buf, size_t *len,
                      err *e) {
  *buf = NULL;
  *len = 0;
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  Inference__ModelInferRequest__InferInputTensor *tens = calloc(n ? n : 1, sizeof *tens);
  Inference__ModelInferRequest__InferInputTensor **ptrs = calloc(n ? n : 1, sizeof *ptrs);
  ProtobufCBinaryData *raw = calloc(n ? n : 1, sizeof *raw);
  int rc = 0;
  if (!tens || !ptrs || !raw) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  req.model_name = (char *)model;
  req.model_version = (char *)(version ? version : "");
  for (size_t i = 0; i < n; i++) {
    inference__model_infer_request__infer_input_tensor__init(&tens[i]);
    tens[i].name = in[i].name;
    tens[i].datatype = in[i].datatype;
    tens[i].n_shape = in[i].rank;
    tens[i].shape = (int64_t *)in[i].shape;
    ptrs[i] = &tens[i];
    raw[i].data = in[i].data;
    raw[i].len = in[i].size;
  }
  req.n_inputs = n;
  req.inputs = ptrs;
  req.n_raw_input_contents = n;
  req.raw_input_contents = raw;
  size_t size = inference__model_infer_request__get_packed_size(&req);
  *buf = malloc(size ? size : 1);
  if (!*buf) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte request", size);
    goto out;
  }
  *len = inference__model_infer_request__pack(&req, *buf);
out:
  free(tens);
  free(ptrs);
  free(raw);
  return rc;
}
