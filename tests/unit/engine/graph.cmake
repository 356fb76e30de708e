# tests/unit/engine/graph.cmake: graph loader, planner and CPU op tests.
# gen_test_models.py writes ONNX models (and onnxruntime reference outputs)
# into the build tree first; without the onnx module that step fails and
# the model-based tests fail with it instead of being skipped.
if(NOT INFERD_PYTHON)
  if(EXISTS /tmp/venv/bin/python)
    set(_py /tmp/venv/bin/python)
  else()
    find_package(Python3 COMPONENTS Interpreter)
    set(_py ${Python3_EXECUTABLE})
  endif()
  set(INFERD_PYTHON ${_py} CACHE FILEPATH "Python with onnx, onnxruntime and numpy")
endif()

set(_graph_models ${CMAKE_CURRENT_BINARY_DIR}/graph_models)
add_test(NAME gen_graph_models
  COMMAND ${INFERD_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/gen_test_models.py ${_graph_models})
set_tests_properties(gen_graph_models PROPERTIES FIXTURES_SETUP graph_models TIMEOUT 300)

set(_graph_libs inferd_graph inferd_plan inferd_proto inferd_kernels inferd_base)
inferd_unit_test(test_graph SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_graph.c LIBS ${_graph_libs})
inferd_unit_test(test_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan.c LIBS ${_graph_libs} Threads::Threads)
inferd_unit_test(test_ops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops.c LIBS ${_graph_libs})
inferd_unit_test(test_ops_conv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops_conv.c LIBS ${_graph_libs})
inferd_unit_test(test_ops_vision SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops_vision.c LIBS ${_graph_libs})
inferd_unit_test(test_plan_values SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan_values.c LIBS ${_graph_libs})
inferd_unit_test(test_ops_ctrl SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops_ctrl.c LIBS ${_graph_libs})
inferd_unit_test(test_ops_transformer SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops_transformer.c LIBS ${_graph_libs})
foreach(t test_graph test_plan test_ops test_ops_vision)
  set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED graph_models)
  target_compile_definitions(${t} PRIVATE INFERD_GRAPH_MODELS="${_graph_models}")
endforeach()

# The attention pass on the committed transformer exports, filled with
# seeded weights by the zoo's fill.py into the build tree first.
set(_attn_zoo ${CMAKE_CURRENT_BINARY_DIR}/attn_zoo)
add_test(NAME gen_attn_zoo
  COMMAND ${INFERD_PYTHON} ${CMAKE_SOURCE_DIR}/tests/models/zoo/fill.py --out ${_attn_zoo}
          --models bert,distilbert,vit,gpt --no-config)
set_tests_properties(gen_attn_zoo PROPERTIES FIXTURES_SETUP attn_zoo TIMEOUT 300)
inferd_unit_test(test_attn SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attn.c LIBS ${_graph_libs})
set_tests_properties(test_attn PROPERTIES FIXTURES_REQUIRED attn_zoo)
target_compile_definitions(test_attn PRIVATE ATTN_ZOO="${_attn_zoo}")
inferd_unit_test(test_attn_qkv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attn_qkv.c LIBS ${_graph_libs})
set_tests_properties(test_attn_qkv PROPERTIES FIXTURES_REQUIRED attn_zoo)
target_compile_definitions(test_attn_qkv PRIVATE ATTN_ZOO="${_attn_zoo}")

# STRING tensors: the plan's edges, Cast to and from STRING, the index ops on strings, GPU refusal.
inferd_unit_test(test_strings SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_strings.c
  LIBS inferd_model inferd_config ${_graph_libs} Threads::Threads)
# The integer convolution: k_qconv.c, k_requantize and the oneDNN int8 path (test_qconv.c).
inferd_unit_test(test_qconv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_qconv.c LIBS inferd_cpu_prims inferd_kernels inferd_base)

# The host fallback's device-free half (engine/cpu/plan_hostfb.c) on the host fallback models, with host
# memory as the device: which nodes, which copies, the snapshots, outputs against the CPU plan.
inferd_unit_test(test_plan_hostfb SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan_hostfb.c LIBS ${_graph_libs})
set_tests_properties(test_plan_hostfb PROPERTIES FIXTURES_REQUIRED graph_models)
target_compile_definitions(test_plan_hostfb PRIVATE INFERD_GRAPH_MODELS="${_graph_models}")

# The CUDA plan's load-time decisions (each node's CUDA init, and the host fallback made from what it
# refuses: engine/cuda/plan_cuda_host.c's eng_cuda__init_ops), without a GPU: built where CUDA is,
# runs anywhere (nothing touches a device).
if(TARGET inferd_plan_cuda)
  inferd_unit_test(test_cuda_init SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_init.c
    LIBS inferd_plan_cuda ${_graph_libs} Threads::Threads ${MATH_LIB})
endif()
