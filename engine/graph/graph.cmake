# engine/graph/graph.cmake: the ONNX loader and its load-time passes, built
# into one library (inferd_graph) with the op families' CPU paths
# (engine/ops/ops.cmake) and the CPU plan (engine/cpu/cpu.cmake): the passes
# fold constants by running the ops, and the ops parse the graph's nodes, so
# the three link as one until that knot is cut.
add_library(inferd_graph STATIC
  ${CMAKE_CURRENT_LIST_DIR}/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_pass_norm.c)
target_include_directories(inferd_graph PRIVATE ${DNNL_INCLUDE_DIR})
target_link_libraries(inferd_graph PUBLIC inferd_proto inferd_base inferd_kernels inferd_dev_seg
  PkgConfig::OPENBLAS ${DNNL_LIB} OpenMP::OpenMP_C ${MATH_LIB})
