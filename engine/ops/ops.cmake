# engine/ops/ops.cmake: the op families, one folder each (attributes, shape
# rule, CPU path and CUDA path side by side), listed once for both backends'
# lookups in engine/ops/families.h. ops_common.c holds what they share,
# registry.c and registry_cuda.c the registry's two walks. Their CPU paths
# are the library inferd_ops (on the graph's representation and the CPU
# primitives), their CUDA paths join the CUDA plan's library
# (engine/cuda/plan_cuda.cmake).
add_library(inferd_ops STATIC
  ${CMAKE_CURRENT_LIST_DIR}/ops_common.c
  ${CMAKE_CURRENT_LIST_DIR}/registry.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn_qkv.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn_onnx.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn_linear.c
  ${CMAKE_CURRENT_LIST_DIR}/attn/attn_cache.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/conv.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/col2im.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/qconv.c
  ${CMAKE_CURRENT_LIST_DIR}/conv/conv_table.c
  ${CMAKE_CURRENT_LIST_DIR}/ctrl/ctrl.c
  ${CMAKE_CURRENT_LIST_DIR}/ctrl/ctrl_common.c
  ${CMAKE_CURRENT_LIST_DIR}/ctrl/ctrl_scan.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/elem.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/elem_unary.c
  ${CMAKE_CURRENT_LIST_DIR}/elem/elem_quant.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/gemm.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/einsum.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/dft.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/window.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/det.c
  ${CMAKE_CURRENT_LIST_DIR}/gemm/rnn.c
  ${CMAKE_CURRENT_LIST_DIR}/index/index.c
  ${CMAKE_CURRENT_LIST_DIR}/index/index_gather.c
  ${CMAKE_CURRENT_LIST_DIR}/index/index_shape.c
  ${CMAKE_CURRENT_LIST_DIR}/index/index_scatter.c
  ${CMAKE_CURRENT_LIST_DIR}/index/index_space.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/ml.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/ml_common.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/ml_tree.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/ml_linear.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/ml_label.c
  ${CMAKE_CURRENT_LIST_DIR}/ml/ml_svm.c
  ${CMAKE_CURRENT_LIST_DIR}/norm/norm.c
  ${CMAKE_CURRENT_LIST_DIR}/reduce/reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/reduce/tfidf.c
  ${CMAKE_CURRENT_LIST_DIR}/resize/resize.c
  ${CMAKE_CURRENT_LIST_DIR}/resize/resize_grid.c
  ${CMAKE_CURRENT_LIST_DIR}/select/select.c
  ${CMAKE_CURRENT_LIST_DIR}/str/str.c)
target_link_libraries(inferd_ops PUBLIC inferd_graph_ir inferd_cpu_prims inferd_kernels inferd_base
  PkgConfig::OPENBLAS ${MATH_LIB})
if(INFERD_HAVE_CUDA)
  target_sources(inferd_plan_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/registry_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/attn/attn_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/conv/conv_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/ctrl/ctrl_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/elem/elem_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/elem/elem_quant_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/gemm/gemm_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/index/index_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/norm/norm_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/reduce/reduce_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/resize/resize_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/select/select_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/ml/ml_cuda.c)
endif()
