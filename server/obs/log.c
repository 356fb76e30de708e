// log.c: one formatted line per call, written with a single fputs so lines
// from different threads do not interleave.
#include "server/obs/log.h"

#include "kernels/base/utf8.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

// Which levels print (bit per srv_log_level) and the line format: set by
// main, then changed at run time only through the LogSettings RPC.
static atomic_uint enabled = (1u << SRV_LOG_ERROR) | (1u << SRV_LOG_WARN) | (1u << SRV_LOG_INFO);
static atomic_int format = SRV_LOG_FORMAT_DEFAULT;

void srv_log_set_level(srv_log_level l) { atomic_store(&enabled, (2u << l) - 1); }

void srv_log_enable(srv_log_level l, int on) {
  if (on) atomic_fetch_or(&enabled, 1u << l);
  else atomic_fetch_and(&enabled, ~(1u << l));
}

int srv_log_enabled(srv_log_level l) { return (atomic_load_explicit(&enabled, memory_order_relaxed) >> l) & 1; }

void srv_log_set_format(srv_log_format f) { atomic_store(&format, (int)f); }
srv_log_format srv_log_get_format(void) { return (srv_log_format)atomic_load(&format); }

int srv_log_parse_level(const char *s, srv_log_level *out) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (srv_log_level)i;
      return 0;
    }
  return -1;
}

void srv_log(srv_log_level l, const char *fmt, ...) {
  if (!srv_log_enabled(l)) return;
  static const char tag[] = "EWID";
  char line[2048];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n;
  if (atomic_load_explicit(&format, memory_order_relaxed) == SRV_LOG_FORMAT_ISO8601)
    n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02dZ %c inferd] ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, tag[l]);
  else
    n = snprintf(line, sizeof line, "%c%02d%02d %02d:%02d:%02d.%06ld inferd] ", tag[l], tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t mlen = m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
  // One record, one line: messages quote what clients send (model names, ids,
  // input names at debug level), so control characters (C0, DEL, C1), the
  // Unicode line separators and bidi controls, backslashes and bytes that are
  // not UTF-8 are written as escapes (kernels/base/utf8.h: utf8_escape_line)
  // and a client cannot forge a log line, a terminal escape sequence or text
  // that reads reordered.
  size_t len = (size_t)n + utf8_escape_line(line + n, sizeof line - (size_t)n - 1, msg, mlen);
  line[len] = '\n';
  line[len + 1] = '\0';
  fputs(line, stderr);
}
