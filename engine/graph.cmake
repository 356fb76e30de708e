# engine/graph.cmake: ONNX loader (graph), memory planner and CPU backend (plan, ops_cpu).
add_library(inferd_graph STATIC
  ${CMAKE_CURRENT_LIST_DIR}/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/plan.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_cpu.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_elem.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_reduce.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_shape.c
  ${CMAKE_CURRENT_LIST_DIR}/ops_resize.c)
target_link_libraries(inferd_graph PUBLIC inferd_proto inferd_base inferd_kernels
  PkgConfig::OPENBLAS ${MATH_LIB})
