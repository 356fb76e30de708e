// server/http/dashboard.h: the /dashboard page (server/http/dashboard.html), embedded
// into the binary at build time by server/http/dashboard.cmake so the server
// needs no files on disk to serve it.
#ifndef INFERD_SERVER_DASHBOARD_H
#define INFERD_SERVER_DASHBOARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The page's bytes, UTF-8 HTML; followed by a NUL that is not counted in
// prof_dashboard_html_len, so it may also be used as a C string.
extern const char prof_dashboard_html[];
extern const size_t prof_dashboard_html_len;

#ifdef __cplusplus
}
#endif

#endif
