// test_openai_req.c: OpenAI request bodies (server/http/openai_req.h): the
// fields read, defaults, prompts in their three forms, messages normalised,
// and each refusal's message and param.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server/http/openai_req.h"

static int parse(srv_oai_kind k, const char *body, srv_oai_req *q, char *param, err *e) {
  cJSON *root = cJSON_Parse(body);
  CHECK_EQ_INT(root != NULL, 1);
  *e = (err){0};
  int rc = srv_oai_parse(k, root, q, param, 128, e);
  // the request borrows root's strings: check what is needed before it goes
  if (rc == 0 && q->model) CHECK_EQ_STR(q->model, "m");
  if (rc == 0 && q->n_stop) CHECK_EQ_STR(q->stop[0], "x");
  if (rc == 0 && q->prompt) CHECK_EQ_INT((int)q->prompt_len, (int)strlen(q->prompt));
  if (rc == 0) srv_oai_req_close(q);
  cJSON_Delete(root);
  return rc;
}

static void refused(srv_oai_kind k, const char *body, const char *msg_part, const char *want_param) {
  srv_oai_req q;
  char param[128];
  err e;
  CHECK_EQ_INT(parse(k, body, &q, param, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, msg_part);
  CHECK_EQ_STR(param, want_param);
}

static void test_completion(void) {
  srv_oai_req q;
  char param[128];
  err e;
  cJSON *root = cJSON_Parse(
      "{\"model\":\"m\",\"prompt\":\"hi\",\"stop\":[\"x\",\"yz\"],\"seed\":-3,"
      "\"temperature\":0,\"top_p\":0.5,\"max_tokens\":7,\"stream\":true,"
      "\"stream_options\":{\"include_usage\":true},\"n\":1,\"user\":\"u\",\"echo\":false,"
      "\"logprobs\":null}");
  CHECK_EQ_INT(srv_oai_parse(SRV_OAI_COMPLETION, root, &q, param, sizeof param, &e), 0);
  CHECK_EQ_STR(q.prompt, "hi");
  CHECK_EQ_INT((int)q.n_stop, 2);
  CHECK_EQ_STR(q.stop[1], "yz");
  CHECK_EQ_INT(q.seeded, 1);
  CHECK_EQ_INT((int64_t)q.sampling.seed, -3);
  CHECK_EQ_INT(q.sampling.temperature == 0.0f, 1);
  CHECK_EQ_INT(q.sampling.top_p == 0.5f, 1);
  CHECK_EQ_INT(q.max_tokens, 7);
  CHECK_EQ_INT(q.stream, 1);
  CHECK_EQ_INT(q.include_usage, 1);
  srv_oai_req_close(&q);
  cJSON_Delete(root);
  // defaults: OpenAI's temperature 1, max_tokens not given
  root = cJSON_Parse("{\"model\":\"m\",\"prompt\":[[5,6,7]]}");
  CHECK_EQ_INT(srv_oai_parse(SRV_OAI_COMPLETION, root, &q, param, sizeof param, &e), 0);
  CHECK_EQ_INT(q.n_ids, 3);
  CHECK_EQ_INT(q.ids[2], 7);
  CHECK_EQ_INT(q.max_tokens, -1);
  CHECK_EQ_INT(q.sampling.temperature == 1.0f, 1);
  CHECK_EQ_INT(q.seeded, 0);
  srv_oai_req_close(&q);
  cJSON_Delete(root);
}

static void test_chat(void) {
  srv_oai_req q;
  char param[128];
  err e;
  cJSON *root = cJSON_Parse(
      "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"s\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
      "{\"type\":\"text\",\"text\":\"b\"}],\"name\":\"n\"},"
      "{\"role\":\"assistant\",\"content\":\"c\"}],\"max_completion_tokens\":3}");
  CHECK_EQ_INT(srv_oai_parse(SRV_OAI_CHAT, root, &q, param, sizeof param, &e), 0);
  char *txt = cJSON_PrintUnformatted(q.messages);
  CHECK_EQ_STR(txt,
               "[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"a\\nb\",\"name\":\"n\"},"
               "{\"role\":\"assistant\",\"content\":\"c\"}]");
  free(txt);
  CHECK_EQ_INT(q.max_tokens, 3);
  CHECK_EQ_INT(q.logprobs, -1);
  srv_oai_req_close(&q);
  cJSON_Delete(root);
  root = cJSON_Parse(
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":true,"
      "\"top_logprobs\":4}");
  CHECK_EQ_INT(srv_oai_parse(SRV_OAI_CHAT, root, &q, param, sizeof param, &e), 0);
  CHECK_EQ_INT(q.logprobs, 4);
  srv_oai_req_close(&q);
  cJSON_Delete(root);
}

static void test_refusals(void) {
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"warp\":1}",
          "Unrecognized request argument supplied: warp", "warp");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":2}", "'n' must be 1", "n");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1.5}", "'max_tokens' is an integer",
          "max_tokens");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":2.5}", "between 0 and 2",
          "temperature");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"\"]}", "must not be empty", "stop");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,-2]}", "token ids", "prompt");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":30}", "between 0 and 20", "logprobs");
  refused(SRV_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"top_logprobs\":2}",
          "'logprobs' must be true", "top_logprobs");
  refused(SRV_OAI_COMPLETION, "{\"prompt\":\"x\"}", "you must provide a model parameter", "model");
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"messages\":[]}", "Unrecognized request argument supplied: messages",
          "messages");
  refused(SRV_OAI_CHAT, "{\"model\":\"m\",\"messages\":[]}", "'messages' is empty", "messages");
  // duplicate keys (found by fuzz_openai: repeated "stop"s overran the stop list)
  refused(SRV_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":\"a\",\"stop\":\"b\"}",
          "'stop' is given more than once", "stop");
  refused(SRV_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"x\":1}]}",
          "'x' is not supported", "messages[0].x");
  refused(SRV_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"a\"}]}", "role is missing", "messages[0].role");
  refused(SRV_OAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[]}",
          "'tools' is not supported", "tools");
  refused(SRV_OAI_CHAT,
          "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stream_options\":{\"include_usage\":"
          "true}}",
          "only allowed when 'stream' is true", "stream_options");
}

int main(void) {
  test_completion();
  test_chat();
  test_refusals();
  CHECK_DONE();
}
