// test_ld_request: clients/load/inputs.c, model.c's metadata reading and
// request.c. Input shapes are resolved from metadata built here (batch dim,
// variable dims, --shape), bytes come out as asked (seeded random, zeros,
// files), and the encoded ModelInferRequest decodes back with protobuf-c to
// exactly the tensors that went in, shared memory references included; the
// invalid request of --mix widens the first input's last dim by one element.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "clients/load/inputs.h"
#include "clients/load/model.h"
#include "clients/load/request.h"
#include "grpc_service.pb-c.h"

// --- a fake ModelMetadataResponse

typedef struct fake_meta {
  Inference__ModelMetadataResponse md;
  Inference__ModelMetadataResponse__TensorMetadata t[4];
  Inference__ModelMetadataResponse__TensorMetadata *tp[4];
  Inference__ModelMetadataResponse__TensorMetadata o;
  Inference__ModelMetadataResponse__TensorMetadata *op[1];
  int64_t shapes[4][4];
} fake_meta;

// n inputs named/typed as given; shapes[i] ends at 0.
static void fake_init(fake_meta *f, size_t n, const char **names, const char **types, const int64_t (*shapes)[4]) {
  memset(f, 0, sizeof *f);
  inference__model_metadata_response__init(&f->md);
  f->md.name = "fake";
  for (size_t i = 0; i < n; i++) {
    inference__model_metadata_response__tensor_metadata__init(&f->t[i]);
    f->t[i].name = (char *)names[i];
    f->t[i].datatype = (char *)types[i];
    size_t r = 0;
    while (r < 4 && shapes[i][r]) f->shapes[i][r] = shapes[i][r], r++;
    f->t[i].n_shape = r;
    f->t[i].shape = f->shapes[i];
    f->tp[i] = &f->t[i];
  }
  inference__model_metadata_response__tensor_metadata__init(&f->o);
  f->o.name = "OUT";
  f->o.datatype = "FP32";
  f->op[0] = &f->o;
  f->md.n_inputs = n;
  f->md.inputs = f->tp;
  f->md.n_outputs = 1;
  f->md.outputs = f->op;
}

static ld_model *model_of(fake_meta *f, int mbs) {
  ld_model *m = NULL;
  err e = {0};
  int rc = ld_model_from_metadata(&f->md, mbs, &m, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  return m;
}

static ld_input_cfg cfg_of(int rows, const ld_shape_opt *shapes, size_t n_shapes, ld_data data, const char *path,
                           uint64_t seed) {
  ld_input_cfg c = {rows, shapes, n_shapes, data, path, seed};
  return c;
}

static ld_shape_opt shape_opt(const char *name, size_t rank, const int64_t *dims) {
  ld_shape_opt s;
  memset(&s, 0, sizeof s);
  s.name = (char *)name;
  s.rank = rank;
  memcpy(s.dims, dims, rank * sizeof *dims);
  return s;
}

#define CHECK_SHAPE(t, ...)                                                                        \
  do {                                                                                             \
    int64_t want_[] = {__VA_ARGS__};                                                               \
    size_t nw_ = sizeof want_ / sizeof want_[0];                                                   \
    CHECK_EQ_INT((t)->rank, nw_);                                                                  \
    for (size_t k_ = 0; k_ < nw_ && k_ < (t)->rank; k_++) CHECK_EQ_INT((t)->shape[k_], want_[k_]); \
  } while (0)

// --- shapes and bytes

static void test_batching_model(void) {
  fake_meta f;
  const char *names[] = {"A", "B"}, *types[] = {"FP32", "INT64"};
  const int64_t shapes[][4] = {{-1, 4}, {-1, -1, 2}};
  fake_init(&f, 2, names, types, shapes);
  ld_model *m = model_of(&f, 8);
  if (!m) return;
  CHECK(m->batching);
  CHECK_EQ_INT(m->max_batch_size, 8);
  CHECK_EQ_INT(m->n_inputs, 2);
  CHECK_EQ_INT(m->n_outputs, 1);
  CHECK_EQ_STR(m->outputs[0].name, "OUT");

  ld_shape_opt so = shape_opt("B", 1, (int64_t[]){3});
  so.rank = 2, so.dims[1] = 2;
  ld_tensor *t = NULL, *t2 = NULL, *t3 = NULL;
  size_t n = 0, n2 = 0, n3 = 0;
  err e = {0};
  ld_input_cfg c = cfg_of(2, &so, 1, LD_DATA_RANDOM, NULL, 5);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), 0);
  CHECK_EQ_INT(n, 2);
  if (n == 2) {
    CHECK_SHAPE(&t[0], 2, 4);
    CHECK_SHAPE(&t[1], 2, 3, 2);
    CHECK_EQ_INT(t[0].size, 2 * 4 * 4);
    CHECK_EQ_INT(t[1].size, 2 * 3 * 2 * 8);
    CHECK_EQ_STR(t[1].datatype, "INT64");
    // FP32 in [-1, 1), INT64 small and non-negative.
    for (size_t i = 0; i < 8; i++) {
      float x;
      memcpy(&x, t[0].data + 4 * i, 4);
      CHECK(x >= -1.0f && x < 1.0f);
    }
    for (size_t i = 0; i < 12; i++) {
      int64_t x;
      memcpy(&x, t[1].data + 8 * i, 8);
      CHECK(x >= 0 && x < 100);
    }
  }
  // Same seed, same bytes; another seed, other bytes.
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t2, &n2, &e), 0);
  c.seed = 6;
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t3, &n3, &e), 0);
  if (n == 2 && n2 == 2 && n3 == 2) {
    CHECK(memcmp(t[0].data, t2[0].data, t[0].size) == 0);
    CHECK(memcmp(t[1].data, t2[1].data, t[1].size) == 0);
    CHECK(memcmp(t[0].data, t3[0].data, t[0].size) != 0);
  }
  ld_inputs_free(t, n), ld_inputs_free(t2, n2), ld_inputs_free(t3, n3);

  // Zeros.
  c = cfg_of(1, &so, 1, LD_DATA_ZERO, NULL, 1);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), 0);
  if (n == 2) {
    CHECK_SHAPE(&t[0], 1, 4);
    size_t nz = 0;
    for (size_t i = 0; i < t[1].size; i++) nz += t[1].data[i] != 0;
    CHECK_EQ_INT(nz, 0);
  }
  ld_inputs_free(t, n);

  // B's variable dim is missing: the message says how to give it.
  c = cfg_of(1, NULL, 0, LD_DATA_RANDOM, NULL, 1);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "input 'B' has a variable dim");
  CHECK_CONTAINS(e.msg, "--shape B:");
  CHECK(t == NULL && n == 0);

  // A --shape for an input the model does not have.
  ld_shape_opt bogus[2] = {so, shape_opt("C", 1, (int64_t[]){1})};
  c = cfg_of(1, bogus, 2, LD_DATA_RANDOM, NULL, 1);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'C'");

  // Overriding a fixed dim is allowed (to provoke server errors) and noted.
  ld_shape_opt over[2] = {so, shape_opt("A", 1, (int64_t[]){5})};
  c = cfg_of(1, over, 2, LD_DATA_RANDOM, NULL, 1);
  FILE *log = tmpfile();
  CHECK_EQ_INT(ld_inputs_build(m, &c, log, &t, &n, &e), 0);
  if (n == 2) CHECK_SHAPE(&t[0], 1, 5);
  char buf[512] = {0};
  rewind(log);
  size_t got = fread(buf, 1, sizeof buf - 1, log);
  CHECK(got > 0);
  CHECK_CONTAINS(buf, "overrides fixed dim 0 (4 -> 5)");
  fclose(log);
  ld_inputs_free(t, n);
  ld_model_destroy(m);
}

static void test_batching_guess(void) {
  // No ModelConfig answer: a leading -1 on every input means batching.
  fake_meta f;
  const char *names[] = {"X"}, *types[] = {"FP16"};
  const int64_t s1[][4] = {{-1, 3}};
  fake_init(&f, 1, names, types, s1);
  ld_model *m = model_of(&f, -1);
  if (m) CHECK(m->batching);
  ld_tensor *t = NULL;
  size_t n = 0;
  err e = {0};
  ld_input_cfg c = cfg_of(4, NULL, 0, LD_DATA_RANDOM, NULL, 1);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), 0);
  if (n == 1) {
    CHECK_SHAPE(&t[0], 4, 3);
    CHECK_EQ_INT(t[0].size, 4 * 3 * 2);
    for (size_t i = 0; i < 12; i++) {  // normal halves below 1: exponent field 7..14
      uint16_t h;
      memcpy(&h, t[0].data + 2 * i, 2);
      CHECK(((h >> 10) & 0x1f) >= 7 && ((h >> 10) & 0x1f) <= 14);
    }
  }
  ld_inputs_free(t, n);
  ld_model_destroy(m);

  // max_batch_size 0: the -1 is an ordinary variable dim; --rows is ignored (and noted).
  const int64_t s2[][4] = {{3, -1}};
  fake_init(&f, 1, names, (const char *[]){"INT8"}, s2);
  m = model_of(&f, 0);
  if (m) CHECK(!m->batching);
  ld_shape_opt so = shape_opt("X", 2, (int64_t[]){3, 5});
  c = cfg_of(4, &so, 1, LD_DATA_RANDOM, NULL, 1);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), 0);
  if (n == 1) {
    CHECK_SHAPE(&t[0], 3, 5);
    CHECK_EQ_INT(t[0].size, 15);
  }
  ld_inputs_free(t, n);
  ld_model_destroy(m);

  // Unknown datatype and BYTES without data are the user's to fix.
  const int64_t s3[][4] = {{-1, 2}};
  fake_init(&f, 1, names, (const char *[]){"COMPLEX"}, s3);
  m = model_of(&f, 4);
  c = cfg_of(1, NULL, 0, LD_DATA_RANDOM, NULL, 1);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "COMPLEX");
  ld_model_destroy(m);
  fake_init(&f, 1, names, (const char *[]){"BYTES"}, s3);
  m = model_of(&f, 4);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "--input-data");
  ld_model_destroy(m);

  // A batching model whose input has no dims at all cannot be described.
  fake_init(&f, 1, names, types, (const int64_t[][4]){{0}});
  ld_model *bad = NULL;
  CHECK_EQ_INT(ld_model_from_metadata(&f.md, 8, &bad, &e), ERR_FAILED_PRECONDITION);
  CHECK(bad == NULL);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  CHECK_EQ_INT(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void test_files(void) {
  char dir[] = "/tmp/ld_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char p1[128], pa[128], pb[128];
  snprintf(p1, sizeof p1, "%s/one.bin", dir);
  snprintf(pa, sizeof pa, "%s/A", dir);
  snprintf(pb, sizeof pb, "%s/B", dir);
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t b[2] = {7, -7};
  write_file(p1, a, sizeof a);
  write_file(pa, a, 4 * sizeof(float));
  write_file(pb, b, sizeof b);

  fake_meta f;
  const char *names[] = {"A", "B"}, *types[] = {"FP32", "INT32"};
  const int64_t shapes[][4] = {{-1, 4}, {-1, 1}};
  fake_init(&f, 1, names, types, shapes);
  ld_model *one = model_of(&f, 8);
  ld_tensor *t = NULL;
  size_t n = 0;
  err e = {0};
  ld_input_cfg c = cfg_of(2, NULL, 0, LD_DATA_PATH, p1, 1);
  CHECK_EQ_INT(ld_inputs_build(one, &c, NULL, &t, &n, &e), 0);
  if (n == 1) CHECK(t[0].size == sizeof a && memcmp(t[0].data, a, sizeof a) == 0);
  ld_inputs_free(t, n);
  c.rows = 1;  // 16 bytes wanted, the file has 32
  CHECK_EQ_INT(ld_inputs_build(one, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "holds 32 bytes");
  CHECK_CONTAINS(e.msg, "needs 16");

  fake_init(&f, 2, names, types, shapes);
  ld_model *two = model_of(&f, 8);
  c = cfg_of(1, NULL, 0, LD_DATA_PATH, p1, 1);
  CHECK_EQ_INT(ld_inputs_build(two, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);  // a file for 2 inputs
  CHECK_CONTAINS(e.msg, "has 2 inputs");
  c = cfg_of(2, NULL, 0, LD_DATA_PATH, dir, 1);                                    // B wants 2 rows x 1 x 4 bytes
  CHECK_EQ_INT(ld_inputs_build(two, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);  // A has 16 bytes, wants 32
  c.rows = 1;
  CHECK_EQ_INT(ld_inputs_build(two, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);  // now B has 8, wants 4
  CHECK_CONTAINS(e.msg, "input 'B'");
  write_file(pb, b, 4);
  CHECK_EQ_INT(ld_inputs_build(two, &c, NULL, &t, &n, &e), 0);
  if (n == 2) {
    CHECK(memcmp(t[0].data, a, 16) == 0);
    CHECK(memcmp(t[1].data, b, 4) == 0);
  }
  ld_inputs_free(t, n);
  c.path = "/nonexistent/ld";
  CHECK_EQ_INT(ld_inputs_build(two, &c, NULL, &t, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "/nonexistent/ld");
  ld_model_destroy(one), ld_model_destroy(two);
  unlink(p1), unlink(pa), unlink(pb), rmdir(dir);
}

// --- the encoder

static void test_encode(void) {
  fake_meta f;
  const char *names[] = {"A", "B"}, *types[] = {"FP32", "INT64"};
  const int64_t shapes[][4] = {{-1, 4}, {-1, 3}};
  fake_init(&f, 2, names, types, shapes);
  ld_model *m = model_of(&f, 8);
  ld_tensor *t = NULL;
  size_t n = 0;
  err e = {0};
  ld_input_cfg c = cfg_of(3, NULL, 0, LD_DATA_RANDOM, NULL, 9);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), 0);
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(ld_request_encode("fake", "2", t, n, &buf, &len, &e), 0);
  CHECK(len > 3 * 4 * 4 + 3 * 3 * 8);
  Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, len, buf);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_STR(r->model_name, "fake");
    CHECK_EQ_STR(r->model_version, "2");
    CHECK_EQ_STR(r->id, "");
    CHECK_EQ_INT(r->n_outputs, 0);  // every output comes back
    CHECK_EQ_INT(r->n_parameters, 0);
    CHECK_EQ_INT(r->n_inputs, 2);
    CHECK_EQ_INT(r->n_raw_input_contents, 2);
    for (size_t i = 0; i < 2 && i < r->n_inputs && i < r->n_raw_input_contents; i++) {
      const Inference__ModelInferRequest__InferInputTensor *x = r->inputs[i];
      CHECK_EQ_STR(x->name, t[i].name);
      CHECK_EQ_STR(x->datatype, t[i].datatype);
      CHECK_EQ_INT(x->n_shape, t[i].rank);
      for (size_t k = 0; k < x->n_shape && k < t[i].rank; k++) CHECK_EQ_INT(x->shape[k], t[i].shape[k]);
      CHECK(x->contents == NULL);  // raw contents only
      CHECK_EQ_INT(r->raw_input_contents[i].len, t[i].size);
      CHECK(memcmp(r->raw_input_contents[i].data, t[i].data, t[i].size) == 0);
    }
    CHECK_EQ_INT(r->inputs[0]->shape[0], 3);
    CHECK_EQ_INT(r->inputs[1]->shape[1], 3);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
  free(buf);

  // No version: the field stays empty (the server picks).
  CHECK_EQ_INT(ld_request_encode("fake", NULL, t, 1, &buf, &len, &e), 0);
  r = inference__model_infer_request__unpack(NULL, len, buf);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_STR(r->model_version, "");
    CHECK_EQ_INT(r->n_inputs, 1);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
  free(buf);
  ld_inputs_free(t, n);
  ld_model_destroy(m);

  char sb[64];
  CHECK_EQ_STR(ld_shape_str((int64_t[]){1, -1, 1024}, 3, sb, sizeof sb), "[1,-1,1024]");
  CHECK_EQ_STR(ld_shape_str(NULL, 0, sb, sizeof sb), "[]");
}

// --- the encoder with shared memory regions

// *out = the value of parameter k among a tensor's entries, or NULL (input
// and requested-output entries are distinct types of the same layout).
#define FIND_PARAM(out, tensor, k)                                                                  \
  do {                                                                                              \
    (out) = NULL;                                                                                   \
    for (size_t p_ = 0; p_ < (tensor)->n_parameters; p_++)                                          \
      if (strcmp((tensor)->parameters[p_]->key, (k)) == 0) (out) = (tensor)->parameters[p_]->value; \
  } while (0)

#define CHECK_SHM_PARAMS(tensor, region, size, offset)                                                    \
  do {                                                                                                    \
    const Inference__InferParameter *r_, *b_, *o_;                                                        \
    FIND_PARAM(r_, tensor, "shared_memory_region");                                                       \
    FIND_PARAM(b_, tensor, "shared_memory_byte_size");                                                    \
    FIND_PARAM(o_, tensor, "shared_memory_offset");                                                       \
    CHECK(r_ && r_->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM);  \
    CHECK(b_ && b_->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM);   \
    if (r_) CHECK_EQ_STR(r_->string_param, region);                                                       \
    if (b_) CHECK_EQ_INT(b_->int64_param, size);                                                          \
    if ((offset) == 0) {                                                                                  \
      CHECK(o_ == NULL); /* the server's default */                                                       \
      CHECK_EQ_INT((tensor)->n_parameters, 2);                                                            \
    } else {                                                                                              \
      CHECK(o_ && o_->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM); \
      if (o_) CHECK_EQ_INT(o_->int64_param, offset);                                                      \
      CHECK_EQ_INT((tensor)->n_parameters, 3);                                                            \
    }                                                                                                     \
  } while (0)

static void test_encode_shm(void) {
  fake_meta f;
  const char *names[] = {"A", "B", "C"}, *types[] = {"FP32", "INT64", "INT32"};
  const int64_t shapes[][4] = {{-1, 4}, {-1, 3}, {-1, 2}};
  fake_init(&f, 3, names, types, shapes);
  ld_model *m = model_of(&f, 8);
  ld_tensor *t = NULL;
  size_t n = 0;
  err e = {0};
  ld_input_cfg c = cfg_of(2, NULL, 0, LD_DATA_RANDOM, NULL, 3);
  CHECK_EQ_INT(ld_inputs_build(m, &c, NULL, &t, &n, &e), 0);
  if (n != 3) {
    ld_inputs_free(t, n);
    ld_model_destroy(m);
    return;
  }
  // A and C in shared memory (C at an offset), B in the message; OUT into a
  // region, AUX requested the ordinary way.
  ld_region_ref in_shm[3] = {{"reg_a", t[0].size, 0}, {NULL, 0, 0}, {"reg_c", t[2].size, 64}};
  ld_output_req outs[2] = {{"OUT", {"reg_out", 102400, 0}}, {"AUX", {NULL, 0, 0}}};
  ld_request_spec spec = {
      .model = "fake", .version = "1", .in = t, .n_in = 3, .in_shm = in_shm, .out = outs, .n_out = 2};
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(ld_request_encode_spec(&spec, &buf, &len, &e), 0);
  Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, len, buf);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_STR(r->model_name, "fake");
    CHECK_EQ_STR(r->model_version, "1");
    CHECK_EQ_INT(r->n_inputs, 3);
    // raw_input_contents only for the inputs not in shared memory: B alone
    CHECK_EQ_INT(r->n_raw_input_contents, 1);
    if (r->n_raw_input_contents == 1) {
      CHECK_EQ_INT(r->raw_input_contents[0].len, t[1].size);
      CHECK(memcmp(r->raw_input_contents[0].data, t[1].data, t[1].size) == 0);
    }
    for (size_t i = 0; i < r->n_inputs && i < 3; i++) {
      CHECK_EQ_STR(r->inputs[i]->name, t[i].name);
      CHECK_EQ_STR(r->inputs[i]->datatype, t[i].datatype);
      CHECK_EQ_INT(r->inputs[i]->n_shape, 2);
      CHECK_EQ_INT(r->inputs[i]->shape[0], 2);
      CHECK(r->inputs[i]->contents == NULL);
    }
    if (r->n_inputs == 3) {
      CHECK_SHM_PARAMS(r->inputs[0], "reg_a", 2 * 4 * 4, 0);
      CHECK_EQ_INT(r->inputs[1]->n_parameters, 0);
      CHECK_SHM_PARAMS(r->inputs[2], "reg_c", 2 * 2 * 4, 64);
    }
    CHECK_EQ_INT(r->n_outputs, 2);
    if (r->n_outputs == 2) {
      CHECK_EQ_STR(r->outputs[0]->name, "OUT");
      CHECK_SHM_PARAMS(r->outputs[0], "reg_out", 102400, 0);
      CHECK_EQ_STR(r->outputs[1]->name, "AUX");
      CHECK_EQ_INT(r->outputs[1]->n_parameters, 0);
    }
    CHECK_EQ_INT(r->n_parameters, 0);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
  free(buf);

  // Every input in shared memory: no raw contents at all.
  ld_region_ref all[3] = {{"a", t[0].size, 0}, {"b", t[1].size, 0}, {"c", t[2].size, 0}};
  spec.in_shm = all;
  spec.n_out = 0;
  CHECK_EQ_INT(ld_request_encode_spec(&spec, &buf, &len, &e), 0);
  r = inference__model_infer_request__unpack(NULL, len, buf);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_INT(r->n_raw_input_contents, 0);
    CHECK_EQ_INT(r->n_outputs, 0);
    for (size_t i = 0; i < r->n_inputs; i++) CHECK_EQ_INT(r->inputs[i]->n_parameters, 2);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
  free(buf);
  ld_inputs_free(t, n);
  ld_model_destroy(m);
}

// --mix's invalid kind: [2,3] FP32 becomes [2,4], each row's bytes then a
// zero element; the other inputs are copies; no dims or BYTES are refused.
static void test_widen_first(void) {
  float a[6] = {1, 2, 3, 4, 5, 6};
  int64_t b[2] = {7, 8};
  ld_tensor in[2] = {
      {.name = "A", .datatype = "FP32", .shape = {2, 3}, .rank = 2, .data = (uint8_t *)a, .size = sizeof a},
      {.name = "B", .datatype = "INT64", .shape = {2}, .rank = 1, .data = (uint8_t *)b, .size = sizeof b},
  };
  ld_tensor *w = NULL;
  err e = {0};
  CHECK_EQ_INT(ld_inputs_widen_first(in, 2, &w, &e), 0);
  if (!w) return;
  CHECK_EQ_STR(w[0].name, "A");
  CHECK_EQ_INT(w[0].rank, 2);
  CHECK_EQ_INT(w[0].shape[0], 2);
  CHECK_EQ_INT(w[0].shape[1], 4);
  CHECK_EQ_INT(w[0].size, 8 * sizeof(float));
  const float want[8] = {1, 2, 3, 0, 4, 5, 6, 0};
  CHECK(memcmp(w[0].data, want, sizeof want) == 0);
  CHECK_EQ_STR(w[1].name, "B");
  CHECK_EQ_INT(w[1].shape[0], 2);
  CHECK_EQ_INT(w[1].size, sizeof b);
  CHECK(w[1].data != in[1].data && memcmp(w[1].data, b, sizeof b) == 0);
  // The encoded request carries the longer shape and its bytes.
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(ld_request_encode("m", "", w, 2, &buf, &len, &e), 0);
  Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, len, buf);
  CHECK(r != NULL);
  if (r) {
    CHECK_EQ_INT(r->inputs[0]->n_shape, 2);
    CHECK_EQ_INT(r->inputs[0]->shape[1], 4);
    CHECK_EQ_INT(r->raw_input_contents[0].len, 32);
    inference__model_infer_request__free_unpacked(r, NULL);
  }
  free(buf);
  ld_inputs_free(w, 2);

  ld_tensor str = {.name = "S", .datatype = "BYTES", .shape = {1}, .rank = 1, .data = (uint8_t *)"x", .size = 1};
  CHECK_EQ_INT(ld_inputs_widen_first(&str, 1, &w, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "fixed element size");
  CHECK(w == NULL);
  ld_tensor scalar = {.name = "C", .datatype = "FP32", .rank = 0, .data = (uint8_t *)a, .size = 4};
  CHECK_EQ_INT(ld_inputs_widen_first(&scalar, 1, &w, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "input 'C'");
  CHECK_EQ_INT(ld_inputs_widen_first(in, 0, &w, &e), ERR_INVALID_ARGUMENT);
}

int main(void) {
  test_widen_first();
  test_batching_model();
  test_batching_guess();
  test_files();
  test_encode();
  test_encode_shm();
  CHECK_DONE();
}
