# kernels/kernels.cmake: the C reference kernels (k_ref.h, k_conv.h), one file per op family.
add_library(inferd_kernels STATIC
  ${CMAKE_CURRENT_LIST_DIR}/k_unary.c
  ${CMAKE_CURRENT_LIST_DIR}/k_binary.c
  ${CMAKE_CURRENT_LIST_DIR}/k_softmax.c
  ${CMAKE_CURRENT_LIST_DIR}/k_attn.c
  ${CMAKE_CURRENT_LIST_DIR}/k_norm.c
  ${CMAKE_CURRENT_LIST_DIR}/k_layout.c
  ${CMAKE_CURRENT_LIST_DIR}/k_gemm_ref.c
  ${CMAKE_CURRENT_LIST_DIR}/k_cast.c
  ${CMAKE_CURRENT_LIST_DIR}/k_conv.c
  ${CMAKE_CURRENT_LIST_DIR}/k_index.c
  ${CMAKE_CURRENT_LIST_DIR}/k_reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/k_resize.c)
target_link_libraries(inferd_kernels PUBLIC ${MATH_LIB})
