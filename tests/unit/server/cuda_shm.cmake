# tests/unit/server/cuda_shm.cmake: client CUDA shared memory regions where
# none can open (no device, or no CUDA in the build).
inferd_unit_test(test_cuda_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_shm.c LIBS inferd_cuda_shm)
