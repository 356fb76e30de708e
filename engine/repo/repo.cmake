# engine/repo/repo.cmake: config.pbtxt parsing (generic text-format parser),
# the Triton-style model repository scan, and config completion/validation.
add_library(inferd_config STATIC
  ${CMAKE_CURRENT_LIST_DIR}/pbtxt.c
  ${CMAKE_CURRENT_LIST_DIR}/repo.c
  ${CMAKE_CURRENT_LIST_DIR}/config.c)
target_link_libraries(inferd_config PUBLIC inferd_proto inferd_base PkgConfig::PROTOBUFC)
