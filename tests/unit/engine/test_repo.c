// Tests engine/repo/repo.c: builds small model repositories in a mkdtemp
// directory and checks model order, versions chosen per policy, and the
// per-model errors (naming the file, field or version), special files
// (a FIFO, a device) refused without blocking.
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "engine/repo/repo.h"

static char g_root[PATH_MAX];

static void mkdirf(const char *fmt, ...) {
  char p[256], full[PATH_MAX + 300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p, sizeof p, fmt, ap);
  va_end(ap);
  snprintf(full, sizeof full, "%s/%s", g_root, p);
  CHECK(mkdir(full, 0755) == 0);
}

static void write_file(const char *rel, const char *text) {
  char full[PATH_MAX + 64];
  int n = snprintf(full, sizeof full, "%s/%s", g_root, rel);
  CHECK(n > 0 && (size_t)n < sizeof full);
  FILE *f = fopen(full, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static const repo_model *find(const repo_model *m, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(m[i].name, name) == 0) return &m[i];
  return NULL;
}

static void ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  CHECK(a >= b && strcmp(s + a - b, suffix) == 0);
  if (!(a >= b && strcmp(s + a - b, suffix) == 0)) fprintf(stderr, "  '%s' does not end with '%s'\n", s, suffix);
}

static void build_repo(void) {
  // no config: latest 1 of the numeric dirs; "abc", "01", "0" are ignored
  mkdirf("b_noconfig");
  const char *b_versions[] = {"1", "3", "10", "abc", "01", "0"};
  for (size_t i = 0; i < 6; i++) {
    char rel[128];
    mkdirf("b_noconfig/%s", b_versions[i]);
    snprintf(rel, sizeof rel, "b_noconfig/%s/model.onnx", b_versions[i]);
    write_file(rel, "not really onnx");
  }
  write_file("b_noconfig/2", "a file named like a version is ignored");

  mkdirf("a_all");
  write_file("a_all/config.pbtxt", "name: \"a_all\"\nversion_policy: { all: {} }\nmax_batch_size: 8\n");
  mkdirf("a_all/2");
  mkdirf("a_all/1");
  write_file("a_all/1/model.onnx", "x");
  write_file("a_all/2/model.onnx", "x");

  mkdirf("c_latest2");
  write_file("c_latest2/config.pbtxt", "version_policy { latest { num_versions: 2 } }");
  for (int v = 1; v <= 3; v++) {
    char rel[128];
    mkdirf("c_latest2/%d", v);
    snprintf(rel, sizeof rel, "c_latest2/%d/model.onnx", v);
    write_file(rel, "x");
  }

  mkdirf("d_specific");
  write_file("d_specific/config.pbtxt", "version_policy: { specific: { versions: [3, 1] } }");
  for (int v = 1; v <= 3; v++) {
    char rel[128];
    mkdirf("d_specific/%d", v);
    snprintf(rel, sizeof rel, "d_specific/%d/model.onnx", v);
    write_file(rel, "x");
  }

  mkdirf("e_specific_missing");
  write_file("e_specific_missing/config.pbtxt", "version_policy: { specific: { versions: [1, 7] } }");
  mkdirf("e_specific_missing/1");
  write_file("e_specific_missing/1/model.onnx", "x");

  mkdirf("f_nofile");
  mkdirf("f_nofile/1");
  write_file("f_nofile/1/model.plan", "x");

  mkdirf("g_noversions");
  write_file("g_noversions/config.pbtxt", "max_batch_size: 4");

  mkdirf("h_badname");
  write_file("h_badname/config.pbtxt", "name: \"other\"");
  mkdirf("h_badname/1");
  write_file("h_badname/1/model.onnx", "x");

  mkdirf("i_parse");
  write_file("i_parse/config.pbtxt", "name: \"i_parse\"\nmax_batch_sise: 4\n");
  mkdirf("i_parse/1");
  write_file("i_parse/1/model.onnx", "x");

  mkdirf("j_custom");
  write_file("j_custom/config.pbtxt", "default_model_filename: \"net.onnx\"");
  mkdirf("j_custom/5");
  write_file("j_custom/5/net.onnx", "x");

  mkdirf("k_latest0");
  write_file("k_latest0/config.pbtxt", "version_policy { latest { num_versions: 0 } }");
  mkdirf("k_latest0/1");
  write_file("k_latest0/1/model.onnx", "x");

  mkdirf(".hidden");
  mkdirf(".hidden/1");
  write_file(".hidden/1/model.onnx", "x");
  write_file("README", "a plain file at the top is not a model");

  // names that cannot be model names: left out of the scan, reported as skipped
  mkdirf("\xff\xfe_notutf8");  // not UTF-8
  mkdirf("\xff\xfe_notutf8/1");
  write_file("\xff\xfe_notutf8/1/model.onnx", "x");
  mkdirf("ctl\nname");         // C0 control
  mkdirf("c1\xc2\x85name");     // C1 control (U+0085, valid UTF-8)
  mkdirf("del\x7fname");        // DEL
  mkdirf("l_ovl\xc0\xaf");      // overlong '/': not UTF-8
  // UTF-8 beyond ASCII is a fine name
  mkdirf("m_caf\xc3\xa9");
  mkdirf("m_caf\xc3\xa9/1");
  write_file("m_caf\xc3\xa9/1/model.onnx", "x");
}

static void test_scan(void) {
  repo_model *m = NULL;
  size_t n = 0;
  err e = {0};
  repo_skip *sk = NULL;
  size_t n_sk = 0;
  CHECK_EQ_INT(repo_scan(g_root, &m, &n, &sk, &n_sk, &e), 0);
  const char *order[] = {"a_all",   "b_noconfig", "c_latest2", "d_specific", "e_specific_missing", "f_nofile",
                         "g_noversions", "h_badname", "i_parse",  "j_custom",  "k_latest0", "m_caf\xc3\xa9"};
  CHECK_EQ_INT(n, 12);
  for (size_t i = 0; i < n && i < 12; i++) {
    CHECK_EQ_STR(m[i].name, order[i]);
    CHECK(m[i].config != NULL);
  }

  const repo_model *x = find(m, n, "a_all");
  CHECK(x && x->status.code == 0 && x->config_from_file == 1 && x->n_versions == 2);
  if (x && x->n_versions == 2) {
    CHECK_EQ_INT(x->versions[0].version, 1);
    CHECK_EQ_INT(x->versions[1].version, 2);
    ends_with(x->versions[1].path, "/a_all/2/model.onnx");
    CHECK_EQ_INT(x->config->max_batch_size, 8);
  }

  x = find(m, n, "b_noconfig");
  CHECK(x && x->status.code == 0 && x->config_from_file == 0 && x->n_versions == 1);
  if (x && x->n_versions == 1) {
    CHECK_EQ_INT(x->versions[0].version, 10);
    ends_with(x->versions[0].path, "/b_noconfig/10/model.onnx");
    CHECK_EQ_STR(x->config->name, "b_noconfig");
    CHECK_EQ_INT(x->config->max_batch_size, 0);
    ends_with(x->dir, "/b_noconfig");
  }

  x = find(m, n, "c_latest2");
  CHECK(x && x->status.code == 0 && x->n_versions == 2);
  if (x && x->n_versions == 2) {
    CHECK_EQ_INT(x->versions[0].version, 2);
    CHECK_EQ_INT(x->versions[1].version, 3);
    CHECK_EQ_STR(x->config->name, "c_latest2");  // filled from the directory
  }

  x = find(m, n, "d_specific");
  CHECK(x && x->status.code == 0 && x->n_versions == 2);
  if (x && x->n_versions == 2) {
    CHECK_EQ_INT(x->versions[0].version, 1);
    CHECK_EQ_INT(x->versions[1].version, 3);
  }

  x = find(m, n, "e_specific_missing");
  CHECK(x && x->status.code == ERR_INVALID_ARGUMENT && x->n_versions == 0);
  if (x) {
    CHECK_CONTAINS(x->status.msg, "version 7 listed in version_policy.specific does not exist");
    CHECK_CONTAINS(x->status.msg, "e_specific_missing/config.pbtxt");
  }

  x = find(m, n, "f_nofile");
  CHECK(x && x->status.code == ERR_INVALID_ARGUMENT);
  if (x) CHECK_CONTAINS(x->status.msg, "/f_nofile/1/model.onnx' for version 1 not found");

  x = find(m, n, "g_noversions");
  CHECK(x && x->status.code == ERR_INVALID_ARGUMENT);
  if (x) CHECK_CONTAINS(x->status.msg, "model 'g_noversions' has no version directories");

  x = find(m, n, "h_badname");
  CHECK(x && x->status.code == ERR_INVALID_ARGUMENT);
  if (x) CHECK_CONTAINS(x->status.msg, "h_badname/config.pbtxt: name 'other' does not match the model directory 'h_badname'");

  x = find(m, n, "i_parse");
  CHECK(x && x->status.code == ERR_INVALID_ARGUMENT && x->config != NULL && x->config_from_file == 0);
  if (x) {
    CHECK_CONTAINS(x->status.msg, "i_parse/config.pbtxt:2: unknown field 'max_batch_sise' in inference.ModelConfig");
    CHECK_EQ_STR(x->config->name, "i_parse");  // the empty stand-in config
  }

  x = find(m, n, "j_custom");
  CHECK(x && x->status.code == 0 && x->n_versions == 1);
  if (x && x->n_versions == 1) {
    CHECK_EQ_INT(x->versions[0].version, 5);
    ends_with(x->versions[0].path, "/j_custom/5/net.onnx");
  }

  x = find(m, n, "k_latest0");
  CHECK(x && x->status.code == ERR_INVALID_ARGUMENT);
  if (x) CHECK_CONTAINS(x->status.msg, "version_policy.latest.num_versions must be > 0");

  CHECK_EQ_INT(n_sk, 5);  // test_scan_skips_bad_names checks which
  free(sk);
  repo_free(m, n);
}

static void test_scan_skips_bad_names(void) {
  repo_model *m = NULL;
  size_t n = 0;
  repo_skip *sk = NULL;
  size_t n_sk = 0;
  err e = {0};
  CHECK_EQ_INT(repo_scan(g_root, &m, &n, &sk, &n_sk, &e), 0);
  // sorted by bytes; each with its reason
  const char *names[] = {"c1\xc2\x85name", "ctl\nname", "del\x7fname", "l_ovl\xc0\xaf", "\xff\xfe_notutf8"};
  const char *whys[] = {"contains control characters", "contains control characters", "contains control characters",
                        "is not valid UTF-8", "is not valid UTF-8"};
  CHECK_EQ_INT(n_sk, 5);
  for (size_t i = 0; i < n_sk && i < 5; i++) {
    CHECK_EQ_STR(sk[i].name, names[i]);
    CHECK_EQ_STR(sk[i].why, whys[i]);
  }
  for (size_t i = 0; i < n; i++) CHECK(repo_name_problem(m[i].name) == NULL);
  free(sk);
  repo_free(m, n);
  // skipped may be NULL: the same models, the skips dropped
  CHECK_EQ_INT(repo_scan(g_root, &m, &n, NULL, NULL, &e), 0);
  CHECK_EQ_INT(n, 12);
  repo_free(m, n);
}

static void test_name_problem_and_escape(void) {
  CHECK(repo_name_problem("mlp") == NULL);
  CHECK(repo_name_problem("caf\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b") == NULL);  // non-ASCII, and a space
  CHECK(repo_name_problem("\xc2\xa0nbsp") == NULL);                          // U+00A0: first after C1
  CHECK_EQ_STR(repo_name_problem("a\tb"), "contains control characters");
  CHECK_EQ_STR(repo_name_problem("a\x1b[31m"), "contains control characters");
  CHECK_EQ_STR(repo_name_problem("\xc2\x9f"), "contains control characters");
  CHECK_EQ_STR(repo_name_problem("a\xed\xa0\x80"), "is not valid UTF-8");  // a surrogate
  CHECK_EQ_STR(repo_name_problem("trunc\xe6\xa8"), "is not valid UTF-8");
  // what a load request's name must also be: one directory of the repository
  CHECK(repo_model_name_problem("mlp") == NULL);
  CHECK(repo_model_name_problem("a.b-c_d") == NULL);
  CHECK_EQ_STR(repo_model_name_problem(""), "is empty");
  CHECK_EQ_STR(repo_model_name_problem("a/b"), "contains '/'");
  CHECK_EQ_STR(repo_model_name_problem("/etc/passwd"), "contains '/'");
  CHECK_EQ_STR(repo_model_name_problem(".."), "starts with '.'");
  CHECK_EQ_STR(repo_model_name_problem(".hidden"), "starts with '.'");
  CHECK_EQ_STR(repo_model_name_problem("a\tb"), "contains control characters");
  char longname[300];
  memset(longname, 'x', sizeof longname - 1);
  longname[255] = '\0';
  CHECK(repo_model_name_problem(longname) == NULL);  // 255 bytes: a directory name may be that long
  longname[255] = 'x';
  longname[256] = '\0';
  CHECK_EQ_STR(repo_model_name_problem(longname), "is longer than 255 bytes");
  char out[64];
  CHECK_EQ_INT(repo_name_escape(out, sizeof out, "a\xff\nb\\c\xc3\xa9"), 17);
  CHECK_EQ_STR(out, "a\\xff\\x0ab\\x5cc\xc3\xa9");
  CHECK_EQ_INT(repo_name_escape(out, 7, "ab\xff\xfe"), 6);  // "ab\xff" fits, the next escape does not
  CHECK_EQ_STR(out, "ab\\xff");
}

static void test_scan_model(void) {
  repo_model m;
  err e = {0};
  CHECK_EQ_INT(repo_scan_model(g_root, "d_specific", &m, &e), 0);
  CHECK_EQ_INT(m.n_versions, 2);
  CHECK(m.config != NULL);
  repo_model_close(&m);
  CHECK(m.config == NULL && m.versions == NULL);

  CHECK_EQ_INT(repo_scan_model(g_root, "nope", &m, &e), ERR_NOT_FOUND);
  CHECK_CONTAINS(e.msg, "model 'nope' not found");
  CHECK(m.config != NULL);
  repo_model_close(&m);

  CHECK_EQ_INT(repo_scan_model(g_root, "../x", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "invalid model name '../x'");
  repo_model_close(&m);
  CHECK_EQ_INT(repo_scan_model(g_root, ".hidden", &m, &e), ERR_INVALID_ARGUMENT);
  repo_model_close(&m);
  // by name too (a load request): refused, the name quoted escaped
  CHECK_EQ_INT(repo_scan_model(g_root, "\xff\xfe_notutf8", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "invalid model name '\\xff\\xfe_notutf8': the name is not valid UTF-8");
  repo_model_close(&m);
  CHECK_EQ_INT(repo_scan_model(g_root, "ctl\nname", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "invalid model name 'ctl\\x0aname': the name contains control characters");
  repo_model_close(&m);

  CHECK_EQ_INT(repo_scan_model(g_root, "f_nofile", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "f_nofile/1/model.onnx");
  CHECK_EQ_STR(m.status.msg, e.msg);
  repo_model_close(&m);
}

// A FIFO as config.pbtxt or as a version's model file: that model fails at
// once naming the file and its kind (the FIFO has no writer: opening it used
// to block the scan forever; main's alarm turns a regression into a failure).
static void test_special_files(void) {
  char p[PATH_MAX + 64];
  mkdirf("s_fifo_config");
  mkdirf("s_fifo_config/1");
  write_file("s_fifo_config/1/model.onnx", "x");
  snprintf(p, sizeof p, "%s/s_fifo_config/config.pbtxt", g_root);
  CHECK_EQ_INT(mkfifo(p, 0600), 0);
  repo_model m;
  err e = {0};
  CHECK_EQ_INT(repo_scan_model(g_root, "s_fifo_config", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "s_fifo_config/config.pbtxt' is a FIFO, not a regular file");
  repo_model_close(&m);

  mkdirf("s_fifo_model");
  mkdirf("s_fifo_model/1");
  snprintf(p, sizeof p, "%s/s_fifo_model/1/model.onnx", g_root);
  CHECK_EQ_INT(mkfifo(p, 0600), 0);
  CHECK_EQ_INT(repo_scan_model(g_root, "s_fifo_model", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "s_fifo_model/1/model.onnx' for version 1 is a FIFO, not a regular file");
  repo_model_close(&m);

  mkdirf("s_dev_model");
  mkdirf("s_dev_model/1");
  snprintf(p, sizeof p, "%s/s_dev_model/1/model.onnx", g_root);
  CHECK_EQ_INT(symlink("/dev/zero", p), 0);  // the link is followed by stat: a device, never read
  CHECK_EQ_INT(repo_scan_model(g_root, "s_dev_model", &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "is a character device, not a regular file");
  repo_model_close(&m);
}

// An ensemble (no model file) is scanned without one; a Python model
// (model.py) is refused for what it is, before the scan looks for model.onnx.
static void test_unsupported_named(void) {
  mkdirf("y_ensemble");
  mkdirf("y_ensemble/1");
  write_file("y_ensemble/config.pbtxt", "platform: \"ensemble\" ensemble_scheduling { step [ { model_name: \"a\" } ] }");
  mkdirf("z_python");
  mkdirf("z_python/1");
  write_file("z_python/1/model.py", "x");
  write_file("z_python/config.pbtxt", "backend: \"python\" sequence_batching {}");
  repo_model m;
  err e = {0};
  // an ensemble has no model file: its version directories are what the scan finds
  CHECK_EQ_INT(repo_scan_model(g_root, "y_ensemble", &m, &e), 0);
  CHECK_EQ_INT(m.n_versions, 1);
  repo_model_close(&m);
  CHECK_EQ_INT(repo_scan_model(g_root, "z_python", &m, &e), ERR_INVALID_ARGUMENT);
  // its sequence_batching is served: only the backend is named
  CHECK_EQ_STR(e.msg, "backend 'python' is not supported (inferd runs ONNX graphs only)");
  repo_model_close(&m);
}

// repo_list names what repo_scan scans, in its order, without the configs.
static void test_list(void) {
  char **names = NULL;
  size_t n = 0, n_models = 0;
  repo_model *ms = NULL;
  err e = {0};
  CHECK_EQ_INT(repo_list(g_root, &names, &n, NULL, NULL, &e), 0);
  CHECK_EQ_INT(repo_scan(g_root, &ms, &n_models, NULL, NULL, &e), 0);
  CHECK_EQ_INT(n, n_models);
  for (size_t i = 0; i < n && i < n_models; i++) CHECK_EQ_STR(names[i], ms[i].name);
  repo_list_free(names, n);
  repo_free(ms, n_models);
  CHECK_EQ_INT(repo_list("/nonexistent/repo", &names, &n, NULL, NULL, &e), ERR_NOT_FOUND);
  CHECK(names == NULL && n == 0);
}

static void test_empty_and_missing(void) {
  char empty[PATH_MAX + 16];
  snprintf(empty, sizeof empty, "%s/.hidden/1", g_root);  // a directory holding only a file
  repo_model *m = (repo_model *)1;
  size_t n = 7;
  err e = {0};
  CHECK_EQ_INT(repo_scan(empty, &m, &n, NULL, NULL, &e), 0);
  CHECK(m == NULL);
  CHECK_EQ_INT(n, 0);
  CHECK_EQ_INT(repo_scan("/nonexistent/repo", &m, &n, NULL, NULL, &e), ERR_NOT_FOUND);
  CHECK_CONTAINS(e.msg, "/nonexistent/repo");
}

int main(void) {
  snprintf(g_root, sizeof g_root, "%s/inferd_repo_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(g_root)) {
    perror("mkdtemp");
    return 1;
  }
  build_repo();
  test_scan();
  test_scan_skips_bad_names();
  test_name_problem_and_escape();
  test_scan_model();
  test_unsupported_named();
  test_list();
  test_empty_and_missing();
  alarm(5);
  test_special_files();
  alarm(0);
  nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  CHECK_DONE();
}
