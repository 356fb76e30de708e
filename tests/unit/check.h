// check.h: typed asserts for the C unit tests. Each prints both sides and
// the location, counts the failure and carries on, so one run shows every
// broken case; CHECK_DONE() turns the count into the exit status.
#ifndef INFERD_TESTS_CHECK_H
#define INFERD_TESTS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// One pair of counters per translation unit, unless a test binary is built
// from several files: then each defines CHECK_SHARED before including this,
// and the file with main() defines the two counters, so CHECK_DONE() counts
// the checks of every file.
#ifdef CHECK_SHARED
extern int check_failures_;
extern int check_count_;
#else
static int check_failures_ = 0;
static int check_count_ = 0;
#endif

#define CHECK_FAIL_(...)                                       \
  do {                                                         \
    fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);      \
    fprintf(stderr, __VA_ARGS__);                              \
    fprintf(stderr, "\n");                                     \
    check_failures_++;                                         \
  } while (0)

#define CHECK(cond)                                  \
  do {                                               \
    check_count_++;                                  \
    if (!(cond)) CHECK_FAIL_("%s", #cond);           \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                           \
  do {                                                                               \
    long long ca_ = (long long)(a), cb_ = (long long)(b);                            \
    check_count_++;                                                                  \
    if (ca_ != cb_) CHECK_FAIL_("%s == %s: %lld != %lld", #a, #b, ca_, cb_);         \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                                  \
  do {                                                                                      \
    const char *ca_ = (a), *cb_ = (b);                                                      \
    check_count_++;                                                                         \
    if (!ca_ || !cb_ || strcmp(ca_, cb_) != 0)                                               \
      CHECK_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, ca_ ? ca_ : "(null)", cb_ ? cb_ : "(null)"); \
  } while (0)

// Substring check, for error messages that must name a field or tensor.
#define CHECK_CONTAINS(hay, needle)                                                          \
  do {                                                                                       \
    const char *ch_ = (hay), *cn_ = (needle);                                                \
    check_count_++;                                                                          \
    if (!ch_ || !strstr(ch_, cn_)) CHECK_FAIL_("\"%s\" does not contain \"%s\"", ch_ ? ch_ : "(null)", cn_); \
  } while (0)

// |a-b| <= atol + rtol*|b|
#define CHECK_NEAR(a, b, rtol, atol)                                                             \
  do {                                                                                           \
    double ca_ = (double)(a), cb_ = (double)(b);                                                 \
    check_count_++;                                                                              \
    if (!(fabs(ca_ - cb_) <= (atol) + (rtol)*fabs(cb_)))                                         \
      CHECK_FAIL_("%s ~= %s: %.9g vs %.9g (diff %.3g)", #a, #b, ca_, cb_, fabs(ca_ - cb_));      \
  } while (0)

#define CHECK_DONE()                                                                  \
  do {                                                                                \
    fprintf(stderr, "%d checks, %d failed\n", check_count_, check_failures_);         \
    return check_failures_ ? 1 : 0;                                                   \
  } while (0)

#endif
