// confine.c: see confine.h. realpath resolves every link of both paths; the
// file is then opened by its resolved name with O_NOFOLLOW, so a link put in
// place after the check is refused rather than followed, and anything but a
// regular file (a FIFO would block the open) is refused by rfile.c.
#include "kernels/base/confine.h"

#include "kernels/base/rfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

// Whether the resolved path lies in the resolved folder dir.
static bool under(const char *path, const char *dir) {
  size_t n = strlen(dir);
  // dir "/" contains everything; otherwise a prefix followed by '/'
  return strcmp(dir, "/") == 0 || (strncmp(path, dir, n) == 0 && path[n] == '/');
}

static bool has_dotdot(const char *rel) {
  for (const char *p = rel; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') return true;
    p += n;
    while (*p == '/') p++;
  }
  return false;
}

// Resolves base/rel into out (PATH_MAX) when it lies inside the bounds.
static int resolve_inside(const char *base, const char *rel, const eng_confine_roots *roots, const char *what,
                          char *out, err *e) {
  if (!rel[0] || rel[0] == '/' || has_dotdot(rel))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' must be a path relative to %s, without '..'", what, rel, base);
  char rbase[PATH_MAX], joined[PATH_MAX];
  if (!realpath(base, rbase))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': cannot resolve %s: %s", what, rel, base, strerror(errno));
  if (snprintf(joined, sizeof joined, "%s/%s", rbase, rel) >= (int)sizeof joined)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': path too long", what, rel);
  if (!realpath(joined, out))
    return err_set(e, ERR_INVALID_ARGUMENT, "cannot open %s '%s/%s': %s", what, base, rel, strerror(errno));
  if (under(out, rbase)) return 0;
  if (!roots || roots->n == 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s '%s' escapes the model directory %s (it resolves to %s; a name from a load request is "
                   "not followed out of it)",
                   what, rel, base, out);
  char rroot[PATH_MAX];
  for (size_t i = 0; i < roots->n; i++)
    if (realpath(roots->dirs[i], rroot) && under(out, rroot)) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT,
                 "%s '%s' escapes the model repository %s (it resolves to %s): links may lead only inside the "
                 "repository or a folder named by --model-store-allow",
                 what, rel, roots->dirs[0], out);
}

int eng_confine_check(const char *base, const char *rel, const eng_confine_roots *roots, const char *what, err *e) {
  char path[PATH_MAX];
  return resolve_inside(base, rel, roots, what, path, e);
}

FILE *eng_confine_fopen(const char *base, const char *rel, const eng_confine_roots *roots, const char *what, err *e) {
  char path[PATH_MAX];
  if (resolve_inside(base, rel, roots, what, path, e)) return NULL;
  // a FIFO or device inside the bounds is refused too, without blocking (rfile.h)
  return rfile_fopen_regular(path, O_NOFOLLOW, what, e);
}
