// order.c: the answers of a version that preserves ordering, held in
// admission order until their turn. The list of admitted requests is the
// order itself: an answer leaves once every entry ahead of it has left.
#include "server/core/order.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/obs/log.h"
#include "server/core/request.h"

// One admitted request's place: its answer waits here once given.
typedef struct srv_order_entry {
  struct srv_order_entry *next;
  srv_order *o;
  srv_request *r;
  int answered;
  uint8_t *resp;  // the packed answer, or NULL with code and msg
  size_t len;
  int code;
  char *msg;
} srv_order_entry;

struct srv_order {
  struct srv_server *s;
  pthread_mutex_t mu;  // taken inside the scheduler's lock, never around it
  srv_order_entry *head, *tail;  // admitted and not yet sent, in admission order
};

int srv_order_create(struct srv_server *s, srv_order **out, err *e) {
  srv_order *o = calloc(1, sizeof *o);
  if (!o) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  o->s = s;
  pthread_mutex_init(&o->mu, NULL);
  *out = o;
  return 0;
}

void srv_order_destroy(srv_order *o) {
  if (!o) return;
  if (o->head) srv_log(SRV_LOG_ERROR, "ordering: a version freed with answers still waiting");
  pthread_mutex_destroy(&o->mu);
  free(o);
}

int srv_order_admit(srv_order *o, srv_request *r, err *e) {
  srv_order_entry *en = calloc(1, sizeof *en);
  if (!en) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  en->r = r;
  en->o = o;
  pthread_mutex_lock(&o->mu);
  if (o->tail) o->tail->next = en;
  else o->head = en;
  o->tail = en;
  r->ord = en;
  pthread_mutex_unlock(&o->mu);
  return 0;
}

void srv_order_answer(srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  srv_order_entry *en = r->ord;
  srv_order *o = en->o;
  pthread_mutex_lock(&o->mu);
  if (en->answered) {  // a second answer would free the request twice
    pthread_mutex_unlock(&o->mu);
    srv_log(SRV_LOG_ERROR, "ordering: a request answered twice");
    free(resp);
    return;
  }
  en->answered = 1;
  en->resp = resp;
  en->len = len;
  en->code = code;
  en->msg = resp ? NULL : strdup(msg ? msg : "");
  while (o->head && o->head->answered) {
    srv_order_entry *h = o->head;
    o->head = h->next;
    if (!o->head) o->tail = NULL;
    h->r->ord = NULL;
    // under the lock: the next answer must not overtake this one
    srv_request_send_locked(o->s, h->r, h->resp, h->len, h->code, h->msg ? h->msg : "");
    free(h->msg);
    free(h);
  }
  pthread_mutex_unlock(&o->mu);
}
