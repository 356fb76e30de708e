# tests/unit/engine/config.cmake: tests for engine/repo/pbtxt.c, repo.c, config.c, model_config.c.
# pbtxt_test.proto is a schema with every field kind, compiled here so the
# parser is tested independently of the model config schema.
set(_pbtxt_gen ${CMAKE_CURRENT_BINARY_DIR}/pbtxt_test_gen)
file(MAKE_DIRECTORY ${_pbtxt_gen})
add_custom_command(
  OUTPUT ${_pbtxt_gen}/pbtxt_test.pb-c.c ${_pbtxt_gen}/pbtxt_test.pb-c.h
  COMMAND ${PROTOC_C} --c_out=${_pbtxt_gen} -I${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/pbtxt_test.proto
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/pbtxt_test.proto
  COMMENT "protoc-c pbtxt_test.proto")
add_library(pbtxt_test_proto STATIC ${_pbtxt_gen}/pbtxt_test.pb-c.c)
target_include_directories(pbtxt_test_proto PUBLIC ${_pbtxt_gen})
target_link_libraries(pbtxt_test_proto PUBLIC PkgConfig::PROTOBUFC)
target_compile_options(pbtxt_test_proto PRIVATE -Wno-unused-parameter -Wno-error)

inferd_unit_test(test_pbtxt SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pbtxt.c LIBS inferd_config pbtxt_test_proto)
inferd_unit_test(test_repo SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_repo.c LIBS inferd_config)
inferd_unit_test(test_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.c LIBS inferd_config)
inferd_unit_test(test_model_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_model_config.c LIBS inferd_config)
