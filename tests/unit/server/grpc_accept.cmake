# tests/unit/server/grpc_accept.cmake: the plaintext gRPC port's own listener (cap, hand-over, inodes).
inferd_unit_test(test_grpc_accept SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grpc_accept.c LIBS inferd_grpc)
# recheck's fstat of descriptors the stand-in for gRPC closes: by design (grpc_tsan.supp says why)
if(INFERD_SANITIZE MATCHES "thread")
  set_tests_properties(test_grpc_accept PROPERTIES ENVIRONMENT
    "TSAN_OPTIONS=halt_on_error=1 suppressions=${CMAKE_CURRENT_LIST_DIR}/grpc_tsan.supp")
endif()
