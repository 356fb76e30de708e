// request.c: ModelInferRequest encoding with protobuf-c. The message points
// at the tensors' own bytes (protobuf-c packs from there), so the only copy
// is the packed buffer, made once per run.
#include "clients/load/request.h"

#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"

#define SHM_PARAMS 3  // region, byte_size, offset

// Input and requested-output parameter entries are distinct protobuf types
// (their descriptors differ), so each kind of tensor gets its own slot; the
// values are the same type and are filled by shm_values for both.
typedef struct in_slot {
  Inference__ModelInferRequest__InferInputTensor t;
  Inference__InferParameter val[SHM_PARAMS];
  Inference__ModelInferRequest__InferInputTensor__ParametersEntry ent[SHM_PARAMS];
  Inference__ModelInferRequest__InferInputTensor__ParametersEntry *entp[SHM_PARAMS];
} in_slot;

typedef struct out_slot {
  Inference__ModelInferRequest__InferRequestedOutputTensor t;
  Inference__InferParameter val[SHM_PARAMS];
  Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry ent[SHM_PARAMS];
  Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry *entp[SHM_PARAMS];
} out_slot;

// Fills keys/vals with the shared_memory_* parameters of ref; returns how
// many (0 when the tensor is not in shared memory).
static size_t shm_values(const ld_region_ref *ref, char **keys, Inference__InferParameter *vals) {
  if (!ref || !ref->region) return 0;
  size_t n = 0;
  inference__infer_parameter__init(&vals[n]);
  keys[n] = "shared_memory_region";
  vals[n].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
  vals[n++].string_param = (char *)ref->region;
  // int64, as Triton's clients send them (inferd takes uint64 as well)
  inference__infer_parameter__init(&vals[n]);
  keys[n] = "shared_memory_byte_size";
  vals[n].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
  vals[n++].int64_param = (int64_t)ref->byte_size;
  if (ref->offset) {
    inference__infer_parameter__init(&vals[n]);
    keys[n] = "shared_memory_offset";
    vals[n].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    vals[n++].int64_param = (int64_t)ref->offset;
  }
  return n;
}

int ld_request_encode_spec(const ld_request_spec *spec, uint8_t **buf, size_t *len, err *e) {
  *buf = NULL;
  *len = 0;
  size_t n = spec->n_in, m = spec->n_out;
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  in_slot *ins = calloc(n ? n : 1, sizeof *ins);
  Inference__ModelInferRequest__InferInputTensor **iptrs = calloc(n ? n : 1, sizeof *iptrs);
  ProtobufCBinaryData *raw = calloc(n ? n : 1, sizeof *raw);
  out_slot *outs = calloc(m ? m : 1, sizeof *outs);
  Inference__ModelInferRequest__InferRequestedOutputTensor **optrs = calloc(m ? m : 1, sizeof *optrs);
  int rc = 0;
  if (!ins || !iptrs || !raw || !outs || !optrs) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  req.model_name = (char *)spec->model;
  req.model_version = (char *)(spec->version ? spec->version : "");
  size_t n_raw = 0;
  for (size_t i = 0; i < n; i++) {
    const ld_tensor *in = &spec->in[i];
    in_slot *s = &ins[i];
    inference__model_infer_request__infer_input_tensor__init(&s->t);
    s->t.name = in->name;
    s->t.datatype = in->datatype;
    s->t.n_shape = in->rank;
    s->t.shape = (int64_t *)in->shape;
    char *keys[SHM_PARAMS];
    size_t np = shm_values(spec->in_shm ? &spec->in_shm[i] : NULL, keys, s->val);
    for (size_t k = 0; k < np; k++) {
      inference__model_infer_request__infer_input_tensor__parameters_entry__init(&s->ent[k]);
      s->ent[k].key = keys[k];
      s->ent[k].value = &s->val[k];
      s->entp[k] = &s->ent[k];
    }
    s->t.n_parameters = np;
    s->t.parameters = s->entp;
    iptrs[i] = &s->t;
    // raw_input_contents is indexed by the inputs that are not in shared memory
    if (np == 0) raw[n_raw++] = (ProtobufCBinaryData){.len = in->size, .data = in->data};
  }
  for (size_t i = 0; i < m; i++) {
    out_slot *s = &outs[i];
    inference__model_infer_request__infer_requested_output_tensor__init(&s->t);
    s->t.name = (char *)spec->out[i].name;
    char *keys[SHM_PARAMS];
    size_t np = shm_values(&spec->out[i].shm, keys, s->val);
    for (size_t k = 0; k < np; k++) {
      inference__model_infer_request__infer_requested_output_tensor__parameters_entry__init(&s->ent[k]);
      s->ent[k].key = keys[k];
      s->ent[k].value = &s->val[k];
      s->entp[k] = &s->ent[k];
    }
    s->t.n_parameters = np;
    s->t.parameters = s->entp;
    optrs[i] = &s->t;
  }
  req.n_inputs = n;
  req.inputs = iptrs;
  req.n_raw_input_contents = n_raw;
  req.raw_input_contents = raw;
  req.n_outputs = m;
  req.outputs = optrs;
  size_t size = inference__model_infer_request__get_packed_size(&req);
  *buf = malloc(size ? size : 1);
  if (!*buf) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte request", size);
    goto out;
  }
  *len = inference__model_infer_request__pack(&req, *buf);
out:
  free(ins);
  free(iptrs);
  free(raw);
  free(outs);
  free(optrs);
  return rc;
}

int ld_request_encode(const char *model, const char *version, const ld_tensor *in, size_t n, uint8_t **buf, size_t *len,
                      err *e) {
  ld_request_spec spec = {.model = model, .version = version, .in = in, .n_in = n};
  return ld_request_encode_spec(&spec, buf, len, e);
}

bool ld_response_matches(const uint8_t *resp, size_t len, const ld_tensor *expect, size_t n) {
  Inference__ModelInferResponse *r = inference__model_infer_response__unpack(NULL, len, resp);
  bool ok = r && r->n_raw_output_contents == n;
  for (size_t k = 0; ok && k < n; k++) {
    const ProtobufCBinaryData *o = &r->raw_output_contents[k];
    ok = o->len == expect[k].size && (o->len == 0 || memcmp(o->data, expect[k].data, o->len) == 0);
  }
  if (r) inference__model_infer_response__free_unpacked(r, NULL);
  return ok;
}
