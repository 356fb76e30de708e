// tests/gpu/test_cuda_conv_util.h: what the files of the test_cuda_conv
// binary share: test_cuda_conv.c (forward convolutions, main), test_cuda_deconv.c
// (transposed convolutions), test_cuda_pool.c (pooling). The random source
// and the host <-> device helpers are defined once, in test_cuda_conv_util.c,
// so every part draws from the one sequence in the order main() runs them;
// the checks count into check.h's one pair of counters (CHECK_SHARED).
#ifndef INFERD_TESTS_GPU_TEST_CUDA_CONV_UTIL_H
#define INFERD_TESTS_GPU_TEST_CUDA_CONV_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#ifdef INFERD_TESTS_CHECK_H
#error "check.h included before test_cuda_conv_util.h: this file would count on its own"
#endif
#define CHECK_SHARED 1
#include "check.h"
#include "cuda_die.h"
#include "engine/cuda/cuda_conv.h"

#define TC(call) CUDA_DIE(call)

// --- host <-> device (test_cuda_conv_util.c)

// n values uniform in [-1, 1), rounded through FP16 when fp16 (the reference
// sees exactly what the GPU gets)
float *rand_buf(size_t n, bool fp16);
// NCHW float <-> device bytes in layout/type
void *to_dev(const float *nchw, int n, int c, int h, int w, eng_cuconv_layout l, eng_cuconv_dtype dt);
float *from_dev(const void *d, int n, int c, int h, int w, eng_cuconv_layout l, eng_cuconv_dtype dt);
void *dev_copy(const void *host, size_t bytes);

// --- the parts main() runs; only: -1 for every case, else one case

void tconv_host_checks(void);  // test_cuda_deconv.c
void pool_host_checks(void);   // test_cuda_pool.c
void tconv_tests(eng_cudnn *h, cudaStream_t st, int only);
void pool_tests(eng_cudnn *h, cudaStream_t st, int only);

#endif
