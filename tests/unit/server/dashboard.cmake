# tests/unit/server/dashboard.cmake: the embedded /dashboard page, and its
# script run in node against a fake DOM (no headless browser on the dev box).
inferd_unit_test(test_dashboard SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dashboard.c
                 LIBS inferd_dashboard)
target_compile_definitions(test_dashboard PRIVATE
  INFERD_DASHBOARD_HTML_PATH="${CMAKE_SOURCE_DIR}/server/http/dashboard.html")

find_program(INFERD_NODE node)
if(INFERD_NODE)
  add_test(NAME check_dashboard_js
           COMMAND ${INFERD_NODE} ${CMAKE_CURRENT_LIST_DIR}/check_dashboard.js
                   ${CMAKE_SOURCE_DIR}/server/http/dashboard.html
                   ${CMAKE_CURRENT_LIST_DIR}/dashboard_sample.json)
  set_tests_properties(check_dashboard_js PROPERTIES TIMEOUT 60)
else()
  message(STATUS "node not found: check_dashboard_js (the dashboard's script) is not run")
endif()
