/* cohort-sim's secure-aggregation rounds; see sim_secagg.h. */
#include "sim_secagg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "log.h"
#include "nn_rng.h"
#include "pb.h"
#include "secagg_flow.h"
#include "service.h"

typedef enum fiber_state { FIBER_READY, FIBER_RUNNING, FIBER_DONE } fiber_state;

struct sched;

/* One client of the cohort and its thread. Touched by its thread only
 * while it holds the baton (sched.turn == i), by the loop otherwise. */
typedef struct fiber {
  struct sched *s;
  size_t i;
  pthread_t thread;
  fiber_state state;
  double wake; /* simulated time it wants the baton back */
  sim_world *w;
  round_engine *e;
  const sim_selected_client *c;
  const float *delta;
  size_t n_params;
  int64_t round;
  int rc;
  char err[256];
} fiber;

typedef struct sched {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long turn; /* the fiber holding the baton; -1: the loop */
  fiber *f;
  size_t n;
  uint64_t *upload_bytes; /* touched only with the baton */
} sched;

/* Gives the baton back to the loop until t, then waits for it. */
static void yield_until(fiber *f, double t) {
  sched *s = f->s;
  pthread_mutex_lock(&s->mu);
  double now = sim_clock_now();
  f->wake = t > now ? t : now;
  f->state = FIBER_READY;
  s->turn = -1;
  pthread_cond_broadcast(&s->cv);
  while (s->turn != (long)f->i)
    pthread_cond_wait(&s->cv, &s->mu);
  f->state = FIBER_RUNNING;
  pthread_mutex_unlock(&s->mu);
}

static const sim_device *device(const fiber *f) {
  return &f->w->clients[f->c->k].dev;
}

static int64_t client_id(const fiber *f) { return f->w->clients[f->c->k].id; }

/* secagg_flow_io: one SecAgg call straight into the engine, its reply
 * packed and unpacked as the service does, and the exchange's time. */
static int io_call(void *ctx, const Cohort__V1__SecAggRequest *req,
                   Cohort__V1__SecAggResponse **resp) {
  fiber *f = ctx;
  *resp = NULL;
  size_t up = protobuf_c_message_get_packed_size(&req->base);
  *f->s->upload_bytes += up;
  round_secagg_reply out;
  round_verdict v =
      round_secagg_call(f->e, client_id(f), (int64_t)req->round, (int)req->step,
                        req->message.data, req->message.len, up, &out);
  if (v.code) {
    snprintf(f->err, sizeof f->err, "secure aggregation step %d refused: %s",
             (int)req->step, v.detail);
    return COHORT_EREJECTED;
  }
  rpc_reply rep = {0};
  service_secagg_reply(&out, &rep);
  free(out.message);
  if (rep.code) {
    free(rep.body);
    snprintf(f->err, sizeof f->err, "%s", rep.detail);
    return COHORT_ENOMEM;
  }
  round_count_download(f->e, client_id(f), rep.body_len);
  *resp = cohort__v1__sec_agg_response__unpack(NULL, rep.body_len, rep.body);
  size_t down = rep.body_len;
  free(rep.body);
  if (!*resp) {
    snprintf(f->err, sizeof f->err, "cannot unpack a SecAgg reply");
    return COHORT_EPROTO;
  }
  yield_until(f, sim_clock_now() +
                     sim_net_exchange_s(device(f), (double)up, (double)down));
  return COHORT_OK;
}

static int io_upload(void *ctx, const uint8_t *bytes, size_t len,
                     uint64_t examples) {
  fiber *f = ctx;
  const sim_device *d = device(f);
  yield_until(f, sim_clock_now() + (double)len / d->up_Bps + d->latency_s);
  int rc = sim_upload(f->e, &f->c->task, client_id(f), bytes, len, examples,
                      (uint32_t)(f->c->train_s * 1000), f->s->upload_bytes);
  if (rc)
    snprintf(f->err, sizeof f->err, "the masked upload was refused");
  return rc;
}

static int io_nap(void *ctx, long ms) {
  fiber *f = ctx;
  yield_until(f, sim_clock_now() + (double)ms / 1000.0);
  return COHORT_OK;
}

/* The task as the flow reads it (a CheckIn reply's Task). */
static void task_message(const round_task *t, Cohort__V1__Task *m,
                         Cohort__V1__TrainingPlan *plan) {
  cohort__v1__task__init(m);
  cohort__v1__training_plan__init(plan);
  m->round = (uint64_t)t->round;
  m->model_version = (uint64_t)t->model_version;
  m->model_sha256.data = (uint8_t *)t->model_sha256;
  m->model_sha256.len = sizeof t->model_sha256;
  m->model_size = t->model_size;
  m->model_spec = (char *)t->model_spec;
  plan->epochs = (uint32_t)t->epochs;
  plan->batch_size = (uint32_t)t->batch_size;
  plan->learning_rate = (float)t->learning_rate;
  plan->fedprox_mu = t->fedprox_mu;
  m->plan = plan;
  m->kind = COHORT__V1__TASK_KIND__TASK_TRAIN;
  m->codec = (char *)t->codec;
  m->codec_seed.data = (uint8_t *)t->codec_seed;
  m->codec_seed.len = sizeof t->codec_seed;
  m->codec_clip = t->codec_clip;
  m->secagg = t->secagg;
  m->dp = (Cohort__V1__DpMode)t->dp;
  m->deadline_ms = t->deadline_ms;
}

/* The client's side of the round, as cohort-client's run_task plays it
 * after its download: join, train (its delta is ready; the time is
 * simulated), submit, unless the network model drops it first. */
static void play(fiber *f) {
  const sim_selected_client *c = f->c;
  sign_key *key = NULL;
  secagg_flow flow;
  memset(&flow, 0, sizeof flow);
  /* Its secrets and DP noise from a stream of its own: one client at a
   * time holds the baton, but each draws the same whoever ran before. */
  uint8_t seed[32];
  uint64_t words[4];
  for (int i = 0; i < 4; i++)
    words[i] =
        nn_rng_mix(nn_rng_mix(nn_rng_mix(f->w->seed, 0x5ecaa900u + (uint64_t)i),
                              (uint64_t)f->round),
                   c->k);
  memcpy(seed, words, sizeof seed);
  f->rc = crypto_random_simulate(seed);
  if (!f->rc)
    f->rc = sim_client_identity(f->w, c->k, &key);
  if (f->rc)
    goto out;
  secagg_flow_trust trust = {.policy = secagg_policy_default()};
  trust.id.key = key;
  secagg_flow_io io = {
      .ctx = f, .call = io_call, .upload = io_upload, .nap = io_nap};
  Cohort__V1__Task task;
  Cohort__V1__TrainingPlan plan;
  task_message(&c->task, &task, &plan);
  double give_up_at =
      sim_clock_now() +
      (c->task.deadline_ms ? c->task.deadline_ms / 1000.0 : 3600.0);
  f->rc = secagg_flow_begin(&flow, &io, &trust, &task, f->n_params, give_up_at,
                            SECAGG_FLOW_NEVER, f->err, sizeof f->err);
  if (f->rc)
    goto out;
  yield_until(f, sim_clock_now() + c->train_s);
  if (c->trip.drop != SIM_DROP_NONE)
    goto out; /* gone before its masked input: the others unmask without it */
  f->rc = secagg_flow_submit(&flow, f->delta, sim_client_examples(f->w, c->k));
out:
  secagg_flow_end(&flow);
  sign_key_free(key);
  crypto_random_simulate_end();
}

static void *fiber_main(void *arg) {
  fiber *f = arg;
  sched *s = f->s;
  pthread_mutex_lock(&s->mu);
  while (s->turn != (long)f->i)
    pthread_cond_wait(&s->cv, &s->mu);
  f->state = FIBER_RUNNING;
  pthread_mutex_unlock(&s->mu);
  play(f);
  pthread_mutex_lock(&s->mu);
  f->state = FIBER_DONE;
  s->turn = -1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Hands the baton to the fiber due first until all are done, ticking the
 * engine (when tick is set) between turns with no client running. */
static int run_fibers(sched *s, round_engine *e, int tick) {
  for (;;) {
    pthread_mutex_lock(&s->mu);
    long next = -1;
    for (size_t i = 0; i < s->n; i++)
      if (s->f[i].state != FIBER_DONE &&
          (next < 0 || s->f[i].wake < s->f[next].wake))
        next = (long)i;
    pthread_mutex_unlock(&s->mu);
    if (next < 0)
      return COHORT_OK;
    sim_clock_set(s->f[next].wake);
    int rc = tick ? round_tick(e) : COHORT_OK;
    if (rc)
      return rc; /* the fibers are stopped by the caller */
    pthread_mutex_lock(&s->mu);
    s->turn = next;
    pthread_cond_broadcast(&s->cv);
    while (s->turn != -1)
      pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
  }
}

int sim_secagg_round(const sim_loop_config *lc, sim_world *w, round_engine *e,
                     int64_t round, sim_selected *sel, sim_trainer *tr,
                     uint64_t *upload_bytes, char *err, size_t errlen) {
  if (sel->n > SIM_SECAGG_MAX_COHORT)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "a secure-aggregation cohort of %zu clients; the "
                       "simulator runs at most %d (a thread each)",
                       sel->n, SIM_SECAGG_MAX_COHORT);
  int rc = sim_trainer_reserve(tr, sel->n);
  if (!rc)
    rc = sim_train_wave(tr, w, round, sel->items, sel->n, 0, err, errlen);
  if (rc)
    return rc;
  sched s = {.turn = -1, .upload_bytes = upload_bytes};
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  s.f = calloc(sel->n ? sel->n : 1, sizeof *s.f);
  if (!s.f)
    rc = COHORT_ENOMEM;
  for (size_t i = 0; !rc && i < sel->n; i++) {
    const sim_selected_client *c = &sel->items[i];
    if (c->trip.drop == SIM_DROP_DOWNLOAD)
      continue;
    fiber *f = &s.f[s.n];
    *f = (fiber){.s = &s,
                 .i = s.n,
                 .state = FIBER_READY,
                 .wake = c->task_at + c->trip.downloaded_s,
                 .w = w,
                 .e = e,
                 .c = c,
                 .delta = tr->slot[i].delta,
                 .n_params = tr->n_params,
                 .round = round};
    if (pthread_create(&f->thread, NULL, fiber_main, f)) {
      rc = errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                       "cannot start client %zu's thread", c->k);
      break;
    }
    s.n++;
  }
  if (!rc)
    rc = run_fibers(&s, e, 1);
  if (rc) {
    /* Stop the rest: each runs to its end with every call refused. */
    int64_t aborted = 0;
    round_abort(e, "the simulator failed", &aborted);
    run_fibers(&s, e, 0);
  }
  for (size_t i = 0; i < s.n; i++) {
    pthread_join(s.f[i].thread, NULL);
    if (s.f[i].rc && s.f[i].rc != COHORT_EREJECTED &&
        s.f[i].rc != COHORT_ECANCELED)
      log_info("round %lld: client %zu left secure aggregation: %s",
               (long long)round, s.f[i].c->k, s.f[i].err);
  }
  free(s.f);
  pthread_mutex_destroy(&s.mu);
  pthread_cond_destroy(&s.cv);
  if (rc)
    return rc;
  /* What the survivors left to the deadlines: the engine closes the phases
   * on its own clock. */
  double give_up = sim_clock_now() + 6 * lc->cfg->secagg_timeout_s +
                   lc->cfg->round_timeout_s;
  int64_t now_round = 0;
  while (round_current(e, &now_round) == ROUND_TRAINING && now_round == round &&
         sim_clock_now() < give_up) {
    sim_clock_set(sim_clock_now() + 1);
    rc = round_tick(e);
    if (rc)
      return rc;
  }
  return COHORT_OK;
}
