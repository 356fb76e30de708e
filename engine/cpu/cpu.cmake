# engine/cpu/cpu.cmake: the CPU backend, two libraries:
#   inferd_cpu_prims  the primitives the op families' CPU paths run on: the
#                     OpenMP split of elementwise loops (par.c) and the oneDNN
#                     primitives of the conv family and Gemm (conv_dnnl.c), the
#                     int8 ones (qconv_dnnl.c, qgemm_dnnl.c) and what they share
#                     (dnnl_util.c: the oneDNN 2.x/3.x shim)
#   inferd_plan       the memory planner and the CPU plan's execution (plan.c),
#                     over the op registry (and the control-flow ops'
#                     subgraphs, each a plan of its own); the CUDA plan runs the same plan,
#                     and its host fallback's device-free half (plan_hostfb.c)
add_library(inferd_cpu_prims STATIC ${CMAKE_CURRENT_LIST_DIR}/par.c ${CMAKE_CURRENT_LIST_DIR}/dnnl_util.c
            ${CMAKE_CURRENT_LIST_DIR}/conv_dnnl.c ${CMAKE_CURRENT_LIST_DIR}/qconv_dnnl.c
            ${CMAKE_CURRENT_LIST_DIR}/qgemm_dnnl.c)
target_include_directories(inferd_cpu_prims PUBLIC ${DNNL_INCLUDE_DIR})
target_link_libraries(inferd_cpu_prims PUBLIC inferd_base inferd_kernels ${DNNL_LIB} OpenMP::OpenMP_C ${MATH_LIB})
add_library(inferd_plan STATIC ${CMAKE_CURRENT_LIST_DIR}/plan.c ${CMAKE_CURRENT_LIST_DIR}/plan_fuse.c ${CMAKE_CURRENT_LIST_DIR}/plan_values.c
  ${CMAKE_CURRENT_LIST_DIR}/plan_probe.c ${CMAKE_CURRENT_LIST_DIR}/plan_hostfb.c)
target_link_libraries(inferd_plan PUBLIC inferd_ops inferd_graph_ir inferd_kernels inferd_base ${MATH_LIB})
