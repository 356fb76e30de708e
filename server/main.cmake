# The server's own pieces: handlers, scheduler loop, registry, flags, main.
add_library(inferd_server STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cli.c
  ${CMAKE_CURRENT_LIST_DIR}/control.c
  ${CMAKE_CURRENT_LIST_DIR}/endpoints.c
  ${CMAKE_CURRENT_LIST_DIR}/infer.c
  ${CMAKE_CURRENT_LIST_DIR}/log.c
  ${CMAKE_CURRENT_LIST_DIR}/registry.c
  ${CMAKE_CURRENT_LIST_DIR}/replyq.c
  ${CMAKE_CURRENT_LIST_DIR}/rest.c
  ${CMAKE_CURRENT_LIST_DIR}/rpc.c
  ${CMAKE_CURRENT_LIST_DIR}/sched.c
  ${CMAKE_CURRENT_LIST_DIR}/settings.c)
target_compile_definitions(inferd_server PUBLIC INFERD_VERSION="${PROJECT_VERSION}")
# cJSON (libcjson-dev): the REST API's JSON (server/rest.c; why this library: README, Dependencies)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
target_link_libraries(inferd_server PUBLIC inferd_grpc inferd_tls inferd_http inferd_httpz inferd_reflection inferd_protoset
  inferd_hist inferd_trace inferd_dashboard inferd_gpumon inferd_shm inferd_cuda_shm
  inferd_batcher inferd_model inferd_config inferd_graph inferd_proto inferd_base PkgConfig::LIBUV PkgConfig::CJSON Threads::Threads)

if(INFERD_HAVE_CUDA)
  target_link_libraries(inferd_server PUBLIC inferd_cuda)  # device discovery at start-up
endif()

add_executable(inferd ${CMAKE_CURRENT_LIST_DIR}/main.c)
target_link_libraries(inferd PRIVATE inferd_server)
