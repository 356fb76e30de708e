// labels.h: the label files of a model's outputs (config.pbtxt's
// label_filename), read once at load for Triton's classification extension:
// an output asked for its top classes answers "value:index:label" strings,
// the label being line `index` of the file.
#ifndef INFERD_SERVER_LABELS_H
#define INFERD_SERVER_LABELS_H

#include <stddef.h>

#include "kernels/base/err.h"
#include "model_config.pb-c.h"

// The most bytes one label file may hold (ImageNet's 1,000 labels take 20 KiB).
#define SRV_LABELS_MAX_BYTES (16u << 20)

typedef struct srv_labels srv_labels;

// Reads every output's label_filename of cfg from model_dir. The name must be
// a file of the model's directory itself (no '/', not hidden; a link is not
// followed): an override's names are a network client's. A file that cannot
// be read fails the load, as in Triton, naming the output and the file.
// *out is NULL when no output names a file. The caller owns *out.
int srv_labels_load(const char *model_dir, const Inference__ModelConfig *cfg, srv_labels **out, err *e);
void srv_labels_free(srv_labels *l);

// The label of class idx of the named output; NULL when it has none (no
// file, or fewer lines). l may be NULL.
const char *srv_labels_get(const srv_labels *l, const char *output, size_t idx);

#endif
