// server/core/llm_text.h: text in, text out over the generative backend
// (issue 36). A request's prompt is text (encoded here with the model's
// tokenizer) or token ids; its answer is text, detokenized incrementally
// (engine/llm/tokenizer.h's eng_tok_stream: never a broken UTF-8 sequence,
// the deltas add up to the decode of every id), with stop strings matched on
// that text: the text ends before the stop string, the sequence ends at the
// token that completed it (its KV blocks freed at once) and finish_reason is
// "stop". A streamed delta never holds text that may still turn out to begin
// a stop string. The OpenAI endpoints (server/http/rest_openai.c), Triton's
// generate extension with text_input (rest_generate.c) and ModelStreamInfer
// with the vLLM backend's tensors (llm_grpc.c) all go through here.
#ifndef INFERD_SERVER_LLM_TEXT_H
#define INFERD_SERVER_LLM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"
#include "server/core/llm_serve.h"

// One answer of a text request, on a runner thread.
// One generated token's log probability (of the model's raw distribution, log-softmax of the logits, as
// vLLM's default), with the most likely alternatives when asked.
#define SRV_LLM_TEXT_MAX_TOP 20
typedef struct srv_llm_text_lp {
  int32_t id;
  float logprob;
  int n_top;
  int32_t top_id[SRV_LLM_TEXT_MAX_TOP];
  float top_lp[SRV_LLM_TEXT_MAX_TOP];
} srv_llm_text_lp;

typedef struct srv_llm_text_out {
  const char *text;  // streaming: the delta; otherwise (final) every generated character
  size_t len;
  int final;                  // the last answer: nothing follows it
  const char *finish_reason;  // final and code 0: "stop" (an end token or a stop string) or "length"
  int64_t prompt_tokens, completion_tokens;
  int code;  // != 0 (final only): the request failed with msg after the answers before it
  const char *msg;
  // with logprobs asked: the tokens since the last answer (streaming) or all of them (final, not streaming)
  const srv_llm_text_lp *lp;
  size_t n_lp;
} srv_llm_text_out;

typedef struct srv_llm_text_sink {
  void *ctx;
  // Called on a runner thread, never twice at once for one request; after the final one ctx is
  // never touched again.
  void (*emit)(void *ctx, const srv_llm_text_out *o);
  int (*cancelled)(void *ctx);  // as srv_llm_sink's
  int (*congested)(void *ctx);  // may be NULL
} srv_llm_text_sink;

typedef struct srv_llm_text_params {
  srv_llm_params base;  // base.output_len < 0: what the context leaves; base.ids NULL: the prompt is text; stop words
                        // (token ids) are not used here
  const char *prompt;   // UTF-8, prompt_len bytes (when base.ids is NULL)
  size_t prompt_len;
  int add_special;          // encode with the tokenizer's template (BOS): completions yes, a rendered chat no
  const char *const *stop;  // stop strings (n_stop, each NUL-terminated, non-empty)
  size_t n_stop;
  int echo_prompt;  // the first answer's text starts with the prompt's text (the vLLM backend's
                    // exclude_input_in_output false)
  int logprobs;     // -1: none; else each token's log probability and this many alternatives (<= 20)
} srv_llm_text_params;

// Encodes the prompt and submits it (srv_llm_submit's checks and errors,
// with the prompt's length in tokens). 0: sink answers until final.
// FAILED_PRECONDITION when the model has no tokenizer.
int srv_llm_text_submit(srv_llm *l, const srv_llm_text_params *p, const srv_llm_text_sink *sink, err *e);

// vLLM's sampling parameters (SamplingParams' names, as Triton's vLLM
// backend takes them in its sampling_parameters tensor and the generate
// extension in "parameters"): max_tokens, temperature, top_p, top_k, min_p,
// seed, repetition_penalty, stop (a string or a list), and n (1),
// presence_penalty and frequency_penalty (0) accepted at their neutral values
// only. Numbers may be given as strings ("0.5"), as that backend converts
// them. Keys not in skip (a NULL-terminated list; may be NULL) and not
// known are refused by name. Stop strings point into obj (borrowed) through
// stop_buf (SRV_LLM_TEXT_MAX_STOP entries).
#define SRV_LLM_TEXT_MAX_STOP 16
struct cJSON;
int srv_llm_text_vllm_params(const struct cJSON *obj, const char *const *skip, srv_llm_text_params *p,
                             const char **stop_buf, err *e);

// The message of a text request to a model without tokenizer.json.
#define SRV_LLM_NO_TOKENIZER_MSG \
  "model '%s' has no tokenizer (no tokenizer.json in its checkpoint folder): it takes token ids only"

#endif
