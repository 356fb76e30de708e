// kernels/base/strwire.h: the KServe v2 wire layout of BYTES (TYPE_STRING)
// tensors, which every layer that moves them speaks: gRPC raw contents,
// REST binary data and shared memory regions hold each element as a 4-byte
// little-endian length followed by that many bytes, elements back to back
// in row-major order. The layout is self-delimiting, so a batch of requests
// is their buffers one after the other, and a request's rows are found by
// walking its elements (no fixed row size exists).
#ifndef INFERD_KERNELS_BASE_STRWIRE_H
#define INFERD_KERNELS_BASE_STRWIRE_H

#include <stddef.h>
#include <stdint.h>

// Whether buf[0, len) holds exactly n elements in the wire layout: 0, or -1
// with *why set to a static phrase ("ends inside a length prefix", "ends
// inside an element", "has bytes after the last element") and *at to the
// element where it broke.
int strwire_check(const uint8_t *buf, size_t len, uint64_t n, const char **why, uint64_t *at);

// The number of elements buf[0, len) holds, or -1 when it is not a whole
// number of elements.
int64_t strwire_count(const uint8_t *buf, size_t len);

// The byte offset of element k in a buffer already checked to hold at least
// k elements (strwire_check): a walk over the k elements before it.
size_t strwire_offset(const uint8_t *buf, size_t len, uint64_t k);

// Reads and writes one 4-byte little-endian length.
static inline uint32_t strwire_len(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void strwire_put_len(uint8_t *p, uint32_t n) {
  p[0] = (uint8_t)n, p[1] = (uint8_t)(n >> 8), p[2] = (uint8_t)(n >> 16), p[3] = (uint8_t)(n >> 24);
}

#endif
