# engine/repo/repo.cmake: config.pbtxt parsing (generic text-format parser),
# the Triton-style model repository scan, config completion/validation, and
# the engine's own config struct (model_config.c) built from the completed one.
add_library(inferd_config STATIC
  ${CMAKE_CURRENT_LIST_DIR}/pbtxt.c
  ${CMAKE_CURRENT_LIST_DIR}/repo.c
  ${CMAKE_CURRENT_LIST_DIR}/config.c
  ${CMAKE_CURRENT_LIST_DIR}/model_config.c)
target_link_libraries(inferd_config PUBLIC inferd_proto inferd_base PkgConfig::PROTOBUFC)
