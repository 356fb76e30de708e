# engine/ops/ops.cmake: the op families, one folder each (attributes, shape
# rule, CPU path and CUDA path side by side), listed once for both backends'
# lookups in engine/ops/families.h. ops.c holds what they share and the
# registry. Their CPU paths build into inferd_graph (engine/graph/graph.cmake
# says why), their CUDA paths into the CUDA plan's library
# (engine/cuda/plan_cuda.cmake).
target_sources(inferd_graph PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ops.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn_qkv.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/conv.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/elem.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/gemm.c
  ${CMAKE_CURRENT_LIST_DIR}/index/index.c
  ${CMAKE_CURRENT_LIST_DIR}/norm/norm.c
  ${CMAKE_CURRENT_LIST_DIR}/reduce/reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/resize/resize.c)
if(INFERD_HAVE_CUDA)
  target_sources(inferd_plan_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/attn/attn_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/conv/conv_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/elem/elem_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/gemm/gemm_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/index/index_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/norm/norm_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/reduce/reduce_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/resize/resize_cuda.c)
endif()
