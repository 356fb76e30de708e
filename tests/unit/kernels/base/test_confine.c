// tests/unit/kernels/base/test_confine.c: kernels/base/confine.c's two
// bounds (issue 31, item 9). A name a load request gave (roots NULL) is not
// followed out of its base folder; a name the operator wrote follows links
// anywhere inside the repository and the --model-store-allow folders, and
// nowhere else (not /etc/passwd, not a folder whose name merely starts like
// an allowed one). Either way an absolute name or one with a ".." part is
// refused, and a FIFO is refused even inside an allowed folder.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kernels/base/confine.h"

static char g_tmp[] = "/tmp/inferd_confine_XXXXXX";
static char g_repo[PATH_MAX], g_base[PATH_MAX], g_store[PATH_MAX];

static void at(char *dst, const char *rel) {
  snprintf(dst, PATH_MAX, "%s/%s", g_tmp, rel);
}

static void mkdir_at(const char *rel) {
  char p[PATH_MAX];
  at(p, rel);
  CHECK_EQ_INT(mkdir(p, 0700), 0);
}

static void file_at(const char *rel) {
  char p[PATH_MAX];
  at(p, rel);
  FILE *f = fopen(p, "wb");
  CHECK(f != NULL);
  if (f) {
    fputs("bytes", f);
    fclose(f);
  }
}

// a link at rel (under the temporary folder) to target, taken as written
static void link_at(const char *target, const char *rel) {
  char p[PATH_MAX];
  at(p, rel);
  CHECK_EQ_INT(symlink(target, p), 0);
}

// base/rel opens (and closes) under those roots
static void opens(const char *rel, const eng_confine_roots *roots) {
  err e = {0};
  FILE *f = eng_confine_fopen(g_base, rel, roots, "external data", &e);
  if (!f) fprintf(stderr, "  %s: %s\n", rel, e.msg);
  CHECK(f != NULL);
  if (f) fclose(f);
  CHECK_EQ_INT(eng_confine_check(g_base, rel, roots, "external data", &e), 0);
}

// base/rel is refused under those roots, the message holding `want`
static void refused(const char *rel, const eng_confine_roots *roots, const char *want) {
  err e = {0};
  FILE *f = eng_confine_fopen(g_base, rel, roots, "external data", &e);
  CHECK(f == NULL);
  if (f) fclose(f);
  CHECK_EQ_INT((int)e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, want);
  e = (err){0};
  CHECK_EQ_INT(eng_confine_check(g_base, rel, roots, "external data", &e), ERR_INVALID_ARGUMENT);
}

int main(void) {
  CHECK(mkdtemp(g_tmp) != NULL);
  // repo/m/1 holds the links; repo/shared is another folder of the
  // repository; store/blobs is a Hugging Face cache's blobs; store2 only
  // starts like it; outside/ is neither
  const char *dirs[] = {"repo", "repo/m", "repo/m/1", "repo/shared", "store", "store/blobs", "store2", "outside"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) mkdir_at(dirs[i]);
  file_at("repo/m/1/model.onnx");
  file_at("repo/shared/w.bin");
  file_at("store/blobs/sha256-abc");
  file_at("store2/secret");
  file_at("outside/secret");
  char p[PATH_MAX];
  at(p, "store/blobs/fifo");
  CHECK_EQ_INT(mkfifo(p, 0600), 0);
  link_at("../../shared/w.bin", "repo/m/1/in_repo");
  at(p, "store/blobs/sha256-abc");
  link_at(p, "repo/m/1/in_store");
  link_at("../../../store2/secret", "repo/m/1/in_store2");
  at(p, "outside/secret");
  link_at(p, "repo/m/1/outside");
  link_at("/etc/passwd", "repo/m/1/passwd");
  at(p, "store/blobs/fifo");
  link_at(p, "repo/m/1/fifo");
  at(g_repo, "repo");
  at(g_base, "repo/m/1");
  at(g_store, "store");

  const char *repo_only[] = {g_repo}, *with_store[] = {g_repo, g_store};
  eng_confine_roots r_repo = {repo_only, 1}, r_store = {with_store, 2};

  // a request's name (no roots): its folder only
  opens("model.onnx", NULL);
  refused("in_repo", NULL, "escapes the model directory");
  refused("in_store", NULL, "escapes the model directory");

  // the operator's name: links into the repository are followed ...
  opens("model.onnx", &r_repo);
  opens("in_repo", &r_repo);
  // ... and into an allowed folder only once it is named, the message naming the flag
  refused("in_store", &r_repo, "--model-store-allow");
  opens("in_store", &r_store);
  // never elsewhere, nor into a folder that only starts like an allowed one
  refused("in_store2", &r_store, "escapes the model repository");
  refused("outside", &r_store, "escapes the model repository");
  refused("passwd", &r_store, "resolves to /etc/passwd");
  // a FIFO is refused even where links may lead (it would block the open)
  // (eng_confine_check bounds where it leads only: the kind is the opener's)
  err e = {0};
  CHECK(eng_confine_fopen(g_base, "fifo", &r_store, "external data", &e) == NULL);
  CHECK_CONTAINS(e.msg, "not a regular file");

  // names: absolute or with a ".." part, whatever the roots
  refused("../../shared/w.bin", &r_store, "without '..'");
  refused("x/../model.onnx", &r_store, "without '..'");
  refused("..", &r_store, "without '..'");
  at(p, "repo/shared/w.bin");
  refused(p, &r_store, "must be a path relative");
  refused("/etc/passwd", NULL, "must be a path relative");
  refused("", &r_store, "must be a path relative");
  refused("missing", &r_store, "cannot open");

  // the temporary tree goes (links first, then files, then folders deepest first)
  const char *rm[] = {"repo/m/1/in_repo",       "repo/m/1/in_store", "repo/m/1/in_store2",  "repo/m/1/outside",
                      "repo/m/1/passwd",        "repo/m/1/fifo",     "repo/m/1/model.onnx", "repo/shared/w.bin",
                      "store/blobs/sha256-abc", "store/blobs/fifo",  "store2/secret",       "outside/secret"};
  for (size_t i = 0; i < sizeof rm / sizeof rm[0]; i++) {
    at(p, rm[i]);
    CHECK_EQ_INT(unlink(p), 0);
  }
  for (size_t i = sizeof dirs / sizeof dirs[0]; i-- > 0;) {
    at(p, dirs[i]);
    CHECK_EQ_INT(rmdir(p), 0);
  }
  CHECK_EQ_INT(rmdir(g_tmp), 0);
  CHECK_DONE();
}
