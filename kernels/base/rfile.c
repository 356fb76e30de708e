// kernels/base/rfile.c: see rfile.h. The kind is checked twice: by stat
// before the open, so that a device is never opened at all (opening some
// has side effects), and by fstat on the descriptor, since the name may be
// swapped for a FIFO between the two; O_NONBLOCK makes that open return at
// once instead of waiting for a writer, and is cleared again for the read.
#include "kernels/base/rfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *rfile_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

static int refuse(const char *path, mode_t mode, const char *what, err *e) {
  return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' is %s, not a regular file", what, path, rfile_kind(mode));
}

int rfile_open_regular(const char *path, int extra_flags, const char *what, err *e) {
  struct stat st;
  int pre = (extra_flags & O_NOFOLLOW) ? lstat(path, &st) : stat(path, &st);
  if (pre == 0 && !S_ISREG(st.st_mode)) {
    refuse(path, st.st_mode, what, e);
    return -1;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | extra_flags);
  if (fd < 0) {
    err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INVALID_ARGUMENT, "cannot open %s '%s': %s", what, path,
            strerror(errno));
    return -1;
  }
  int fl;
  if (fstat(fd, &st) != 0) {
    err_set(e, ERR_INVALID_ARGUMENT, "cannot stat %s '%s': %s", what, path, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    refuse(path, st.st_mode, what, e);
    close(fd);
    return -1;
  }
  if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
    err_set(e, ERR_INTERNAL, "cannot read %s '%s': %s", what, path, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

FILE *rfile_fopen_regular(const char *path, int extra_flags, const char *what, err *e) {
  int fd = rfile_open_regular(path, extra_flags, what, e);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot open %s '%s': %s", what, path, strerror(errno));
    close(fd);
  }
  return f;
}

int rfile_read_all(const char *path, const char *what, size_t max, uint8_t **buf, size_t *len, err *e) {
  *buf = NULL;
  *len = 0;
  int fd = rfile_open_regular(path, 0, what, e);
  if (fd < 0) return e ? e->code : ERR_INVALID_ARGUMENT;
  struct stat st;
  int rc = 0;
  uint8_t *b = NULL;
  size_t n = 0;
  if (fstat(fd, &st) != 0) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "cannot stat %s '%s': %s", what, path, strerror(errno));
    goto out;
  }
  if ((uint64_t)st.st_size > (uint64_t)max) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' is larger than %zu bytes", what, path, max);
    goto out;
  }
  // the size fstat saw, plus one byte to see EOF; a file that grows past max meanwhile is refused
  size_t cap = (size_t)st.st_size + 1;
  if (!(b = malloc(cap))) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory reading %s '%s' (%zu bytes)", what, path, cap);
    goto out;
  }
  for (;;) {
    if (n == cap) {
      if (cap > max) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' is larger than %zu bytes", what, path, max);
        goto out;
      }
      size_t ncap = cap * 2;
      if (max - cap < cap) ncap = max < SIZE_MAX ? max + 1 : SIZE_MAX;  // one past max, to see it exceeded
      uint8_t *g = realloc(b, ncap);
      if (!g) {
        rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory reading %s '%s'", what, path);
        goto out;
      }
      b = g, cap = ncap;
    }
    ssize_t got = read(fd, b + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "cannot read %s '%s': %s", what, path, strerror(errno));
      goto out;
    }
    if (got == 0) break;
    n += (size_t)got;
  }
  if (n > max) rc = err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' is larger than %zu bytes", what, path, max);
out:
  close(fd);
  if (rc) {
    free(b);
    return rc;
  }
  *buf = b;
  *len = n;
  return 0;
}
