// confine.h: files a model names (external weights, warmup data, the model
// file itself) are found under the model's folder, and the links on the way
// lead only where the operator allows. Checking the name alone ("no '..',
// not absolute") lets a symlink inside the directory hand out /etc/passwd as
// weights.
//
// Two bounds, by who wrote the name (issue 31, item 9):
// - a name a network request gave (a load request's config override: its
//   default_model_filename, its warmup input_data_file) resolves, links
//   followed, inside base itself;
// - a name the operator wrote (config.pbtxt on disk, the model file's own
//   external data locations) may also resolve through links into any of
//   the roots: the model repository and the folders --model-store-allow
//   names. That is how the Hugging Face cache (snapshots link into blobs),
//   Kubernetes volume mounts and shared model stores lay files out.
// Either way the name itself must be relative and without a ".." part.
#ifndef INFERD_BASE_CONFINE_H
#define INFERD_BASE_CONFINE_H

#include <stdio.h>

#include "kernels/base/err.h"

// Folders links may lead into (each resolved at every check; one that does
// not exist bounds nothing). dirs[0] is the model repository by convention:
// messages name it.
typedef struct eng_confine_roots {
  const char *const *dirs;
  size_t n;
} eng_confine_roots;

// Opens base/rel for reading ("rb") when the file it resolves to, every
// symbolic link followed, lies inside base or, roots not NULL, inside one of
// roots. what names the file in the error ("external data",
// "input_data_file"...). NULL with e set when rel is absolute or has a ".."
// part, does not exist, resolves outside those bounds, or is not a regular
// file (a FIFO, a device: refused at once, see rfile.h). The caller owns
// the FILE.
FILE *eng_confine_fopen(const char *base, const char *rel, const eng_confine_roots *roots, const char *what, err *e);

// Whether base/rel resolves inside those bounds (0) or not (e set, as
// above), without opening it.
int eng_confine_check(const char *base, const char *rel, const eng_confine_roots *roots, const char *what, err *e);

#endif
