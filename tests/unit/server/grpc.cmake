# tests/unit/server/grpc.cmake: the gRPC front end's transport, driven by a C-core client.
inferd_unit_test(test_grpc_front
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grpc_front.c ${CMAKE_CURRENT_LIST_DIR}/grpc_test_client.c
  LIBS inferd_grpc)
# Debian's gRPC and abseil are not instrumented: TSan needs to ignore what they do.
if(INFERD_SANITIZE MATCHES "thread")
  set_tests_properties(test_grpc_front PROPERTIES ENVIRONMENT
    "TSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/grpc_tsan.supp")
endif()
# The TLS terminator between a real OpenSSL client and the test as the core (no gRPC inside).
inferd_unit_test(test_grpc_tls SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grpc_tls.c LIBS inferd_grpc)
