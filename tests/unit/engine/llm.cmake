# tests/unit/engine/llm.cmake: tests for engine/llm/ (config.json parsing, safetensors headers). The forward
# step against transformers: tests/llm/check_llm_greedy.py (ctest llm_greedy).
inferd_unit_test(test_llm_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llm_config.c LIBS inferd_llm ${MATH_LIB})
inferd_unit_test(test_llm_step SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llm_step.c LIBS inferd_llm ${MATH_LIB})
inferd_unit_test(test_llm_sample SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llm_sample.c LIBS inferd_llm ${MATH_LIB})
