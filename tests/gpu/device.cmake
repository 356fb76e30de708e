# tests/gpu/device.cmake: the CUDA device layer (engine/cuda_*.c).
# test_cuda_dev also runs without a GPU: it checks the CPU fallback there.
inferd_gpu_test(test_cuda_dev SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_dev.c LIBS inferd_cuda)
inferd_gpu_test(test_cuda_mem SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_mem.c LIBS inferd_cuda)
inferd_gpu_test(test_cuda_gemm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_gemm.c LIBS inferd_cuda inferd_kernels ${MATH_LIB})
