# tests/unit/server/repeat_cfg.cmake: the repeat backend's config checked as Triton's backend checks it (server/core/repeat_cfg.h).
inferd_unit_test(test_repeat_cfg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_repeat_cfg.c LIBS inferd_server)
