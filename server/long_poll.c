/* See long_poll.h. Handlers append held calls to `items` under the
 * poller's lock; the thread takes the whole list out, works on it without
 * the lock (re-asking the engine takes the engine's, once per batch of
 * check-ins: round_checkin_batch), and puts back what
 * is still held ahead of what arrived meanwhile, so the order of arrival
 * is kept (selection itself is a draw among a window's candidates unless
 * --selection-window is 0: then it is first come, first served). */
#include "long_poll.h"

#include <grpc/status.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "log.h"
#include "pace.h"

/* Held check-ins asked of the engine together (round_checkin_batch): one
 * store transaction for this many selections instead of one each. Bounds
 * how long the engine's lock is held at once (at most a few ms). */
#define ASK_BATCH 64

typedef enum held_kind { HELD_CHECKIN, HELD_SECAGG } held_kind;

typedef struct held_call {
  rpc_held *call;
  held_kind kind;
  int64_t client;
  uint64_t changes; /* round_changes() before the engine's last answer */
  double until;     /* monotonic: answer RetryLater (Wait) after 0 ms then */
  /* A check-in, as its client sent it. */
  uint64_t num_examples;
  size_t n_attributes;
  char *names; /* n_attributes NUL-terminated names, back to back */
  double *values;
  char reason[160]; /* the last RetryLater's reason */
  /* A SecAgg poll. */
  int64_t round;
  int step;
} held_call;

/* A batch being gathered by a pass: each ask borrows its held call's
 * attributes. */
typedef struct ask_batch {
  round_checkin_ask asks[ASK_BATCH];
  held_call *held[ASK_BATCH];
  const char *names[ASK_BATCH][ROUND_MAX_ATTRIBUTES];
  size_t n;
} ask_batch;

struct long_poll {
  round_engine *engine;
  long_poll_config cfg;
  long_poll_answer_fn answer;
  long_poll_secagg_answer_fn answer_secagg;
  pthread_t thread;
  pthread_mutex_t mu;
  held_call *items; /* under mu */
  size_t n, cap;
  /* The clients with a SecAgg poll held, taken out by the thread or not
   * (one each), under mu. */
  int64_t *secagg_clients;
  size_t n_secagg, cap_secagg;
  size_t in_flight; /* taken out by the thread, still held */
  int stopping;     /* under mu */
  ask_batch *batch; /* the thread's */
};

static void held_free(held_call *h) {
  free(h->names);
  free(h->values);
}

static int held_copy(held_call *h, const long_poll_checkin *c) {
  memset(h, 0, sizeof *h);
  if (c->n_attributes > ROUND_MAX_ATTRIBUTES) /* the engine refuses them */
    return COHORT_EINVAL;
  h->client = c->client;
  h->num_examples = c->num_examples;
  h->n_attributes = c->n_attributes;
  if (!c->n_attributes)
    return COHORT_OK;
  size_t len = 0;
  for (size_t i = 0; i < c->n_attributes; i++)
    len += strlen(c->names[i]) + 1;
  h->names = malloc(len);
  h->values = malloc(c->n_attributes * sizeof *h->values);
  if (!h->names || !h->values) {
    held_free(h);
    return COHORT_ENOMEM;
  }
  char *p = h->names;
  for (size_t i = 0; i < c->n_attributes; i++) {
    size_t n = strlen(c->names[i]) + 1;
    memcpy(p, c->names[i], n);
    p += n;
    h->values[i] = c->values[i];
  }
  return COHORT_OK;
}

/* h's attribute names, pointing into h->names. */
static void held_names(const held_call *h,
                       const char *names[ROUND_MAX_ATTRIBUTES]) {
  const char *p = h->names;
  for (size_t i = 0; i < h->n_attributes; i++) {
    names[i] = p;
    p += strlen(p) + 1;
  }
}

/* The engine's answer to the held check-in now. */
static round_verdict ask_engine(long_poll *lp, const held_call *h,
                                checkin_result *res) {
  const char *names[ROUND_MAX_ATTRIBUTES];
  held_names(h, names);
  return round_checkin(lp->engine, h->client, h->num_examples, h->n_attributes,
                       names, h->values, res);
}

/* A reply that starts as the engine's refusal v, or OK when v is. */
static rpc_reply verdict_reply(const round_verdict *v) {
  rpc_reply rep;
  memset(&rep, 0, sizeof rep);
  rep.code = v->code;
  if (v->code)
    snprintf(rep.detail, sizeof rep.detail, "%s", v->detail);
  return rep;
}

static void answer(long_poll *lp, held_call *h, const round_verdict *v,
                   const checkin_result *res) {
  rpc_reply rep = verdict_reply(v);
  if (!v->code && res->kind == CHECKIN_TASK && res->fresh && lp->cfg.selected)
    lp->cfg.selected(lp->cfg.selected_ctx, h->client);
  if (!v->code)
    lp->answer(res, &rep);
  rpc_held_reply(h->call, &rep);
  held_free(h);
}

/* RetryLater with no wait: the hold ran out, the client asks again. */
static void answer_again(long_poll *lp, held_call *h) {
  checkin_result res;
  memset(&res, 0, sizeof res);
  res.kind = CHECKIN_RETRY;
  snprintf(res.reason, sizeof res.reason, "%s", h->reason);
  round_verdict ok = {0};
  answer(lp, h, &ok, &res);
}

/* Under mu: whether client has a SecAgg poll held, and that it no longer
 * has. */
static int secagg_held_locked(const long_poll *lp, int64_t client) {
  for (size_t i = 0; i < lp->n_secagg; i++)
    if (lp->secagg_clients[i] == client)
      return 1;
  return 0;
}

static void secagg_forget_locked(long_poll *lp, int64_t client) {
  for (size_t i = 0; i < lp->n_secagg; i++)
    if (lp->secagg_clients[i] == client) {
      lp->secagg_clients[i] = lp->secagg_clients[--lp->n_secagg];
      return;
    }
}

static void secagg_forget(long_poll *lp, int64_t client) {
  pthread_mutex_lock(&lp->mu);
  secagg_forget_locked(lp, client);
  pthread_mutex_unlock(&lp->mu);
}

/* Answers a held SecAgg poll; the caller forgets its client too. */
static void answer_secagg(long_poll *lp, held_call *h, const round_verdict *v,
                          round_secagg_reply *out) {
  rpc_reply rep = verdict_reply(v);
  if (!v->code) {
    lp->answer_secagg(out, &rep);
    if (rep.code == GRPC_STATUS_OK)
      round_count_download(lp->engine, h->client, rep.body_len);
  }
  free(out->message);
  rpc_held_reply(h->call, &rep);
}

/* A held SecAgg poll, asked again once the engine moved: 1 while the
 * answer is still Wait and the hold has time left. */
static int revisit_secagg(long_poll *lp, held_call *h, uint64_t changes,
                          double now) {
  if (h->changes == changes && now < h->until)
    return 1;
  round_secagg_reply out;
  round_verdict v = round_secagg_call(lp->engine, h->client, h->round, h->step,
                                      NULL, 0, 0, &out);
  int waiting = !v.code && out.outcome == ROUND_SECAGG_WAIT;
  if (!v.code && !waiting) {
    /* Authenticated when it came: what it gets now is only for a client
     * the operator has not revoked since. */
    round_verdict live = round_session_live(lp->engine, h->client);
    if (live.code) {
      free(out.message);
      memset(&out, 0, sizeof out);
      v = live;
    }
  }
  if (waiting && now < h->until) {
    h->changes = changes;
    return 1;
  }
  if (waiting)
    out.after_ms = 0; /* the hold ran out: poll again at once */
  /* Forgotten first: the client's next poll, sent as soon as this answer
   * reaches it, must find no poll of its held. */
  secagg_forget(lp, h->client);
  answer_secagg(lp, h, &v, &out);
  return 0;
}

/* The answer to a call that cannot stay held: ask again at once. Under
 * mu. */
static void answer_now_locked(long_poll *lp, held_call *h) {
  if (h->kind == HELD_CHECKIN) {
    answer_again(lp, h);
    return;
  }
  round_secagg_reply out;
  memset(&out, 0, sizeof out);
  out.outcome = ROUND_SECAGG_WAIT;
  round_verdict ok = {0};
  answer_secagg(lp, h, &ok, &out);
  secagg_forget_locked(lp, h->client);
}

/* One pass over the held calls: 1 when h stays held. */
static int revisit(long_poll *lp, held_call *h, uint64_t changes, double now) {
  if (rpc_held_gone(h->call)) {
    if (h->kind == HELD_SECAGG)
      secagg_forget(lp, h->client);
    rpc_reply none;
    memset(&none, 0, sizeof none);
    rpc_held_reply(h->call, &none); /* only releases it */
    held_free(h);
    return 0;
  }
  if (h->kind == HELD_SECAGG)
    return revisit_secagg(lp, h, changes, now);
  if (now >= h->until) {
    answer_again(lp, h);
    return 0;
  }
  return 1;
}

static void ask_batch_add(ask_batch *b, held_call *h) {
  size_t k = b->n++;
  held_names(h, b->names[k]);
  b->held[k] = h;
  b->asks[k] = (round_checkin_ask){.client = h->client,
                                   .num_examples = h->num_examples,
                                   .n_attributes = h->n_attributes,
                                   .names = b->names[k],
                                   .values = h->values};
}

/* Asks the engine about the batch's check-ins, then answers each that is
 * no longer RetryLater or whose hold ran out (its call then set to NULL),
 * once the batch is committed. */
static void ask_batch_run(long_poll *lp, ask_batch *b, double now) {
  round_checkin_batch(lp->engine, b->asks, b->n);
  for (size_t i = 0; i < b->n; i++) {
    held_call *h = b->held[i];
    const round_checkin_ask *a = &b->asks[i];
    if (a->v.code || a->out.kind != CHECKIN_RETRY) {
      answer(lp, h, &a->v, &a->out);
      h->call = NULL;
      continue;
    }
    h->changes = a->out.changes;
    snprintf(h->reason, sizeof h->reason, "%s", a->out.reason);
    if (now >= h->until) {
      answer_again(lp, h);
      h->call = NULL;
    }
  }
  b->n = 0;
}

/* One pass over the held calls: the check-ins the engine has moved on
 * from are asked again in batches; the rest are revisited one by one.
 * Returns how many stay held, moved to the front of work. */
static size_t pass(long_poll *lp, held_call *work, size_t n, uint64_t changes,
                   double now) {
  ask_batch *b = lp->batch;
  for (size_t i = 0; i < n; i++) {
    held_call *h = &work[i];
    if (h->kind == HELD_CHECKIN && h->changes != changes &&
        !rpc_held_gone(h->call)) {
      ask_batch_add(b, h);
      if (b->n == ASK_BATCH)
        ask_batch_run(lp, b, now);
    } else if (!revisit(lp, h, changes, now)) {
      h->call = NULL;
    }
  }
  if (b->n)
    ask_batch_run(lp, b, now);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (work[i].call)
      work[kept++] = work[i];
  return kept;
}

static void *poller_main(void *arg) {
  long_poll *lp = arg;
  uint64_t changes = round_changes(lp->engine);
  for (;;) {
    changes = round_wait_changes(lp->engine, changes, lp->cfg.poll_ms);
    pthread_mutex_lock(&lp->mu);
    if (lp->stopping) {
      pthread_mutex_unlock(&lp->mu);
      break;
    }
    held_call *work = lp->items;
    size_t n = lp->n;
    lp->items = NULL;
    lp->n = lp->cap = 0;
    lp->in_flight = n;
    pthread_mutex_unlock(&lp->mu);

    size_t kept = pass(lp, work, n, changes, clock_mono_s());

    /* Put back what is still held, ahead of what came meanwhile. */
    pthread_mutex_lock(&lp->mu);
    size_t total = kept + lp->n;
    held_call *all = total ? realloc(work, total * sizeof *all) : NULL;
    if (!total) {
      free(work);
    } else if (!all) {
      /* Out of memory: answer the newer ones now rather than lose them. */
      for (size_t i = 0; i < lp->n; i++)
        answer_now_locked(lp, &lp->items[i]);
      all = work;
      total = kept;
    } else if (lp->n) { /* memcpy from NULL, even of 0 bytes, is UB */
      memcpy(all + kept, lp->items, lp->n * sizeof *all);
    }
    free(lp->items);
    lp->items = all;
    lp->n = lp->cap = total;
    lp->in_flight = 0;
    pthread_mutex_unlock(&lp->mu);
  }
  return NULL;
}

int long_poll_start(round_engine *e, const long_poll_config *cfg,
                    long_poll_answer_fn answer_fn,
                    long_poll_secagg_answer_fn secagg_fn, long_poll **out) {
  *out = NULL;
  if (!e || !cfg || !answer_fn || !secagg_fn || cfg->max_hold_ms < 0)
    return COHORT_EINVAL;
  long_poll *lp = calloc(1, sizeof *lp);
  if (!lp)
    return COHORT_ENOMEM;
  lp->engine = e;
  lp->cfg = *cfg;
  if (lp->cfg.poll_ms <= 0)
    lp->cfg.poll_ms = 50;
  lp->answer = answer_fn;
  lp->answer_secagg = secagg_fn;
  lp->batch = calloc(1, sizeof *lp->batch);
  if (!lp->batch) {
    free(lp);
    return COHORT_ENOMEM;
  }
  pthread_mutex_init(&lp->mu, NULL);
  if (pthread_create(&lp->thread, NULL, poller_main, lp) != 0) {
    pthread_mutex_destroy(&lp->mu);
    free(lp->batch);
    free(lp);
    return COHORT_ENOMEM;
  }
  *out = lp;
  return COHORT_OK;
}

/* arr (capacity *cap, n used) with room for one more element of size:
 * arr itself, or a larger copy (*cap updated), or NULL when out of
 * memory (arr untouched). */
static void *grow(void *arr, size_t *cap, size_t n, size_t size) {
  if (n < *cap)
    return arr;
  size_t more = *cap ? 2 * *cap : 64;
  void *p = realloc(arr, more * size);
  if (p)
    *cap = more;
  return p;
}

/* Appends item (its call set) unless the poller is stopping, limit calls
 * are held, or, for a SecAgg poll, one of its client's is held already;
 * COHORT_OK, COHORT_ESTATE or COHORT_ENOMEM. */
static int append(long_poll *lp, const held_call *item, size_t limit) {
  int rc = COHORT_OK;
  int secagg = item->kind == HELD_SECAGG;
  pthread_mutex_lock(&lp->mu);
  if (lp->stopping || lp->n + lp->in_flight >= limit ||
      (secagg && secagg_held_locked(lp, item->client)))
    rc = COHORT_ESTATE;
  if (!rc && secagg) {
    int64_t *c =
        grow(lp->secagg_clients, &lp->cap_secagg, lp->n_secagg, sizeof *c);
    if (c)
      lp->secagg_clients = c;
    else
      rc = COHORT_ENOMEM;
  }
  if (!rc) {
    held_call *items = grow(lp->items, &lp->cap, lp->n, sizeof *items);
    if (items)
      lp->items = items;
    else
      rc = COHORT_ENOMEM;
  }
  if (!rc) {
    lp->items[lp->n++] = *item;
    if (secagg)
      lp->secagg_clients[lp->n_secagg++] = item->client;
  }
  pthread_mutex_unlock(&lp->mu);
  return rc;
}

int long_poll_hold(long_poll *lp, rpc_held *h, const long_poll_checkin *c,
                   const checkin_result *res, int hold_ms) {
  if (!lp || !h || !res || hold_ms <= 0)
    return COHORT_EINVAL;
  size_t limit = pace_hold_limit(lp->cfg.max_held, res->wanted, res->active,
                                 res->took_part, res->candidate);
  if (!limit)
    return COHORT_ESTATE;
  held_call item;
  if (held_copy(&item, c))
    return COHORT_ENOMEM;
  item.call = h;
  item.kind = HELD_CHECKIN;
  item.changes = res->changes;
  item.until = clock_mono_s() + hold_ms / 1000.0;
  int rc = append(lp, &item, limit);
  if (rc)
    held_free(&item);
  return rc;
}

int long_poll_hold_secagg(long_poll *lp, rpc_held *h, const long_poll_secagg *p,
                          int hold_ms) {
  if (!lp || !h || !p || hold_ms <= 0)
    return COHORT_EINVAL;
  held_call item;
  memset(&item, 0, sizeof item);
  item.call = h;
  item.kind = HELD_SECAGG;
  item.client = p->client;
  item.round = p->round;
  item.step = p->step;
  item.changes = p->changes;
  item.until = clock_mono_s() + hold_ms / 1000.0;
  return append(lp, &item,
                lp->cfg.max_held ? lp->cfg.max_held
                                 : LONG_POLL_SECAGG_MAX_HELD);
}

size_t long_poll_held(long_poll *lp) {
  pthread_mutex_lock(&lp->mu);
  size_t n = lp->n + lp->in_flight;
  pthread_mutex_unlock(&lp->mu);
  return n;
}

void long_poll_stop(long_poll *lp) {
  if (!lp)
    return;
  pthread_mutex_lock(&lp->mu);
  lp->stopping = 1;
  pthread_mutex_unlock(&lp->mu);
  pthread_join(lp->thread, NULL);
  /* No call is held from now on (long_poll_hold refuses), so the list is
   * this thread's alone. */
  int done = round_federation_done(lp->engine);
  for (size_t i = 0; i < lp->n; i++) {
    held_call *h = &lp->items[i];
    if (h->kind == HELD_SECAGG) {
      round_secagg_reply none = {0};
      round_verdict v = {.code = GRPC_STATUS_UNAVAILABLE};
      snprintf(v.detail, sizeof v.detail, "the coordinator is stopping");
      answer_secagg(lp, h, &v, &none);
      continue;
    }
    checkin_result res;
    round_verdict v = {.code = GRPC_STATUS_UNAVAILABLE};
    snprintf(v.detail, sizeof v.detail,
             "the coordinator is stopping; check in again");
    if (done)
      v = ask_engine(lp, h, &res);
    answer(lp, h, &v, &res);
  }
  free(lp->items);
  lp->items = NULL;
  lp->n = lp->cap = 0;
  free(lp->secagg_clients);
  lp->secagg_clients = NULL;
  lp->n_secagg = lp->cap_secagg = 0;
}

void long_poll_free(long_poll *lp) {
  if (!lp)
    return;
  pthread_mutex_destroy(&lp->mu);
  free(lp->batch);
  free(lp);
}
