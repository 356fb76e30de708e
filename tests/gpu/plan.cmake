# tests/gpu/plan.cmake: the CUDA plan (engine/cuda/plan_cuda.c) against the CPU
# plan on the models gen_test_models.py writes (a fixture here, as
# tests/unit/engine/graph.cmake does). test_gpu_plan skips (77) without a GPU
# after checking that create refuses.
if(TARGET inferd_plan_cuda)
  if(NOT INFERD_PYTHON)
    if(EXISTS /tmp/venv/bin/python)
      set(INFERD_PYTHON /tmp/venv/bin/python)
    else()
      find_package(Python3 COMPONENTS Interpreter)
      set(INFERD_PYTHON ${Python3_EXECUTABLE})
    endif()
  endif()
  set(_gpu_plan_models ${CMAKE_CURRENT_BINARY_DIR}/gpu_plan_models)
  add_test(NAME gen_gpu_plan_models
    COMMAND ${INFERD_PYTHON} ${CMAKE_SOURCE_DIR}/tests/unit/engine/gen_test_models.py ${_gpu_plan_models})
  set_tests_properties(gen_gpu_plan_models PROPERTIES FIXTURES_SETUP gpu_plan_models TIMEOUT 300 LABELS gpu)
  # one binary, a file per part: main and the case-file runner in test_gpu_plan.c, the plan in
  # service (_run), the op families' routes (_ops), the shared helpers (_util)
  inferd_gpu_test(test_gpu_plan
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_plan.c ${CMAKE_CURRENT_LIST_DIR}/test_gpu_plan_run.c
            ${CMAKE_CURRENT_LIST_DIR}/test_gpu_plan_ops.c ${CMAKE_CURRENT_LIST_DIR}/test_gpu_plan_util.c
    LIBS inferd_plan_cuda inferd_graph inferd_plan inferd_kernels Threads::Threads ${MATH_LIB})
  set_tests_properties(test_gpu_plan PROPERTIES FIXTURES_REQUIRED gpu_plan_models)
  target_compile_definitions(test_gpu_plan PRIVATE INFERD_GPU_PLAN_MODELS="${_gpu_plan_models}")
  # the plan's integer arithmetic and the comparisons on every integer type against k_binary/k_compare
  inferd_gpu_test(test_k_cuda_int
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_k_cuda_int.c
    LIBS inferd_plan_cuda inferd_kernels_cuda inferd_kernels CUDA::cudart ${MATH_LIB})
endif()
# batch sizes prepared before the plan serves (plan_cuda_prep.c): nothing captured or tuned after,
# unprepared sizes padded (issue 32); the same models, as an argument or INFERD_GPU_PLAN_MODELS
if(TARGET inferd_plan_cuda)
  inferd_gpu_test(test_gpu_plan_prepare
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_plan_prepare.c ${CMAKE_CURRENT_LIST_DIR}/test_gpu_plan_util.c
    LIBS inferd_plan_cuda inferd_graph inferd_plan inferd_kernels Threads::Threads ${MATH_LIB})
  set_tests_properties(test_gpu_plan_prepare PROPERTIES FIXTURES_REQUIRED gpu_plan_models)
  set_property(TEST test_gpu_plan_prepare PROPERTY ENVIRONMENT INFERD_GPU_PLAN_MODELS=${_gpu_plan_models})
endif()
