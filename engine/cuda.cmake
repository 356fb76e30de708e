# engine/cuda.cmake: the CUDA device layer (device discovery, memory pools
# sized at load, cuBLASLt GEMM). Host-only C11 against the CUDA runtime, so
# it builds with the C compiler; kernels live in kernels/ (.cu).
add_library(inferd_cuda STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cuda_dev.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_mem.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_gemm.c)
target_link_libraries(inferd_cuda PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt inferd_base)
target_compile_definitions(inferd_cuda PUBLIC INFERD_HAVE_CUDA=1)
