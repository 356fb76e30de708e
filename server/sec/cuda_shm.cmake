# server/sec/cuda_shm.cmake: registered client CUDA shared memory regions (IPC
# handles). Builds either way: without CUDA its Register says why it refuses.
add_library(inferd_cuda_shm STATIC ${CMAKE_CURRENT_LIST_DIR}/cuda_shm.c)
target_link_libraries(inferd_cuda_shm PUBLIC inferd_base inferd_shm Threads::Threads)
if(INFERD_HAVE_CUDA)
  target_link_libraries(inferd_cuda_shm PRIVATE CUDA::cudart)
  target_compile_definitions(inferd_cuda_shm PRIVATE INFERD_HAVE_CUDA=1)
endif()
