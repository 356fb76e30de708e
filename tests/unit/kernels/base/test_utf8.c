// test_utf8.c: kernels/base/utf8.c's escapes for text quoted back to clients
// (utf8_escape_controls) and into logs (utf8_escape_line): line separators, bidi controls and C1 controls hide in a
// line that is otherwise valid UTF-8.
#include <string.h>

#include "check.h"
#include "kernels/base/utf8.h"

static void test_hides_in_line(void) {
  const char *hidden[] = {"\u2028", "\u2029", "\u202a", "\u202e", "\u2066", "\u2069", "\xc2\x85", "\xc2\x9b"};
  for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++)
    CHECK(utf8_hides_in_line((const unsigned char *)hidden[i], strlen(hidden[i])));
  const char *shown[] = {"\u2027", "\u202f", "\u2065", "\u206a", "\xc2\xa0", "\u65e5", "\xf0\x9f\x98\x80"};
  for (size_t i = 0; i < sizeof shown / sizeof *shown; i++)
    CHECK(!utf8_hides_in_line((const unsigned char *)shown[i], strlen(shown[i])));
}

static void test_escape_controls(void) {
  char out[128];
  const char *s = "a\n\x1b[31m\u2028\u202e\xc2\x85\xff\\ r\xc3\xa9sum\xc3\xa9";
  CHECK(utf8_has_controls(s, strlen(s)));
  utf8_escape_controls(out, sizeof out, s, strlen(s));
  CHECK_EQ_STR(out, "a\\n\\x1b[31m\\xe2\\x80\\xa8\\xe2\\x80\\xae\\xc2\\x85\\xff\\ r\xc3\xa9sum\xc3\xa9");
  const char *plain = "unknown model 'r\xc3\xa9sum\xc3\xa9-\xe6\x97\xa5' \\ ok";
  CHECK(!utf8_has_controls(plain, strlen(plain)));
  // truncated at a whole escape: 5 bytes of room hold "ab" and not half of \x1b
  CHECK_EQ_INT(utf8_escape_controls(out, 6, "ab\x1bzz", 5), 2);
  CHECK_EQ_STR(out, "ab");
}

// Log lines (server/obs/log.c) escape the same bytes, and a backslash too.
static void test_escape_line(void) {
  char out[128];
  const char *s = "a\n\x1b[31m\u2028\u202e\xc2\x85\xff\\ r\xc3\xa9sum\xc3\xa9";
  utf8_escape_line(out, sizeof out, s, strlen(s));
  CHECK_EQ_STR(out, "a\\n\\x1b[31m\\xe2\\x80\\xa8\\xe2\\x80\\xae\\xc2\\x85\\xff\\\\ r\xc3\xa9sum\xc3\xa9");
  // a literal backslash-n from a client is not an escaped newline
  utf8_escape_line(out, sizeof out, "x\\ny", 4);
  CHECK_EQ_STR(out, "x\\\\ny");
  // truncated at a whole escape: 2 bytes of room hold "a" and not half of "\\"
  CHECK_EQ_INT(utf8_escape_line(out, 3, "a\\b", 3), 1);
  CHECK_EQ_STR(out, "a");
}

int main(void) {
  test_hides_in_line();
  test_escape_controls();
  test_escape_line();
  CHECK_DONE();
}
