# tests/unit/server/classify.cmake: the classification extension's top classes and label files (server/core/classify.h, labels.h).
inferd_unit_test(test_classify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_classify.c LIBS inferd_server)
