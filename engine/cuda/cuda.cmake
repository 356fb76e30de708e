# engine/cuda/cuda.cmake: the CUDA device layer (device discovery, memory pools
# sized at load, cuBLASLt GEMM, cuDNN convolutions and pooling). Host-only C11 against the CUDA runtime, so
# it builds with the C compiler; kernels live in kernels/ (.cu).
add_library(inferd_cuda STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cuda_dev.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_mem.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_gemm.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_conv.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_deconv.c
  ${CMAKE_CURRENT_LIST_DIR}/cuda_pool.c)
# inferd_kernels: the fp16 conversion used when packing weights; inferd_kernels_cuda: the unary
# kernel that runs the activations cuDNN has no mode for (HardSigmoid, HardSwish) after a conv
target_link_libraries(inferd_cuda PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt inferd_base
  PRIVATE inferd_kernels inferd_kernels_cuda)
target_compile_definitions(inferd_cuda PUBLIC INFERD_HAVE_CUDA=1)
# cuda_conv.c, cuda_deconv.c and cuda_pool.c build either way; without cuDNN their GPU entry
# points say so (eng_cuconv_available() is false) and callers need no #ifdef.
if(INFERD_HAVE_CUDNN)
  target_include_directories(inferd_cuda PRIVATE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(inferd_cuda PUBLIC ${CUDNN_LIBRARY})
  target_compile_definitions(inferd_cuda PUBLIC INFERD_HAVE_CUDNN=1)
endif()
