# engine/llm/llm.cmake: the decoder runtime (issue 35), CPU slice: Hugging Face
# checkpoints (config.json, safetensors through mmap) loaded into FP32 and one
# forward step over a paged KV cache. cJSON reads config.json and the
# safetensors headers; OpenBLAS runs the projections.
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
add_library(inferd_llm STATIC
  ${CMAKE_CURRENT_LIST_DIR}/llm_config.c
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.c
  ${CMAKE_CURRENT_LIST_DIR}/llm_model.c
  ${CMAKE_CURRENT_LIST_DIR}/llm_step.c
  ${CMAKE_CURRENT_LIST_DIR}/llm_sample.c)
target_link_libraries(inferd_llm PUBLIC inferd_kernels inferd_base PkgConfig::CJSON PkgConfig::OPENBLAS ${MATH_LIB})
# engine/llm/cuda/: the same step on a GPU (weights in the checkpoint's type,
# cuBLASLt GEMMs, the decoder kernels of kernels/), only with INFERD_CUDA.
if(INFERD_HAVE_CUDA)
  add_library(inferd_llm_cuda STATIC ${CMAKE_CURRENT_LIST_DIR}/cuda/llm_cuda.c)
  target_link_libraries(inferd_llm_cuda PUBLIC inferd_llm inferd_cuda inferd_kernels_cuda CUDA::cudart)
endif()
# The tokenizer (issue 36): tokenizer.json read with cJSON, the Split
# pre-tokenizers' patterns run by PCRE2 (\p{L}, \p{N} and lookahead in UTF +
# UCP mode), the NFC/NFKC normalizers by utf8proc.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
add_library(inferd_tok STATIC
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_load.c
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_pretok.c
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bpe.c
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_decode.c)
target_link_libraries(inferd_tok PUBLIC inferd_base PkgConfig::CJSON PkgConfig::PCRE2 PkgConfig::UTF8PROC)

# Chat templates: a Jinja subset interpreter (jinja_*.c) and the chat layer
# over it (chat_template.c), rendering as transformers' apply_chat_template.
add_library(inferd_chat_template STATIC
  ${CMAKE_CURRENT_LIST_DIR}/jinja_lex.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_parse.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_parse_expr.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_value.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_rt.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_eval.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_builtins.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_methods.c
  ${CMAKE_CURRENT_LIST_DIR}/jinja_filters.c
  ${CMAKE_CURRENT_LIST_DIR}/chat_template.c)
target_link_libraries(inferd_chat_template PUBLIC inferd_base PkgConfig::CJSON ${MATH_LIB})
