# server/grpc/reflection.cmake: gRPC server reflection answers (server/grpc/reflection.c).
add_library(inferd_reflection STATIC ${CMAKE_CURRENT_LIST_DIR}/reflection.c)
target_link_libraries(inferd_reflection PUBLIC inferd_base inferd_proto inferd_descriptor_proto
                      PkgConfig::PROTOBUFC)
