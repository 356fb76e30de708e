inferd_unit_test(test_err SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_err.c LIBS inferd_base)
