# server/grpc/grpc.cmake: the gRPC C-core transport of the front end.
add_library(inferd_grpc STATIC ${CMAKE_CURRENT_LIST_DIR}/grpc_front.c ${CMAKE_CURRENT_LIST_DIR}/grpc_shared.c
  ${CMAKE_CURRENT_LIST_DIR}/grpc_call.c ${CMAKE_CURRENT_LIST_DIR}/grpc_stream.c ${CMAKE_CURRENT_LIST_DIR}/rapid_reset.c
  ${CMAKE_CURRENT_LIST_DIR}/grpc_accept.c ${CMAKE_CURRENT_LIST_DIR}/grpc_tls.c)
target_link_libraries(inferd_grpc PUBLIC inferd_base inferd_fdlimit inferd_tls inferd_tls_ssl inferd_grpc_offload PkgConfig::GRPC Threads::Threads)
