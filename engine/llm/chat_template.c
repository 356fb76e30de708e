// engine/llm/chat_template.c: OpenAI-style messages into a checkpoint's
// prompt text, the way transformers' apply_chat_template(tokenize=False)
// prepares them for its Jinja template: each message's null-valued keys
// dropped (_normalize_chat_messages), reasoning_content/thinking/reasoning
// aliased (_alias_reasoning_fields), tools and documents passed as None when
// absent, the special tokens beside the caller's extra variables.
#include "engine/llm/chat_template.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/jinja.h"
#include "engine/llm/jinja_internal.h"
#include "kernels/base/rfile.h"

struct eng_chat_template {
  eng_jinja *dflt;      // the template
  eng_jinja *tool_use;  // a named "tool_use" template, used when tools are given; may be NULL
  char *dflt_text, *tool_use_text;  // their text: continue_final_message looks for the field's name in it
  char *bos, *eos;      // NULL: the tokenizer has none
};

void eng_chat_template_destroy(eng_chat_template *t) {
  if (!t) return;
  eng_jinja_destroy(t->dflt);
  eng_jinja_destroy(t->tool_use);
  free(t->dflt_text);
  free(t->tool_use_text);
  free(t->bos);
  free(t->eos);
  free(t);
}

static int dup_token(const char *s, char **out, err *e) {
  *out = NULL;
  if (!s) return 0;
  *out = strdup(s);
  return *out ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
}

eng_chat_template *eng_chat_template_create(const char *template_text, size_t len, const char *bos, const char *eos,
                                            err *e) {
  eng_chat_template *t = calloc(1, sizeof *t);
  if (!t) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    return NULL;
  }
  if (dup_token(bos, &t->bos, e) || dup_token(eos, &t->eos, e) || !(t->dflt = eng_jinja_create(template_text, len, e)) ||
      !(t->dflt_text = strndup(template_text, len))) {
    if (t->dflt && !t->dflt_text) err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    eng_chat_template_destroy(t);
    return NULL;
  }
  return t;
}

// --- from a checkpoint directory

// A special token in tokenizer_config.json: a string, or an AddedToken {"content": ...}.
static const char *token_text(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *read_text(const char *dir, const char *name, size_t *len, err *e, int *missing) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
    err_set(e, ERR_INVALID_ARGUMENT, "chat template: path too long: %s/%s", dir, name);
    return NULL;
  }
  uint8_t *buf = NULL;
  err e2 = {0};
  if (rfile_read_all(path, name, (size_t)16 << 20, &buf, len, &e2)) {
    *missing = e2.code == ERR_NOT_FOUND;
    if (e && !*missing) *e = e2;
    return NULL;
  }
  char *s = realloc(buf, *len + 1);
  if (!s) {
    free(buf);
    err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    return NULL;
  }
  s[*len] = '\0';
  return s;
}

eng_chat_template *eng_chat_template_load(const char *dir, err *e) {
  size_t clen = 0, jlen = 0;
  int cmissing = 0, jmissing = 0;
  char *cfg_text = read_text(dir, "tokenizer_config.json", &clen, e, &cmissing);
  if (!cfg_text && !cmissing) return NULL;
  cJSON *cfg = cfg_text ? cJSON_ParseWithLength(cfg_text, clen) : NULL;
  free(cfg_text);
  if (cmissing == 0 && !cJSON_IsObject(cfg)) {
    cJSON_Delete(cfg);
    err_set(e, ERR_INVALID_ARGUMENT, "chat template: %s/tokenizer_config.json is not a JSON object", dir);
    return NULL;
  }
  const char *bos = token_text(cfg, "bos_token"), *eos = token_text(cfg, "eos_token");
  eng_chat_template *t = NULL;
  char *jinja = read_text(dir, "chat_template.jinja", &jlen, e, &jmissing);
  if (jinja) {
    t = eng_chat_template_create(jinja, jlen, bos, eos, e);
    free(jinja);
  } else if (jmissing) {
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *dflt = cJSON_IsString(ct) ? ct->valuestring : NULL, *tool = NULL;
    if (cJSON_IsArray(ct))
      for (const cJSON *it = ct->child; it; it = it->next) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(it, "template");
        if (!cJSON_IsString(nm) || !cJSON_IsString(tx)) continue;
        if (!strcmp(nm->valuestring, "default")) dflt = tx->valuestring;
        if (!strcmp(nm->valuestring, "tool_use")) tool = tx->valuestring;
      }
    if (!dflt)
      err_set(e, ERR_NOT_FOUND, "chat template: %s has no chat_template.jinja and tokenizer_config.json has no chat_template", dir);
    else if ((t = eng_chat_template_create(dflt, strlen(dflt), bos, eos, e)) && tool &&
             (!(t->tool_use = eng_jinja_create(tool, strlen(tool), e)) || !(t->tool_use_text = strdup(tool)))) {
      err_prefix(e, "the tool_use template: ");
      eng_chat_template_destroy(t);
      t = NULL;
    }
  }
  cJSON_Delete(cfg);
  return t;
}

// --- rendering

static const char *const REASONING_FIELDS[] = {"reasoning_content", "thinking", "reasoning"};

// One message as transformers hands it to the template; NULL on memory failure.
static cJSON *normalize_message(const cJSON *m) {
  cJSON *out = cJSON_CreateObject();
  if (!out) return NULL;
  const cJSON *reasoning = NULL;
  for (int k = 0; k < 3 && !reasoning; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, REASONING_FIELDS[k]);
    if (v && !cJSON_IsNull(v)) reasoning = v;
  }
  // {"thinking": r, **message, "reasoning_content": r}: thinking first unless the message has it.
  const cJSON *own_thinking = cJSON_GetObjectItemCaseSensitive(m, "thinking");
  if (reasoning && (!own_thinking || cJSON_IsNull(own_thinking)))
    if (!cJSON_AddItemToObject(out, "thinking", cJSON_Duplicate(reasoning, 1))) goto oom;
  for (const cJSON *c = m->child; c; c = c->next) {
    if (cJSON_IsNull(c) || !c->string || cJSON_GetObjectItemCaseSensitive(out, c->string)) {
      // null: dropped (_normalize_chat_messages); a repeated key: the last one wins, in the first one's place.
      if (c->string && !cJSON_IsNull(c) && cJSON_GetObjectItemCaseSensitive(out, c->string)) {
        cJSON *dup = cJSON_Duplicate(c, 1);
        if (!dup || !cJSON_ReplaceItemInObjectCaseSensitive(out, c->string, dup)) goto oom;
      }
      continue;
    }
    const cJSON *src = c;
    if (reasoning && (!strcmp(c->string, "thinking") || !strcmp(c->string, "reasoning_content"))) src = reasoning;
    if (!cJSON_AddItemToObject(out, c->string, cJSON_Duplicate(src, 1))) goto oom;
  }
  if (reasoning && !cJSON_GetObjectItemCaseSensitive(out, "reasoning_content"))
    if (!cJSON_AddItemToObject(out, "reasoning_content", cJSON_Duplicate(reasoning, 1))) goto oom;
  return out;
oom:
  cJSON_Delete(out);
  return NULL;
}

static int put(cJSON *vars, const char *key, cJSON *v, err *e) {
  if (!v) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  if (cJSON_GetObjectItemCaseSensitive(vars, key)) {
    if (!cJSON_ReplaceItemInObjectCaseSensitive(vars, key, v)) {
      cJSON_Delete(v);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    }
    return 0;
  }
  if (!cJSON_AddItemToObject(vars, key, v)) {
    cJSON_Delete(v);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  }
  return 0;
}

static int build_vars(const eng_chat_template *t, const cJSON *messages, const eng_chat_opts *o, cJSON *vars, err *e) {
  if (!cJSON_IsArray(messages)) return err_set(e, ERR_INVALID_ARGUMENT, "chat template: messages must be a JSON array");
  if (!messages->child)
    return err_set(e, ERR_INVALID_ARGUMENT, "chat template: Cannot apply chat template to an empty conversation.");
  cJSON *msgs = cJSON_CreateArray();
  if (!msgs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  int i = 0;
  for (const cJSON *m = messages->child; m; m = m->next, i++) {
    if (!cJSON_IsObject(m)) {
      cJSON_Delete(msgs);
      return err_set(e, ERR_INVALID_ARGUMENT, "chat template: message %d is not a JSON object", i);
    }
    cJSON *n = normalize_message(m);
    if (!n || !cJSON_AddItemToArray(msgs, n)) {
      cJSON_Delete(n);
      cJSON_Delete(msgs);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    }
  }
  if (o && o->tools && !cJSON_IsArray(o->tools)) {
    cJSON_Delete(msgs);
    return err_set(e, ERR_INVALID_ARGUMENT, "chat template: tools must be a JSON array");
  }
  if (o && o->documents && !cJSON_IsArray(o->documents)) {
    cJSON_Delete(msgs);
    return err_set(e, ERR_INVALID_ARGUMENT, "chat template: documents must be a JSON array");
  }
  if (o && o->extra && !cJSON_IsObject(o->extra)) {
    cJSON_Delete(msgs);
    return err_set(e, ERR_INVALID_ARGUMENT, "chat template: extra variables must be a JSON object");
  }
  TRY(put(vars, "messages", msgs, e));
  TRY(put(vars, "tools", o && o->tools ? cJSON_Duplicate(o->tools, 1) : cJSON_CreateNull(), e));
  TRY(put(vars, "documents", o && o->documents ? cJSON_Duplicate(o->documents, 1) : cJSON_CreateNull(), e));
  TRY(put(vars, "add_generation_prompt", cJSON_CreateBool(o && o->add_generation_prompt), e));
  if (t->bos) TRY(put(vars, "bos_token", cJSON_CreateString(t->bos), e));
  if (t->eos) TRY(put(vars, "eos_token", cJSON_CreateString(t->eos), e));
  if (o && o->extra)
    for (const cJSON *c = o->extra->child; c; c = c->next)
      if (c->string) TRY(put(vars, c->string, cJSON_Duplicate(c, 1), e));
  return 0;
}

// --- continue_final_message

#define CONTINUE_TAG "CONTINUE_FINAL_MESSAGE_TAG "

static int cont_fail(err *e, const char *fmt, const char *arg) {
  char msg[ERR_MSG_MAX];
  snprintf(msg, sizeof msg, fmt, arg);
  return err_set(e, ERR_INVALID_ARGUMENT, "chat template: %s", msg);
}

// Appends the tag to the text transformers tags (the last message's field, or its last text part);
// *final gets a copy of that text before the tag. The fields tagged are named in the template?
static int tag_final(cJSON *vars, const char *field, const char *tpl, char **final, err *e) {
  *final = NULL;
  cJSON *msgs = cJSON_GetObjectItemCaseSensitive(vars, "messages"), *last = msgs ? msgs->child : NULL;
  while (last && last->next) last = last->next;
  cJSON *fv = last ? cJSON_GetObjectItemCaseSensitive(last, field) : NULL;
  if (!fv) return cont_fail(e, "continue_final_message is set but the final message has no \"%s\" to continue!", field);
  // A reasoning field is copied under several names: tag each copy holding the same text.
  const char *fields[3] = {field, NULL, NULL};
  size_t nf = 1;
  if (!strcmp(field, "reasoning_content") || !strcmp(field, "thinking") || !strcmp(field, "reasoning")) {
    nf = 0;
    for (int k = 0; k < 3; k++) {
      cJSON *o = cJSON_GetObjectItemCaseSensitive(last, REASONING_FIELDS[k]);
      if (o && cJSON_Compare(o, fv, 1)) fields[nf++] = REASONING_FIELDS[k];
    }
  }
  int named = 0;
  for (size_t k = 0; k < nf; k++) named |= strstr(tpl, fields[k]) != NULL;
  if (!named)
    return cont_fail(e, "continue_final_message is set to \"%s\" but this is not an accepted field in the chat_template", field);
  cJSON *targets[3] = {NULL, NULL, NULL};
  size_t nt = 0;
  if (cJSON_IsArray(fv)) {
    for (cJSON *p = fv->child; p; p = p->next) {
      cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
      if (tx) targets[0] = tx, nt = 1;  // the last part with text
    }
    if (!nt) return cont_fail(e, "%s", "continue_final_message is set but we could not find any text to continue in the final message!");
  } else {
    for (size_t k = 0; k < nf; k++) targets[nt++] = cJSON_GetObjectItemCaseSensitive(last, fields[k]);
  }
  for (size_t k = 0; k < nt; k++) {
    if (!cJSON_IsString(targets[k])) return cont_fail(e, "%s", "continue_final_message: the text to continue is not a string");
    if (!*final && !(*final = strdup(targets[k]->valuestring))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    size_t n = strlen(targets[k]->valuestring);
    char *tagged = malloc(n + sizeof CONTINUE_TAG);
    if (!tagged) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    memcpy(tagged, targets[k]->valuestring, n);
    memcpy(tagged + n, CONTINUE_TAG, sizeof CONTINUE_TAG);
    int ok = cJSON_SetValuestring(targets[k], tagged) != NULL;
    free(tagged);
    if (!ok) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  }
  return 0;
}

// Cuts the rendered text at the tag as transformers does (and checks the message survived the template).
static int cut_at_tag(char *out, size_t *len, const char *final, err *e) {
  size_t b, en, tn = sizeof CONTINUE_TAG - 2;  // the tag without its trailing space
  eng_jinja__strip(final, strlen(final), NULL, 1, 1, &b, &en);
  if (eng_jinja__str_find(out, *len, final + b, en - b, 0) < 0 || eng_jinja__str_find(out, *len, CONTINUE_TAG, tn, 0) < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "chat template: continue_final_message is set but the final message does not appear in the chat "
                   "after applying the chat template");
  long at = -1, f;
  while ((f = eng_jinja__str_find(out, *len, CONTINUE_TAG, tn, (size_t)(at + 1))) >= 0) at = f;
  size_t cut = (size_t)at;
  if (!(cut + tn + 1 <= *len && out[cut + tn] == ' ')) {  // the template trimmed the text: trim what precedes too
    size_t s0, s1;
    eng_jinja__strip(out, cut, NULL, 0, 1, &s0, &s1);
    cut = s1;
  }
  out[cut] = '\0';
  *len = cut;
  return 0;
}

int eng_chat_template_render(const eng_chat_template *t, const cJSON *messages, const eng_chat_opts *o, char **out,
                             size_t *out_len, err *e) {
  *out = NULL;
  if (out_len) *out_len = 0;
  const char *cont = o ? o->continue_final_message : NULL;
  if (cont && o->add_generation_prompt)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "chat template: continue_final_message and add_generation_prompt are not compatible");
  cJSON *vars = cJSON_CreateObject();
  if (!vars) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  int use_tool = o && o->tools && t->tool_use;
  char *final = NULL;
  size_t len = 0;
  int rc = build_vars(t, messages, o, vars, e);
  if (!rc && cont) rc = tag_final(vars, cont, use_tool ? t->tool_use_text : t->dflt_text, &final, e);
  if (!rc) {
    eng_jinja_opts jo = {o ? o->now : NULL, o ? o->now_ctx : NULL, o ? o->max_output : 0, 0};
    rc = eng_jinja_render(use_tool ? t->tool_use : t->dflt, vars, &jo, out, &len, e);
  }
  if (!rc && cont && (rc = cut_at_tag(*out, &len, final, e))) {
    free(*out);
    *out = NULL;
  }
  if (!rc && out_len) *out_len = len;
  free(final);
  cJSON_Delete(vars);
  return rc;
}
