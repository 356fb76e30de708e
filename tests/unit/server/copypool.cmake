# tests/unit/server/copypool.cmake: the copy threads that split a big batch's
# gather and scatter (server/core/copypool.c; also run under TSan).
inferd_unit_test(test_copypool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_copypool.c LIBS inferd_copypool)
