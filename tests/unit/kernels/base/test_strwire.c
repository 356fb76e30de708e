// Tests kernels/base/strwire.c: the KServe BYTES wire layout's check, count
// and element offsets on whole buffers and on every way a client's buffer
// can be cut or padded, and that an offset never runs past a bad buffer.
#include <stdint.h>

#include "check.h"
#include "kernels/base/strwire.h"

// "ab", "", "xyz" in the wire layout
static const uint8_t good[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 3, 0, 0, 0, 'x', 'y', 'z'};

static void test_check(void) {
  const char *why = NULL;
  uint64_t at = 99;
  CHECK_EQ_INT(strwire_check(good, sizeof good, 3, &why, &at), 0);
  CHECK_EQ_INT(strwire_check(NULL, 0, 0, &why, &at), 0);  // an empty tensor
  // one element fewer: bytes left over
  CHECK_EQ_INT(strwire_check(good, sizeof good, 2, &why, &at), -1);
  CHECK_EQ_STR(why, "has bytes after the last element");
  // one more: the buffer ends where a length should start
  CHECK_EQ_INT(strwire_check(good, sizeof good, 4, &why, &at), -1);
  CHECK_EQ_STR(why, "ends inside a length prefix");
  CHECK_EQ_INT((int)at, 3);
  // cut inside the last element, and inside its length
  CHECK_EQ_INT(strwire_check(good, sizeof good - 1, 3, &why, &at), -1);
  CHECK_EQ_STR(why, "ends inside an element");
  CHECK_EQ_INT((int)at, 2);
  CHECK_EQ_INT(strwire_check(good, 12, 3, &why, &at), -1);
  CHECK_EQ_STR(why, "ends inside a length prefix");
  // a length near 4 GiB must not wrap the walk
  const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 'a'};
  CHECK_EQ_INT(strwire_check(huge, sizeof huge, 1, &why, &at), -1);
  CHECK_EQ_STR(why, "ends inside an element");
}

static void test_count_offset(void) {
  CHECK_EQ_INT((int)strwire_count(good, sizeof good), 3);
  CHECK_EQ_INT((int)strwire_count(good, 0), 0);
  CHECK_EQ_INT((int)strwire_count(good, sizeof good - 1), -1);
  CHECK_EQ_INT((int)strwire_count(good, 5), -1);
  CHECK_EQ_INT((int)strwire_offset(good, sizeof good, 0), 0);
  CHECK_EQ_INT((int)strwire_offset(good, sizeof good, 1), 6);
  CHECK_EQ_INT((int)strwire_offset(good, sizeof good, 2), 10);
  CHECK_EQ_INT((int)strwire_offset(good, sizeof good, 3), (int)sizeof good);
  // on a buffer that lies about its lengths the offset stops at its end
  const uint8_t bad[] = {9, 0, 0, 0, 'a'};
  CHECK_EQ_INT((int)strwire_offset(bad, sizeof bad, 1), (int)sizeof bad);
  CHECK_EQ_INT((int)strwire_offset(bad, sizeof bad, 5), (int)sizeof bad);
}

static void test_len(void) {
  uint8_t b[4];
  strwire_put_len(b, 0x01020304u);
  CHECK(b[0] == 4 && b[1] == 3 && b[2] == 2 && b[3] == 1);  // little-endian
  CHECK(strwire_len(b) == 0x01020304u);
  strwire_put_len(b, UINT32_MAX);
  CHECK(strwire_len(b) == UINT32_MAX);
}

int main(void) {
  test_check();
  test_count_offset();
  test_len();
  CHECK_DONE();
}
