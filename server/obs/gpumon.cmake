# server/obs/gpumon.cmake: per-GPU metrics (NVML through dlopen, engine busy time)
# and the sliding-window rates behind the throughput and busy gauges.
add_library(inferd_gpumon STATIC ${CMAKE_CURRENT_LIST_DIR}/gpumon.c ${CMAKE_CURRENT_LIST_DIR}/window.c)
target_link_libraries(inferd_gpumon PUBLIC inferd_base Threads::Threads ${CMAKE_DL_LIBS})
