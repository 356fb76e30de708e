// server/http/openai_req.h: an OpenAI request body (/v1/completions,
// /v1/chat/completions), checked field by field as OpenAI checks it: an
// unknown field is refused by name ("Unrecognized request argument supplied"),
// a known one of the wrong type or range says which and why, fields OpenAI has
// and this server does not honour (logprobs, tools, n > 1, echo, penalties)
// are refused unless they hold their neutral value. Pure: it runs nothing;
// rest_openai.c submits what it reads.
#ifndef INFERD_SERVER_HTTP_OPENAI_REQ_H
#define INFERD_SERVER_HTTP_OPENAI_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "engine/llm/llm_sample.h"
#include "kernels/base/err.h"

typedef struct cJSON cJSON;

#define SRV_OAI_MAX_STOP 16  // stop strings at most (llm_text.h takes as many)

typedef enum srv_oai_kind { SRV_OAI_COMPLETION = 0, SRV_OAI_CHAT } srv_oai_kind;

typedef struct srv_oai_req {
  srv_oai_kind kind;
  const char *model;  // borrowed from the body's JSON, as every string here
  // completions: the prompt as text, or as token ids (owned)
  const char *prompt;
  size_t prompt_len;
  int32_t *ids;
  int64_t n_ids;
  // chat: the messages normalised (role, content as one string, name): owned
  cJSON *messages;
  int stream, include_usage;
  int64_t max_tokens;  // -1: not given (the rest of the context)
  eng_llm_sampling sampling;
  int seeded;
  int logprobs;  // -1: none; else log probabilities with this many alternatives per token
  int top_logprobs;  // chat's, -1 when not given (folded into logprobs)
  const char *stop[SRV_OAI_MAX_STOP];
  size_t n_stop;
} srv_oai_req;

// Reads root (the body, a JSON object) into *q. On failure e says why and
// param (cap bytes) names the field at fault ("" when none); *q is closed.
int srv_oai_parse(srv_oai_kind kind, const cJSON *root, srv_oai_req *q, char *param, size_t cap, err *e);
void srv_oai_req_close(srv_oai_req *q);

#endif
