// Tests engine/pad.c: the pad_to_longest / pad_max_ratio parameters (what
// loads, and the error of each misuse), a request's sequence length, and
// the copies that pad an input and crop an output.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/pad.h"
#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"

static eng_io io(const char *name, dtype dt, int ndims, int64_t d0, int64_t d1) {
  eng_io x;
  memset(&x, 0, sizeof x);
  snprintf(x.name, sizeof x.name, "%s", name);
  x.dt = dt;
  x.ndims = ndims;
  x.dims[0] = d0;
  x.dims[1] = d1;
  return x;
}

// The config inputs as the client sees them (no batch dim): a BERT-style
// model plus a fixed-size input, an image-like one, a string and a half.
static eng_io g_in[7], g_out[3];

static void setup(void) {
  g_in[0] = io("input_ids", DT_INT64, 1, -1, 0);
  g_in[1] = io("attention_mask", DT_INT64, 1, -1, 0);
  g_in[2] = io("scale", DT_FP32, 1, 4, 0);
  g_in[3] = io("hw", DT_FP32, 2, -1, -1);
  g_in[4] = io("text", DT_STRING, 1, -1, 0);
  g_in[5] = io("emb:0", DT_FP16, 2, -1, 8);
  g_in[6] = io("flags", DT_UINT8, 1, -1, 0);
  g_out[0] = io("hidden", DT_FP32, 2, -1, 16);
  g_out[1] = io("pooled", DT_FP32, 1, 16, 0);
  g_out[2] = io("scores", DT_FP32, 2, -1, -1);
}

// eng_pad_parse on the engine's copy of a parsed config, as the registry hands it over.
static int pad_parse(const ProtobufCMessage *m, eng_pad *p, err *e) {
  eng_model_config *c = NULL;
  int rc = eng_model_config_from_proto((const Inference__ModelConfig *)m, &c, e);
  CHECK_EQ_INT(rc, 0);
  if (rc) return rc;
  rc = eng_pad_parse(c, g_in, 7, g_out, 3, p, e);
  eng_model_config_free(c);
  return rc;
}

static int parse(const char *params, eng_pad *p, err *e) {
  char text[1024];
  snprintf(text, sizeof text, "max_batch_size: 8\ndynamic_batching {}\n%s", params);
  ProtobufCMessage *m = NULL;
  int rc = pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", e->msg);
    return rc;
  }
  rc = pad_parse(m, p, e);
  protobuf_c_message_free_unpacked(m, NULL);
  return rc;
}

#define PAD(spec) "parameters { key: \"pad_to_longest\" value { string_value: \"" spec "\" } }\n"
#define RATIO(r) "parameters { key: \"pad_max_ratio\" value { string_value: \"" r "\" } }\n"

static void test_parse_ok(void) {
  eng_pad p;
  err e = {0};
  CHECK_EQ_INT(parse("", &p, &e), 0);
  CHECK(p.in == NULL);  // no padding

  CHECK_EQ_INT(parse(PAD(" input_ids : 7 , attention_mask,flags:255") RATIO("2.5"), &p, &e), 0);
  if (p.in) {
    CHECK_EQ_INT(p.in[0].on, 1);
    CHECK_EQ_INT(p.in[0].dim, 1);  // batch dim first
    int64_t v;
    memcpy(&v, p.in[0].value, 8);
    CHECK_EQ_INT(v, 7);
    CHECK_EQ_INT(p.in[0].value_zero, 0);
    CHECK_EQ_INT(p.in[1].on, 1);  // default value 0
    CHECK_EQ_INT(p.in[1].value_zero, 1);
    CHECK_EQ_INT(p.in[2].on, 0);
    CHECK_EQ_INT(p.in[6].value[0], 255);
    CHECK_EQ_STR(p.in[1].name, "attention_mask");
    CHECK(p.max_ratio == 2.5);
    CHECK_EQ_INT(p.out_var[0], 1u << 1);
    CHECK_EQ_INT(p.out_var[1], 0);
    CHECK_EQ_INT(p.out_var[2], (1u << 1) | (1u << 2));
  }
  eng_pad_free(&p);

  // a name with a colon of its own; a value after it; FP16 values
  CHECK_EQ_INT(parse(PAD("emb:0"), &p, &e), 0);
  if (p.in) {
    CHECK_EQ_INT(p.in[5].on, 1);
    CHECK_EQ_INT(p.in[5].dim, 1);
    CHECK_EQ_INT(p.in[5].value_zero, 1);
  }
  eng_pad_free(&p);
  CHECK_EQ_INT(parse(PAD("emb:0:-2.5"), &p, &e), 0);
  if (p.in) {
    uint16_t h;
    memcpy(&h, p.in[5].value, 2);
    CHECK_EQ_INT(h, 0xc100);  // -2.5 in IEEE half
  }
  eng_pad_free(&p);
}

static void test_parse_errors(void) {
  eng_pad p;
  err e = {0};
  struct {
    const char *params, *want;
  } cases[] = {
      {PAD("nope:0"), "'nope' is not an input"},
      {PAD("input_ids,input_ids:1"), "input 'input_ids' is listed twice"},
      {PAD("scale"), "input 'scale' has 0 variable (-1) dims"},
      {PAD("hw"), "input 'hw' has 2 variable (-1) dims"},
      {PAD("text"), "input 'text' is BYTES, which cannot be padded"},
      {PAD("input_ids:1.5"), "pad value '1.5' of input 'input_ids' is not a INT64 value"},
      {PAD("flags:256"), "pad value '256' of input 'flags'"},
      {PAD("flags:-1"), "pad value '-1' of input 'flags'"},
      {PAD("input_ids:"), "no usable pad value"},
      {PAD("input_ids,,attention_mask"), "an entry is empty"},
      {PAD("input_ids") RATIO("0.5"), "pad_max_ratio '0.5' must be 0 (unbounded) or a number >= 1"},
      {PAD("input_ids") RATIO("abc"), "pad_max_ratio 'abc'"},
      {PAD("input_ids") RATIO("inf"), "pad_max_ratio 'inf'"},
      {RATIO("2"), "pad_max_ratio is set but pad_to_longest is not"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(parse(cases[i].params, &p, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, cases[i].want);
    CHECK(p.in == NULL && p.out_var == NULL);  // nothing left to free
  }
  // the scheduling it needs
  const char *no_batch = "max_batch_size: 0\n" PAD("input_ids");
  ProtobufCMessage *m = NULL;
  CHECK_EQ_INT(pbtxt_parse(&inference__model_config__descriptor, no_batch, strlen(no_batch), "c", &m, &e), 0);
  CHECK_EQ_INT(pad_parse(m, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "needs max_batch_size > 0");
  protobuf_c_message_free_unpacked(m, NULL);
  const char *no_dyn = "max_batch_size: 4\n" PAD("input_ids");
  CHECK_EQ_INT(pbtxt_parse(&inference__model_config__descriptor, no_dyn, strlen(no_dyn), "c", &m, &e), 0);
  CHECK_EQ_INT(pad_parse(m, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "needs dynamic_batching");
  protobuf_c_message_free_unpacked(m, NULL);
  const char *reshaped = "max_batch_size: 4\ndynamic_batching {}\n"
                         "input { name: \"input_ids\" data_type: TYPE_INT64 dims: [-1] reshape { shape: [-1, 1] } }\n"
                         PAD("input_ids");
  CHECK_EQ_INT(pbtxt_parse(&inference__model_config__descriptor, reshaped, strlen(reshaped), "c", &m, &e), 0);
  CHECK_EQ_INT(pad_parse(m, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "input 'input_ids' has a reshape");
  protobuf_c_message_free_unpacked(m, NULL);
}

static eng_tensor tensor(dtype dt, int ndims, int64_t d0, int64_t d1, int64_t d2, void *data) {
  eng_tensor t = {.dt = dt, .ndims = ndims, .dims = {d0, d1, d2}, .data = data};
  t.bytes = eng_tensor_bytes(&t);
  return t;
}

static void test_seq_len(void) {
  eng_pad p;
  err e = {0};
  CHECK_EQ_INT(parse(PAD("input_ids,attention_mask"), &p, &e), 0);
  eng_tensor t[7] = {0};
  t[0] = tensor(DT_INT64, 2, 1, 5, 0, NULL);
  t[1] = tensor(DT_INT64, 2, 1, 5, 0, NULL);
  t[2] = tensor(DT_FP32, 2, 1, 4, 0, NULL);
  int64_t len = -1;
  CHECK_EQ_INT(eng_pad_seq_len(&p, t, &len, &e), 0);
  CHECK_EQ_INT(len, 5);
  t[1].dims[1] = 4;
  CHECK_EQ_INT(eng_pad_seq_len(&p, t, &len, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "input 'attention_mask': sequence length 4 differs from input 'input_ids''s 5");
  eng_pad_free(&p);
}

static void test_copy_and_crop(void) {
  // [2 rows, 3 long, 2 inner] int32 padded to 5 with -1: row-major per row
  int32_t src[12], dst[20];
  for (int i = 0; i < 12; i++) src[i] = i;
  eng_tensor t = tensor(DT_INT32, 3, 2, 3, 2, src);
  int32_t pad = -1;
  CHECK_EQ_INT(eng_pad_bytes(&t, 1, 5), sizeof dst);
  CHECK_EQ_INT(eng_pad_copy((uint8_t *)dst, &t, 1, 5, (const uint8_t *)&pad), sizeof dst);
  int32_t want[20] = {0, 1, 2, 3, 4, 5, -1, -1, -1, -1, 6, 7, 8, 9, 10, 11, -1, -1, -1, -1};
  for (int i = 0; i < 20; i++) CHECK_EQ_INT(dst[i], want[i]);
  // the last dim padded with zeros (memset path)
  int32_t dst2[16];
  int32_t zero = 0;
  eng_tensor t2 = tensor(DT_INT32, 2, 2, 6, 0, src);
  CHECK_EQ_INT(eng_pad_copy((uint8_t *)dst2, &t2, 1, 8, (const uint8_t *)&zero), sizeof dst2);
  int32_t want2[16] = {0, 1, 2, 3, 4, 5, 0, 0, 6, 7, 8, 9, 10, 11, 0, 0};
  for (int i = 0; i < 16; i++) CHECK_EQ_INT(dst2[i], want2[i]);

  // cropping back gives the original
  int32_t back[12];
  int64_t have[3] = {2, 5, 2}, w[3] = {2, 3, 2};
  CHECK_EQ_INT(eng_pad_crop((uint8_t *)back, (const uint8_t *)dst, 3, have, w, 4), sizeof back);
  for (int i = 0; i < 12; i++) CHECK_EQ_INT(back[i], i);
  // a [L, L] output cropped in both dims: [1, 4, 4] -> [1, 2, 2]
  int32_t sq[16], sqc[4];
  for (int i = 0; i < 16; i++) sq[i] = i;
  int64_t have2[3] = {1, 4, 4}, w2[3] = {1, 2, 2};
  CHECK_EQ_INT(eng_pad_crop((uint8_t *)sqc, (const uint8_t *)sq, 3, have2, w2, 4), sizeof sqc);
  CHECK_EQ_INT(sqc[0], 0);
  CHECK_EQ_INT(sqc[1], 1);
  CHECK_EQ_INT(sqc[2], 4);
  CHECK_EQ_INT(sqc[3], 5);
  // nothing cropped: one copy; a zero-length crop writes nothing
  int32_t whole[16];
  int64_t w3[3] = {1, 4, 4}, w4[3] = {1, 0, 4};
  CHECK_EQ_INT(eng_pad_crop((uint8_t *)whole, (const uint8_t *)sq, 3, have2, w3, 4), sizeof whole);
  CHECK_EQ_INT(whole[15], 15);
  CHECK_EQ_INT(eng_pad_crop((uint8_t *)sqc, (const uint8_t *)sq, 3, have2, w4, 4), 0);
}

int main(void) {
  setup();
  test_parse_ok();
  test_parse_errors();
  test_seq_len();
  test_copy_and_crop();
  CHECK_DONE();
}
