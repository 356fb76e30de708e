# tests/unit/server/wire.cmake: reading protobuf wire bytes (server/grpc/wire.c):
# string fields holding a NUL byte found in nested messages and map entries.
inferd_unit_test(test_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wire.c LIBS inferd_server)
