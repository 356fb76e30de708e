# tests/gpu/conv.cmake: cuDNN convolutions and pooling (engine/cuda/cuda_conv.c)
# against the references in conv_ref.h. Built with or without cuDNN: without
# it, the host-side checks run and the test skips (exit 77).
inferd_gpu_test(test_cuda_conv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_conv.c
  LIBS inferd_cuda inferd_kernels ${MATH_LIB})
