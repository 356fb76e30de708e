// log.c: one formatted line per call, written with a single fputs so lines
// from different threads do not interleave.
#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static srv_log_level level = SRV_LOG_INFO;  // write-once configuration, see log.h

void srv_log_set_level(srv_log_level l) { level = l; }
int srv_log_enabled(srv_log_level l) { return l <= level; }

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
  if (l > level) return;
  static const char tag[] = "EWID";
  char line[2048];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "%c%02d%02d %02d:%02d:%02d.%06ld inferd] ", tag[l], tm.tm_mon + 1,
                   tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  line[len] = '\n';
  line[len + 1] = '\0';
  fputs(line, stderr);
}
