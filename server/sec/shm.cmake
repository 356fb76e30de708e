# server/sec/shm.cmake: registered client system shared memory regions, and the
# region list (shmtab.c) that CUDA shared memory shares, and the SIGBUS guard
# around copies from and into them (shmguard.c).
add_library(inferd_shm STATIC ${CMAKE_CURRENT_LIST_DIR}/shm.c ${CMAKE_CURRENT_LIST_DIR}/shmtab.c
            ${CMAKE_CURRENT_LIST_DIR}/shmguard.c)
target_link_libraries(inferd_shm PUBLIC inferd_base Threads::Threads)
