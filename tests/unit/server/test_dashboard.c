// tests/unit/server/test_dashboard.c: the embedded /dashboard page
// (server/http/dashboard.h) is byte-for-byte server/http/dashboard.html, and the page
// loads nothing from outside the server (no http(s) URL, no external
// <script src> / <link href> / CSS url() / @import).
// usage: test_dashboard [path of server/http/dashboard.html]; the build passes
// the source tree's path in INFERD_DASHBOARD_HTML_PATH.
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server/http/dashboard.h"

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) {
    b[n] = '\0';
    *len = (size_t)n;
  }
  return b;
}

// Case-insensitive count of needle in hay[0..n), ignoring spaces after a '<'
// so "< script" is caught too.
static int count_ci(const char *hay, size_t n, const char *needle) {
  size_t m = strlen(needle);
  int c = 0;
  for (size_t i = 0; i + m <= n; i++) {
    size_t j = 0;
    while (j < m && tolower((unsigned char)hay[i + j]) == tolower((unsigned char)needle[j])) j++;
    if (j == m) c++;
  }
  return c;
}

// Number of tags "<name ...>" whose attributes contain attr=.
static int tags_with_attr(const char *h, size_t n, const char *name, const char *attr) {
  int c = 0;
  size_t nl = strlen(name), al = strlen(attr);
  for (size_t i = 0; i < n; i++) {
    if (h[i] != '<') continue;
    size_t k = i + 1;
    while (k < n && isspace((unsigned char)h[k])) k++;
    if (k + nl > n || strncasecmp(h + k, name, nl) != 0) continue;
    const char *end = memchr(h + k, '>', n - k);
    if (!end) end = h + n;
    for (const char *q = h + k + nl; q + al <= end; q++)
      if (strncasecmp(q, attr, al) == 0 && (q[al] == '=' || isspace((unsigned char)q[al]))) {
        c++;
        break;
      }
  }
  return c;
}

#ifndef INFERD_DASHBOARD_HTML_PATH
#define INFERD_DASHBOARD_HTML_PATH "server/http/dashboard.html"
#endif

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : INFERD_DASHBOARD_HTML_PATH;
  size_t n = 0;
  char *file = slurp(path, &n);
  CHECK(file != NULL);
  if (!file) CHECK_DONE();

  CHECK_EQ_INT(prof_dashboard_html_len, n);
  CHECK(prof_dashboard_html_len == n && memcmp(prof_dashboard_html, file, n) == 0);
  CHECK_EQ_INT(prof_dashboard_html[prof_dashboard_html_len], 0);
  CHECK_EQ_INT(strlen(prof_dashboard_html), prof_dashboard_html_len);  // no NUL inside

  const char *h = prof_dashboard_html;
  size_t hl = prof_dashboard_html_len;
  CHECK_EQ_INT(count_ci(h, hl, "http://"), 0);
  CHECK_EQ_INT(count_ci(h, hl, "https://"), 0);
  CHECK_EQ_INT(tags_with_attr(h, hl, "script", "src"), 0);
  CHECK_EQ_INT(tags_with_attr(h, hl, "link", "href"), 0);
  CHECK_EQ_INT(tags_with_attr(h, hl, "img", "src"), 0);
  CHECK_EQ_INT(tags_with_attr(h, hl, "iframe", "src"), 0);
  CHECK_EQ_INT(count_ci(h, hl, "@import"), 0);
  CHECK_EQ_INT(count_ci(h, hl, "url("), 0);
  CHECK_EQ_INT(count_ci(h, hl, "@font-face"), 0);
  // The scanner must see what it looks for, or the zeros above say nothing.
  const char *bad = "<script type=x src=\"a.js\"></script><LINK rel=s HREF='x'>";
  CHECK_EQ_INT(tags_with_attr(bad, strlen(bad), "script", "src"), 1);
  CHECK_EQ_INT(tags_with_attr(bad, strlen(bad), "link", "href"), 1);
  CHECK_EQ_INT(count_ci("a HTTPS://b", 11, "https://"), 1);

  // What the page is for: one inline script polling the JSON endpoint.
  CHECK_EQ_INT(count_ci(h, hl, "<script"), 1);
  CHECK_CONTAINS(h, "\"/dashboard.json\"");
  CHECK_CONTAINS(h, "disconnected");
  CHECK_CONTAINS(h, "<!DOCTYPE html>");
  free(file);
  CHECK_DONE();
}
