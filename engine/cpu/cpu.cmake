# engine/cpu/cpu.cmake: the memory planner and the CPU plan's execution
# (plan.c), the OpenMP split of elementwise loops (par.c) and the oneDNN
# primitives the conv family and Gemm run on (conv_dnnl.c). Part of
# inferd_graph (engine/graph/graph.cmake says why).
target_sources(inferd_graph PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/plan.c
  ${CMAKE_CURRENT_LIST_DIR}/par.c
  ${CMAKE_CURRENT_LIST_DIR}/conv_dnnl.c)
