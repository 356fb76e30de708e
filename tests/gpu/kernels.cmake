# tests/gpu/kernels.cmake: each CUDA kernel family (kernels/k_*.cu) against
# its C reference (kernels/k_*.c). Binaries test_k_cuda_<family>; each skips
# (exit 77) where no GPU answers, after its host-side argument checks.
foreach(_t unary unop binary softmax norm layout cast bias_act f16 reduce resize index xf attn dwconv llm sample arg scatter)
  inferd_gpu_test(test_k_cuda_${_t}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_k_cuda_${_t}.c
    LIBS inferd_kernels_cuda inferd_kernels CUDA::cudart ${MATH_LIB})
endforeach()
