// lattarget.c: the latency-target policy (lattarget.h says the rule). The
// comments here say why the numbers are what they are.
#include "batcher/lattarget.h"

#include <math.h>
#include <stdlib.h>

// Share of the target kept in reserve: predictions are estimates, the
// clock the server keeps is not the client's, and a p99 target allows
// only one request in a hundred over it.
#define MARGIN 0.1
// Executor utilisation the goal size aims under: queueing delay grows
// without bound as utilisation nears 1 (an M/D/k queue at 0.85 waits about
// 3 service times at its tail, which the margin and the deadline absorb).
#define RHO 0.85
// Prediction = mean + DEV_K x mean absolute deviation (about p98 of a
// normal spread, whose MAD is 0.8 sigma).
#define DEV_K 2.5
// EWMA weight of a new measurement: about the last 10 batches of a size.
#define ALPHA 0.1
// Size buckets: exact sizes up to this many, wider buckets above.
#define MAX_BUCKETS 512
// Arrivals pause when no row came for this many expected gaps (a Poisson
// stream has such a gap once in e^4 = 55 rows at worst: a short extra wait).
#define GAP_FACTOR 4.0

typedef struct bucket {
  double rows;  // mean rows of the batches measured in it
  double mean;  // compute, microseconds
  double dev;   // mean absolute deviation
  int n;        // measurements (saturating)
} bucket;

struct bat_lt {
  bat_lt_config cfg;
  int n_buckets;
  bucket *bk;
  int *measured;  // bucket indices with a measurement, ascending
  int n_measured;
  double tau_us;  // the rate estimator's time constant
  double rate;    // rows per microsecond at rate_at
  int64_t rate_at;
  int have_rate;
  bat_lt_stats st;
};

int bat_lt_create(const bat_lt_config *c, bat_lt **out, err *e) {
  if (c->target_us <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "latency target %lld us must be > 0", (long long)c->target_us);
  if (c->max_rows < 1 || c->n_executors < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "latency target: max_rows and executors must be >= 1");
  bat_lt *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  p->cfg = *c;
  p->n_buckets = c->max_rows < MAX_BUCKETS ? (int)c->max_rows : MAX_BUCKETS;
  p->bk = calloc((size_t)p->n_buckets, sizeof *p->bk);
  p->measured = calloc((size_t)p->n_buckets, sizeof *p->measured);
  if (!p->bk || !p->measured) {
    bat_lt_destroy(p);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  // The rate over about one target: long enough to average a Poisson
  // stream's noise at the loads where batching matters, short enough to
  // follow a load change before the target is missed for long.
  double tau = (double)c->target_us;
  p->tau_us = tau < 2000 ? 2000 : tau > 200000 ? 200000 : tau;
  p->st.target_us = c->target_us;
  *out = p;
  return 0;
}

void bat_lt_destroy(bat_lt *p) {
  if (!p) return;
  free(p->bk);
  free(p->measured);
  free(p);
}

static int bucket_of(const bat_lt *p, int64_t rows) {
  if (rows < 1) rows = 1;
  if (rows > p->cfg.max_rows) rows = p->cfg.max_rows;
  return (int)((rows - 1) * p->n_buckets / p->cfg.max_rows);
}

// --- arrival rate

static double rate_at(const bat_lt *p, int64_t now) {
  if (!p->have_rate) return 0;
  double dt = (double)(now - p->rate_at);
  return dt > 0 ? p->rate * exp(-dt / p->tau_us) : p->rate;
}

void bat_lt_arrival(bat_lt *p, int64_t now, int64_t rows) {
  if (p->have_rate && now < p->rate_at) now = p->rate_at;  // a clock that stepped back
  p->rate = rate_at(p, now) + (double)rows / p->tau_us;
  p->rate_at = now;
  p->have_rate = 1;
  p->st.rate_per_s = p->rate * 1e6;
}

// --- compute

static double hi(const bucket *b) {
  return b->mean + DEV_K * b->dev;
}

void bat_lt_observe(bat_lt *p, int64_t now, int64_t rows, int64_t compute_us, double predicted_us) {
  if (rows < 1 || compute_us < 0) return;
  (void)now;  // kept for estimators over time (the measurements are per batch so far)
  int i = bucket_of(p, rows);
  bucket *b = &p->bk[i];
  double x = (double)compute_us;
  if (b->n == 0) {
    *b = (bucket){.rows = (double)rows, .mean = x, .dev = x * 0.05, .n = 1};  // a first spread of 5 %
    int k = p->n_measured++;
    while (k > 0 && p->measured[k - 1] > i) {
      p->measured[k] = p->measured[k - 1];
      k--;
    }
    p->measured[k] = i;
  } else {
    // the first few measurements count more, so a bucket settles quickly
    double a = b->n < 10 ? 1.0 / (b->n + 1) : ALPHA;
    b->dev += a * (fabs(x - b->mean) - b->dev);
    b->mean += a * (x - b->mean);
    b->rows += a * ((double)rows - b->rows);
    if (b->n < 1000000) b->n++;
  }
  p->st.observed++;
  p->st.predicted_us_sum += predicted_us;
  p->st.measured_us_sum += x;
  p->st.measured_sizes = p->n_measured;
}

double bat_lt_predict(const bat_lt *p, int64_t rows) {
  if (p->n_measured == 0) return 0;
  double n = (double)rows;
  int i = bucket_of(p, rows);
  // the first measured bucket at or above i
  int lo = 0, up = p->n_measured;
  while (lo < up) {
    int mid = (lo + up) / 2;
    if (p->measured[mid] < i)
      lo = mid + 1;
    else
      up = mid;
  }
  const bucket *above = lo < p->n_measured ? &p->bk[p->measured[lo]] : NULL;
  const bucket *below = lo > 0 ? &p->bk[p->measured[lo - 1]] : NULL;
  if (above && p->measured[lo] == i) return hi(above);
  if (above && !below) return hi(above);  // below every measured size: as the smallest (never less)
  if (above && below) {
    double f = above->rows > below->rows ? (n - below->rows) / (above->rows - below->rows) : 1;
    if (f < 0) f = 0;
    if (f > 1) f = 1;
    return hi(below) + f * (hi(above) - hi(below));
  }
  // above every measured size: the line through the two largest, or in
  // proportion to the rows while one alone is known (pessimistic for a
  // fixed cost, which is what makes a cold start dispatch early)
  double y = hi(below);
  if (p->n_measured >= 2) {
    const bucket *b2 = &p->bk[p->measured[p->n_measured - 2]];
    double slope = below->rows > b2->rows ? (hi(below) - hi(b2)) / (below->rows - b2->rows) : 0;
    double prop = y / below->rows;  // never flatter than a tenth of proportional
    if (slope < 0.1 * prop) slope = 0.1 * prop;
    return y + slope * (n - below->rows);
  }
  return y * n / below->rows;
}

// The fixed cost a and the cost per row b of compute(n) ~ a + b n, from the
// smallest and the largest measured buckets; with one, all of it is a cost
// per row (b) so the goal stays small until more is known.
static void line(const bat_lt *p, double *a, double *b) {
  const bucket *s = &p->bk[p->measured[0]], *l = &p->bk[p->measured[p->n_measured - 1]];
  if (p->n_measured < 2 || l->rows <= s->rows) {
    *a = 0;
    *b = hi(l) / l->rows;
    return;
  }
  *b = (hi(l) - hi(s)) / (l->rows - s->rows);
  if (*b < 0) *b = 0;
  *a = hi(s) - *b * s->rows;
  if (*a < 0) {
    *a = 0;
    *b = hi(l) / l->rows;
  }
}

// --- the decision

void bat_lt_decide(bat_lt *p, const bat_lt_view *v, bat_lt_decision *d) {
  *d = (bat_lt_decision){.go = 1, .wait_until = v->now, .goal_rows = v->pending_rows};
  if (p->n_measured == 0 || v->full) return;  // cold start: go, and measure
  int64_t M = p->cfg.max_rows;
  double T = (double)p->cfg.target_us * (1 - MARGIN);
  double deadline = (double)v->oldest_us + T;
  double now = (double)v->now;
  double P = (double)v->pending_rows;
  double lam = rate_at(p, v->now);
  double a, b;
  line(p, &a, &b);
  // the goal
  double k = (double)p->cfg.n_executors * RHO;
  double need = k > lam * b ? lam * a / (k - lam * b) : (double)M;
  // rows arriving during one batch's fixed cost, shared by the executors:
  // below it a wait gains more rows per executor-microsecond than it costs
  double marg = lam * a / (double)p->cfg.n_executors;
  double goal = need > marg ? need : marg;
  if (goal > (double)M) goal = (double)M;
  if (goal < 1) goal = 1;
  d->goal_rows = (int64_t)ceil(goal);
  p->st.goal_rows = d->goal_rows;
  if (now + bat_lt_predict(p, v->pending_rows) >= deadline) {
    d->early = P < goal;
    return;
  }
  if (P >= goal || lam <= 0) return;
  // the latest start t that meets the deadline with the rows expected by
  // then: t + compute(P + rate x (t - now)) <= d, increasing in t and true
  // at now (checked above). First the line's answer (t + a + b (P + rate
  // (t - now)) = d), kept when the prediction agrees; else bisected below
  // it. Solved per decision, which runs per arrival: 24 bisection steps
  // cost 3 us, the line's guess a tenth of it.
  double lo = now, up = deadline - bat_lt_predict(p, v->pending_rows);
  double guess = (deadline - a - b * P + b * lam * now) / (1 + b * lam);
  if (guess < up) up = guess;
  if (up > lo) {
    double n_up = P + lam * (up - now);
    if (n_up > (double)M) n_up = (double)M;
    if (up + bat_lt_predict(p, (int64_t)ceil(n_up)) <= deadline) lo = up;
  }
  for (int i = 0; i < 12 && up - lo > 1; i++) {
    double t = (lo + up) / 2, n_t = P + lam * (t - now);
    if (n_t > (double)M) n_t = (double)M;
    if (t + bat_lt_predict(p, (int64_t)ceil(n_t)) <= deadline)
      lo = t;
    else
      up = t;
  }
  double latest = lo;
  double pause = (double)v->last_arrival_us + GAP_FACTOR / lam;
  double until = latest < pause ? latest : pause;
  if (p->cfg.max_wait_us > 0 && (double)(v->oldest_us + p->cfg.max_wait_us) < until)
    until = (double)(v->oldest_us + p->cfg.max_wait_us);
  if (until <= now) {
    d->early = latest <= pause && latest <= now;
    return;
  }
  d->go = 0;
  d->wait_until = until >= 9e18 ? INT64_MAX : (int64_t)ceil(until);
  if (d->wait_until <= v->now) d->wait_until = v->now + 1;
}

void bat_lt_dispatched(bat_lt *p, int64_t rows, int64_t waited_us, int early) {
  p->st.batches++;
  p->st.early += early != 0;
  p->st.last_rows = rows;
  p->st.last_wait_us = waited_us;
}

void bat_lt_stats_get(const bat_lt *p, bat_lt_stats *out) {
  *out = p->st;
}
