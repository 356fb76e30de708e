# tests/unit/server/llm_cfg.cmake: the generative backend's config checked at load (server/core/llm_cfg.h).
inferd_unit_test(test_llm_cfg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llm_cfg.c LIBS inferd_server)
