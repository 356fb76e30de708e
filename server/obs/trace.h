// server/obs/trace.h: sampled request tracing written as Chrome trace events
// (JSON array format), so a run of `inferd --trace-file x.json --trace-rate N`
// opens in Perfetto (ui.perfetto.dev) and chrome://tracing.
//
// Every span becomes one Complete event ("ph":"X") with the batch id, batch
// size, instance, stream and device in "args". The first span seen on a
// (pid, tid) track also writes metadata events ("ph":"M") naming the process
// after the model and the thread after the instance and device, so the tracks
// read "mlp v1 / instance 0 (GPU 0)" without the caller naming them.
//
// All functions are safe to call from any thread concurrently (CQ threads,
// the loop thread, instance threads). Functions taking a prof_trace * accept
// NULL and then do nothing, so callers need no "is tracing on" branch.
#ifndef INFERD_SERVER_TRACE_H
#define INFERD_SERVER_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct prof_trace prof_trace;

// One stage of one request. Strings are borrowed for the duration of the
// call only; any of them may be NULL (written as ""). request_id comes from
// clients and may hold anything: it is escaped, invalid UTF-8 becomes U+FFFD,
// and it is cut at PROF_TRACE_STR_MAX bytes like every other string.
typedef struct prof_trace_span_info {
  const char *name;       // stage: "request", "queue", "compute_input", "compute_infer", "compute_output"
  int64_t start_us;       // CLOCK_MONOTONIC microseconds (prof_trace_now_us)
  int64_t end_us;         // same clock; end < start is written as a zero-length span
  const char *model;
  const char *version;
  const char *request_id;
  uint64_t batch_id;
  int batch_size;
  int instance;           // model instance index, -1 when not yet assigned (request, queue)
  int stream;             // CUDA stream index within the instance, -1 when none
  int device;             // GPU ordinal, -1 = CPU
  // Track the span is drawn on. Spans on one (pid, tid) must nest (Perfetto
  // drops partial overlaps): give each request a lane (prof_trace_lane).
  // Suggested: pid = the model's index in the repository.
  int pid;
  int tid;
} prof_trace_span_info;

// Strings longer than this (in bytes, before escaping) are cut.
#define PROF_TRACE_STR_MAX 256

// Opens (creates or truncates) path and writes the array's opening '['.
// rate >= 1: prof_trace_sample returns 1 for every rate-th call.
// Errors: ERR_INVALID_ARGUMENT naming the path when it cannot be opened, or
// when rate < 1. On success *out is owned by the caller (prof_trace_close).
int prof_trace_open(const char *path, int rate, prof_trace **out, err *e);

// Caps the file at max_bytes (0: no cap; main passes --trace-file-max-bytes):
// any client may turn sampling up through the trace settings API, and every
// request at rate 1 writes ~2 KB, so an uncapped file fills the disk. The
// event that would pass the cap is dropped, tracing turns off, and note (may
// be NULL) gets one message, once, under the trace's lock. Call before use.
void prof_trace_limit(prof_trace *t, uint64_t max_bytes, void (*note)(void *arg, const char *msg), void *arg);

// 1 for calls 1, rate+1, 2*rate+1, ... (the first request is always traced,
// so short runs still show something) while sampling is on and the count
// lasts, else 0. Lock-free; NULL gives 0.
int prof_trace_sample(prof_trace *t);

// Sampling settings (Triton's trace_rate, trace_level, trace_count), changed
// while serving; a change starts the rate's count afresh.
typedef struct prof_trace_settings {
  int rate;       // >= 1
  int on;         // 0: nothing is sampled
  int64_t count;  // samples still to take; -1 unlimited
} prof_trace_settings;
void prof_trace_settings_get(const prof_trace *t, prof_trace_settings *out);
int prof_trace_settings_set(prof_trace *t, const prof_trace_settings *s, err *e);
// The file given to prof_trace_open.
const char *prof_trace_path(const prof_trace *t);

// Appends one Complete event (plus track metadata the first time a track is
// seen). Never fails towards the caller: a write error is remembered and
// returned by prof_trace_flush / prof_trace_close.
void prof_trace_span(prof_trace *t, const prof_trace_span_info *s);

// A track for one sampled request's spans, [start_us, end_us] being its
// whole extent: requests running at the same time get different lanes, so
// no two spans on one track partially overlap (Perfetto drops such spans),
// and lanes are reused once free. Returns the tid to use (>= 
// PROF_TRACE_LANE_TID0, so it never collides with small instance tids).
#define PROF_TRACE_LANE_TID0 1000
int prof_trace_lane(prof_trace *t, int pid, int64_t start_us, int64_t end_us);

// Names a track explicitly (overrides the automatic names if called before
// the track's first span; later calls for a named track are ignored).
// process_name or thread_name may be NULL to leave that part automatic.
void prof_trace_name_track(prof_trace *t, int pid, int tid, const char *process_name,
                           const char *thread_name);

// Writes buffered events to the file (still without the closing ']').
// Returns the first write error seen so far, if any.
int prof_trace_flush(prof_trace *t, err *e);

// Writes the closing ']', closes the file and frees t (always, even on error).
// Returns the first write error seen over the file's life. NULL is a no-op.
int prof_trace_close(prof_trace *t, err *e);

// CLOCK_MONOTONIC in microseconds, the clock spans are expressed in.
int64_t prof_trace_now_us(void);

// Escapes src[0..len) as the inside of a JSON string into dst (NUL
// terminated, never more than cap bytes including the NUL; cut on a whole
// escape). Invalid UTF-8 becomes \ufffd, control characters \u00XX or \n etc.
// Returns the number of bytes written, not counting the NUL. Exposed for tests.
size_t prof_trace_escape(char *dst, size_t cap, const char *src, size_t len);

#ifdef __cplusplus
}
#endif

#endif
