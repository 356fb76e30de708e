// server/obs/gpumon.c: see gpumon.h. NVML's few entry points are declared here
// (the toolkit ships no nvml.h on every machine) with the ABI the driver has
// kept since NVML 1: opaque device handles, int return codes, 0 = success.
#include "server/obs/gpumon.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/obs/window.h"

typedef void *nvml_dev;
typedef struct {
  unsigned gpu, memory;
} nvml_util;
typedef struct {
  unsigned long long total, free, used;
} nvml_mem;

typedef struct nvml_api {
  void *lib;
  int (*init)(void);
  int (*shutdown)(void);
  int (*by_uuid)(const char *, nvml_dev *);
  int (*util)(nvml_dev, nvml_util *);
  int (*mem)(nvml_dev, nvml_mem *);
  int (*power)(nvml_dev, unsigned *);
  int (*power_limit)(nvml_dev, unsigned *);
} nvml_api;

typedef struct gpu {
  prof_gpu_info info;
  nvml_dev h;  // NULL: NVML does not know it
  pthread_mutex_t mu;
  int64_t busy_until_us;
  double busy_us;
  prof_window busy_win;  // busy microseconds per second
} gpu;

struct prof_gpus {
  int n;
  gpu *g;
  nvml_api nv;
  int nvml_up;
  char status[256];
};

static int load_nvml(prof_gpus *g) {
  nvml_api *a = &g->nv;
  a->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!a->lib) {
    const char *why = dlerror();
    snprintf(g->status, sizeof g->status, "NVML not loaded (%s): no GPU utilization/memory/power metrics",
             why ? why : "libnvidia-ml.so.1 not found");
    return -1;
  }
  // dlsym returns void *; POSIX guarantees the conversion to a function pointer
#define SYM(field, name) *(void **)(&a->field) = dlsym(a->lib, name)
  SYM(init, "nvmlInit_v2");
  SYM(shutdown, "nvmlShutdown");
  SYM(by_uuid, "nvmlDeviceGetHandleByUUID");
  SYM(util, "nvmlDeviceGetUtilizationRates");
  SYM(mem, "nvmlDeviceGetMemoryInfo");
  SYM(power, "nvmlDeviceGetPowerUsage");
  SYM(power_limit, "nvmlDeviceGetEnforcedPowerLimit");
#undef SYM
  if (!a->init || !a->shutdown || !a->by_uuid || !a->util || !a->mem || !a->power || !a->power_limit) {
    snprintf(g->status, sizeof g->status, "NVML lacks an entry point: no GPU metrics from it");
    return -1;
  }
  int rc = a->init();
  if (rc != 0) {
    snprintf(g->status, sizeof g->status, "nvmlInit failed (%d): no GPU metrics from NVML", rc);
    return -1;
  }
  g->nvml_up = 1;
  int found = 0;
  for (int i = 0; i < g->n; i++) {
    nvml_dev h = NULL;
    if (a->by_uuid(g->g[i].info.uuid, &h) != 0) {
      // a MIG instance's UUID goes by "MIG-" in NVML
      char alt[64];
      const char *u = g->g[i].info.uuid;
      snprintf(alt, sizeof alt, "MIG-%s", strncmp(u, "GPU-", 4) == 0 ? u + 4 : u);
      if (a->by_uuid(alt, &h) != 0) h = NULL;
    }
    g->g[i].h = h;
    found += h != NULL;
  }
  snprintf(g->status, sizeof g->status, "NVML loaded: %d of %d device(s) found", found, g->n);
  return 0;
}

int prof_gpus_create(const prof_gpu_info *devs, int n, prof_gpus **out, err *e) {
  prof_gpus *g = calloc(1, sizeof *g);
  if (!g) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  g->g = calloc((size_t)(n > 0 ? n : 1), sizeof *g->g);
  if (!g->g) {
    free(g);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  g->n = n;
  for (int i = 0; i < n; i++) {
    g->g[i].info = devs[i];
    pthread_mutex_init(&g->g[i].mu, NULL);
    prof_window_init(&g->g[i].busy_win);
  }
  if (n > 0) load_nvml(g);
  else snprintf(g->status, sizeof g->status, "no GPU: NVML not needed");
  *out = g;
  return 0;
}

void prof_gpus_destroy(prof_gpus *g) {
  if (!g) return;
  if (g->nvml_up) (void)g->nv.shutdown();
  if (g->nv.lib) dlclose(g->nv.lib);
  for (int i = 0; i < g->n; i++) {
    pthread_mutex_destroy(&g->g[i].mu);
    prof_window_destroy(&g->g[i].busy_win);
  }
  free(g->g);
  free(g);
}

int prof_gpus_n(const prof_gpus *g) { return g ? g->n : 0; }
const prof_gpu_info *prof_gpus_info(const prof_gpus *g, int dev) { return &g->g[dev].info; }
const char *prof_gpus_nvml_status(const prof_gpus *g) { return g->status; }

void prof_gpus_busy(prof_gpus *g, int dev, int64_t start_us, int64_t end_us) {
  if (!g || dev < 0 || dev >= g->n || end_us <= start_us) return;
  gpu *d = &g->g[dev];
  pthread_mutex_lock(&d->mu);
  int64_t from = start_us > d->busy_until_us ? start_us : d->busy_until_us;
  double add = end_us > from ? (double)(end_us - from) : 0;
  if (end_us > d->busy_until_us) d->busy_until_us = end_us;
  d->busy_us += add;
  pthread_mutex_unlock(&d->mu);
  if (add > 0) prof_window_add(&d->busy_win, end_us, add);
}

void prof_gpus_sample(prof_gpus *g, int dev, int64_t now_us, prof_gpu_sample *s) {
  *s = (prof_gpu_sample){.utilization = -1, .mem_total = -1, .mem_used = -1, .power_w = -1, .power_limit_w = -1};
  if (!g || dev < 0 || dev >= g->n) return;
  gpu *d = &g->g[dev];
  pthread_mutex_lock(&d->mu);
  s->busy_s = d->busy_us / 1e6;
  pthread_mutex_unlock(&d->mu);
  double f = prof_window_rate(&d->busy_win, now_us, 5) / 1e6;
  s->busy_fraction = f > 1 ? 1 : f;
  if (!g->nvml_up || !d->h) return;
  s->nvml = 1;
  nvml_util u;
  nvml_mem m;
  unsigned mw;
  if (g->nv.util(d->h, &u) == 0) s->utilization = u.gpu / 100.0;
  if (g->nv.mem(d->h, &m) == 0) {
    s->mem_total = (double)m.total;
    s->mem_used = (double)m.used;
  }
  if (g->nv.power(d->h, &mw) == 0) s->power_w = mw / 1000.0;
  if (g->nv.power_limit(d->h, &mw) == 0) s->power_limit_w = mw / 1000.0;
}
