# tests/unit/engine/dev_seg.cmake: tests for engine/dev_seg.c (a batch's inputs split into host runs and device segments).
inferd_unit_test(test_dev_seg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dev_seg.c LIBS inferd_dev_seg)
