# tests/gpu/llm.cmake: the GPU decoder runner (engine/llm/cuda/) against the
# CPU runner on the fixture checkpoints, which the test writes first with
# tests/llm/write_ckpts.py (numpy). Host-side loader checks run without a
# GPU; the rest skips (exit 77) there.
add_executable(test_gpu_llm_step ${CMAKE_CURRENT_LIST_DIR}/test_gpu_llm_step.c)
set_target_properties(test_gpu_llm_step PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_include_directories(test_gpu_llm_step PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit ${CMAKE_SOURCE_DIR}/tests/gpu)
target_link_libraries(test_gpu_llm_step PRIVATE inferd_llm_cuda inferd_llm ${MATH_LIB})
add_test(NAME test_gpu_llm_step
         COMMAND test_gpu_llm_step ${CMAKE_CURRENT_BINARY_DIR}/llm_ckpts ${INFERD_PYTHON}
                 ${CMAKE_SOURCE_DIR}/tests/llm/write_ckpts.py)
set_tests_properties(test_gpu_llm_step PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 300)
