// fuzz_openai.c: libFuzzer driver for OpenAI request bodies
// (server/http/openai_req.c): the input is a JSON body, read as a completion
// and as a chat request. Each must be refused with a message and a param no
// longer than its buffer, or read with its invariants holding (a model; a
// completion's prompt as text or ids; a chat's messages normalised to
// {role, content string}; stop strings non-empty; n_stop within bounds).
// Untrusted bytes every request; a crash, leak or UB report is a finding.
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/openai_req.h"

static void check(const srv_oai_req *q) {
  if (!q->model) abort();
  if (q->kind == SRV_OAI_COMPLETION && !q->prompt && !(q->ids && q->n_ids > 0)) abort();
  if (q->kind == SRV_OAI_CHAT) {
    if (!cJSON_IsArray(q->messages) || cJSON_GetArraySize(q->messages) < 1) abort();
    for (const cJSON *m = q->messages->child; m; m = m->next) {
      const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
      if (!cJSON_IsString(r) || !cJSON_IsString(c)) abort();
    }
  }
  if (q->n_stop > SRV_OAI_MAX_STOP) abort();
  for (size_t i = 0; i < q->n_stop; i++)
    if (!q->stop[i] || !q->stop[i][0]) abort();
  if (q->max_tokens != -1 && q->max_tokens < 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *root = cJSON_ParseWithLength((const char *)data, size);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return 0;
  }
  for (int k = 0; k < 2; k++) {
    srv_oai_req q;
    char param[128];
    err e = {0};
    memset(param, 'x', sizeof param);
    if (srv_oai_parse((srv_oai_kind)k, root, &q, param, sizeof param, &e) == 0) {
      check(&q);
      srv_oai_req_close(&q);
    } else if (!e.msg[0] || !memchr(param, 0, sizeof param)) {
      abort();
    }
  }
  cJSON_Delete(root);
  return 0;
}
