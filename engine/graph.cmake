# engine/graph.cmake: ONNX loader (graph), memory planner and CPU backend
# (plan, ops_cpu; the conv/pool family in ops_conv on oneDNN, conv_dnnl).
add_library(inferd_graph STATIC
  ${CMAKE_CURRENT_LIST_DIR}/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass_norm.c
  ${CMAKE_CURRENT_LIST_DIR}/attn.c
  ${CMAKE_CURRENT_LIST_DIR}/attn_qkv.c
  ${CMAKE_CURRENT_LIST_DIR}/plan.c
  ${CMAKE_CURRENT_LIST_DIR}/dev_seg.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_cpu.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_conv.c
  ${CMAKE_CURRENT_LIST_DIR}/conv_dnnl.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_elem.c
  ${CMAKE_CURRENT_LIST_DIR}/par.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_shape.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_resize.c)
target_include_directories(inferd_graph PRIVATE ${DNNL_INCLUDE_DIR})
target_link_libraries(inferd_graph PUBLIC inferd_proto inferd_base inferd_kernels
  PkgConfig::OPENBLAS ${DNNL_LIB} OpenMP::OpenMP_C ${MATH_LIB})
