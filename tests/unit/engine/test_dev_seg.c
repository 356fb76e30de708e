// Tests engine/dev_seg.c: which byte ranges of a batch's inputs a GPU plan
// copies from host staging and which device to device, and the refusal of
// segments that are unsorted, overlapping, empty or past their input.
#include <stdint.h>

#include "check.h"
#include "engine/dev_seg.h"

static const uint8_t dev_a[1], dev_b[1];  // stand-ins for device addresses

// The runs of one input as "H0+8 D8+4 ..." (H: host, D: device segment).
static const char *runs(const eng_dev_seg *segs, size_t n, size_t input, size_t total) {
  static char buf[256];
  size_t o = 0;
  buf[0] = 0;
  eng_seg_walk w;
  eng_copy_run r;
  eng_seg_walk_init(&w, segs, n, input, total);
  while (eng_seg_walk_next(&w, &r) && o < sizeof buf)
    o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%c%zu+%zu", o ? " " : "", r.seg ? 'D' : 'H', r.offset, r.bytes);
  return buf;
}

static void test_walk(void) {
  // a batch of four 16-byte rows of input 0 where rows 1 and 2 live on the
  // device (two requests in CUDA regions) and of input 1 whose last row does
  eng_dev_seg s[] = {
      {.input = 0, .offset = 16, .bytes = 16, .device = 0, .ptr = dev_a},
      {.input = 0, .offset = 32, .bytes = 16, .device = 1, .ptr = dev_b},
      {.input = 1, .offset = 24, .bytes = 8, .device = 0, .ptr = dev_a},
  };
  size_t total[] = {64, 32, 40};
  err e = {0};
  CHECK_EQ_INT(eng_dev_seg_check(s, 3, total, 3, &e), 0);
  CHECK_EQ_STR(runs(s, 3, 0, 64), "H0+16 D16+16 D32+16 H48+16");
  CHECK_EQ_STR(runs(s, 3, 1, 32), "H0+24 D24+8");
  CHECK_EQ_STR(runs(s, 3, 2, 40), "H0+40");  // no segment: one host run, as without any
  CHECK_EQ_STR(runs(NULL, 0, 0, 64), "H0+64");
  CHECK_EQ_STR(runs(s, 3, 0, 0), "");  // an empty input has nothing to copy

  // the segment a device run names, with its device and address
  eng_seg_walk w;
  eng_copy_run r;
  eng_seg_walk_init(&w, s, 3, 0, 64);
  CHECK(eng_seg_walk_next(&w, &r) && !r.seg);
  CHECK(eng_seg_walk_next(&w, &r) && r.seg == &s[0] && r.seg->ptr == dev_a && r.seg->device == 0);
  CHECK(eng_seg_walk_next(&w, &r) && r.seg == &s[1] && r.seg->ptr == dev_b && r.seg->device == 1);

  // a whole input on the device: no host run at all
  eng_dev_seg all[] = {{.input = 0, .offset = 0, .bytes = 32, .device = 0, .ptr = dev_a},
                       {.input = 0, .offset = 32, .bytes = 32, .device = 0, .ptr = dev_b}};
  CHECK_EQ_INT(eng_dev_seg_check(all, 2, total, 1, &e), 0);
  CHECK_EQ_STR(runs(all, 2, 0, 64), "D0+32 D32+32");
}

static void test_refused(void) {
  size_t total[] = {64, 32};
  err e = {0};
  eng_dev_seg overlap[] = {{.input = 0, .offset = 0, .bytes = 20, .device = 0, .ptr = dev_a},
                           {.input = 0, .offset = 16, .bytes = 16, .device = 0, .ptr = dev_a}};
  CHECK_EQ_INT(eng_dev_seg_check(overlap, 2, total, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overlapping");
  eng_dev_seg unsorted[] = {{.input = 1, .offset = 0, .bytes = 8, .device = 0, .ptr = dev_a},
                            {.input = 0, .offset = 0, .bytes = 8, .device = 0, .ptr = dev_a}};
  CHECK_EQ_INT(eng_dev_seg_check(unsorted, 2, total, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "segment 1");
  eng_dev_seg past = {.input = 1, .offset = 24, .bytes = 16, .device = 0, .ptr = dev_a};
  CHECK_EQ_INT(eng_dev_seg_check(&past, 1, total, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "past the input's 32");
  eng_dev_seg wrap = {.input = 0, .offset = SIZE_MAX - 4, .bytes = 8, .device = 0, .ptr = dev_a};
  CHECK_EQ_INT(eng_dev_seg_check(&wrap, 1, total, 2, &e), ERR_INVALID_ARGUMENT);
  eng_dev_seg no_input = {.input = 2, .offset = 0, .bytes = 8, .device = 0, .ptr = dev_a};
  CHECK_EQ_INT(eng_dev_seg_check(&no_input, 1, total, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "the batch has 2");
  eng_dev_seg empty = {.input = 0, .offset = 0, .bytes = 0, .device = 0, .ptr = dev_a};
  CHECK_EQ_INT(eng_dev_seg_check(&empty, 1, total, 2, &e), ERR_INVALID_ARGUMENT);
  eng_dev_seg no_ptr = {.input = 0, .offset = 0, .bytes = 8, .device = 0, .ptr = NULL};
  CHECK_EQ_INT(eng_dev_seg_check(&no_ptr, 1, total, 2, &e), ERR_INVALID_ARGUMENT);
  eng_dev_seg no_dev = {.input = 0, .offset = 0, .bytes = 8, .device = -1, .ptr = dev_a};
  CHECK_EQ_INT(eng_dev_seg_check(&no_dev, 1, total, 2, &e), ERR_INVALID_ARGUMENT);
}

int main(void) {
  test_walk();
  test_refused();
  CHECK_DONE();
}
