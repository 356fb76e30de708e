// engine/llm/chat_template.h: a checkpoint's chat template (tokenizer_config.json's
// `chat_template`, or chat_template.jinja) rendered from OpenAI-style messages
// exactly as transformers' tokenizer.apply_chat_template(..., tokenize=False)
// renders it: the messages normalised as transformers does (keys whose value
// is null dropped, reasoning_content/thinking/reasoning aliased), tools and
// documents passed as None when absent, bos_token/eos_token and extra
// variables beside them. The Jinja subset: jinja.h.
#ifndef INFERD_ENGINE_LLM_CHAT_TEMPLATE_H
#define INFERD_ENGINE_LLM_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct cJSON cJSON;
// Immutable once created: renders from several threads at once need no lock.
typedef struct eng_chat_template eng_chat_template;

typedef struct eng_chat_opts {
  int add_generation_prompt;
  const cJSON *tools;      // a JSON array of tool schemas, or NULL (the template sees None)
  const cJSON *documents;  // a JSON array of documents, or NULL (None)
  const cJSON *extra;      // an object of further variables (date_string, enable_thinking, ...), or NULL;
                           // they win over bos_token/eos_token as transformers' kwargs do
  int64_t (*now)(void *ctx);  // strftime_now's clock (seconds since the epoch, UTC); NULL: the real one
  void *now_ctx;
  size_t max_output;       // bytes; 0: jinja.h's default
  // transformers' continue_final_message: the last message's field (usually "content"; a reasoning
  // field continues the reasoning) is left open for the model to continue: the text ends where that
  // field's text ends, with no end-of-turn after it. NULL: off. Not with add_generation_prompt.
  const char *continue_final_message;
} eng_chat_opts;

// Compiles template_text (len bytes). bos/eos: the tokenizer's special tokens
// (NULL when it has none: the template then sees them undefined). NULL with
// *e naming the construct and its line and column when the template is
// outside the subset or malformed.
eng_chat_template *eng_chat_template_create(const char *template_text, size_t len, const char *bos, const char *eos,
                                            err *e);

// From a checkpoint directory: dir/chat_template.jinja when present, else
// tokenizer_config.json's chat_template (a string, or a list of named
// templates: "default", and "tool_use" used when tools are given); bos and eos
// from tokenizer_config.json (strings or {"content": ...}). NOT_FOUND when the
// checkpoint has no chat template.
eng_chat_template *eng_chat_template_load(const char *dir, err *e);

// Renders messages (a JSON array of {role, content (a string or a list of
// parts), tool_calls, tool_call_id, name, ...}). On success *out is a malloc'd
// NUL-terminated UTF-8 string the caller frees. A template's
// raise_exception(msg) fails with FAILED_PRECONDITION and msg as the message
// (the client's conversation is what the template refused); other render
// errors are INVALID_ARGUMENT.
int eng_chat_template_render(const eng_chat_template *t, const cJSON *messages, const eng_chat_opts *o, char **out,
                             size_t *out_len, err *e);

void eng_chat_template_destroy(eng_chat_template *t);

#endif
