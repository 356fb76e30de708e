# tests/unit/engine/batch_sizes.cmake: tests for engine/batch_sizes.c (the batch sizes prepared at load).
inferd_unit_test(test_batch_sizes SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch_sizes.c LIBS inferd_batch_sizes)
