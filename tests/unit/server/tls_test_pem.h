// tests/unit/server/tls_test_pem.h: the folder of PEM files that the TLS
// unit tests (test_tls.c, test_http_tls.c) make with libcrypto, so neither
// needs the openssl CLI: a temporary folder, paths in it, and self-signed
// P-256 certificates with their keys. A failure here is the test's own
// setup breaking, not a finding: it exits 2.
#ifndef INFERD_TESTS_UNIT_SERVER_TLS_TEST_PEM_H
#define INFERD_TESTS_UNIT_SERVER_TLS_TEST_PEM_H

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ttp_dir {
  char dir[128];
  char buf[8][256];  // ttp_path's results: the last 8 stay valid
  int k;
} ttp_dir;

// Makes a fresh folder /tmp/inferd_<tag>_XXXXXX; 0, or -1 where it cannot.
static inline int ttp_open(ttp_dir *d, const char *tag) {
  snprintf(d->dir, sizeof d->dir, "/tmp/inferd_%s_XXXXXX", tag);
  d->k = 0;
  return mkdtemp(d->dir) ? 0 : -1;
}

// name's path in the folder, in one of 8 rotating buffers (so a call can
// take several).
static inline const char *ttp_path(ttp_dir *d, const char *name) {
  char dir[sizeof d->dir];  // a copy: GCC's -Wrestrict cannot tell d->dir from d->buf
  memcpy(dir, d->dir, sizeof dir);
  char *p = d->buf[d->k++ % 8];
  snprintf(p, sizeof d->buf[0], "%s/%s", dir, name);
  return p;
}

// A self-signed P-256 certificate with CN name and its key as <name>.crt
// and <name>.key, valid from `from_s` to `to_s` seconds from now.
static inline void ttp_write_pair(ttp_dir *d, const char *name, long from_s, long to_s) {
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  if (!k || !x) exit(2);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), from_s);
  X509_gmtime_adj(X509_getm_notAfter(x), to_s);
  X509_set_pubkey(x, k);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(x));
  if (!X509_sign(x, k, EVP_sha256())) exit(2);
  char f[64];
  snprintf(f, sizeof f, "%s.crt", name);
  FILE *cf = fopen(ttp_path(d, f), "wb");
  snprintf(f, sizeof f, "%s.key", name);
  FILE *kf = fopen(ttp_path(d, f), "wb");
  if (!cf || !kf || !PEM_write_X509(cf, x) || !PEM_write_PrivateKey(kf, k, NULL, NULL, 0, NULL, NULL)) exit(2);
  fclose(cf);
  fclose(kf);
  X509_free(x);
  EVP_PKEY_free(k);
}

#endif
