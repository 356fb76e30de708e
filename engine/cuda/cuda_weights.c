// engine/cuda/cuda_weights.c: see cuda_weights.h.
#include "engine/cuda/cuda_weights.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_mem.h"
#include "kernels/base/dtype.h"
#include "kernels/k_ref.h"

typedef struct derived {
  const void *src;
  int kind;
  void *ptr;
  size_t bytes;
} derived;

struct eng_cuda_wset {
  eng_cuda_weights *owner;
  int device;
  bool half;
  int holders;
  eng_cuda_arena *arena;  // every constant, one block each
  void **ptr;             // per graph value
  size_t n_values;
  uint64_t bytes;
  derived *d;
  size_t n_d, cap_d;
  eng_cuda_wset *next;
};

struct eng_cuda_weights {
  const eng_graph *g;
  pthread_mutex_t mu;
  eng_cuda_wset *sets;
};

static size_t round_up(size_t n) { return (n + ENG_CUDA_MEM_ALIGN - 1) / ENG_CUDA_MEM_ALIGN * ENG_CUDA_MEM_ALIGN; }

int eng_cuda_weights_create(const eng_graph *g, eng_cuda_weights **out, err *e) {
  eng_cuda_weights *w = calloc(1, sizeof *w);
  if (!w) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  w->g = g;
  pthread_mutex_init(&w->mu, NULL);
  *out = w;
  return 0;
}

static void set_free(eng_cuda_wset *s) {
  if (!s) return;
  (void)cudaSetDevice(s->device);
  for (size_t i = 0; i < s->n_d; i++) (void)cudaFree(s->d[i].ptr);
  free(s->d);
  eng_cuda_arena_destroy(s->arena);
  free(s->ptr);
  free(s);
}

void eng_cuda_weights_destroy(eng_cuda_weights *w) {
  if (!w) return;
  while (w->sets) {
    eng_cuda_wset *s = w->sets;
    w->sets = s->next;
    set_free(s);
  }
  pthread_mutex_destroy(&w->mu);
  free(w);
}

// One arena for every constant, one block each, copied in; FP32 ones
// converted to FP16 on the host first in a half copy (the one conversion
// of the weights).
// The bytes value val takes on the device in s: half of an FP32 constant's in
// a half copy.
static size_t stored_bytes(const eng_cuda_wset *s, const eng_value *val) {
  return s->half && val->dt == DT_FP32 ? val->bytes / sizeof(float) * sizeof(uint16_t) : val->bytes;
}

static int upload(const eng_graph *g, eng_cuda_wset *s, err *e) {
  size_t total = 0, n = 0;
  for (size_t v = 0; v < s->n_values; v++) {
    const eng_value *val = eng_graph_value(g, v);
    if (val->kind == ENG_VALUE_CONST && val->bytes) {
      total += round_up(stored_bytes(s, val));
      n++;
    }
  }
  if (!n) return 0;
  // a block whose size is not a multiple of the alignment leaves a pad in
  // front of the next one: two bookkeeping slots per constant
  TRY(eng_cuda_arena_create(&s->arena, s->device, total + ENG_CUDA_MEM_ALIGN, 2 * (int)n + 4, e));
  s->bytes += total + ENG_CUDA_MEM_ALIGN;
  for (size_t v = 0; v < s->n_values; v++) {
    const eng_value *val = eng_graph_value(g, v);
    if (val->kind != ENG_VALUE_CONST || !val->bytes) continue;
    TRY(eng_cuda_arena_alloc(s->arena, stored_bytes(s, val), 0, &s->ptr[v], e));
    if (s->half && val->dt == DT_FP32) {
      size_t cnt = val->bytes / sizeof(float);
      uint16_t *h = malloc(cnt * sizeof *h + 1);
      if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory converting weights to FP16");
      k_f32_to_f16(h, val->data, cnt);
      int rc = CUDA_OK(e, cudaMemcpy(s->ptr[v], h, cnt * sizeof *h, cudaMemcpyHostToDevice));
      free(h);
      if (rc) return rc;
    } else {
      CUDA_TRY(e, cudaMemcpy(s->ptr[v], val->data, val->bytes, cudaMemcpyHostToDevice));
    }
  }
  return 0;
}

int eng_cuda_weights_acquire(eng_cuda_weights *w, int device, bool half, eng_cuda_wset **out, bool *uploaded,
                             err *e) {
  if (uploaded) *uploaded = false;
  pthread_mutex_lock(&w->mu);
  for (eng_cuda_wset *s = w->sets; s; s = s->next)
    if (s->device == device && s->half == half) {
      s->holders++;
      pthread_mutex_unlock(&w->mu);
      *out = s;
      return 0;
    }
  // uploaded under the lock: a second plan for this device waits for the
  // first one's copy instead of making its own (loading time only)
  int rc = 0;
  eng_cuda_wset *s = calloc(1, sizeof *s);
  size_t nv = eng_graph_n_values(w->g);
  if (!s || !(s->ptr = calloc(nv + 1, sizeof *s->ptr))) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    s->owner = w;
    s->device = device;
    s->half = half;
    s->n_values = nv;
    rc = CUDA_OK(e, cudaSetDevice(device));
    if (!rc) rc = upload(w->g, s, e);
  }
  if (rc) {
    pthread_mutex_unlock(&w->mu);
    set_free(s);
    err_prefix(e, "weights on GPU %d: ", device);
    return rc;
  }
  s->holders = 1;
  s->next = w->sets;
  w->sets = s;
  pthread_mutex_unlock(&w->mu);
  if (uploaded) *uploaded = true;
  *out = s;
  return 0;
}

void eng_cuda_weights_release(eng_cuda_weights *w, eng_cuda_wset *s) {
  if (!s) return;
  pthread_mutex_lock(&w->mu);
  if (--s->holders > 0) {
    pthread_mutex_unlock(&w->mu);
    return;
  }
  for (eng_cuda_wset **pp = &w->sets; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  pthread_mutex_unlock(&w->mu);
  set_free(s);
}

void *eng_cuda_wset_ptr(const eng_cuda_wset *s, size_t v) { return v < s->n_values ? s->ptr[v] : NULL; }

uint64_t eng_cuda_wset_bytes(const eng_cuda_wset *s) {
  pthread_mutex_lock(&s->owner->mu);
  uint64_t b = s->bytes;
  pthread_mutex_unlock(&s->owner->mu);
  return b;
}

int eng_cuda_wset_holders(const eng_cuda_wset *s) {
  pthread_mutex_lock(&s->owner->mu);
  int n = s->holders;
  pthread_mutex_unlock(&s->owner->mu);
  return n;
}

int eng_cuda_wset_derived(eng_cuda_wset *s, const void *src, int kind, size_t bytes, eng_cuda_wset_make_fn make,
                          void *ctx, void **out, int *made, err *e) {
  if (made) *made = 0;
  pthread_mutex_t *mu = &s->owner->mu;
  pthread_mutex_lock(mu);
  for (size_t i = 0; i < s->n_d; i++)
    if (s->d[i].src == src && s->d[i].kind == kind) {
      *out = s->d[i].ptr;
      pthread_mutex_unlock(mu);
      return 0;
    }
  int rc = 0;
  void *d = NULL;
  if (s->n_d == s->cap_d) {
    size_t cap = s->cap_d ? 2 * s->cap_d : 16;
    derived *nd = realloc(s->d, cap * sizeof *nd);
    if (!nd) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    else s->d = nd, s->cap_d = cap;
  }
  if (!rc) rc = CUDA_OK(e, cudaSetDevice(s->device));
  if (!rc) rc = CUDA_OK(e, cudaMalloc(&d, bytes ? bytes : 1));
  if (!rc) rc = make(d, src, ctx, e);
  if (rc) {
    if (d) (void)cudaFree(d);
    pthread_mutex_unlock(mu);
    return rc;
  }
  s->d[s->n_d++] = (derived){.src = src, .kind = kind, .ptr = d, .bytes = bytes};
  s->bytes += round_up(bytes ? bytes : 1);
  pthread_mutex_unlock(mu);
  if (made) *made = 1;
  *out = d;
  return 0;
}
