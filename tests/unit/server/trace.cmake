# tests/unit/server/trace.cmake: the Chrome trace writer, checked in C and by
# Python's json module (INFERD_PYTHON; only the standard library is needed).
inferd_unit_test(test_trace SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trace.c
                 LIBS inferd_trace Threads::Threads)
add_test(NAME check_trace
         COMMAND ${INFERD_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_trace.py $<TARGET_FILE:test_trace>)
set_tests_properties(check_trace PROPERTIES TIMEOUT 60)
