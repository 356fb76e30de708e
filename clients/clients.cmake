# clients/clients.cmake: inferd-load, the load generator (clients/load/).
# The library holds everything but main() so the unit tests link the same code.
# Clients talk to the server only over gRPC: they depend on inferd_proto and
# inferd_base (err, dtype), never on server/.
add_library(inferd_load STATIC
  ${CMAKE_CURRENT_LIST_DIR}/load/hist.c
  ${CMAKE_CURRENT_LIST_DIR}/load/stats.c
  ${CMAKE_CURRENT_LIST_DIR}/load/cli.c
  ${CMAKE_CURRENT_LIST_DIR}/load/rng.c
  ${CMAKE_CURRENT_LIST_DIR}/load/mix.c
  ${CMAKE_CURRENT_LIST_DIR}/load/rpc.c
  ${CMAKE_CURRENT_LIST_DIR}/load/model.c
  ${CMAKE_CURRENT_LIST_DIR}/load/inputs.c
  ${CMAKE_CURRENT_LIST_DIR}/load/request.c
  ${CMAKE_CURRENT_LIST_DIR}/load/shm.c
  ${CMAKE_CURRENT_LIST_DIR}/load/cudart.c
  ${CMAKE_CURRENT_LIST_DIR}/load/stream_msg.c
  ${CMAKE_CURRENT_LIST_DIR}/load/stream.c
  ${CMAKE_CURRENT_LIST_DIR}/load/driver.c
  ${CMAKE_CURRENT_LIST_DIR}/load/report.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_dist.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_sse.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_http.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_grpc.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_cli.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_run.c
  ${CMAKE_CURRENT_LIST_DIR}/load/gen_report.c)
# generate mode (gen.h): cJSON for the SSE payloads and config.json, http_parser (the server's HTTP
# parser) for its HTTP client
find_path(LD_HTTP_PARSER_INCLUDE_DIR http_parser.h REQUIRED)
find_library(LD_HTTP_PARSER_LIB http_parser REQUIRED)
pkg_check_modules(LD_CJSON REQUIRED IMPORTED_TARGET libcjson)
target_include_directories(inferd_load PRIVATE ${LD_HTTP_PARSER_INCLUDE_DIR})
target_link_libraries(inferd_load PUBLIC inferd_proto inferd_base inferd_grpc_offload PkgConfig::GRPC PkgConfig::PROTOBUFC
  PkgConfig::LD_CJSON ${LD_HTTP_PARSER_LIB} Threads::Threads ${MATH_LIB} ${CMAKE_DL_LIBS})

add_executable(inferd-load ${CMAKE_CURRENT_LIST_DIR}/load/main.c)
target_link_libraries(inferd-load PRIVATE inferd_load)

# inferd-tune (clients/inferd-tune, the package clients/tune/; Python): build/bin/inferd-tune beside
# inferd and inferd-load, a wrapper that runs it with the project's Python (tritonclient's protos) and
# tells it where its two binaries are.
file(WRITE ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/inferd-tune
     "#!/bin/sh\n# written by clients/clients.cmake\nINFERD_TUNE_BINDIR='${CMAKE_RUNTIME_OUTPUT_DIRECTORY}' exec '${INFERD_PYTHON}' '${CMAKE_CURRENT_LIST_DIR}/inferd-tune' \"$@\"\n")
file(CHMOD ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/inferd-tune PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
     GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
