# tests/unit/server/tls.cmake: the gRPC port's certificate checks, on files made with libcrypto.
inferd_unit_test(test_tls SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tls.c LIBS inferd_tls)
