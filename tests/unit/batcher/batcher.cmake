inferd_unit_test(test_batcher SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batcher.c LIBS inferd_batcher)
inferd_unit_test(test_batcher_random SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batcher_random.c LIBS inferd_batcher)
inferd_unit_test(test_sequence SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sequence.c LIBS inferd_batcher)
inferd_unit_test(test_kvblocks SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kvblocks.c LIBS inferd_batcher)
