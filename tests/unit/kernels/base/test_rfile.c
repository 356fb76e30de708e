// tests/unit/kernels/base/test_rfile.c: kernels/base/rfile.c and its use by
// confine.c. A FIFO, a device, a socket or a directory where a file is
// expected is refused at once, naming the file and its kind; a regular file
// reads. The FIFO has no writer, so a regression would block its open
// forever: an alarm turns that hang into a failure.
#include "check.h"
#include "kernels/base/confine.h"
#include "kernels/base/rfile.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char g_root[] = "/tmp/inferd_rfile_XXXXXX";

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_rfile: timed out: an open blocked on a special file\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(2);
}

static void path_of(char *dst, const char *name) { snprintf(dst, PATH_MAX, "%s/%s", g_root, name); }

static void write_file(const char *name, const char *text) {
  char p[PATH_MAX];
  path_of(p, name);
  FILE *f = fopen(p, "wb");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

// rfile_read_all on path fails, and the message names path and kind.
static void check_refused(const char *path, const char *kind) {
  err e = {0};
  uint8_t *buf = (uint8_t *)1;
  size_t len = 7;
  CHECK_EQ_INT(rfile_read_all(path, "model file", 1 << 20, &buf, &len, &e), ERR_INVALID_ARGUMENT);
  CHECK(buf == NULL);
  CHECK_EQ_INT((int)len, 0);
  CHECK_CONTAINS(e.msg, path);
  char want[128];
  snprintf(want, sizeof want, "is %s, not a regular file", kind);
  CHECK_CONTAINS(e.msg, want);
  e = (err){0};
  CHECK_EQ_INT(rfile_open_regular(path, 0, "model file", &e), -1);
  CHECK_CONTAINS(e.msg, want);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(5);
  if (!mkdtemp(g_root)) {
    perror("mkdtemp");
    return 1;
  }
  char p[PATH_MAX];

  // a regular file reads, whole; one over max is refused
  write_file("ok.txt", "hello");
  path_of(p, "ok.txt");
  err e = {0};
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(rfile_read_all(p, "config", 1 << 20, &buf, &len, &e), 0);
  CHECK_EQ_INT((int)len, 5);
  CHECK(buf && memcmp(buf, "hello", 5) == 0);
  free(buf);
  CHECK_EQ_INT(rfile_read_all(p, "config", 4, &buf, &len, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "larger than 4 bytes");
  int fd = rfile_open_regular(p, O_NOFOLLOW, "config", &e);
  CHECK(fd >= 0);
  if (fd >= 0) {  // O_NONBLOCK is cleared for the read, O_CLOEXEC kept
    CHECK_EQ_INT(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
  }
  path_of(p, "missing");
  CHECK_EQ_INT(rfile_read_all(p, "config", 1 << 20, &buf, &len, &e), ERR_NOT_FOUND);

  // a FIFO with no writer: refused at once (blocked forever before)
  path_of(p, "fifo");
  CHECK_EQ_INT(mkfifo(p, 0600), 0);
  check_refused(p, "a FIFO");
  FILE *f = rfile_fopen_regular(p, 0, "weights", &e);
  CHECK(f == NULL);
  CHECK_CONTAINS(e.msg, "weights '");
  // ... and through the confinement of files a model names
  CHECK(eng_confine_fopen(g_root, "fifo", NULL, "external data", &e) == NULL);
  CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "external data '");
  CHECK_CONTAINS(e.msg, "is a FIFO, not a regular file");
  // a link to the FIFO inside the directory: the link resolves inside, the FIFO is still refused
  char l[PATH_MAX];
  path_of(l, "fifo_link");
  CHECK_EQ_INT(symlink("fifo", l), 0);
  CHECK(eng_confine_fopen(g_root, "fifo_link", NULL, "external data", &e) == NULL);
  CHECK_CONTAINS(e.msg, "is a FIFO, not a regular file");
  check_refused(l, "a FIFO");

  // a directory where a file is expected
  path_of(p, "dir");
  CHECK_EQ_INT(mkdir(p, 0700), 0);
  check_refused(p, "a directory");

  // a character device: /dev/zero would be read forever
  check_refused("/dev/zero", "a character device");
  check_refused("/dev/null", "a character device");

  // a socket (open(2) would fail with ENXIO; the kind is named instead)
  path_of(p, "sock");
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (s >= 0 && strlen(p) < sizeof sa.sun_path) {
    strcpy(sa.sun_path, p);
    CHECK_EQ_INT(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    check_refused(p, "a socket");
    close(s);
    unlink(p);
  }

  // the confined regular file still opens
  f = eng_confine_fopen(g_root, "ok.txt", NULL, "external data", &e);
  CHECK(f != NULL);
  if (f) fclose(f);

  path_of(p, "ok.txt");
  unlink(p);
  path_of(p, "fifo_link");
  unlink(p);
  path_of(p, "fifo");
  unlink(p);
  path_of(p, "dir");
  rmdir(p);
  rmdir(g_root);
  CHECK_DONE();
}
