# tests/unit/engine/warmup.cmake: tests for engine/warmup.c (the whole warmup's budget, checked from the config; runs and cancel on a tiny model).
inferd_unit_test(test_warmup SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_warmup.c LIBS inferd_model inferd_config inferd_graph inferd_proto Threads::Threads)
