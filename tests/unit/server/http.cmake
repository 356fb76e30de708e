inferd_unit_test(test_http SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_http.c LIBS inferd_http Threads::Threads)
inferd_unit_test(test_http_tls SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_http_tls.c LIBS inferd_http_tls)
inferd_unit_test(test_httpz SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_httpz.c LIBS inferd_httpz)
