// test_tls: server/sec/tls.c on PEM files this test makes with libcrypto (two
// self-signed P-256 certificates with their keys): a matching pair loads
// with the texts unchanged; every refusal is ERR_INVALID_ARGUMENT naming the
// flag and the file: missing, a directory, empty, a NUL byte, not PEM, a
// damaged second certificate, a key that belongs to another certificate, a
// client-certificate setup without a client CA, an expired certificate (its
// notAfter in the message). The watch (server/sec/tls_watch.c): a reload to a
// good set advances the generation the fetcher sees and serves the new PEM
// texts; a bad set is refused naming the file and the old one stays.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "server/sec/tls.h"
#include "server/sec/tls_watch.h"
#include "tls_test_pem.h"

static ttp_dir pem;  // this test's PEM files

static const char *path(const char *name) { return ttp_path(&pem, name); }

static void write_text(const char *name, const char *text, size_t len) {
  FILE *f = fopen(path(name), "wb");
  if (!f || fwrite(text, 1, len, f) != len) {
    perror(name);
    exit(2);
  }
  fclose(f);
}

static char *read_text(const char *name) {
  FILE *f = fopen(path(name), "rb");
  if (!f) exit(2);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strdup(buf);
}

static void make_pair_valid(const char *name, long from_s, long to_s) {
  ttp_write_pair(&pem, name, from_s, to_s);
}

static void make_pair(const char *name) { make_pair_valid(name, 0, 3600); }

// Loading fails with ERR_INVALID_ARGUMENT and a message holding both needles.
static void check_refused(const char *cert, const char *key, const char *root, int root_required, const char *n1,
                          const char *n2) {
  srv_tls *t = (srv_tls *)1;
  err e = {0};
  CHECK_EQ_INT(srv_tls_load(cert, key, root, root_required, &t, &e), ERR_INVALID_ARGUMENT);
  CHECK(t == NULL);
  CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, n1);
  CHECK_CONTAINS(e.msg, n2);
}

static void test_good_pair(void) {
  srv_tls *t = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_tls_load(path("a.crt"), path("a.key"), NULL, 0, &t, &e), 0);
  char *crt = read_text("a.crt"), *key = read_text("a.key");
  CHECK_EQ_STR(srv_tls_cert_pem(t), crt);
  CHECK_EQ_STR(srv_tls_key_pem(t), key);
  CHECK(srv_tls_root_pem(t) == NULL);
  CHECK_CONTAINS(srv_tls_describe(t), "CN=a");
  CHECK_CONTAINS(srv_tls_describe(t), "serial 01");
  CHECK_CONTAINS(srv_tls_describe(t), "notAfter ");
  srv_tls_destroy(t);
  // mutual, with b's certificate as the client CA
  CHECK_EQ_INT(srv_tls_load(path("a.crt"), path("a.key"), path("b.crt"), 1, &t, &e), 0);
  char *root = read_text("b.crt");
  CHECK_EQ_STR(srv_tls_root_pem(t), root);
  srv_tls_destroy(t);
  free(crt);
  free(key);
  free(root);
  srv_tls_destroy(NULL);  // a no-op
}

static void test_refusals(void) {
  char crt[256], key[256];  // path()'s buffers rotate: keep these two
  snprintf(crt, sizeof crt, "%s", path("a.crt"));
  snprintf(key, sizeof key, "%s", path("a.key"));
  check_refused(crt, path("missing.key"), NULL, 0, "--grpc-server-key", "missing.key");
  check_refused(path("missing.crt"), key, NULL, 0, "--grpc-server-cert", "No such file");
  check_refused(pem.dir, key, NULL, 0, "--grpc-server-cert", "not a regular file");
  check_refused(crt, path("empty"), NULL, 0, "--grpc-server-key", "is empty");
  check_refused(crt, path("nul.key"), NULL, 0, "--grpc-server-key", "NUL byte");
  check_refused(path("garbage"), key, NULL, 0, "--grpc-server-cert", "no valid PEM certificate");
  check_refused(crt, path("garbage"), NULL, 0, "--grpc-server-key", "no usable PEM private key");
  check_refused(crt, path("a.crt"), NULL, 0, "--grpc-server-key", "no usable PEM private key");
  check_refused(path("damaged_chain.crt"), key, NULL, 0, "--grpc-server-cert", "after the first is damaged");
  check_refused(crt, path("b.key"), NULL, 0, "is not the private key of the certificate", path("b.key"));
  check_refused(crt, key, NULL, 1, "client certificates need --grpc-root-cert", "");
  // expired an hour ago; the year OpenSSL prints is in the message
  check_refused(path("old.crt"), path("old.key"), NULL, 0, "--grpc-server-cert", "expired (notAfter ");
  check_refused(path("old.crt"), path("old.key"), NULL, 0, path("old.crt"), " GMT)");
  check_refused(crt, key, path("garbage"), 1, "--grpc-root-cert", "garbage");
  check_refused(crt, key, path("missing_ca.crt"), 1, "--grpc-root-cert", "missing_ca.crt");
  check_refused(NULL, key, NULL, 0, "--grpc-server-cert FILE", "");
  check_refused(crt, NULL, NULL, 0, "--grpc-server-key FILE", "");
}

// --- the watch

static void copy_file(const char *from, const char *to) {
  char *t = read_text(from);
  write_text(to, t, strlen(t));
  free(t);
}

typedef struct seen_pems {
  int calls;
  char cert[8192];
} seen_pems;

static void keep_cert(void *ctx, const srv_tls *t) {
  seen_pems *s = ctx;
  s->calls++;
  snprintf(s->cert, sizeof s->cert, "%s", srv_tls_cert_pem(t));
}

typedef struct notes {
  int ok, failed;
  char last[1024];
} notes;

static void on_note(void *ctx, int failed, const char *msg) {
  notes *n = ctx;
  if (failed) n->failed++;
  else n->ok++;
  snprintf(n->last, sizeof n->last, "%s", msg);
}

static void test_watch(void) {
  copy_file("a.crt", "live.crt");
  copy_file("a.key", "live.key");
  char *a = read_text("a.crt"), *b = read_text("b.crt");
  notes n = {0};
  srv_tlsw *w = NULL;
  err e = {0};
  char crt[256], key[256];
  snprintf(crt, sizeof crt, "%s", path("live.crt"));
  snprintf(key, sizeof key, "%s", path("live.key"));
  CHECK_EQ_INT(srv_tlsw_create(crt, key, NULL, SRV_TLS_CLIENT_NONE, on_note, &n, &w, &e), 0);
  CHECK_EQ_INT(srv_tlsw_client(w), SRV_TLS_CLIENT_NONE);
  unsigned long long gen = 0;
  seen_pems s = {0};
  CHECK_EQ_INT(srv_tlsw_if_newer(w, &gen, keep_cert, &s), 1);  // the first fetch always gets the set
  CHECK_EQ_STR(s.cert, a);
  CHECK_EQ_INT(srv_tlsw_if_newer(w, &gen, keep_cert, &s), 0);  // nothing new since
  CHECK_EQ_INT(s.calls, 1);

  // b's files in place of a's: a reload serves them
  copy_file("b.crt", "live.crt");
  copy_file("b.key", "live.key");
  CHECK_EQ_INT(srv_tlsw_reload(w, &e), 0);
  CHECK_EQ_INT(n.ok, 1);
  CHECK_CONTAINS(n.last, "CN=b");
  CHECK_EQ_INT(srv_tlsw_if_newer(w, &gen, keep_cert, &s), 1);
  CHECK_EQ_STR(s.cert, b);

  // half a replacement (a's certificate with b's key): refused, b stays
  copy_file("a.crt", "live.crt");
  err e2 = {0};
  CHECK_EQ_INT(srv_tlsw_reload(w, &e2), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e2.msg, "is not the private key of the certificate");
  CHECK_EQ_INT(n.failed, 1);
  CHECK_CONTAINS(n.last, "previous ones stay in service");
  CHECK_CONTAINS(n.last, key);
  CHECK_EQ_INT(srv_tlsw_if_newer(w, &gen, keep_cert, &s), 0);
  // garbage in the certificate file: refused naming it
  write_text("live.crt", "garbage\n", 8);
  CHECK_EQ_INT(srv_tlsw_reload(w, &e2), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(n.last, crt);
  CHECK_EQ_INT(srv_tlsw_if_newer(w, &gen, keep_cert, &s), 0);
  CHECK_EQ_STR(s.cert, b);
  // a fetcher that never fetched still gets the set in service (b)
  unsigned long long fresh = 0;
  CHECK_EQ_INT(srv_tlsw_if_newer(w, &fresh, keep_cert, &s), 1);
  CHECK_EQ_STR(s.cert, b);
  srv_tlsw_destroy(w);

  // optional client certificates need the CA like required ones
  w = (srv_tlsw *)1;
  CHECK_EQ_INT(srv_tlsw_create(path("a.crt"), path("a.key"), NULL, SRV_TLS_CLIENT_OPTIONAL, NULL, NULL, &w, &e),
               ERR_INVALID_ARGUMENT);
  CHECK(w == NULL);
  CHECK_EQ_INT(srv_tlsw_create(path("a.crt"), path("a.key"), path("b.crt"), SRV_TLS_CLIENT_OPTIONAL, NULL, NULL, &w,
                               &e), 0);
  CHECK_EQ_INT(srv_tlsw_client(w), SRV_TLS_CLIENT_OPTIONAL);
  srv_tlsw_destroy(w);
  srv_tlsw_destroy(NULL);
  free(a);
  free(b);
}

int main(void) {
  if (ttp_open(&pem, "test_tls")) return 2;
  make_pair("a");
  make_pair("b");
  make_pair_valid("old", -7200, -3600);
  write_text("empty", "", 0);
  static const char nul_key[] = "-----BEGIN PRIVATE KEY-----\n\0\n";
  write_text("nul.key", nul_key, sizeof nul_key - 1);
  write_text("garbage", "not a certificate\n", 18);
  char *a = read_text("a.crt");
  char damaged[8192];
  snprintf(damaged, sizeof damaged, "%s-----BEGIN CERTIFICATE-----\nAAAA!!!!\n-----END CERTIFICATE-----\n", a);
  write_text("damaged_chain.crt", damaged, strlen(damaged));
  free(a);
  test_good_pair();
  test_refusals();
  test_watch();
  const char *files[] = {"a.crt", "a.key", "b.crt", "b.key", "empty", "nul.key", "garbage", "damaged_chain.crt",
                         "old.crt", "old.key", "live.crt", "live.key"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(path(files[i]));
  rmdir(pem.dir);
  CHECK_DONE();
}
