# tests/unit/server/fdlimit.cmake: the descriptor limit's split between the ports (server/core/fdlimit.h).
inferd_unit_test(test_fdlimit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fdlimit.c LIBS inferd_fdlimit)
