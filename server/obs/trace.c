// server/obs/trace.c: Chrome trace event writer for sampled requests (trace.h).
//
// Design: each caller formats its event into a buffer on its own stack, with
// no lock held, then takes one mutex only to copy the bytes into a 64 KiB
// buffer (and, once per ~64 KiB, to write that buffer to the file).
// Why not a lock-free queue drained by a writer thread: with --trace-rate N
// only every Nth request reaches this code (about 5 spans per request), so
// the mutex is uncontended in practice; the critical section is a memcpy of
// ~300 bytes (tens of ns), and a write(2) of 64 KiB into the page cache
// every ~200 events costs a few tens of µs, bounded and rare. A writer
// thread would add a thread to start and join, a queue to size and a
// policy for when it is full, for no gain at these rates. Measured on the
// 2-core dev box (-O2, every span written, test_trace prints it): about
// 0.3-0.5 µs per span on one thread, formatting included (printf is avoided
// on this path: it was half the cost), and 0.9-1.4 µs with 4 threads on 2
// cores, where the extra is mostly oversubscription, not the lock.
#include "server/obs/trace.h"

#include "kernels/base/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { PATH_MAX_MSG = 384 };

// ---------------------------------------------------------------------------
// sizes

#define WBUF_CAP (64 * 1024)
// Worst case of one event: 4 strings of PROF_TRACE_STR_MAX bytes each turned
// into 6-byte escapes, plus fixed text and numbers (< 600 bytes).
#define EVENT_CAP (4 * (PROF_TRACE_STR_MAX * 6 + 1) + 1024)
// Tracks and processes remembered for naming; beyond this they go unnamed
// (the events are still written). Models x instances stays far below.
#define MAX_TRACKS 1024
#define MAX_PROCS 256
// Request lanes per process (prof_trace_lane); beyond this, the lane that
// frees first is shared.
#define MAX_LANES 64

typedef struct track {
  int pid, tid;
} track;

struct prof_trace {
  int fd;
  // sampling, changed while serving through the TraceSetting RPC
  atomic_int rate;
  atomic_int on;                  // trace_level TIMESTAMPS (1) or OFF (0)
  atomic_int_fast64_t left;       // trace_count: samples still to take, -1 unlimited
  atomic_uint_fast64_t calls;     // prof_trace_sample's counter

  pthread_mutex_t mu;  // guards everything below
  char *path;
  char *wbuf;
  size_t wlen;
  uint64_t nevents;  // events appended so far (decides the ",\n" separator)
  uint64_t written;    // bytes appended so far (buffered ones included)
  uint64_t max_bytes;  // prof_trace_limit's cap on the file; 0: none
  int full;            // an event met the cap: no more are written
  void (*note)(void *arg, const char *msg);
  void *note_arg;
  err werr;          // first write error; later writes are dropped
  int nprocs, ntracks;
  int procs[MAX_PROCS];
  track tracks[MAX_TRACKS];
  struct {
    int pid, n;
    int64_t busy_until[MAX_LANES];
  } lanes[MAX_PROCS];
  int nlane_procs;
};

// ---------------------------------------------------------------------------
// JSON string escaping

size_t prof_trace_escape(char *dst, size_t cap, const char *src, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)src;
  size_t o = 0, i = 0;
  if (cap == 0) return 0;
  while (i < len) {
    // Fast path: a run of printable ASCII needing no escape is copied at once.
    size_t run = i;
    while (run < len && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\') run++;
    if (run > i) {
      size_t n = run - i;
      if (n > cap - 1 - o) n = cap - 1 - o;
      memcpy(dst + o, s + i, n);
      o += n;
      i += n;
      if (i < run) break;  // out of room
      continue;
    }
    char tmp[8];
    size_t tn = 0, adv = 1;
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      tmp[tn++] = '\\';
      tmp[tn++] = (char)c;
    } else if (c < 0x20) {
      tmp[tn++] = '\\';
      switch (c) {
        case '\n': tmp[tn++] = 'n'; break;
        case '\r': tmp[tn++] = 'r'; break;
        case '\t': tmp[tn++] = 't'; break;
        case '\b': tmp[tn++] = 'b'; break;
        case '\f': tmp[tn++] = 'f'; break;
        default:
          tmp[tn++] = 'u';
          tmp[tn++] = '0';
          tmp[tn++] = '0';
          tmp[tn++] = hex[c >> 4];
          tmp[tn++] = hex[c & 15];
      }
    } else if (c < 0x80) {
      tmp[tn++] = (char)c;
    } else {
      adv = utf8_seq_len(s + i, len - i);
      if (adv == 0) {
        // One replacement per bad byte: simple, and resynchronises at the
        // next lead byte.
        memcpy(tmp, "\\ufffd", 6);
        tn = 6;
        adv = 1;
      } else {
        memcpy(tmp, s + i, adv);
        tn = adv;
      }
    }
    if (o + tn + 1 > cap) break;  // cut on a whole escape / code point
    memcpy(dst + o, tmp, tn);
    o += tn;
    i += adv;
  }
  dst[o] = '\0';
  return o;
}

// ---------------------------------------------------------------------------
// event formatting (no lock held)

typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  // EVENT_CAP is sized for the worst case, so a cut means a bug; clamp anyway.
  if (n < 0) return;
  if ((size_t)n >= b->cap - b->len) n = (int)(b->cap - b->len - 1);
  b->len += (size_t)n;
}

static void sb_str(sbuf *b, const char *s) {
  if (!s) s = "";
  size_t n = strnlen(s, PROF_TRACE_STR_MAX);
  if (b->cap - b->len < 3) return;
  b->p[b->len++] = '"';
  b->len += prof_trace_escape(b->p + b->len, b->cap - b->len - 1, s, n);
  b->p[b->len++] = '"';
  b->p[b->len] = '\0';
}

static void fmt_meta(sbuf *b, const char *what, int pid, int tid, const char *name) {
  sb_printf(b, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", what,
            pid, tid);
  sb_str(b, name);
  sb_printf(b, "}}");
}

// The span path avoids printf: the literals are copied and the numbers
// converted by hand, which halves the cost of a span (measured in test_trace).
static void sb_lit(sbuf *b, const char *lit, size_t n) {
  if (b->cap - b->len <= n) return;  // cannot happen with EVENT_CAP; stay in bounds anyway
  memcpy(b->p + b->len, lit, n);
  b->len += n;
  b->p[b->len] = '\0';
}
#define SB_LIT(b, s) sb_lit((b), (s), sizeof(s) - 1)

static void sb_u64(sbuf *b, uint64_t v, int neg) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  if (neg) tmp[sizeof tmp - 1 - n++] = '-';
  sb_lit(b, tmp + sizeof tmp - n, n);
}

static void sb_i64(sbuf *b, int64_t v) {
  // Negate in unsigned arithmetic so INT64_MIN does not overflow.
  sb_u64(b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

static void sb_batch_id(sbuf *b, uint64_t v) { sb_u64(b, v, 0); }

// A span's fields after its time, in the order written: the key's literal
// (with the comma before it), what writes the value, and the field. A list
// that fmt_span expands into straight-line code, so every literal stays a
// constant-size copy (a loop over a table cost 16% more instructions per
// span, measured with callgrind).
#define SPAN_ARGS(X)                              \
  X(",\"pid\":", sb_i64, pid)                     \
  X(",\"tid\":", sb_i64, tid)                     \
  X(",\"args\":{\"model\":", sb_str, model)       \
  X(",\"version\":", sb_str, version)             \
  X(",\"request_id\":", sb_str, request_id)       \
  X(",\"batch_id\":", sb_batch_id, batch_id)      \
  X(",\"batch_size\":", sb_i64, batch_size)       \
  X(",\"instance\":", sb_i64, instance)           \
  X(",\"stream\":", sb_i64, stream)               \
  X(",\"device\":", sb_i64, device)

static void fmt_span(sbuf *b, const prof_trace_span_info *s) {
  int64_t dur = s->end_us - s->start_us;
  if (dur < 0) dur = 0;
  SB_LIT(b, "{\"name\":");
  sb_str(b, s->name);
  SB_LIT(b, ",\"cat\":\"inferd\",\"ph\":\"X\",\"ts\":");
  sb_i64(b, s->start_us);
  SB_LIT(b, ",\"dur\":");
  sb_i64(b, dur);
#define SPAN_ARG(lit, write, field) \
  SB_LIT(b, lit);                   \
  write(b, s->field);
  SPAN_ARGS(SPAN_ARG)
#undef SPAN_ARG
  SB_LIT(b, "}}");
}

// ---------------------------------------------------------------------------
// buffered writer (mutex held)

static void write_all_locked(prof_trace *t, const char *p, size_t n) {
  while (n > 0 && t->werr.code == ERR_OK) {
    ssize_t w = write(t->fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      err_set(&t->werr, ERR_INTERNAL, "writing trace file '%s': %s", t->path, strerror(errno));
      return;
    }
    p += w;
    n -= (size_t)w;
  }
}

static void flush_locked(prof_trace *t) {
  write_all_locked(t, t->wbuf, t->wlen);
  t->wlen = 0;
}

static void append_locked(prof_trace *t, const char *p, size_t n) {
  if (t->werr.code != ERR_OK) return;
  if (t->wlen + n > WBUF_CAP) flush_locked(t);
  if (n > WBUF_CAP) {
    write_all_locked(t, p, n);
    return;
  }
  memcpy(t->wbuf + t->wlen, p, n);
  t->wlen += n;
}

// 1 when n more bytes would take the file past its cap (the closing "\n]\n"
// kept in reserve, so the file stays valid JSON when closed). The first
// time, tracing is turned off (prof_trace_sample then costs one load) and
// one line says so; a client turning it on again gets nothing written.
static int over_cap_locked(prof_trace *t, size_t n) {
  if (!t->max_bytes || t->written + n + 3 <= t->max_bytes) return 0;
  if (!t->full) {
    t->full = 1;
    atomic_store(&t->on, 0);
    if (t->note) {
      char msg[PATH_MAX_MSG];
      snprintf(msg, sizeof msg,
               "trace file '%.200s' reached --trace-file-max-bytes (%llu bytes): tracing stopped, no more events "
               "are written (restart, or move the file and restart, to trace again)",
               t->path, (unsigned long long)t->max_bytes);
      t->note(t->note_arg, msg);
    }
  }
  return 1;
}

// Appends one event with its separator. Events are formatted with a leading
// ",\n" placeholder slot so the separator costs no second copy.
static void append_event_locked(prof_trace *t, sbuf *b) {
  // b->p[0..2) is reserved for the separator.
  const char *p = b->p;
  size_t n = b->len;
  if (t->nevents == 0) {
    p += 1;  // "\n" only
    n -= 1;
  }
  if (over_cap_locked(t, n)) return;
  append_locked(t, p, n);
  t->written += n;
  t->nevents++;
}

static void sb_begin(sbuf *b, char *mem, size_t cap) {
  b->p = mem;
  b->cap = cap;
  b->p[0] = ',';
  b->p[1] = '\n';
  b->p[2] = '\0';
  b->len = 2;
}

// Whether the process / track was named already; with add, marks it named.
// A full table reads as "named" so the caller stops trying (events are still
// written, only unnamed).
static int proc_seen_locked(prof_trace *t, int pid, int add) {
  for (int i = 0; i < t->nprocs; i++)
    if (t->procs[i] == pid) return 1;
  if (t->nprocs == MAX_PROCS) return 1;
  if (add) t->procs[t->nprocs++] = pid;
  return 0;
}

static int track_seen_locked(prof_trace *t, int pid, int tid, int add) {
  for (int i = 0; i < t->ntracks; i++)
    if (t->tracks[i].pid == pid && t->tracks[i].tid == tid) return 1;
  if (t->ntracks == MAX_TRACKS) return 1;
  if (add) {
    t->tracks[t->ntracks].pid = pid;
    t->tracks[t->ntracks].tid = tid;
    t->ntracks++;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// public API

int64_t prof_trace_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int prof_trace_open(const char *path, int rate, prof_trace **out, err *e) {
  *out = NULL;
  if (!path || !*path) return err_set(e, ERR_INVALID_ARGUMENT, "trace file path is empty");
  if (rate < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "trace rate for '%s' must be >= 1, got %d", path,
                   rate);
  prof_trace *t = calloc(1, sizeof *t);
  if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory opening trace '%s'", path);
  t->fd = -1;
  atomic_init(&t->rate, rate);
  atomic_init(&t->on, 1);
  atomic_init(&t->left, -1);
  atomic_init(&t->calls, 0);
  t->path = strdup(path);
  t->wbuf = malloc(WBUF_CAP);
  if (!t->path || !t->wbuf) {
    free(t->path);
    free(t->wbuf);
    free(t);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory opening trace '%s'", path);
  }
  int rc = pthread_mutex_init(&t->mu, NULL);
  if (rc != 0) {
    free(t->path);
    free(t->wbuf);
    free(t);
    return err_set(e, ERR_INTERNAL, "trace '%s': pthread_mutex_init: %s", path, strerror(rc));
  }
  t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (t->fd < 0) {
    int en = errno;
    pthread_mutex_destroy(&t->mu);
    free(t->path);
    free(t->wbuf);
    free(t);
    return err_set(e, ERR_INVALID_ARGUMENT, "cannot open trace file '%s': %s", path,
                   strerror(en));
  }
  // The opening bracket goes straight out so a file that is never closed
  // (crash) is still the array format's valid prefix, which chrome://tracing
  // and Perfetto accept without the closing ']'.
  t->wbuf[0] = '[';
  t->wlen = 1;
  t->written = 1;
  *out = t;
  return 0;
}

void prof_trace_limit(prof_trace *t, uint64_t max_bytes, void (*note)(void *arg, const char *msg), void *arg) {
  pthread_mutex_lock(&t->mu);
  t->max_bytes = max_bytes;
  t->note = note;
  t->note_arg = arg;
  pthread_mutex_unlock(&t->mu);
}

int prof_trace_sample(prof_trace *t) {
  if (!t || !atomic_load_explicit(&t->on, memory_order_relaxed)) return 0;
  uint_fast64_t n = atomic_fetch_add_explicit(&t->calls, 1, memory_order_relaxed);
  if (n % (uint_fast64_t)atomic_load_explicit(&t->rate, memory_order_relaxed) != 0) return 0;
  // a count, when set, is spent one sample at a time and never below zero
  int_fast64_t left = atomic_load_explicit(&t->left, memory_order_relaxed);
  while (left >= 0) {
    if (left == 0) return 0;
    if (atomic_compare_exchange_weak_explicit(&t->left, &left, left - 1, memory_order_relaxed,
                                              memory_order_relaxed))
      return 1;
  }
  return 1;
}

void prof_trace_settings_get(const prof_trace *t, prof_trace_settings *out) {
  prof_trace *m = (prof_trace *)t;
  out->rate = atomic_load(&m->rate);
  out->on = atomic_load(&m->on);
  out->count = atomic_load(&m->left);
}

int prof_trace_settings_set(prof_trace *t, const prof_trace_settings *s, err *e) {
  if (s->rate < 1) return err_set(e, ERR_INVALID_ARGUMENT, "trace rate must be >= 1, got %d", s->rate);
  if (s->count < -1) return err_set(e, ERR_INVALID_ARGUMENT, "trace count must be >= -1, got %lld", (long long)s->count);
  atomic_store(&t->rate, s->rate);
  atomic_store(&t->left, s->count);
  // a new rate starts counting afresh, so its first request is traced
  atomic_store(&t->calls, 0);
  atomic_store(&t->on, s->on != 0);
  return 0;
}

const char *prof_trace_path(const prof_trace *t) { return t->path; }

void prof_trace_name_track(prof_trace *t, int pid, int tid, const char *process_name,
                           const char *thread_name) {
  if (!t) return;
  char mem[2 * (PROF_TRACE_STR_MAX * 6 + 1) + 512];
  sbuf pb, tb;
  // Formatted before taking the lock; thrown away if the track is known.
  sb_begin(&pb, mem, sizeof mem / 2);
  sb_begin(&tb, mem + sizeof mem / 2, sizeof mem / 2);
  if (process_name) fmt_meta(&pb, "process_name", pid, 0, process_name);
  if (thread_name) fmt_meta(&tb, "thread_name", pid, tid, thread_name);
  pthread_mutex_lock(&t->mu);
  if (process_name && !proc_seen_locked(t, pid, 1)) append_event_locked(t, &pb);
  if (thread_name && !track_seen_locked(t, pid, tid, 1)) append_event_locked(t, &tb);
  pthread_mutex_unlock(&t->mu);
}

int prof_trace_lane(prof_trace *t, int pid, int64_t start_us, int64_t end_us) {
  if (!t) return PROF_TRACE_LANE_TID0;
  pthread_mutex_lock(&t->mu);
  int p = 0;
  while (p < t->nlane_procs && t->lanes[p].pid != pid) p++;
  if (p == t->nlane_procs) {
    if (p == MAX_PROCS) {
      pthread_mutex_unlock(&t->mu);
      return PROF_TRACE_LANE_TID0;
    }
    t->lanes[p].pid = pid;
    t->lanes[p].n = 0;
    t->nlane_procs++;
  }
  // The first lane whose spans all ended by start_us; else a new one; else
  // (all MAX_LANES taken) the one that frees first.
  int k = -1, first_free = 0;
  for (int i = 0; i < t->lanes[p].n && k < 0; i++)
    if (t->lanes[p].busy_until[i] <= start_us) k = i;
  if (k < 0 && t->lanes[p].n < MAX_LANES) k = t->lanes[p].n++;
  if (k < 0) {
    for (int i = 1; i < MAX_LANES; i++)
      if (t->lanes[p].busy_until[i] < t->lanes[p].busy_until[first_free]) first_free = i;
    k = first_free;
  }
  if (end_us > t->lanes[p].busy_until[k]) t->lanes[p].busy_until[k] = end_us;
  pthread_mutex_unlock(&t->mu);
  return PROF_TRACE_LANE_TID0 + k;
}

void prof_trace_span(prof_trace *t, const prof_trace_span_info *s) {
  if (!t || !s) return;
  char mem[EVENT_CAP];
  sbuf b;
  sb_begin(&b, mem, sizeof mem);
  fmt_span(&b, s);

  // Common case: the track is named already, one lock for check and append.
  pthread_mutex_lock(&t->mu);
  int need_proc = !proc_seen_locked(t, s->pid, 0);
  int need_track = !track_seen_locked(t, s->pid, s->tid, 0);
  if (!need_proc && !need_track) {
    append_event_locked(t, &b);
    pthread_mutex_unlock(&t->mu);
    return;
  }
  pthread_mutex_unlock(&t->mu);

  // First span on a new track: name it automatically (rare, so formatting
  // twice under a race is fine; name_track dedupes under the lock).
  char pname[2 * PROF_TRACE_STR_MAX + 8], tname[64];
  snprintf(pname, sizeof pname, "%.*s v%.*s", PROF_TRACE_STR_MAX, s->model ? s->model : "",
           PROF_TRACE_STR_MAX, s->version ? s->version : "");
  if (s->instance < 0)
    snprintf(tname, sizeof tname, "requests");
  else if (s->device < 0)
    snprintf(tname, sizeof tname, "instance %d (CPU)", s->instance);
  else
    snprintf(tname, sizeof tname, "instance %d (GPU %d)", s->instance, s->device);
  prof_trace_name_track(t, s->pid, s->tid, need_proc ? pname : NULL, need_track ? tname : NULL);

  pthread_mutex_lock(&t->mu);
  append_event_locked(t, &b);
  pthread_mutex_unlock(&t->mu);
}

int prof_trace_flush(prof_trace *t, err *e) {
  if (!t) return 0;
  pthread_mutex_lock(&t->mu);
  flush_locked(t);
  int rc = t->werr.code;
  if (rc && e) *e = t->werr;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int prof_trace_close(prof_trace *t, err *e) {
  if (!t) return 0;
  pthread_mutex_lock(&t->mu);
  append_locked(t, "\n]\n", 3);
  flush_locked(t);
  pthread_mutex_unlock(&t->mu);
  if (close(t->fd) != 0 && t->werr.code == ERR_OK)
    err_set(&t->werr, ERR_INTERNAL, "closing trace file '%s': %s", t->path, strerror(errno));
  int rc = t->werr.code;
  if (rc && e) *e = t->werr;
  pthread_mutex_destroy(&t->mu);
  free(t->path);
  free(t->wbuf);
  free(t);
  return rc;
}
