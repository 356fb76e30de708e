// confine.h: files a model names (external weights, warmup data, the model
// file itself) stay inside the model's directory once symbolic links are
// resolved. Checking the name alone ("no '..', not absolute") lets a
// symlink inside the directory hand out /etc/passwd as weights.
#ifndef INFERD_BASE_CONFINE_H
#define INFERD_BASE_CONFINE_H

#include <stdio.h>

#include "kernels/base/err.h"

// Opens base/rel for reading ("rb") when the file it resolves to, every
// symbolic link followed, lies inside base (itself resolved). what names the
// file in the error ("external data", "input_data_file"...). NULL with e set
// when rel is absolute, does not exist, resolves outside base, or is not a
// regular file (a FIFO, a device: refused at once, see rfile.h). The caller
// owns the FILE.
FILE *eng_confine_fopen(const char *base, const char *rel, const char *what, err *e);

// Whether base/rel resolves inside base (0) or not (e set, as above),
// without opening it.
int eng_confine_check(const char *base, const char *rel, const char *what, err *e);

#endif
