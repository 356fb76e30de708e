// repo.c: Triton-style model repository scan: model directories, their
// config.pbtxt, and the numeric version directories the version policy picks.
#include "engine/repo/repo.h"

#include "kernels/base/rfile.h"
#include "kernels/base/utf8.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"

// --- helpers

static int join(char *dst, size_t cap, err *e, const char *fmt, const char *a, const char *b) {
  int n = snprintf(dst, cap, fmt, a, b);
  if (n < 0 || (size_t)n >= cap) return err_set(e, ERR_INVALID_ARGUMENT, "path too long: %s/%s", a, b);
  return 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Triton's rule: a version directory is a positive decimal number without a
// leading zero; anything else in the model directory is ignored.
static int parse_version(const char *s, int64_t *v) {
  if (s[0] < '1' || s[0] > '9') return 0;
  int64_t x = 0;
  for (const char *c = s; *c; c++) {
    if (*c < '0' || *c > '9') return 0;
    if (x > (INT64_MAX - (*c - '0')) / 10) return 0;
    x = x * 10 + (*c - '0');
  }
  *v = x;
  return 1;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_skip(const void *a, const void *b) {
  return strcmp(((const repo_skip *)a)->name, ((const repo_skip *)b)->name);
}

const char *repo_name_problem(const char *name) {
  size_t n = strlen(name);
  const unsigned char *s = (const unsigned char *)name;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq_len(s + i, n - i);
    if (!k) return "is not valid UTF-8";
    // C0 controls, DEL, and C1 controls (U+0080-U+009F, two bytes: C2 80-9F)
    if (s[i] < 0x20 || s[i] == 0x7f || (k == 2 && s[i] == 0xc2 && s[i + 1] < 0xa0))
      return "contains control characters";
    i += k;
  }
  return NULL;
}

size_t repo_name_escape(char *dst, size_t cap, const char *name) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)name;
  size_t n = strlen(name), o = 0;
  if (!cap) return 0;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq_len(s + i, n - i);
    int ctl = !k || s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\' || (k == 2 && s[i] == 0xc2 && s[i + 1] < 0xa0);
    if (ctl) k = 1;
    size_t w = ctl ? 4 : k;
    if (o + w >= cap) break;
    if (ctl) {
      dst[o++] = '\\', dst[o++] = 'x', dst[o++] = hex[s[i] >> 4], dst[o++] = hex[s[i] & 15];
    } else {
      memcpy(dst + o, s + i, k);
      o += k;
    }
    i += k;
  }
  dst[o] = '\0';
  return o;
}

const char *repo_model_name_problem(const char *name) {
  if (!name || !name[0]) return "is empty";
  if (strlen(name) >= sizeof((repo_model *)0)->name) return "is longer than 255 bytes";
  if (name[0] == '.') return "starts with '.'";
  if (strchr(name, '/')) return "contains '/'";
  return repo_name_problem(name);
}

static int valid_name(const char *name) { return !repo_model_name_problem(name); }

// Sorted numeric version directories of dir.
static int list_versions(const char *dir, int64_t **out, size_t *n, err *e) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return err_set(e, ERR_INTERNAL, "cannot read model directory %s: %s", dir, strerror(errno));
  size_t cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    int64_t v;
    char path[PATH_MAX];
    if (!parse_version(de->d_name, &v)) continue;
    if (join(path, sizeof path, e, "%s/%s", dir, de->d_name)) continue;
    if (!is_dir(path)) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      int64_t *g = realloc(*out, cap * sizeof **out);
      if (!g) {
        rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory listing %s", dir);
        break;
      }
      *out = g;
    }
    (*out)[(*n)++] = v;
  }
  closedir(d);
  if (rc) {
    free(*out);
    *out = NULL;
    *n = 0;
    return rc;
  }
  if (*n) qsort(*out, *n, sizeof **out, cmp_i64);
  return 0;
}

// Chooses versions per the policy and checks each has its model file.
static int select_versions(repo_model *m, err *e) {
  const Inference__ModelConfig *c = m->config;
  const char *fname = c->default_model_filename && c->default_model_filename[0] ? c->default_model_filename
                                                                                 : REPO_DEFAULT_MODEL_FILENAME;
  if (strchr(fname, '/') || strcmp(fname, "..") == 0 || strcmp(fname, ".") == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s/config.pbtxt: default_model_filename '%s' must be a plain file name",
                   m->dir, fname);
  int64_t *avail;
  size_t n_avail;
  TRY(list_versions(m->dir, &avail, &n_avail, e));
  int rc = 0;
  int64_t *chosen = NULL;
  size_t n_chosen = 0;
  const Inference__ModelVersionPolicy *vp = c->version_policy;
  int which = vp ? (int)vp->policy_choice_case : 0;
  if (n_avail == 0) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "model '%s' has no version directories (numbered subdirectories of %s)",
                 m->name, m->dir);
    goto out;
  }
  chosen = malloc((vp && which == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC && vp->specific
                       ? vp->specific->n_versions + 1
                       : n_avail) *
                  sizeof *chosen);
  if (!chosen) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", m->dir);
    goto out;
  }
  if (which == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL) {
    memcpy(chosen, avail, n_avail * sizeof *chosen);
    n_chosen = n_avail;
  } else if (which == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC) {
    const Inference__ModelVersionPolicy__Specific *sp = vp->specific;
    for (size_t i = 0; sp && i < sp->n_versions; i++) {
      int64_t v = sp->versions[i];
      if (!bsearch(&v, avail, n_avail, sizeof *avail, cmp_i64)) {
        rc = err_set(e, ERR_INVALID_ARGUMENT,
                     "%s/config.pbtxt: version %lld listed in version_policy.specific does not exist in %s",
                     m->dir, (long long)v, m->dir);
        goto out;
      }
      int dup = 0;
      for (size_t k = 0; k < n_chosen; k++) dup |= chosen[k] == v;
      if (!dup) chosen[n_chosen++] = v;
    }
    if (n_chosen == 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "%s/config.pbtxt: version_policy.specific lists no versions", m->dir);
      goto out;
    }
    qsort(chosen, n_chosen, sizeof *chosen, cmp_i64);
  } else {
    uint32_t want = 1;
    if (which == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST && vp->latest) {
      want = vp->latest->num_versions;
      if (want == 0) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "%s/config.pbtxt: version_policy.latest.num_versions must be > 0",
                     m->dir);
        goto out;
      }
    }
    n_chosen = want < n_avail ? want : n_avail;
    memcpy(chosen, avail + (n_avail - n_chosen), n_chosen * sizeof *chosen);
  }
  m->versions = calloc(n_chosen, sizeof *m->versions);
  if (!m->versions) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", m->dir);
    goto out;
  }
  for (size_t i = 0; i < n_chosen; i++) {
    repo_version *rv = &m->versions[i];
    rv->version = chosen[i];
    int n = snprintf(rv->path, sizeof rv->path, "%s/%lld/%s", m->dir, (long long)chosen[i], fname);
    if (n < 0 || (size_t)n >= sizeof rv->path) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "path too long in %s", m->dir);
      break;
    }
    struct stat st;
    // an ensemble (platform "ensemble") has no model file: its version directories are all it has
    if (m->config && m->config->platform && strcmp(m->config->platform, "ensemble") == 0) continue;
    // nor does the built-in repeat backend (server/core/repeat.h)
    if (m->config && m->config->backend && strcmp(m->config->backend, CONFIG_BACKEND_REPEAT) == 0) continue;
    // a generative model's version folder is a checkpoint (config.json, safetensors): its loader names what is missing
    if (m->config && m->config->backend && strcmp(m->config->backend, CONFIG_BACKEND_LLM) == 0) continue;
    // A directory is accepted too: ONNX models with external data may be one.
    if (stat(rv->path, &st) != 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "model file '%s' for version %lld not found", rv->path,
                   (long long)chosen[i]);
      break;
    }
    // a FIFO would block the load's open until someone wrote to it; a device would be read forever
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "model file '%s' for version %lld is %s, not a regular file", rv->path,
                   (long long)chosen[i], rfile_kind(st.st_mode));
      break;
    }
    // where a link may lead is checked when the file is loaded (the server's
    // registry knows the repository's bounds and who named the file)
  }
  if (rc) {
    free(m->versions);
    m->versions = NULL;
  } else {
    m->n_versions = n_chosen;
  }
out:
  free(chosen);
  free(avail);
  return rc;
}

// Sets config.name to the directory name when empty; rejects a mismatch.
static int settle_name(repo_model *m, err *e) {
  Inference__ModelConfig *c = m->config;
  if (c->name && c->name[0]) {
    if (strcmp(c->name, m->name) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s/config.pbtxt: name '%s' does not match the model directory '%s'",
                     m->dir, c->name, m->name);
    return 0;
  }
  char *copy = strdup(m->name);
  if (!copy) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (c->name != protobuf_c_empty_string) free(c->name);
  c->name = copy;
  return 0;
}

// --- public

int repo_scan_model(const char *repo_dir, const char *name, repo_model *out, err *e) {
  return repo_scan_model_config(repo_dir, name, NULL, out, e);
}

int repo_scan_model_config(const char *repo_dir, const char *name, const char *config_text, repo_model *out,
                           err *e) {
  memset(out, 0, sizeof *out);
  err *st = &out->status;
  int ok_name = valid_name(name);
  out->config = config_new(ok_name ? name : NULL);
  if (!out->config) {
    err_set(st, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  if (!ok_name) {
    // quoted escaped: the message reaches clients and logs
    char shown[4 * sizeof out->name];
    repo_name_escape(shown, sizeof shown, name ? name : "(null)");
    const char *why = name && name[0] ? repo_name_problem(name) : NULL;
    err_set(st, ERR_INVALID_ARGUMENT, "invalid model name '%s'%s%s", shown, why ? ": the name " : "", why ? why : "");
    goto done;
  }
  snprintf(out->name, sizeof out->name, "%s", name);
  if (join(out->dir, sizeof out->dir, st, "%s/%s", repo_dir, name)) goto done;
  if (!is_dir(out->dir)) {
    err_set(st, ERR_NOT_FOUND, "model '%s' not found in repository %s", name, repo_dir);
    goto done;
  }
  char cfg_path[PATH_MAX];
  if (join(cfg_path, sizeof cfg_path, st, "%s/%s", out->dir, "config.pbtxt")) goto done;
  struct stat sb;
  if (config_text) {  // a load request's override stands in for the file
    ProtobufCMessage *parsed = NULL;
    if (pbtxt_parse(&inference__model_config__descriptor, config_text, strlen(config_text), "config override",
                    &parsed, st))
      goto done;
    config_free(out->config);
    out->config = (Inference__ModelConfig *)parsed;
    out->config_from_file = 1;
    out->config_override = 1;
    if (settle_name(out, st)) goto done;
  } else if (stat(cfg_path, &sb) == 0) {
    ProtobufCMessage *parsed = NULL;
    if (pbtxt_parse_file(&inference__model_config__descriptor, cfg_path, &parsed, st)) goto done;
    config_free(out->config);
    out->config = (Inference__ModelConfig *)parsed;
    out->config_from_file = 1;
    if (settle_name(out, st)) goto done;
  } else if (errno != ENOENT) {
    err_set(st, ERR_INTERNAL, "cannot read %s: %s", cfg_path, strerror(errno));
    goto done;
  }
  // before the files: an ensemble has none, a Python model no model.onnx
  if (out->config_from_file && config_check_supported(out->config, st)) goto done;
  select_versions(out, st);
done:
  if (st->code && e) *e = *st;
  return st->code;
}

void repo_model_close(repo_model *m) {
  if (!m) return;
  config_free(m->config);
  free(m->versions);
  memset(m, 0, sizeof *m);
}

void repo_free(repo_model *models, size_t n) {
  if (!models) return;
  for (size_t i = 0; i < n; i++) repo_model_close(&models[i]);
  free(models);
}

int repo_list(const char *repo_dir, char ***names_out, size_t *n_names, repo_skip **skipped, size_t *n_skipped,
              err *e) {
  *names_out = NULL;
  *n_names = 0;
  if (skipped) *skipped = NULL;
  if (n_skipped) *n_skipped = 0;
  repo_skip *skips = NULL;
  size_t n_skips = 0, skip_cap = 0;
  DIR *d = opendir(repo_dir);
  if (!d)
    return err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, "cannot read model repository %s: %s", repo_dir,
                   strerror(errno));
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char path[PATH_MAX];
    if (de->d_name[0] == '.') continue;  // hidden, "." and ".."
    if (join(path, sizeof path, NULL, "%s/%s", repo_dir, de->d_name) || !is_dir(path)) continue;
    const char *why = repo_name_problem(de->d_name);
    if (why) {  // never a model: its name would be echoed into every answer that lists models
      if (n_skips == skip_cap) {
        skip_cap = skip_cap ? skip_cap * 2 : 4;
        repo_skip *g = realloc(skips, skip_cap * sizeof *skips);
        if (!g) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", repo_dir);
          break;
        }
        skips = g;
      }
      snprintf(skips[n_skips].name, sizeof skips[n_skips].name, "%s", de->d_name);
      skips[n_skips++].why = why;
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **g = realloc(names, cap * sizeof *names);
      if (!g) {
        rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", repo_dir);
        break;
      }
      names = g;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", repo_dir);
      break;
    }
    n++;
  }
  closedir(d);
  if (rc || !skipped) {
    free(skips);
    skips = NULL;
    n_skips = 0;
  }
  if (rc) {
    repo_list_free(names, n);
    return rc;
  }
  if (n) qsort(names, n, sizeof *names, cmp_str);
  *names_out = names;
  *n_names = n;
  if (skipped) {
    if (n_skips) qsort(skips, n_skips, sizeof *skips, cmp_skip);
    *skipped = skips;
    *n_skipped = n_skips;
  }
  return 0;
}

void repo_list_free(char **names, size_t n) {
  for (size_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
}

int repo_scan(const char *repo_dir, repo_model **models, size_t *n_models, repo_skip **skipped, size_t *n_skipped,
              err *e) {
  *models = NULL;
  *n_models = 0;
  char **names = NULL;
  size_t n = 0;
  TRY(repo_list(repo_dir, &names, &n, skipped, n_skipped, e));
  int rc = 0;
  repo_model *arr = NULL;
  if (n) {
    arr = calloc(n, sizeof *arr);
    if (!arr) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", repo_dir);
  }
  for (size_t i = 0; !rc && i < n; i++) {
    repo_scan_model(repo_dir, names[i], &arr[i], NULL);  // problems stay in arr[i].status
    if (!arr[i].config) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory scanning %s", repo_dir);
      repo_free(arr, i + 1);
      arr = NULL;
    }
  }
  repo_list_free(names, n);
  if (rc) {
    if (skipped) {
      free(*skipped);
      *skipped = NULL;
      *n_skipped = 0;
    }
    return rc;
  }
  *models = arr;
  *n_models = n;
  return 0;
}
