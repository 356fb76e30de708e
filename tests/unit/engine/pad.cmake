# tests/unit/engine/pad.cmake: tests for engine/pad.c (padding to the longest sequence).
inferd_unit_test(test_pad SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pad.c LIBS inferd_model inferd_config)
