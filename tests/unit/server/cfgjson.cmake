# tests/unit/server/cfgjson.cmake: a load's JSON config override as config.pbtxt text (server/core/cfgjson.h).
inferd_unit_test(test_cfgjson SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cfgjson.c LIBS inferd_cfgjson inferd_config)
