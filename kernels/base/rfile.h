// kernels/base/rfile.h: opening the files of a model repository (config.pbtxt,
// model files, external data, warmup data) without ever blocking on them. A
// FIFO in the repository used to block open(2) until someone wrote to it,
// and with it the model load and every gRPC call queued behind it; a device
// (/dev/zero, a tty) would be read forever. Only regular files are read.
#ifndef INFERD_BASE_RFILE_H
#define INFERD_BASE_RFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "kernels/base/err.h"

// "a FIFO", "a directory", "a character device"... for an st_mode.
const char *rfile_kind(mode_t mode);

// Opens path read-only, close-on-exec, as a regular file: anything else
// (a FIFO, a device, a socket, a directory) is refused at once with an
// error naming the file and its kind ("model file '/r/m/1/model.onnx' is a
// FIFO, not a regular file"). extra_flags are added to open(2) (O_NOFOLLOW).
// what names the file in errors. Returns the descriptor, or -1 with e set
// (ERR_NOT_FOUND when it does not exist, else ERR_INVALID_ARGUMENT).
int rfile_open_regular(const char *path, int extra_flags, const char *what, err *e);

// As rfile_open_regular, as a FILE ("rb") the caller owns; NULL with e set.
FILE *rfile_fopen_regular(const char *path, int extra_flags, const char *what, err *e);

// Reads the whole regular file at path into *buf (malloc'ed, the caller
// frees it; *len bytes). More than max bytes is refused before they are
// read. 0, or the error code with e set and *buf NULL.
int rfile_read_all(const char *path, const char *what, size_t max, uint8_t **buf, size_t *len, err *e);

#endif
