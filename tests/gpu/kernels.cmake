# tests/gpu/kernels.cmake: each CUDA kernel family (kernels/k_*.cu) against
# its C reference (kernels/k_*.c). Binaries test_k_cuda_<family>; each skips
# (exit 77) where no GPU answers, after its host-side argument checks.
foreach(_t unary unop binary softmax norm groupnorm layout cast bias_act f16 reduce resize index xf attn dwconv llm quant arg scatter)
  inferd_gpu_test(test_k_cuda_${_t}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_k_cuda_${_t}.c
    LIBS inferd_kernels_cuda inferd_kernels CUDA::cudart ${MATH_LIB})
endforeach()
# test_k_cuda_sample also times the previous sampler (tests/gpu/k_sample_old.cu) side by side: a
# library of its own, with kernels/cuda.cmake's flags (nvcc takes the host warnings through -Xcompiler).
add_library(k_sample_old STATIC ${CMAKE_CURRENT_LIST_DIR}/k_sample_old.cu)
target_link_libraries(k_sample_old PUBLIC inferd_kernels_cuda)
set_target_properties(k_sample_old PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
get_target_property(_kso_opts k_sample_old COMPILE_OPTIONS)
if(_kso_opts)
  list(FILTER _kso_opts EXCLUDE REGEX "^-W|^-fsanitize|^-fno-omit-frame-pointer|^-fno-sanitize-recover")
  set_target_properties(k_sample_old PROPERTIES COMPILE_OPTIONS "${_kso_opts}")
endif()
target_compile_options(k_sample_old PRIVATE
  -Xcompiler=-Wall,-Wextra
  $<$<BOOL:${INFERD_WERROR}>:-Xcompiler=-Werror>
  $<$<BOOL:${INFERD_WERROR}>:--Werror=all-warnings>)
inferd_gpu_test(test_k_cuda_sample
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_k_cuda_sample.c
  LIBS k_sample_old inferd_kernels_cuda inferd_kernels CUDA::cudart ${MATH_LIB})
