# tests/gpu/conv.cmake: cuDNN convolutions, transposed convolutions and pooling
# (engine/cuda/cuda_conv.c, cuda_deconv.c, cuda_pool.c) against the references
# in conv_ref.h: one binary, a file per piece (main in test_cuda_conv.c, the
# shared helpers in test_cuda_conv_util.c). Built with or without cuDNN:
# without it, the host-side checks run and the test skips (exit 77).
inferd_gpu_test(test_cuda_conv
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_conv.c ${CMAKE_CURRENT_LIST_DIR}/test_cuda_deconv.c
          ${CMAKE_CURRENT_LIST_DIR}/test_cuda_pool.c ${CMAKE_CURRENT_LIST_DIR}/test_cuda_conv_util.c
  LIBS inferd_cuda inferd_kernels ${MATH_LIB})
