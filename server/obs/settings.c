// settings.c: the run-time settings RPCs of Triton's logging and trace
// extensions (LogSettings, TraceSetting). Both check every setting of a
// request before applying any, so a refused request changes nothing.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "server/obs/log.h"
#include "server/core/server.h"

#define LOG_KEYS "log_file, log_info, log_warning, log_error, log_verbose_level, log_format"

// --- logging (Triton's logging extension): the levels and the line format,
// changed at run time; every setting is checked before any is applied

static int log_setting_check(const Inference__LogSettingsRequest__SettingsEntry *st, err *e) {
  const Inference__LogSettingsRequest__SettingValue *v = st->value;
  int kind = v ? (int)v->parameter_choice_case : 0;
  const char *k = st->key;
  if (!strcmp(k, "log_info") || !strcmp(k, "log_warning") || !strcmp(k, "log_error")) {
    if (kind != INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM)
      return err_set(e, ERR_INVALID_ARGUMENT, "log setting '%s' must be a bool", k);
  } else if (!strcmp(k, "log_verbose_level")) {
    if (kind != INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM)
      return err_set(e, ERR_INVALID_ARGUMENT, "log setting '%s' must be a uint32", k);
  } else if (!strcmp(k, "log_format") || !strcmp(k, "log_file")) {
    if (kind != INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM)
      return err_set(e, ERR_INVALID_ARGUMENT, "log setting '%s' must be a string", k);
    if (!strcmp(k, "log_format") && strcmp(v->string_param, "default") && strcmp(v->string_param, "ISO8601"))
      return err_set(e, ERR_INVALID_ARGUMENT, "log_format '%s': expected 'default' or 'ISO8601'", v->string_param);
    if (!strcmp(k, "log_file") && *v->string_param)
      return err_set(e, ERR_INVALID_ARGUMENT, "log_file '%s': inferd logs to stderr only (give \"\")",
                     v->string_param);
  } else {
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "unknown log setting '%s' (" LOG_KEYS ")", k);
  }
  return 0;
}

static void log_setting_apply(const Inference__LogSettingsRequest__SettingsEntry *st) {
  const Inference__LogSettingsRequest__SettingValue *v = st->value;
  const char *k = st->key;
  if (!strcmp(k, "log_info")) srv_log_enable(SRV_LOG_INFO, v->bool_param);
  else if (!strcmp(k, "log_warning")) srv_log_enable(SRV_LOG_WARN, v->bool_param);
  else if (!strcmp(k, "log_error")) srv_log_enable(SRV_LOG_ERROR, v->bool_param);
  else if (!strcmp(k, "log_verbose_level")) srv_log_enable(SRV_LOG_DEBUG, v->uint32_param > 0);
  else if (!strcmp(k, "log_format"))
    srv_log_set_format(strcmp(v->string_param, "ISO8601") ? SRV_LOG_FORMAT_DEFAULT : SRV_LOG_FORMAT_ISO8601);
}

void srv_log_settings(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  (void)ctx;
  Inference__LogSettingsRequest *q = (Inference__LogSettingsRequest *)srv_unpack_or_fail(
      call, &inference__log_settings_request__descriptor, req, len);
  if (!q) return;
  err e;
  for (size_t i = 0; i < q->n_settings; i++)
    if (log_setting_check(q->settings[i], &e) != 0) {
      srv_call_fail(call, (int)e.code, e.msg);
      inference__log_settings_request__free_unpacked(q, NULL);
      return;
    }
  for (size_t i = 0; i < q->n_settings; i++) log_setting_apply(q->settings[i]);
  if (q->n_settings) srv_log(SRV_LOG_INFO, "log settings changed (%zu setting(s))", q->n_settings);
  inference__log_settings_request__free_unpacked(q, NULL);

  enum { N = 6 };
  static const char *keys[N] = {"log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format"};
  Inference__LogSettingsResponse__SettingValue val[N];
  Inference__LogSettingsResponse__SettingsEntry ent[N], *entp[N];
  for (int i = 0; i < N; i++) {
    inference__log_settings_response__setting_value__init(&val[i]);
    inference__log_settings_response__settings_entry__init(&ent[i]);
    ent[i].key = (char *)keys[i];
    ent[i].value = &val[i];
    entp[i] = &ent[i];
  }
  val[0].parameter_choice_case = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
  val[0].string_param = "";
  srv_log_level lv[3] = {SRV_LOG_INFO, SRV_LOG_WARN, SRV_LOG_ERROR};
  for (int i = 0; i < 3; i++) {
    val[1 + i].parameter_choice_case = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM;
    val[1 + i].bool_param = srv_log_enabled(lv[i]);
  }
  val[4].parameter_choice_case = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM;
  val[4].uint32_param = (uint32_t)srv_log_enabled(SRV_LOG_DEBUG);
  val[5].parameter_choice_case = INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
  val[5].string_param = srv_log_get_format() == SRV_LOG_FORMAT_ISO8601 ? "ISO8601" : "default";
  Inference__LogSettingsResponse r = INFERENCE__LOG_SETTINGS_RESPONSE__INIT;
  r.n_settings = N;
  r.settings = entp;
  srv_reply_msg(call, &r.base);
}

// --- tracing (Triton's trace extension), for the --trace-file trace: its
// sampling (trace_rate, trace_level, trace_count) changes while serving; the
// file is fixed at start and per-model settings do not exist here

typedef struct trace_req {
  prof_trace_settings st;
  int set_file;  // trace_file named (must be the current file)
} trace_req;

// One request value as a whole number in [lo, hi].
static int trace_int(const Inference__TraceSettingRequest__SettingValue *v, const char *key, long long lo,
                     long long hi, long long *out, err *e) {
  if (!v || v->n_value != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "trace setting '%s' takes one value", key);
  char *end;
  long long x = strtoll(v->value[0], &end, 10);
  if (end == v->value[0] || *end || x < lo || x > hi)
    return err_set(e, ERR_INVALID_ARGUMENT, "trace setting '%s': '%s' is not a whole number in %lld..%lld", key,
                   v->value[0], lo, hi);
  *out = x;
  return 0;
}

// Folds one setting into *r; a setting with no value goes back to the
// start value (Triton's "clear").
static int trace_setting_check(const srv_server *s, const Inference__TraceSettingRequest__SettingsEntry *en,
                               trace_req *r, err *e) {
  const Inference__TraceSettingRequest__SettingValue *v = en->value;
  const char *k = en->key;
  int clear = !v || v->n_value == 0;
  long long x = 0;
  if (!strcmp(k, "trace_file")) {
    if (!clear && (v->n_value != 1 || strcmp(v->value[0], prof_trace_path(s->trace)) != 0))
      return err_set(e, ERR_INVALID_ARGUMENT, "trace_file is fixed at start (--trace-file); it is '%s'",
                     prof_trace_path(s->trace));
  } else if (!strcmp(k, "trace_level")) {
    r->st.on = 1;
    for (size_t i = 0; !clear && i < v->n_value; i++) {
      if (!strcmp(v->value[i], "OFF") && v->n_value == 1) r->st.on = 0;
      else if (strcmp(v->value[i], "TIMESTAMPS") != 0)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "trace_level '%s': only [\"TIMESTAMPS\"] or [\"OFF\"] (tensors are not traced)", v->value[i]);
    }
  } else if (!strcmp(k, "trace_rate")) {
    if (!clear) TRY(trace_int(v, k, 1, INT32_MAX, &x, e));
    r->st.rate = clear ? s->trace_rate : (int)x;
  } else if (!strcmp(k, "trace_count")) {
    if (!clear) TRY(trace_int(v, k, -1, INT64_MAX, &x, e));
    r->st.count = clear ? -1 : x;
  } else if (!strcmp(k, "log_frequency")) {
    if (!clear && (trace_int(v, k, 0, 0, &x, e) != 0))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "log_frequency: only 0 (the trace file is written as spans come and completed at exit)");
  } else {
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "unknown trace setting '%s' (trace_file, trace_level, trace_rate, trace_count, log_frequency)", k);
  }
  return 0;
}

void srv_trace_setting(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__TraceSettingRequest *q = (Inference__TraceSettingRequest *)srv_unpack_or_fail(
      call, &inference__trace_setting_request__descriptor, req, len);
  if (!q) return;
  err e = {0};
  int rc = 0;
  if (*q->model_name)
    rc = err_set(&e, ERR_INVALID_ARGUMENT, "per-model trace settings are not supported (model '%s'): every "
                 "model is traced alike", q->model_name);
  else if (!s->trace && q->n_settings)
    rc = err_set(&e, ERR_FAILED_PRECONDITION, "tracing is off: start inferd with --trace-file to trace");
  trace_req r = {0};
  if (s->trace) prof_trace_settings_get(s->trace, &r.st);
  for (size_t i = 0; rc == 0 && i < q->n_settings; i++) rc = trace_setting_check(s, q->settings[i], &r, &e);
  if (rc == 0 && s->trace && q->n_settings) {
    rc = prof_trace_settings_set(s->trace, &r.st, &e);
    if (rc == 0)
      srv_log(SRV_LOG_INFO, "trace settings: level %s, rate %d, count %" PRId64, r.st.on ? "TIMESTAMPS" : "OFF",
              r.st.rate, r.st.count);
  }
  inference__trace_setting_request__free_unpacked(q, NULL);
  if (rc) {
    srv_call_fail(call, rc, e.msg);
    return;
  }

  prof_trace_settings st = {.rate = s->trace_rate, .on = 0, .count = -1};
  if (s->trace) prof_trace_settings_get(s->trace, &st);
  char rate[24], count[24];
  snprintf(rate, sizeof rate, "%d", st.rate);
  snprintf(count, sizeof count, "%" PRId64, st.count);
  char *vals[5] = {s->trace ? (char *)prof_trace_path(s->trace) : "", st.on ? "TIMESTAMPS" : "OFF", rate, count,
                   "0"};
  static const char *keys[5] = {"trace_file", "trace_level", "trace_rate", "trace_count", "log_frequency"};
  Inference__TraceSettingResponse__SettingValue val[5];
  Inference__TraceSettingResponse__SettingsEntry ent[5], *entp[5];
  for (int i = 0; i < 5; i++) {
    inference__trace_setting_response__setting_value__init(&val[i]);
    val[i].n_value = 1;
    val[i].value = &vals[i];
    inference__trace_setting_response__settings_entry__init(&ent[i]);
    ent[i].key = (char *)keys[i];
    ent[i].value = &val[i];
    entp[i] = &ent[i];
  }
  Inference__TraceSettingResponse resp = INFERENCE__TRACE_SETTING_RESPONSE__INIT;
  resp.n_settings = 5;
  resp.settings = entp;
  srv_reply_msg(call, &resp.base);
}
