# tests/unit/server/shm.cmake: client system shared memory regions against
# real POSIX shared memory objects (also run under TSan).
inferd_unit_test(test_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shm.c LIBS inferd_shm)
# the region list shm.c and cuda_shm.c share (server/sec/shmtab.c)
inferd_unit_test(test_shmtab SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shmtab.c LIBS inferd_shm)
# the SIGBUS guard: copies from and into a truncated object fail, the process lives
inferd_unit_test(test_shmguard SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shmguard.c LIBS inferd_shm)
