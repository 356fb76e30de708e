# tests/unit/proto/grpc_offload.cmake: gRPC's combiner offload declined
# (proto/grpc_offload.c), against a stand-in libgrpc.so linked with and
# without -Bsymbolic-functions. Each stand-in is named libgrpc.so, as the
# check looks for, in a folder of its own.
foreach(kind plt symbolic)
  add_library(fake_grpc_${kind} SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_grpc_def.c ${CMAKE_CURRENT_LIST_DIR}/fake_grpc_call.c)
  set_target_properties(fake_grpc_${kind} PROPERTIES OUTPUT_NAME grpc
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_grpc_${kind})
  inferd_unit_test(test_grpc_offload_${kind} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grpc_offload.c
    LIBS inferd_grpc_offload fake_grpc_${kind})
  target_compile_definitions(test_grpc_offload_${kind} PRIVATE FAKE_GRPC_VIA_PLT=$<STREQUAL:${kind},plt>)
endforeach()
target_link_options(fake_grpc_symbolic PRIVATE "LINKER:-Bsymbolic-functions")
