# tests/unit/server/hist.cmake: the profiler's histograms: percentiles against
# sorted samples, exact small integers, merge, cumulative counts, threads.
inferd_unit_test(test_hist SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hist.c LIBS inferd_hist Threads::Threads)
