# server/shm.cmake: registered client system shared memory regions.
add_library(inferd_shm STATIC ${CMAKE_CURRENT_LIST_DIR}/shm.c)
target_link_libraries(inferd_shm PUBLIC inferd_base Threads::Threads)
