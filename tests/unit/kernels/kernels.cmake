# Unit tests for kernels/ (the C reference kernels of k_ref.h and kernels/conv/k_conv.h), one per op family.
foreach(_t unary binary softmax norm layout gemm cast conv str reduce quant paged_attn ml)
  inferd_unit_test(test_k_${_t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_k_${_t}.c LIBS inferd_kernels ${MATH_LIB})
endforeach()
# The device sampler's reference against the host sampler's rule (engine/llm/llm_sample.c).
inferd_unit_test(test_k_sample SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_k_sample.c LIBS inferd_kernels inferd_llm ${MATH_LIB})
