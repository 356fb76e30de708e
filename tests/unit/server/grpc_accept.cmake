# tests/unit/server/grpc_accept.cmake: the plaintext gRPC port's own listener (cap, hand-over, inodes).
inferd_unit_test(test_grpc_accept SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grpc_accept.c LIBS inferd_grpc)
