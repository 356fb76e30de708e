# server/obs/hist.cmake: the profiler's lock-free log-linear histograms (server/obs/hist.c).
add_library(inferd_hist STATIC ${CMAKE_CURRENT_LIST_DIR}/hist.c)
target_link_libraries(inferd_hist PUBLIC inferd_base ${MATH_LIB})
