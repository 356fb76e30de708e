// fuzz_chat.c: libFuzzer driver for chat templates (engine/llm/jinja*.c,
// chat_template.c). The input is a template, a NUL byte, then messages as
// JSON: the template is compiled (the checkpoint's surface) and, when it
// compiles, rendered with those messages; the messages are also rendered
// through a fixed real template (Qwen2.5's, with tools: the client's
// surface, untrusted bytes every request). Every input must end in text or
// an error value within the budgets; a crash, leak, UB report or a hang is a
// finding.
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/chat_template.h"

static const char FIXED[] =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- for tool in tools %}{{- \"\\n\" }}{{- tool | tojson }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if message.role == \"user\" "
    "or (message.role == \"assistant\" and not message.tool_calls) %}{{- '<|im_start|>' + message.role + '\\n' + "
    "message.content + '<|im_end|>\\n' }}{%- elif message.role == \"assistant\" %}{%- for tool_call in "
    "message.tool_calls %}{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- tool_call.name }}{{- tool_call.arguments | tojson(indent=2) }}{%- endfor %}{%- elif message.role == \"tool\" %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- message.content | string | trim }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- endif %}";

static int64_t fixed_now(void *ctx) {
  (void)ctx;
  return 1770459072;
}

static void render(const eng_chat_template *t, const cJSON *msgs, const cJSON *tools) {
  eng_chat_opts o = {1, tools, NULL, NULL, fixed_now, NULL, 1 << 20, NULL};
  char *out = NULL;
  err e = {0};
  if (!eng_chat_template_render(t, msgs, &o, &out, NULL, &e)) free(out);
  // And the last message continued (transformers' continue_final_message).
  o.add_generation_prompt = 0, o.continue_final_message = "content";
  out = NULL;
  if (!eng_chat_template_render(t, msgs, &o, &out, NULL, &e)) free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t tlen = nul ? (size_t)(nul - data) : size;
  cJSON *msgs = nul ? cJSON_ParseWithLength((const char *)nul + 1, size - tlen - 1) : NULL;
  if (!msgs) msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
  cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]");
  err e = {0};
  eng_chat_template *t = eng_chat_template_create((const char *)data, tlen, "<s>", "</s>", &e);
  if (t) {
    render(t, msgs, NULL);
    eng_chat_template_destroy(t);
  }
  eng_chat_template *fixed = eng_chat_template_create(FIXED, sizeof FIXED - 1, NULL, "<|im_end|>", &e);
  if (!fixed) abort();  // the fixed template is ours: it must compile
  render(fixed, msgs, tools);
  eng_chat_template_destroy(fixed);
  cJSON_Delete(tools);
  cJSON_Delete(msgs);
  return 0;
}
