# tests/unit/server/rapid_reset.cmake: the gRPC port's rapid-reset guard (counts, ending a TCP connection).
inferd_unit_test(test_rapid_reset SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_rapid_reset.c LIBS inferd_grpc)
