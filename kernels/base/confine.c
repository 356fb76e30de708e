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

// Resolves base/rel into out (PATH_MAX) when it lies inside base.
static int resolve_inside(const char *base, const char *rel, const char *what, char *out, err *e) {
  if (!rel[0] || rel[0] == '/')
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' must be a path relative to %s", what, rel, base);
  char rbase[PATH_MAX], joined[PATH_MAX];
  if (!realpath(base, rbase))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': cannot resolve %s: %s", what, rel, base, strerror(errno));
  if (snprintf(joined, sizeof joined, "%s/%s", rbase, rel) >= (int)sizeof joined)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': path too long", what, rel);
  if (!realpath(joined, out))
    return err_set(e, ERR_INVALID_ARGUMENT, "cannot open %s '%s/%s': %s", what, base, rel, strerror(errno));
  size_t n = strlen(rbase);
  // rbase "/" (a model at the root) contains everything; otherwise a prefix followed by '/'
  bool inside = strcmp(rbase, "/") == 0 || (strncmp(out, rbase, n) == 0 && out[n] == '/');
  if (!inside)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' escapes the model directory %s (it resolves to %s)", what,
                   rel, base, out);
  return 0;
}

int eng_confine_check(const char *base, const char *rel, const char *what, err *e) {
  char path[PATH_MAX];
  return resolve_inside(base, rel, what, path, e);
}

FILE *eng_confine_fopen(const char *base, const char *rel, const char *what, err *e) {
  char path[PATH_MAX];
  if (resolve_inside(base, rel, what, path, e)) return NULL;
  // a FIFO or device inside base is refused too, without blocking (rfile.h)
  return rfile_fopen_regular(path, O_NOFOLLOW, what, e);
}
