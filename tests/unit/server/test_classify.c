// test_classify.c: the classification extension's top classes
// (server/core/classify.h) and label files (server/core/labels.h): order by
// the element type's own values (ties by index, NaN last, UINT64 past 2^53
// exact), Triton's value text, labels by line, the BYTES layout, refusals.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "server/core/classify.h"
#include "server/core/labels.h"

// The i-th string of a BYTES buffer, NUL-ended into buf.
static const char *nth(const uint8_t *p, size_t len, size_t i, char *buf, size_t cap) {
  size_t off = 0;
  for (size_t k = 0; off + 4 <= len; k++) {
    size_t n = (size_t)p[off] | (size_t)p[off + 1] << 8 | (size_t)p[off + 2] << 16 | (size_t)p[off + 3] << 24;
    if (k == i) {
      snprintf(buf, cap, "%.*s", (int)n, (const char *)p + off + 4);
      return buf;
    }
    off += 4 + n;
  }
  return "(none)";
}

static void test_order_and_text(void) {
  err e = {0};
  uint8_t *out = NULL;
  size_t len = 0, n = 0;
  char b[64];
  float f[2][4] = {{1, 5, 10, 4}, {NAN, -1, 2.5f, 2.5f}};
  CHECK_EQ_INT(srv_classify(f, DT_FP32, 2, 4, 2, 100, NULL, "y", &out, &len, &n, &e), 0);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_STR(nth(out, len, 0, b, sizeof b), "10.000000:2");  // the extension's own example
  CHECK_EQ_STR(nth(out, len, 1, b, sizeof b), "5.000000:1");
  CHECK_EQ_STR(nth(out, len, 2, b, sizeof b), "2.500000:2");  // a tie: the lower index first
  CHECK_EQ_STR(nth(out, len, 3, b, sizeof b), "2.500000:3");
  free(out);
  CHECK_EQ_INT(srv_classify(f[1], DT_FP32, 1, 4, 9, 100, NULL, "y", &out, &len, &n, &e), 0);
  CHECK_EQ_INT(n, 4);  // at most the row's elements
  CHECK_EQ_STR(nth(out, len, 3, b, sizeof b), "nan:0");  // NaN last
  free(out);
  uint64_t u[3] = {(1ull << 53) + 1, 1ull << 53, 7};  // equal as doubles, not as UINT64
  CHECK_EQ_INT(srv_classify(u, DT_UINT64, 1, 3, 1, 100, NULL, "y", &out, &len, &n, &e), 0);
  CHECK_EQ_STR(nth(out, len, 0, b, sizeof b), "9007199254740993:0");
  free(out);
  int8_t s8[3] = {-5, 3, -128};
  CHECK_EQ_INT(srv_classify(s8, DT_INT8, 1, 3, 3, 100, NULL, "y", &out, &len, &n, &e), 0);
  CHECK_EQ_STR(nth(out, len, 2, b, sizeof b), "-128:2");
  free(out);
  CHECK_EQ_INT(srv_classify(s8, DT_BOOL, 1, 3, 1, 100, NULL, "y", &out, &len, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "class result not available for output due to unsupported type 'BOOL'");
  CHECK_EQ_INT(srv_classify(f, DT_FP32, 1, 4, 1, 3, NULL, "y", &out, &len, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "classification output tensor too large");
  CHECK(out == NULL);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static void test_labels(void) {
  char dir[] = "/tmp/inferd_labels_XXXXXX";
  if (!mkdtemp(dir)) return;
  char p[256];
  snprintf(p, sizeof p, "%s/l.txt", dir);
  write_file(p, "cat\r\ndog\n\nbird");  // CRLF, an empty line, no newline at the end
  Inference__ModelOutput o = INFERENCE__MODEL_OUTPUT__INIT, o2 = INFERENCE__MODEL_OUTPUT__INIT;
  Inference__ModelOutput *outs[2] = {&o, &o2};
  o.name = "y";
  o.label_filename = "l.txt";
  o2.name = "z";
  Inference__ModelConfig c = INFERENCE__MODEL_CONFIG__INIT;
  c.n_output = 2;
  c.output = outs;
  srv_labels *l = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_labels_load(dir, &c, &l, &e), 0);
  CHECK_EQ_STR(srv_labels_get(l, "y", 0), "cat");
  CHECK_EQ_STR(srv_labels_get(l, "y", 1), "dog");
  CHECK_EQ_STR(srv_labels_get(l, "y", 2), "");
  CHECK_EQ_STR(srv_labels_get(l, "y", 3), "bird");
  CHECK(srv_labels_get(l, "y", 4) == NULL);
  CHECK(srv_labels_get(l, "z", 0) == NULL);
  float f[4] = {1, 4, 3, 2};
  uint8_t *out = NULL;
  size_t len = 0, n = 0;
  char b[64];
  CHECK_EQ_INT(srv_classify(f, DT_FP32, 1, 4, 3, 100, l, "y", &out, &len, &n, &e), 0);
  CHECK_EQ_STR(nth(out, len, 0, b, sizeof b), "4.000000:1:dog");
  CHECK_EQ_STR(nth(out, len, 1, b, sizeof b), "3.000000:2:");  // an empty label is still a label
  CHECK_EQ_STR(nth(out, len, 2, b, sizeof b), "2.000000:3:bird");
  free(out);
  srv_labels_free(l);
  // refused: a path, a missing file, bytes that are not UTF-8
  o.label_filename = "../l.txt";
  CHECK_EQ_INT(srv_labels_load(dir, &c, &l, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "output 'y': label_filename '../l.txt' must name a file of the model's directory");
  o.label_filename = "nope.txt";
  CHECK(srv_labels_load(dir, &c, &l, &e) != 0);
  CHECK_CONTAINS(e.msg, "output 'y': ");
  CHECK(l == NULL);
  snprintf(p, sizeof p, "%s/bad.txt", dir);
  write_file(p, "caf\xe9\n");
  o.label_filename = "bad.txt";
  CHECK_EQ_INT(srv_labels_load(dir, &c, &l, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "is not valid UTF-8");
  unlink(p);
  snprintf(p, sizeof p, "%s/l.txt", dir);
  unlink(p);
  rmdir(dir);
}

int main(void) {
  test_order_and_text();
  test_labels();
  CHECK_DONE();
}
