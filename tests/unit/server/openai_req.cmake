# tests/unit/server/openai_req.cmake: OpenAI request bodies checked and read (server/http/openai_req.h).
inferd_unit_test(test_openai_req SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_openai_req.c LIBS inferd_server)
