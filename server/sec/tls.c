// tls.c: reads and checks the gRPC port's certificate, key and client CA
// with OpenSSL's libcrypto. gRPC's core would take the PEM texts unchecked and
// fail only inside each handshake (or in grpc_server_add_http2_port with no
// reason given), so the checks here are what gives the operator a message
// that names the file.
#include "server/sec/tls.h"

#include <errno.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// PEM files are small; a bigger one is a wrong path (a model, a log).
#define MAX_PEM_BYTES (1u << 20)

struct srv_tls {
  char *cert, *key, *root;
  char desc[512];
};

// --- reading

static int read_file(const char *flag, const char *path, char **out, err *e) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(e, ERR_INVALID_ARGUMENT, "%s: cannot open '%s': %s", flag, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: '%s' is not a regular file", flag, path);
  }
  if ((unsigned long long)st.st_size > MAX_PEM_BYTES) {
    fclose(f);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: '%s' is %lld bytes, more than a PEM file's %u", flag, path,
                   (long long)st.st_size, MAX_PEM_BYTES);
  }
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf) {
    fclose(f);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: out of memory reading '%s'", flag, path);
  }
  size_t n = fread(buf, 1, (size_t)st.st_size, f);
  int rerr = ferror(f);
  fclose(f);
  if (rerr) {
    free(buf);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: cannot read '%s'", flag, path);
  }
  buf[n] = '\0';
  if (n == 0) {
    free(buf);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: '%s' is empty", flag, path);
  }
  if (strlen(buf) != n) {  // gRPC takes NUL-terminated text: a NUL inside would cut it short silently
    free(buf);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: '%s' holds a NUL byte (DER? a PEM file is wanted)", flag, path);
  }
  *out = buf;
  return 0;
}

// OpenSSL's reason for the last failure, so "bad decrypt" or "no start line" reaches the log.
static const char *ssl_reason(char *buf, size_t n) {
  unsigned long code = ERR_peek_last_error();
  if (!code) return "not PEM";
  ERR_error_string_n(code, buf, n);
  ERR_clear_error();
  return buf;
}

// --- checking

// Every certificate in `pem` (a chain or a CA bundle) parses; returns the
// first in *first (the caller frees it) when first is not NULL.
static int check_certs(const char *flag, const char *path, const char *pem, X509 **first, err *e) {
  char why[256];
  BIO *b = BIO_new_mem_buf(pem, -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: out of memory", flag);
  int n = 0;
  X509 *x;
  ERR_clear_error();
  while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    if (n == 0 && first) *first = x;
    else X509_free(x);
    n++;
  }
  // PEM_read_bio_X509 ends a good file with "no start line"; anything else is damage
  unsigned long last = ERR_peek_last_error();
  int clean_end = last && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  BIO_free(b);
  if (n == 0 || !clean_end) {
    if (first && *first) {
      X509_free(*first);
      *first = NULL;
    }
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: '%s' holds no valid PEM certificate (%s)", flag, path,
                   n == 0 ? ssl_reason(why, sizeof why) : "a certificate after the first is damaged");
  }
  ERR_clear_error();
  return 0;
}

static int check_key(const char *cert_path, const char *key_path, const char *key_pem, X509 *cert, err *e) {
  char why[256];
  BIO *b = BIO_new_mem_buf(key_pem, -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "--grpc-server-key: out of memory");
  ERR_clear_error();
  // no password callback: an encrypted key cannot be used unattended by gRPC either
  EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"");
  BIO_free(b);
  if (!k)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--grpc-server-key: '%s' holds no usable PEM private key (%s; an unencrypted PEM key is wanted)",
                   key_path, ssl_reason(why, sizeof why));
  int ok = X509_check_private_key(cert, k);
  EVP_PKEY_free(k);
  ERR_clear_error();
  if (ok != 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--grpc-server-key: '%s' is not the private key of the certificate in '%s' (--grpc-server-cert)",
                   key_path, cert_path);
  return 0;
}

// notAfter as OpenSSL prints it ("Nov 26 19:00:00 2026 GMT").
static void print_time(const ASN1_TIME *t, char *buf, size_t n) {
  buf[0] = '\0';
  BIO *b = BIO_new(BIO_s_mem());
  if (!b) return;
  if (ASN1_TIME_print(b, t) == 1) {
    int len = BIO_read(b, buf, (int)n - 1);
    buf[len > 0 ? len : 0] = '\0';
  }
  BIO_free(b);
}

// An expired certificate would fail every handshake with a message only the
// client sees ("certificate has expired"): refuse it here, naming the date.
static int check_not_expired(const char *path, X509 *cert, err *e) {
  const ASN1_TIME *na = X509_get0_notAfter(cert);
  if (X509_cmp_current_time(na) > 0) return 0;
  char when[64];
  print_time(na, when, sizeof when);
  return err_set(e, ERR_INVALID_ARGUMENT, "--grpc-server-cert: '%s' expired (notAfter %s)", path,
                 when[0] ? when : "unreadable");
}

static void describe(X509 *cert, char *buf, size_t n) {
  char subj[256] = "", serial[80] = "", when[64] = "";
  X509_NAME_oneline(X509_get_subject_name(cert), subj, sizeof subj);
  BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
  char *hex = bn ? BN_bn2hex(bn) : NULL;
  if (hex) snprintf(serial, sizeof serial, "%s", hex);
  OPENSSL_free(hex);
  BN_free(bn);
  print_time(X509_get0_notAfter(cert), when, sizeof when);
  snprintf(buf, n, "subject %s, serial %s, notAfter %s", subj, serial, when);
}

// --- lifecycle

int srv_tls_load(const char *cert_path, const char *key_path, const char *root_path, int root_required,
                 srv_tls **out, err *e) {
  *out = NULL;
  if (!cert_path) return err_set(e, ERR_INVALID_ARGUMENT, "TLS on gRPC needs --grpc-server-cert FILE");
  if (!key_path) return err_set(e, ERR_INVALID_ARGUMENT, "TLS on gRPC needs --grpc-server-key FILE");
  if (root_required && !root_path)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "client certificates need --grpc-root-cert FILE (the CA that signs client certificates)");
  srv_tls *t = calloc(1, sizeof *t);
  if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS: out of memory");
  X509 *cert = NULL;
  int rc = read_file("--grpc-server-cert", cert_path, &t->cert, e);
  if (!rc) rc = read_file("--grpc-server-key", key_path, &t->key, e);
  if (!rc && root_path) rc = read_file("--grpc-root-cert", root_path, &t->root, e);
  if (!rc) rc = check_certs("--grpc-server-cert", cert_path, t->cert, &cert, e);
  if (!rc) rc = check_key(cert_path, key_path, t->key, cert, e);
  if (!rc) rc = check_not_expired(cert_path, cert, e);
  if (!rc) describe(cert, t->desc, sizeof t->desc);
  if (!rc && root_path) rc = check_certs("--grpc-root-cert", root_path, t->root, NULL, e);
  X509_free(cert);
  if (rc) {
    srv_tls_destroy(t);
    return rc;
  }
  *out = t;
  return 0;
}

void srv_tls_destroy(srv_tls *t) {
  if (!t) return;
  if (t->key) {  // the private key does not linger in freed heap memory
    OPENSSL_cleanse(t->key, strlen(t->key));
    free(t->key);
  }
  free(t->cert);
  free(t->root);
  free(t);
}

const char *srv_tls_cert_pem(const srv_tls *t) { return t->cert; }
const char *srv_tls_key_pem(const srv_tls *t) { return t->key; }
const char *srv_tls_root_pem(const srv_tls *t) { return t->root; }
const char *srv_tls_describe(const srv_tls *t) { return t->desc; }
