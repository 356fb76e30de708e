# server/sec/shm.cmake: registered client system shared memory regions, and the
# region list (shmtab.c) that CUDA shared memory shares.
add_library(inferd_shm STATIC ${CMAKE_CURRENT_LIST_DIR}/shm.c ${CMAKE_CURRENT_LIST_DIR}/shmtab.c)
target_link_libraries(inferd_shm PUBLIC inferd_base Threads::Threads)
