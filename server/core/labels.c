// labels.c: label files read at load (see labels.h). One buffer per file,
// cut into lines in place.
#include "server/core/labels.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/rfile.h"
#include "kernels/base/utf8.h"

typedef struct out_labels {
  char *output;  // the output's name, owned
  char *text;    // the file, owned; lines end at NULs written over '\n'
  char **line;   // owned; into text
  size_t n;
} out_labels;

struct srv_labels {
  out_labels *o;
  size_t n;
};

void srv_labels_free(srv_labels *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free(l->o[i].output), free(l->o[i].text), free(l->o[i].line);
  free(l->o);
  free(l);
}

// Splits text[0, len) into lines ("\r\n" or "\n"; a last line without one counts).
static int split_lines(out_labels *ol, char *text, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += text[i] == '\n';
  if (len && text[len - 1] != '\n') n++;
  ol->line = calloc(n ? n : 1, sizeof *ol->line);
  if (!ol->line) return -1;
  size_t k = 0;
  char *start = text;
  for (size_t i = 0; i <= len && k < n; i++) {
    if (i < len && text[i] != '\n') continue;
    text[i] = 0;  // text holds len + 1 bytes
    if (&text[i] > start && text[i - 1] == '\r') text[i - 1] = 0;
    ol->line[k++] = start;
    start = &text[i + 1];
  }
  ol->n = k;
  return 0;
}

int srv_labels_load(const char *model_dir, const Inference__ModelConfig *cfg, srv_labels **out, err *e) {
  *out = NULL;
  size_t want = 0;
  for (size_t i = 0; i < cfg->n_output; i++) want += cfg->output[i]->label_filename && cfg->output[i]->label_filename[0];
  if (!want) return 0;
  srv_labels *l = calloc(1, sizeof *l);
  if (!l || !(l->o = calloc(want, sizeof *l->o))) {
    free(l);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (size_t i = 0; i < cfg->n_output; i++) {
    const Inference__ModelOutput *t = cfg->output[i];
    const char *f = t->label_filename;
    if (!f || !f[0]) continue;
    if (strchr(f, '/') || f[0] == '.') {
      srv_labels_free(l);
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "output '%s': label_filename '%s' must name a file of the model's directory (no '/', not hidden)",
                     t->name, f);
    }
    char path[4352];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", model_dir, f) >= sizeof path) {
      srv_labels_free(l);
      return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': label file path too long", t->name);
    }
    FILE *fp = rfile_fopen_regular(path, O_NOFOLLOW, "label file", e);
    if (!fp) {
      srv_labels_free(l);
      return err_prefix(e, "output '%s': ", t->name);
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    while (rc == 0) {
      if (len == cap) {
        if (cap >= SRV_LABELS_MAX_BYTES) {
          rc = err_set(e, ERR_INVALID_ARGUMENT, "output '%s': label file '%s' is larger than %u bytes", t->name, f,
                       SRV_LABELS_MAX_BYTES);
          break;
        }
        cap *= 2;
        char *g = realloc(buf, cap + 1);
        if (!g) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
          break;
        }
        buf = g;
      }
      size_t got = fread(buf + len, 1, cap - len, fp);
      len += got;
      if (got == 0) {
        if (ferror(fp)) rc = err_set(e, ERR_INVALID_ARGUMENT, "output '%s': cannot read label file '%s'", t->name, f);
        break;
      }
    }
    fclose(fp);
    if (rc) {
      free(buf);
      srv_labels_free(l);
      return rc;
    }
    // a label is sent in answers (proto3 strings, JSON): UTF-8 only
    if (!utf8_valid(buf, len)) {
      free(buf);
      srv_labels_free(l);
      return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': label file '%s' is not valid UTF-8", t->name, f);
    }
    out_labels *ol = &l->o[l->n++];
    char *text = buf;  // holds len + 1 bytes
    ol->text = text;
    text[len] = 0;
    if (!(ol->output = strdup(t->name))) {
      srv_labels_free(l);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (split_lines(ol, text, len) != 0) {
      srv_labels_free(l);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  *out = l;
  return 0;
}

const char *srv_labels_get(const srv_labels *l, const char *output, size_t idx) {
  for (size_t i = 0; l && i < l->n; i++)
    if (strcmp(l->o[i].output, output) == 0) return idx < l->o[i].n ? l->o[i].line[idx] : NULL;
  return NULL;
}
