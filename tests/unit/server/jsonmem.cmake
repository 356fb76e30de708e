# tests/unit/server/jsonmem.cmake: the JSON parse memory estimate and budget (server/http/jsonmem.h).
inferd_unit_test(test_jsonmem SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_jsonmem.c LIBS inferd_jsonmem)
