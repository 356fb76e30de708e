# tests/unit/engine/chat_template.cmake: tests for engine/llm/jinja*.c and chat_template.c (the Jinja subset and
# the chat layer). The real templates against transformers: tests/llm/chat/ (ctest chat_templates).
inferd_unit_test(test_jinja SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_jinja.c LIBS inferd_chat_template)
