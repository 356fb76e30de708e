// server/obs/window.c: see window.h.
#include "server/obs/window.h"

void prof_window_init(prof_window *w) {
  pthread_mutex_init(&w->mu, NULL);
  for (int i = 0; i < PROF_WINDOW_SLOTS; i++) {
    w->sec[i] = -1;
    w->val[i] = 0;
  }
}

void prof_window_destroy(prof_window *w) { pthread_mutex_destroy(&w->mu); }

void prof_window_add(prof_window *w, int64_t now_us, double v) {
  int64_t s = now_us / 1000000;
  int i = (int)(s % PROF_WINDOW_SLOTS);
  pthread_mutex_lock(&w->mu);
  if (w->sec[i] != s) {  // a slot reused for a newer second starts from zero
    w->sec[i] = s;
    w->val[i] = 0;
  }
  w->val[i] += v;
  pthread_mutex_unlock(&w->mu);
}

double prof_window_rate(prof_window *w, int64_t now_us, int seconds) {
  if (seconds < 1) seconds = 1;
  if (seconds > PROF_WINDOW_SLOTS - 1) seconds = PROF_WINDOW_SLOTS - 1;
  int64_t cur = now_us / 1000000;
  double sum = 0;
  pthread_mutex_lock(&w->mu);
  for (int k = 1; k <= seconds; k++) {
    int64_t s = cur - k;
    int i = (int)(((s % PROF_WINDOW_SLOTS) + PROF_WINDOW_SLOTS) % PROF_WINDOW_SLOTS);
    if (w->sec[i] == s) sum += w->val[i];
  }
  pthread_mutex_unlock(&w->mu);
  return sum / seconds;
}
