inferd_unit_test(test_batcher SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batcher.c LIBS inferd_batcher)
