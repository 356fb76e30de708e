// model.c: a model version's instances. Each instance is a thread owning a
// plan (its own arena), fed through a one-slot mailbox: the batcher never
// hands an instance a second batch before the first one's done callback.
#include "engine/model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/plan.h"
#if INFERD_HAVE_CUDA
#include "engine/plan_cuda.h"
#endif

typedef struct instance {
  eng_model *model;
  int index;
  int device;  // CUDA ordinal, -1 on the CPU
  eng_plan *plan;
#if INFERD_HAVE_CUDA
  eng_cuda_plan *cuda_plan;
#endif
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  eng_job *job;  // guarded by mu
  int stop;      // guarded by mu
} instance;

typedef struct binding {
  eng_io client;         // what the client sends/receives (no batch dim)
  int has_reshape;
  int n_model_dims;      // the graph's view when the config reshapes
  int64_t model_dims[ENG_MAX_DIMS];
  size_t graph_index;
} binding;

struct eng_model {
  eng_graph *graph;
  int max_batch;
  binding *in, *out;
  size_t n_in, n_out;
  size_t n_graph_in, n_graph_out;
  int *graph_in_to_cfg;  // per graph input, the config input feeding it
  instance *inst;
  int n_inst;
};

int64_t eng_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// --- binding the config's tensors to the graph's

static int bind_tensor(binding *b, const char *name, Inference__DataType dt, size_t n_dims,
                       const int64_t *dims, const Inference__ModelTensorReshape *reshape,
                       const eng_graph *g, int is_input, err *e) {
  size_t n = is_input ? eng_graph_n_inputs(g) : eng_graph_n_outputs(g);
  memset(b, 0, sizeof *b);
  size_t gi = n;
  for (size_t i = 0; i < n; i++) {
    const eng_io *io = is_input ? eng_graph_input(g, i) : eng_graph_output(g, i);
    if (strcmp(io->name, name) == 0) gi = i;
  }
  if (gi == n)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' of the config is not in the model",
                   is_input ? "input" : "output", name);
  if (n_dims > ENG_MAX_DIMS - 1 || (reshape && reshape->n_shape > ENG_MAX_DIMS - 1))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' has more than %d dims", is_input ? "input" : "output",
                   name, ENG_MAX_DIMS - 1);
  snprintf(b->client.name, sizeof b->client.name, "%s", name);
  b->client.dt = (dtype)dt;
  b->client.ndims = (int)n_dims;
  memcpy(b->client.dims, dims, n_dims * sizeof *dims);
  b->graph_index = gi;
  if (reshape) {
    b->has_reshape = 1;
    b->n_model_dims = (int)reshape->n_shape;
    memcpy(b->model_dims, reshape->shape, reshape->n_shape * sizeof *reshape->shape);
  }
  return 0;
}

static int bind_all(eng_model *m, const Inference__ModelConfig *cfg, err *e) {
  const eng_graph *g = m->graph;
  m->n_in = cfg->n_input;
  m->n_out = cfg->n_output;
  m->n_graph_in = eng_graph_n_inputs(g);
  m->n_graph_out = eng_graph_n_outputs(g);
  m->in = calloc(m->n_in ? m->n_in : 1, sizeof *m->in);
  m->out = calloc(m->n_out ? m->n_out : 1, sizeof *m->out);
  m->graph_in_to_cfg = calloc(m->n_graph_in ? m->n_graph_in : 1, sizeof *m->graph_in_to_cfg);
  if (!m->in || !m->out || !m->graph_in_to_cfg) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < m->n_in; i++) {
    const Inference__ModelInput *ci = cfg->input[i];
    TRY(bind_tensor(&m->in[i], ci->name, ci->data_type, ci->n_dims, ci->dims, ci->reshape, g, 1, e));
  }
  for (size_t i = 0; i < m->n_out; i++) {
    const Inference__ModelOutput *co = cfg->output[i];
    TRY(bind_tensor(&m->out[i], co->name, co->data_type, co->n_dims, co->dims, co->reshape, g, 0, e));
  }
  for (size_t gi = 0; gi < m->n_graph_in; gi++) {
    m->graph_in_to_cfg[gi] = -1;
    for (size_t i = 0; i < m->n_in; i++)
      if (m->in[i].graph_index == gi) m->graph_in_to_cfg[gi] = (int)i;
    if (m->graph_in_to_cfg[gi] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "model input '%s' is missing from the config",
                     eng_graph_input(g, gi)->name);
  }
  return 0;
}

// --- running one job on an instance thread

static void set_shape(eng_tensor *t, int64_t rows, int batched, int nd, const int64_t *dims) {
  t->ndims = 0;
  if (batched) t->dims[t->ndims++] = rows;
  for (int d = 0; d < nd; d++) t->dims[t->ndims++] = dims[d];
}

static void run_job(instance *in, eng_job *job) {
  eng_model *m = in->model;
  eng_tensor gin[ENG_MAX_DIMS * 4];
  eng_tensor *gin_p = m->n_graph_in <= sizeof gin / sizeof gin[0] ? gin : calloc(m->n_graph_in, sizeof *gin_p);
  eng_tensor gout_s[ENG_MAX_DIMS * 4];
  eng_tensor *gout = m->n_graph_out <= sizeof gout_s / sizeof gout_s[0] ? gout_s : calloc(m->n_graph_out, sizeof *gout);
  eng_tensor cout_s[ENG_MAX_DIMS * 4];
  eng_tensor *cout = m->n_out <= sizeof cout_s / sizeof cout_s[0] ? cout_s : calloc(m->n_out ? m->n_out : 1, sizeof *cout);
  err e = {0};
  int rc = 0;
  job->t_start_us = job->t_infer_start_us = job->t_infer_end_us = eng_now_us();
  if (!gin_p || !gout || !cout) {
    rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  if (job->prepare && (rc = job->prepare(job, &e)) != 0) goto done;
  int batched = m->max_batch > 0;
  for (size_t gi = 0; gi < m->n_graph_in; gi++) {
    const binding *b = &m->in[m->graph_in_to_cfg[gi]];
    gin_p[gi] = job->inputs[m->graph_in_to_cfg[gi]];
    if (b->has_reshape) set_shape(&gin_p[gi], job->rows, batched, b->n_model_dims, b->model_dims);
  }
  job->t_infer_start_us = eng_now_us();
#if INFERD_HAVE_CUDA
  if (in->cuda_plan) rc = eng_cuda_plan_run(in->cuda_plan, gin_p, m->n_graph_in, gout, m->n_graph_out, &e);
  else
#endif
    rc = eng_plan_run(in->plan, gin_p, m->n_graph_in, gout, m->n_graph_out, &e);
  job->t_infer_end_us = eng_now_us();
  if (rc == 0) {
    for (size_t i = 0; i < m->n_out; i++) {
      const binding *b = &m->out[i];
      cout[i] = gout[b->graph_index];
      if (b->has_reshape) set_shape(&cout[i], job->rows, batched, b->client.ndims, b->client.dims);
    }
  }
done:
  job->done(job, rc, &e, rc == 0 ? cout : NULL, rc == 0 ? m->n_out : 0);
  if (gin_p != gin) free(gin_p);
  if (gout != gout_s) free(gout);
  if (cout != cout_s) free(cout);
}

static void *instance_main(void *arg) {
  instance *in = arg;
  for (;;) {
    pthread_mutex_lock(&in->mu);
    while (!in->job && !in->stop) pthread_cond_wait(&in->cv, &in->mu);
    eng_job *job = in->job;
    in->job = NULL;
    int stop = in->stop;
    pthread_mutex_unlock(&in->mu);
    if (job) run_job(in, job);
    else if (stop) return NULL;
  }
}

// --- lifecycle

// The instances the config asks for: per group, `count` on the CPU, or
// `count` on each listed GPU (every visible one when `gpus` is empty).
// KIND_AUTO has been resolved by the caller (registry) by then.
static int instance_devices(const Inference__ModelConfig *cfg, int n_gpus, int **out, int *n_out, err *e) {
  int n = 0;
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    const Inference__ModelInstanceGroup *ig = cfg->instance_group[i];
    int per = ig->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU ? (ig->n_gpus ? (int)ig->n_gpus : n_gpus) : 1;
    n += ig->count * per;
  }
  if (cfg->n_instance_group == 0) n = 1;
  if (n < 1 || n > 1024) return err_set(e, ERR_INVALID_ARGUMENT, "instance_group: %d instances requested (1..1024)", n);
  int *dev = calloc((size_t)n, sizeof *dev);
  if (!dev) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int k = 0;
  if (cfg->n_instance_group == 0) dev[k++] = -1;
  for (size_t i = 0; i < cfg->n_instance_group; i++) {
    const Inference__ModelInstanceGroup *ig = cfg->instance_group[i];
    if (ig->kind != INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU) {
      for (int c = 0; c < ig->count; c++) dev[k++] = -1;
      continue;
    }
    if (n_gpus == 0) {
      free(dev);
      return err_set(e, ERR_INVALID_ARGUMENT, "instance_group '%s': KIND_GPU but no CUDA device is visible",
                     ig->name ? ig->name : "");
    }
    int ng = ig->n_gpus ? (int)ig->n_gpus : n_gpus;
    for (int gi = 0; gi < ng; gi++) {
      int d = ig->n_gpus ? ig->gpus[gi] : gi;
      if (d < 0 || d >= n_gpus) {
        free(dev);
        return err_set(e, ERR_INVALID_ARGUMENT, "instance_group '%s': gpu %d is not visible (%d device(s))",
                       ig->name ? ig->name : "", d, n_gpus);
      }
      for (int c = 0; c < ig->count; c++) dev[k++] = d;
    }
  }
  *out = dev;
  *n_out = n;
  return 0;
}

static int create_plan(instance *in, const eng_graph *g, int max_batch, err *e) {
  if (in->device < 0) return eng_plan_create(g, max_batch, &in->plan, e);
#if INFERD_HAVE_CUDA
  return eng_cuda_plan_create(g, max_batch, in->device, &in->cuda_plan, e);
#else
  return err_set(e, ERR_UNIMPLEMENTED, "this inferd was built without CUDA");
#endif
}

int eng_model_create(eng_graph *g, const Inference__ModelConfig *cfg, int n_gpus, eng_model **out, err *e) {
  eng_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  m->graph = g;
  m->max_batch = cfg->max_batch_size;
  int rc = bind_all(m, cfg, e);
  int *dev = NULL, n = 0;
  if (rc == 0) rc = instance_devices(cfg, n_gpus, &dev, &n, e);
  if (rc == 0 && !(m->inst = calloc((size_t)n, sizeof *m->inst)))
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; rc == 0 && i < n; i++) {
    instance *in = &m->inst[i];
    in->model = m;
    in->index = i;
    in->device = dev[i];
    rc = create_plan(in, g, m->max_batch, e);
    if (rc) {
      err_prefix(e, "instance %d (%s%d): ", i, in->device < 0 ? "CPU" : "GPU ", in->device < 0 ? 0 : in->device);
      break;
    }
    m->n_inst++;
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cv, NULL);
    if (pthread_create(&in->thread, NULL, instance_main, in) != 0) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start instance thread %d", i);
      break;
    }
    in->started = 1;
  }
  free(dev);
  if (rc) {
    m->graph = NULL;  // the caller keeps the graph on failure
    eng_model_destroy(m);
    return rc;
  }
  *out = m;
  return 0;
}

int eng_model_instance_device(const eng_model *m, int instance) {
  return instance >= 0 && instance < m->n_inst ? m->inst[instance].device : -1;
}

int eng_model_n_gpu_instances(const eng_model *m) {
  int n = 0;
  for (int i = 0; i < m->n_inst; i++) n += m->inst[i].device >= 0;
  return n;
}

void eng_model_destroy(eng_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_inst; i++) {
    instance *in = &m->inst[i];
    if (in->started) {
      pthread_mutex_lock(&in->mu);
      in->stop = 1;
      pthread_cond_signal(&in->cv);
      pthread_mutex_unlock(&in->mu);
      pthread_join(in->thread, NULL);
    }
    eng_plan_destroy(in->plan);
#if INFERD_HAVE_CUDA
    eng_cuda_plan_destroy(in->cuda_plan);
#endif
    pthread_mutex_destroy(&in->mu);
    pthread_cond_destroy(&in->cv);
  }
  free(m->inst);
  free(m->in);
  free(m->out);
  free(m->graph_in_to_cfg);
  if (m->graph) eng_graph_destroy(m->graph);
  free(m);
}

int eng_model_submit(eng_model *m, int instance_index, eng_job *job, err *e) {
  if (instance_index < 0 || instance_index >= m->n_inst)
    return err_set(e, ERR_INTERNAL, "no instance %d", instance_index);
  instance *in = &m->inst[instance_index];
  pthread_mutex_lock(&in->mu);
  int busy = in->job != NULL;
  if (!busy) {
    in->job = job;
    pthread_cond_signal(&in->cv);
  }
  pthread_mutex_unlock(&in->mu);
  if (busy) return err_set(e, ERR_INTERNAL, "instance %d already has a job", instance_index);
  return 0;
}

int eng_model_n_instances(const eng_model *m) { return m->n_inst; }
int eng_model_max_batch(const eng_model *m) { return m->max_batch; }
size_t eng_model_n_inputs(const eng_model *m) { return m->n_in; }
const eng_io *eng_model_input(const eng_model *m, size_t i) { return &m->in[i].client; }
size_t eng_model_n_outputs(const eng_model *m) { return m->n_out; }
const eng_io *eng_model_output(const eng_model *m, size_t i) { return &m->out[i].client; }
