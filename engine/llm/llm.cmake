# engine/llm/llm.cmake: the decoder runtime (issue 35), CPU slice: Hugging Face
# checkpoints (config.json, safetensors through mmap) loaded into FP32 and one
# forward step over a paged KV cache. cJSON reads config.json and the
# safetensors headers; OpenBLAS runs the projections.
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
add_library(inferd_llm STATIC
  ${CMAKE_CURRENT_LIST_DIR}/llm_config.c
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.c
  ${CMAKE_CURRENT_LIST_DIR}/llm_model.c
  ${CMAKE_CURRENT_LIST_DIR}/llm_step.c)
target_link_libraries(inferd_llm PUBLIC inferd_kernels inferd_base PkgConfig::CJSON PkgConfig::OPENBLAS ${MATH_LIB})

# Chat templates: a Jinja subset interpreter (jinja_*.c) and the chat layer
# over it (chat_template.c), rendering as transformers' apply_chat_template.
add_library(inferd_chat_template STATIC
  ${CMAKE_CURRENT_LIST_DIR}/jinja_lex.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_parse.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_value.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_rt.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_eval.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_builtins.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_methods.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_filters.c
  ${CMAKE_CURRENT_LIST_DIR}/chat_template.c)
target_link_libraries(inferd_chat_template PUBLIC inferd_base PkgConfig::CJSON ${MATH_LIB})
