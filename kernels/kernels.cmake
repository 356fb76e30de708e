# kernels/kernels.cmake: the C reference kernels (k_ref.h, conv/k_conv.h), one folder per op
# family with the names of engine/ops/ (attn, conv, elem, gemm, index, ml, norm, reduce, resize, select).
add_library(inferd_kernels STATIC
  ${CMAKE_CURRENT_LIST_DIR}/elem/k_unary.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/k_binary.c
  ${CMAKE_CURRENT_LIST_DIR}/norm/k_softmax.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/k_attn.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/k_paged_attn.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/k_rope.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/k_linear_attn.c
  ${CMAKE_CURRENT_LIST_DIR}/index/k_embed.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/k_mlp_act.c
  ${CMAKE_CURRENT_LIST_DIR}/norm/k_norm.c
  ${CMAKE_CURRENT_LIST_DIR}/index/k_layout.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/k_gemm_ref.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/k_cast.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/k_quant.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/k_einsum.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/k_dft.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/k_rnn.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/k_conv.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/k_qconv.c
  ${CMAKE_CURRENT_LIST_DIR}/index/k_index.c
  ${CMAKE_CURRENT_LIST_DIR}/reduce/k_reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/resize/k_resize.c
  ${CMAKE_CURRENT_LIST_DIR}/select/k_select.c
  ${CMAKE_CURRENT_LIST_DIR}/sample/k_sample.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/k_tree.c
  ${CMAKE_CURRENT_LIST_DIR}/str/k_str.c)
target_link_libraries(inferd_kernels PUBLIC ${MATH_LIB})
