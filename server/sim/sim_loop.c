/* cohort-sim's round loop; see sim_loop.h. Everything the coordinator
 * decides, it decides in its own code: the loop only plays the clients
 * (who checks in, in what order, when each update arrives, who drops out)
 * and moves the simulated clock from one event to the next. Engine calls
 * are made from one thread at a time in an order fixed by the seed, so a
 * run repeats itself byte for byte; the local training of a round's
 * clients runs on the worker pool, each client on one thread, so the
 * thread count changes how fast, never what. */
#include "sim_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "log.h"
#include "nn_rng.h"
#include "pb.h"
#include "sim_secagg.h"
#include "sim_train.h"
#include "upload_loop.h"
#include "wire.h"

/* ---- the simulated clock ---- */

/* Seconds since the run began; the wall clock starts at a fixed instant,
 * so the times the store records repeat too (2026-01-01T00:00:00Z). */
#define SIM_WALL_EPOCH 1767225600.0

static double g_now;

double sim_clock_now(void) { return g_now; }

static double mono_now(void *ctx) {
  (void)ctx;
  return g_now;
}

static double wall_now(void *ctx) {
  (void)ctx;
  return SIM_WALL_EPOCH + g_now;
}

static const clock_source SIM_CLOCK = {mono_now, wall_now, NULL};

void sim_clock_set(double t) {
  if (t > g_now)
    g_now = t;
}

/* ---- one round ---- */

/* This many failed rounds in a row end the run: with settings under which
 * no round can commit (a deadline shorter than any upload, dropouts
 * certain), the loop would otherwise fail rounds for ever, each adding its
 * rows. A run that commits now and then never gets near it. */
#define SIM_MAX_FAILED_IN_A_ROW 1000

typedef struct run {
  const sim_loop_config *lc;
  sim_world *w;
  round_engine *e;
  uint64_t upload_bytes; /* all clients', since the start */
  size_t dropped;        /* this round's drawn dropouts */
  int failed_in_a_row;   /* rounds failed since the last commit */
  char *err;
  size_t errlen;
} run;

/* The engine refused a call the loop expected to pass: the simulation
 * cannot go on meaningfully. */
static int refused(run *r, const char *what, size_t k, const round_verdict *v) {
  return errbuf_fail(r->err, r->errlen, COHORT_EREJECTED, NULL,
                     "client %zu: %s refused: %s", k, what, v->detail);
}

/* The clients that check in this round, in the order they come: a seeded
 * permutation, so that who is online first changes from round to round. */
static uint32_t *arrival_order(const sim_world *w, int64_t round) {
  uint32_t *order = malloc(w->n * sizeof *order);
  if (!order)
    return NULL;
  for (size_t i = 0; i < w->n; i++)
    order[i] = (uint32_t)i;
  nn_rng rng;
  nn_rng_seed(&rng,
              nn_rng_mix(nn_rng_mix(w->seed, 0x5e1ec7u), (uint64_t)round));
  nn_rng_shuffle(&rng, order, w->n);
  return order;
}

/* OPEN: clients check in until the selection is full (every client when
 * DP samples them), then the clock runs to the selection deadline if the
 * engine still waits. Fills sel (the selected clients, in check-in order)
 * with their tasks. */
static int run_selection(run *r, int64_t round, sim_selected *sel) {
  const round_config *cfg = r->lc->cfg;
  size_t select_max =
      (size_t)ceil((double)cfg->clients_per_round * (1.0 + cfg->over_select));
  int everyone = cfg->dp != ROUND_DP_OFF;
  uint32_t *order = arrival_order(r->w, round);
  if (!order)
    return COHORT_ENOMEM;
  int rc = COHORT_OK;
  for (size_t i = 0; i < r->w->n && (everyone || sel->n < select_max); i++) {
    size_t k = order[i];
    checkin_result res;
    round_verdict v =
        round_checkin(r->e, r->w->clients[k].id, sim_client_examples(r->w, k),
                      0, NULL, NULL, &res);
    if (v.code) {
      rc = refused(r, "check-in", k, &v);
      break;
    }
    if (res.kind != CHECKIN_TASK || res.task.round != round)
      continue;
    rc = sim_selected_add(sel, k, &res.task, g_now);
    if (rc)
      break;
  }
  free(order);
  /* Selection closes at once when full, else at its timeout. */
  for (int tries = 0; !rc && tries < 4; tries++) {
    rc = round_tick(r->e);
    int64_t now_round = 0;
    if (rc || round_current(r->e, &now_round) != ROUND_OPEN ||
        now_round != round)
      break;
    sim_clock_set(g_now + cfg->selection_timeout_s + 0.001);
  }
  return rc;
}

/* The wire size of a GetModel reply of len bytes (what the coordinator
 * counts as the client's download). */
static size_t get_model_wire(const round_task *t, uint64_t offset, size_t len) {
  Cohort__V1__GetModelResponse m = COHORT__V1__GET_MODEL_RESPONSE__INIT;
  m.model_version = (uint64_t)t->model_version;
  m.total_size = t->model_size;
  m.offset = offset;
  m.data.len = len;
  m.model_sha256.len = sizeof t->model_sha256;
  return protobuf_c_message_get_packed_size(&m.base);
}

int sim_download(round_engine *e, const round_task *t, int64_t client,
                 uint8_t *buf, size_t buflen) {
  uint64_t offset = 0, total = t->model_size;
  while (offset < total) {
    size_t len = 0;
    uint8_t sha[32];
    round_verdict v = round_get_model(e, client, t->model_version, offset, buf,
                                      buflen, &len, &total, sha);
    if (v.code || len == 0)
      return COHORT_EREJECTED;
    round_count_download(e, client, get_model_wire(t, offset, len));
    offset += len;
  }
  return COHORT_OK;
}

/* upload_loop's transport for cohort-sim: each chunk straight to the round
 * engine, counted at the size it would have on the wire. */
typedef struct engine_upload {
  round_engine *e;
  int64_t round, client;
  uint64_t *wire_total;
} engine_upload;

static int engine_upload_send(void *ctx, const Cohort__V1__UploadRequest *req,
                              uint64_t *next_offset, int *complete) {
  engine_upload *u = ctx;
  upload_chunk c = {.round = u->round,
                    .total_size = req->total_size,
                    .offset = req->offset,
                    .data = req->data.data,
                    .len = req->data.len,
                    .sha256 = req->update_sha256.data,
                    .sha256_len = req->update_sha256.len,
                    .xxh64 = req->update_xxh64,
                    .num_examples = req->num_examples,
                    .wire_bytes =
                        protobuf_c_message_get_packed_size(&req->base),
                    .train_ms = req->train_ms};
  round_verdict v = round_upload(u->e, u->client, &c, next_offset, complete);
  if (v.code) {
    /* Uploads are made only while the round takes them: this is the
     * coordinator's verdict on the update itself. */
    log_warn("round %lld: the update of client %lld was refused: %s",
             (long long)u->round, (long long)u->client, v.detail);
    return COHORT_EREJECTED;
  }
  *u->wire_total += c.wire_bytes;
  return COHORT_OK;
}

int sim_upload(round_engine *e, const round_task *t, int64_t client,
               const uint8_t *bytes, size_t len, uint64_t examples,
               uint32_t train_ms, uint64_t *wire_total) {
  engine_upload u = {
      .e = e, .round = t->round, .client = client, .wire_total = wire_total};
  return upload_loop((uint64_t)t->round, bytes, len, PB_MAX_CHUNK_BYTES,
                     examples, train_ms, engine_upload_send, &u, NULL, 0);
}

/* Whether round is still TRAINING (not over, not another round). */
static int still_training(round_engine *e, int64_t round) {
  int64_t now_round = 0;
  return round_current(e, &now_round) == ROUND_TRAINING && now_round == round;
}

static int by_arrival(const void *a, const void *b) {
  const sim_selected_client *x = a, *y = b;
  if (x->arrive_at != y->arrive_at)
    return x->arrive_at < y->arrive_at ? -1 : 1;
  return x->k < y->k ? -1 : x->k > y->k;
}

/* Plain TRAINING: the updates arrive in the order of their simulated
 * arrival; each is trained (a wave of them at a time on the pool) only
 * when it is next to arrive, and the round closes when the engine has what
 * it needs, or at its deadline. */
static int run_plain_training(run *r, int64_t round, sim_selected *sel,
                              sim_trainer *tr) {
  const round_config *cfg = r->lc->cfg;
  double deadline = g_now + cfg->round_timeout_s;
  qsort(sel->items, sel->n, sizeof *sel->items, by_arrival);
  /* Survivors first, in arrival order; the dropped ones never upload. */
  size_t n_live = 0;
  for (size_t i = 0; i < sel->n; i++)
    if (sel->items[i].trip.drop == SIM_DROP_NONE)
      sel->items[n_live++] = sel->items[i];
  size_t wave = tr->slots;
  for (size_t first = 0; first < n_live && still_training(r->e, round);
       first += wave) {
    size_t n = n_live - first < wave ? n_live - first : wave;
    if (sel->items[first].arrive_at > deadline)
      break;
    int rc = sim_train_wave(tr, r->w, round, sel->items + first, n, 1, r->err,
                            r->errlen);
    if (rc)
      return rc;
    for (size_t j = 0; j < n; j++) {
      sim_selected_client *c = &sel->items[first + j];
      if (c->arrive_at > deadline || !still_training(r->e, round))
        break;
      sim_clock_set(c->arrive_at);
      sim_client *cl = &r->w->clients[c->k];
      rc = sim_upload(r->e, &c->task, cl->id, tr->slot[j].wire,
                      tr->slot[j].wire_len, sim_client_examples(r->w, c->k),
                      (uint32_t)fmin(c->train_s * 1000, UINT32_MAX),
                      &r->upload_bytes);
      if (rc == COHORT_OK)
        sim_train_accepted(cl);
      else if (rc != COHORT_EREJECTED)
        return rc;
      rc = round_tick(r->e);
      if (rc)
        return rc;
    }
  }
  /* Not enough came in: the deadline decides. */
  if (still_training(r->e, round)) {
    sim_clock_set(deadline + 0.001);
    return round_tick(r->e);
  }
  return COHORT_OK;
}

/* The round's trips: each selected client's device and dropout draw for
 * the model's and the update's sizes. */
static void plan_trips(run *r, int64_t round, sim_selected *sel,
                       const sim_trainer *tr) {
  r->dropped = 0;
  for (size_t i = 0; i < sel->n; i++) {
    sim_selected_client *c = &sel->items[i];
    const sim_client *cl = &r->w->clients[c->k];
    double flops = sim_train_flops(tr, r->lc->cfg->epochs,
                                   sim_client_examples(r->w, c->k));
    sim_net_trip(r->lc->net, &cl->dev, r->w->seed, round, (int64_t)c->k,
                 (double)c->task.model_size, flops, (double)tr->wire_size,
                 &c->trip);
    c->train_s = flops / cl->dev.flops;
    c->arrive_at = c->task_at + c->trip.arrived_s;
    if (c->trip.drop != SIM_DROP_NONE)
      r->dropped++;
  }
}

/* Every selected client that does not drop out while downloading fetches
 * the model, as the coordinator counts it. */
static int download_all(run *r, sim_selected *sel, uint8_t **buf) {
  if (!sel->n)
    return COHORT_OK;
  size_t len = PB_MAX_CHUNK_BYTES;
  if (!*buf && !(*buf = malloc(len)))
    return COHORT_ENOMEM;
  for (size_t i = 0; i < sel->n; i++) {
    sim_selected_client *c = &sel->items[i];
    if (c->trip.drop == SIM_DROP_DOWNLOAD)
      continue;
    int rc = sim_download(r->e, &c->task, r->w->clients[c->k].id, *buf, len);
    if (rc)
      return errbuf_fail(r->err, r->errlen, rc, NULL,
                         "client %zu: the model download was refused", c->k);
  }
  return COHORT_OK;
}

/* ---- output of a round ---- */

/* Prints what the engine wrote to its round lines since the last call,
 * each line followed by the simulated time. */
static void flush_lines(const sim_loop_config *lc, size_t *done) {
  fflush(lc->lines);
  const char *buf = *lc->lines_buf;
  size_t len = *lc->lines_len;
  while (*done < len) {
    const char *nl = memchr(buf + *done, '\n', len - *done);
    size_t end = nl ? (size_t)(nl - buf) : len;
    printf("%.*s sim %.3f s\n", (int)(end - *done), buf + *done, g_now);
    *done = nl ? end + 1 : len;
  }
  fflush(stdout);
}

static int report_round(run *r, int64_t *reported, size_t *lines_done,
                        size_t selected) {
  round_outcome o;
  round_last_outcome(r->e, &o);
  if (o.round <= *reported)
    return COHORT_OK;
  *reported = o.round;
  flush_lines(r->lc, lines_done);
  if (!o.committed)
    printf("round %lld: FAILED clients %lld/%zu sim %.3f s\n",
           (long long)o.round, (long long)o.result.clients_aggregated, selected,
           g_now);
  r->failed_in_a_row = o.committed ? 0 : r->failed_in_a_row + 1;
  sim_record rec = {.round = o.round,
                    .committed = o.committed,
                    .selected = selected,
                    .completed = (size_t)o.result.clients_aggregated,
                    .dropped = r->dropped,
                    .accuracy = o.result.accuracy,
                    .loss = o.result.loss,
                    .upload_bytes = r->upload_bytes,
                    .sim_time_s = g_now,
                    .epsilon = o.epsilon};
  return r->lc->record ? r->lc->record(r->lc->record_ctx, &rec) : COHORT_OK;
}

int sim_loop_run(const sim_loop_config *lc, sim_world *w, round_engine *e,
                 char *err, size_t errlen) {
  run r = {.lc = lc, .w = w, .e = e, .err = err, .errlen = errlen};
  sim_trainer tr;
  int rc = sim_trainer_init(&tr, lc, w, err, errlen);
  if (rc)
    return rc;
  sim_selected sel = {0};
  uint8_t *chunk = NULL;
  int64_t reported = 0;
  size_t lines_done = 0;
  int idle = 0;
  int64_t last_open = 0;
  while (!rc && !round_federation_done(e)) {
    rc = round_tick(e);
    int64_t round = 0;
    round_state s = rc ? ROUND_IDLE : round_current(e, &round);
    if (rc)
      break;
    if (s == ROUND_IDLE) {
      /* A DP coordinator waits for its census before the first round. */
      if (++idle > 100000) {
        rc = errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                         "the coordinator opens no round");
        break;
      }
      sim_clock_set(g_now + 1);
      continue;
    }
    idle = 0;
    if (s != ROUND_OPEN) {
      rc = errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "round %lld is %s where the loop expected OPEN",
                       (long long)round, round_state_name(s));
      break;
    }
    if (round == last_open) {
      rc = errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "round %lld cannot fill its selection (%zu clients "
                       "checked in)",
                       (long long)round, sel.n);
      break;
    }
    last_open = round;
    sim_selected_clear(&sel);
    rc = run_selection(&r, round, &sel);
    if (!rc && still_training(e, round)) {
      rc = sim_trainer_round(&tr, e, w, &sel, err, errlen);
      if (!rc) {
        plan_trips(&r, round, &sel, &tr);
        rc = download_all(&r, &sel, &chunk);
      }
      if (!rc)
        rc = lc->cfg->secagg != ROUND_SECAGG_OFF
                 ? sim_secagg_round(lc, w, e, round, &sel, &tr, &r.upload_bytes,
                                    err, errlen)
                 : run_plain_training(&r, round, &sel, &tr);
    }
    if (!rc)
      rc = report_round(&r, &reported, &lines_done, sel.n);
    if (!rc && r.failed_in_a_row >= SIM_MAX_FAILED_IN_A_ROW)
      rc = errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "%d rounds in a row failed, none committed (the "
                       "last: round %lld, %zu selected); with these settings "
                       "no round can commit: check --round-timeout against "
                       "the --network's links, its drop-* rates and "
                       "--min-clients",
                       r.failed_in_a_row, (long long)round, sel.n);
  }
  free(chunk);
  sim_selected_free(&sel);
  sim_trainer_free(&tr);
  return rc;
}

void sim_clock_install(void) {
  g_now = 0;
  clock_set_source(&SIM_CLOCK);
}
