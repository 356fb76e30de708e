# server/obs/trace.cmake: sampled Chrome trace output (server/obs/trace.c).
add_library(inferd_trace STATIC ${CMAKE_CURRENT_LIST_DIR}/trace.c)
target_link_libraries(inferd_trace PUBLIC inferd_base Threads::Threads)
