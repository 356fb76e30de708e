# tests/unit/server/shm.cmake: client system shared memory regions against
# real POSIX shared memory objects (also run under TSan).
inferd_unit_test(test_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shm.c LIBS inferd_shm)
