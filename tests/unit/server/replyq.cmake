# tests/unit/server/replyq.cmake: the threads that send batches' answers.
inferd_unit_test(test_replyq SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_replyq.c LIBS inferd_server)
