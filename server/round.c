/* The round engine's lifecycle: start-up (model, strategy state, recovery of
 * an interrupted round), the scheduler's state machine and the commit. See
 * round.h; what clients call is in round_client.c. One mutex guards the
 * in-memory state and the store connection. Aggregation and evaluation run
 * outside it, while the round is AGGREGATING and handlers refuse uploads. */
#include <grpc/status.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cohort_status.h"
#include "log.h"
#include "nn_train.h"
#include "round_internal.h"
#include "wire.h"

/* Updates a median or trimmed-mean round keeps at most. */
#define ROBUST_MAX_UPDATES 1024

void round_config_init(round_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->rounds = 5;
  cfg->clients_per_round = 4;
  cfg->min_clients = 1;
  cfg->round_timeout_s = 60;
  cfg->selection_timeout_s = 10;
  cfg->retry_ms = 500;
  cfg->retry_max_ms = 60000;
  cfg->session_ttl_s = 86400;
  cfg->active_window_s = 300;
  cfg->selection_window_s = 0.3;
  cfg->offender_failures = 3;
  cfg->offender_rounds = 10;
  cfg->offender_exclusion_s = 600;
  cfg->epochs = 1;
  cfg->batch_size = 32;
  cfg->learning_rate = 0.05;
  strategy_config_init(STRATEGY_FEDAVG, &cfg->strategy);
  cfg->secagg_dropout = 0.1;
  cfg->secagg_corrupt = 0.05;
  cfg->secagg_timeout_s = 30;
  cfg->secagg_max_examples = 10000;
  cfg->bound_multiplier = 2;
  cfg->max_update_examples = 100000;
  cfg->dp_delta = 1e-5;
  cfg->dp_clip = 1.0;
  cfg->dp_clip_lr = 0.2;
  cfg->dp_bits = 16;
  cfg->model_spec = "logreg";
  cfg->input = (nn_shape){.c = 1, .h = 28, .w = 28};
  cfg->classes = 10;
}

const char *round_state_name(round_state s) {
  static const char *names[] = {"IDLE", "OPEN", "TRAINING", "AGGREGATING"};
  return (unsigned)s < 4 ? names[s] : "?";
}

void round_set_state(round_engine *e, round_state s) {
  e->state = s;
  round_changed(e);
}

void round_changed(round_engine *e) {
  e->changes++;
  pthread_cond_broadcast(&e->changed);
}

round_verdict round_ok(void) {
  round_verdict v = {0};
  return v;
}

round_verdict round_fail_verdict(int code, const char *fmt, ...) {
  round_verdict v = {.code = code};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v.detail, sizeof v.detail, fmt, ap);
  va_end(ap);
  return v;
}

round_verdict round_store_failed(round_engine *e) {
  /* SQLite's words and file names stay in the log (store_fail wrote
   * them); a client learns only to come back later, and a store that
   * cannot write any more stops the coordinator (store_fatal). */
  (void)e;
  return round_fail_verdict(GRPC_STATUS_UNAVAILABLE,
                            "the coordinator cannot store this now; retry "
                            "later");
}

participant *round_find_participant(round_engine *e, int64_t client) {
  const seen_client *c = seen_set_find(&e->seen, client);
  if (!c || c->part_round != e->round || c->part_index >= e->n_parts ||
      e->parts[c->part_index].client != client)
    return NULL;
  return &e->parts[c->part_index];
}

participant *round_add_participant(round_engine *e, int64_t client) {
  seen_client *c = seen_set_get(&e->seen, client);
  if (!c)
    return NULL;
  if (e->n_parts == e->cap_parts) {
    size_t cap = e->cap_parts ? 2 * e->cap_parts : 16;
    participant *p = realloc(e->parts, cap * sizeof *p);
    if (!p)
      return NULL;
    e->parts = p;
    e->cap_parts = cap;
  }
  c->part_round = e->round;
  c->part_index = e->n_parts;
  participant *p = &e->parts[e->n_parts++];
  memset(p, 0, sizeof *p);
  p->client = client;
  return p;
}

size_t round_active_clients(round_engine *e, double now) {
  return seen_set_active(&e->seen, now, e->cfg.active_window_s);
}

/* Training is over: the rounds are committed, or the privacy budget
 * admits no more. */
static int training_over(const round_engine *e) {
  return e->committed >= e->cfg.rounds || e->dp.exhausted;
}

int round_done_locked(round_engine *e) {
  return training_over(e) && e->state == ROUND_IDLE && !e->eval_due;
}

void round_model_release(void *owner) {
  model_blob *b = owner;
  if (b && atomic_fetch_sub(&b->refs, 1) == 1)
    free(b);
}

/* The wire form of params (one reference, into *blob) and its digest. */
static int model_wire(const round_engine *e, const float *params,
                      model_blob **blob, uint8_t sha[CRYPTO_SHA256_LEN]) {
  size_t len = e->model.n_params * sizeof(float);
  *blob = malloc(sizeof **blob + len);
  if (!*blob)
    return COHORT_ENOMEM;
  atomic_init(&(*blob)->refs, 1);
  wire_put_f32le((*blob)->bytes, params, e->model.n_params);
  int rc = crypto_sha256((*blob)->bytes, len, sha);
  if (rc) {
    round_model_release(*blob);
    *blob = NULL;
  }
  return rc;
}

/* Makes params (taken over), its wire form blob (taken over) and digest
 * the global model of that version. */
static void adopt_global(round_engine *e, float *params, model_blob *blob,
                         const uint8_t sha[CRYPTO_SHA256_LEN],
                         int64_t version) {
  free(e->global);
  round_model_release(e->blob);
  e->global = params;
  e->blob = blob;
  e->blob_len = e->model.n_params * sizeof(float);
  memcpy(e->sha, sha, CRYPTO_SHA256_LEN);
  e->version = version;
}

static int set_global(round_engine *e, float *params, int64_t version) {
  model_blob *blob = NULL;
  uint8_t sha[CRYPTO_SHA256_LEN];
  int rc = model_wire(e, params, &blob, sha);
  if (rc) {
    free(params);
    return rc;
  }
  adopt_global(e, params, blob, sha, version);
  return COHORT_OK;
}

/* The settings a database was created with must match the flags: a model
 * of another shape cannot continue. The first start records them. */
static int check_settings(round_engine *e, char *err, size_t errlen) {
  char want[3][64], have[64];
  const char *keys[3] = {"model_spec", "input_hwc", "classes"};
  snprintf(want[0], sizeof want[0], "%s", e->model.spec);
  nn_shape_format(e->cfg.input, want[1]);
  snprintf(want[2], sizeof want[2], "%d", e->cfg.classes);
  for (int i = 0; i < 3; i++) {
    int rc = store_setting_get(e->db, keys[i], have, sizeof have);
    if (rc == COHORT_ENOTFOUND)
      rc = store_setting_put(e->db, keys[i], want[i]);
    else if (!rc && strcmp(have, want[i]) != 0) {
      snprintf(err, errlen,
               "the database was created with %s %s, not %s (use another "
               "--db)",
               keys[i], have, want[i]);
      return COHORT_EINVAL;
    }
    if (rc) {
      snprintf(err, errlen, "cannot read settings: %s", store_errmsg(e->db));
      return rc;
    }
  }
  return COHORT_OK;
}

static int load_or_create_model(round_engine *e, char *err, size_t errlen) {
  store_model m;
  int rc = store_model_latest(e->db, &m);
  size_t want = e->model.n_params * sizeof(float);
  if (rc == COHORT_OK) {
    if (strcmp(m.spec, e->model.spec) != 0 || m.blob_len != want) {
      snprintf(err, errlen,
               "the database holds a %s model of %zu bytes; --model %s needs "
               "%zu bytes (use another --db)",
               m.spec, m.blob_len, e->model.spec, want);
      store_model_clear(&m);
      return COHORT_EINVAL;
    }
    float *p = malloc(want);
    if (!p) {
      store_model_clear(&m);
      return COHORT_ENOMEM;
    }
    wire_get_f32le(p, m.blob, e->model.n_params);
    int64_t version = m.version;
    store_model_clear(&m);
    return set_global(e, p, version);
  }
  if (rc != COHORT_ENOTFOUND) {
    snprintf(err, errlen, "cannot read models: %s", store_errmsg(e->db));
    return rc;
  }
  float *p = malloc(want);
  if (!p)
    return COHORT_ENOMEM;
  nn_net_init(&e->model.net, p, e->cfg.seed);
  rc = set_global(e, p, 0);
  if (rc)
    return rc;
  store_model init = {.version = 0,
                      .round = 0,
                      .parent = -1,
                      .blob = e->blob->bytes,
                      .blob_len = e->blob_len};
  snprintf(init.spec, sizeof init.spec, "%s", e->model.spec);
  crypto_hex(e->sha, sizeof e->sha, init.sha256_hex);
  rc = store_model_put_initial(e->db, &init, clock_wall_s());
  if (rc)
    snprintf(err, errlen, "cannot store the initial model: %s",
             store_errmsg(e->db));
  return rc;
}

/* The server optimizer continues from the state saved with the model it
 * produced; a strategy without state, or a database from before it had
 * one, starts fresh. */
static int load_strategy_state(round_engine *e) {
  uint8_t *blob = NULL;
  size_t len = 0;
  int rc = store_strategy_state_get(e->db, e->version, &blob, &len);
  if (rc == COHORT_ENOTFOUND)
    return COHORT_OK;
  if (rc)
    return rc;
  char why[200];
  if (strategy_state_load(e->strategy, blob, len, why, sizeof why))
    log_warn("strategy state of model %lld not used (%s); starting fresh",
             (long long)e->version, why);
  free(blob);
  return COHORT_OK;
}

/* ---- updates ---- */

int round_update_prepare(round_engine *e, const uint8_t *payload, size_t len,
                         uint64_t examples, float *delta, uint64_t *weight,
                         int *within, double *norm, char *why, size_t whylen) {
  int rc = round_codec_decode(e, &e->cparams, payload, len, delta, why, whylen);
  if (rc)
    return rc;
  *weight = examples;
  *within = round_dp_clip_update(e, delta, weight);
  *norm = round_bound_norm(delta, e->agg_dim);
  return COHORT_OK;
}

int round_update_add(round_engine *e, const float *delta, uint64_t weight,
                     int within, int checked, char *why, size_t whylen) {
  int rc = checked ? aggregate_add_checked(e->agg, delta, weight, why, whylen)
                   : aggregate_add(e->agg, delta, weight, why, whylen);
  if (!rc)
    rc = round_dp_add_update(e, delta);
  if (!rc)
    e->dp.within += (uint64_t)within;
  return rc;
}

/* ---- recovery ---- */

typedef struct resume_ctx {
  round_engine *e;
  int64_t *dropped; /* clients whose kept update could not be used */
  size_t n_dropped;
} resume_ctx;

static int resume_participant(void *ctx, const store_participant *sp) {
  resume_ctx *rc = ctx;
  round_engine *e = rc->e;
  participant *p = round_add_participant(e, sp->client);
  if (!p)
    return COHORT_ENOMEM;
  p->bytes_down = sp->bytes_down;
  p->bytes_up = sp->bytes_up;
  p->examples = sp->examples;
  p->reported = sp->reported;
  e->n_done += (size_t)p->reported;
  if (!sp->uploaded)
    return COHORT_OK;
  float *delta = malloc(e->agg_dim * sizeof *delta);
  char why[200] = "out of memory";
  uint64_t weight = 0;
  int within = 0;
  if (delta &&
      round_update_prepare(e, sp->delta, sp->delta_len, sp->examples, delta,
                           &weight, &within, &p->norm, why,
                           sizeof why) == COHORT_OK &&
      round_update_add(e, delta, weight, within, 0, why, sizeof why) ==
          COHORT_OK) {
    p->uploaded = 1;
    crypto_unhex(sp->sha256_hex, p->digest, sizeof p->digest);
  }
  free(delta);
  if (p->uploaded) {
    e->n_done++;
    return COHORT_OK;
  }
  log_warn("round %lld: update of client %lld not resumed (%s); it may "
           "upload again",
           (long long)e->round, (long long)sp->client, why);
  int64_t *d = realloc(rc->dropped, (rc->n_dropped + 1) * sizeof *d);
  if (!d)
    return COHORT_ENOMEM;
  rc->dropped = d;
  rc->dropped[rc->n_dropped++] = sp->client;
  return COHORT_OK;
}

/* Picks up the round a crash interrupted, in the state it was in: its
 * selected clients, the updates they had uploaded (kept in the store) and
 * what was left of its deadline. A round of an older model, or one whose
 * participants cannot be read back, is FAILED instead. */
static int resume_round(round_engine *e, char *err, size_t errlen) {
  store_round_info info;
  int rc = store_round_unfinished(e->db, &info);
  if (rc == COHORT_ENOTFOUND)
    return COHORT_OK;
  if (rc) {
    snprintf(err, errlen, "cannot read rounds: %s", store_errmsg(e->db));
    return rc;
  }
  if (info.base_version != e->version) {
    log_warn("round %lld was on model %lld, the latest is %lld: FAILED",
             (long long)info.id, (long long)info.base_version,
             (long long)e->version);
    return store_round_fail(e->db, info.id,
                            "coordinator restarted; its model is not the "
                            "latest",
                            clock_wall_s());
  }
  int evaluate = strcmp(info.kind, "EVALUATE") == 0;
  /* A secure-aggregation round cannot go on: its keys and shares were only
   * in memory. Nor can a plain one when --secagg is now on: its clients
   * would upload their updates in the clear. */
  if (!evaluate && (info.secagg[0] || e->cfg.secagg != ROUND_SECAGG_OFF)) {
    const char *reason =
        info.secagg[0] ? "coordinator restarted during secure aggregation; "
                         "its keys were only in memory"
                       : "coordinator restarted with --secagg on; the round "
                         "began without it";
    log_warn("round %lld: FAILED: %s", (long long)info.id, reason);
    return store_round_fail(e->db, info.id, reason, clock_wall_s());
  }
  char why[300];
  if (!evaluate && round_codec_resume(e, &info.codec, why, sizeof why)) {
    log_warn("round %lld cannot be resumed (%s): FAILED", (long long)info.id,
             why);
    return store_round_fail(e->db, info.id,
                            "coordinator restarted with another codec",
                            clock_wall_s());
  }
  e->round = info.id;
  e->resumed = 1;
  e->kind = evaluate ? KIND_EVALUATE : KIND_TRAIN;
  e->target = info.target > 0 ? (size_t)info.target : 1;
  e->select_max = (size_t)ceil((double)e->target * (1.0 + e->cfg.over_select));
  if (round_dp_sampling_round(e)) {
    /* Coins and candidates lived in memory: a selection cannot go on
     * without giving some clients a second chance in the same round. */
    if (strcmp(info.state, "OPEN") == 0)
      snprintf(why, sizeof why,
               "coordinator restarted while the round was sampling its "
               "clients; the sampling decisions were only in memory");
    if (strcmp(info.state, "OPEN") == 0 ||
        round_dp_resume(e, &info, why, sizeof why)) {
      log_warn("round %lld: FAILED: %s", (long long)info.id, why);
      return store_round_fail(e->db, info.id, why, clock_wall_s());
    }
  }
  resume_ctx ctx = {.e = e};
  rc = store_round_participants(e->db, info.id, resume_participant, &ctx);
  /* Written after the read is done: the clients whose kept update was
   * unusable are SELECTED again, so their new upload is taken. */
  for (size_t i = 0; !rc && i < ctx.n_dropped; i++)
    rc = store_participation_unupload(e->db, info.id, ctx.dropped[i]);
  free(ctx.dropped);
  if (rc) {
    snprintf(err, errlen, "cannot read round %lld: %s", (long long)info.id,
             store_errmsg(e->db));
    return rc;
  }
  double now = clock_mono_s();
  e->opened_at = now;
  if (strcmp(info.state, "OPEN") == 0) {
    round_set_state(e, ROUND_OPEN);
    round_select_open(e, now); /* candidates lived in memory: a new window */
  } else {
    /* TRAINING keeps what was left of its deadline; AGGREGATING had passed
     * it, so the next tick aggregates the kept updates again. */
    double left = info.deadline_at - clock_wall_s();
    if (strcmp(info.state, "AGGREGATING") == 0 || left < 0)
      left = 0;
    if (strcmp(info.state, "TRAINING") != 0)
      rc = store_round_set_state(e->db, info.id, "TRAINING", NULL,
                                 clock_wall_s());
    round_set_state(e, ROUND_TRAINING);
    e->deadline = now + left;
  }
  log_info("round %lld: resumed after a restart in %s with %zu of %zu "
           "client(s) done",
           (long long)e->round, round_state_name(e->state), e->n_done,
           e->n_parts);
  return rc;
}

static int eval_due_now(round_engine *e) {
  return e->cfg.eval_every > 0 && e->committed > 0 &&
         e->committed % e->cfg.eval_every == 0;
}

int round_engine_new(const round_config *cfg, store *db, round_engine **out,
                     char *err, size_t errlen) {
  if (cfg->clients_per_round < 1 || cfg->min_clients < 1 ||
      (cfg->fraction <= 0 && cfg->min_clients > cfg->clients_per_round) ||
      cfg->rounds < 0 || cfg->fraction < 0 || cfg->fraction > 1 ||
      cfg->over_select < 0 || cfg->eval_every < 0) {
    snprintf(err, errlen,
             "need 1 <= --min-clients <= --clients-per-round, --fraction in "
             "[0, 1], --over-select >= 0 and --rounds, --eval-every >= 0");
    return COHORT_EINVAL;
  }
  if (strategy_config_check(&cfg->strategy, err, errlen))
    return COHORT_EINVAL;
  round_engine *e = calloc(1, sizeof *e);
  if (!e)
    return COHORT_ENOMEM;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->uploaded, NULL);
  pthread_cond_init(&e->changed, NULL);
  e->cfg = *cfg;
  e->db = db;
  e->started_at = clock_mono_s();
  int rc = nn_zoo_resolve(cfg->model_spec, cfg->input, cfg->classes, &e->model,
                          err, errlen);
  if (rc)
    goto out;
  rc = strategy_new(&cfg->strategy, e->model.n_params, &e->strategy);
  if (!rc && (rc = round_codec_setup(e, err, errlen)))
    goto out;
  if (!rc && (rc = round_dp_setup(e, err, errlen)))
    goto out;
  if (!rc && (rc = round_secagg_setup(e, err, errlen)))
    goto out;
  if (!rc) {
    agg_kind kind = strategy_aggregation(e->strategy);
    /* The robust kinds keep every update (4 bytes per parameter each):
     * a round's selection is bounded for them. */
    size_t cap = kind == AGG_MEAN ? 0 : ROBUST_MAX_UPDATES;
    rc = aggregate_new(kind, e->agg_dim, cap, cfg->strategy.trim, &e->agg);
  }
  if (rc) {
    snprintf(err, errlen, "cannot set up strategy %s: %s",
             strategy_name(cfg->strategy.kind), cohort_strerror(rc));
    goto out;
  }
  rc = check_settings(e, err, errlen);
  if (!rc)
    rc = load_or_create_model(e, err, errlen);
  if (!rc)
    rc = load_strategy_state(e);
  if (!rc)
    rc = round_codec_load_state(e);
  if (!rc)
    rc = round_dp_load(e, err, errlen);
  int64_t max_round = 0;
  if (!rc)
    rc = store_round_count_committed(db, &e->committed);
  if (!rc)
    rc = store_round_max(db, &max_round);
  if (rc) {
    if (!*err)
      snprintf(err, errlen, "cannot read the database: %s", store_errmsg(db));
    goto out;
  }
  e->next_round = max_round + 1;
  rc = resume_round(e, err, errlen);
  if (rc)
    goto out;
  if (e->state == ROUND_IDLE && eval_due_now(e)) {
    int exists = 0;
    rc = store_round_eval_exists(db, e->version, &exists);
    e->eval_due = !exists;
  }
  log_info("model %s (%zu parameters), version %lld, strategy %s, codec %s "
           "(%zu bytes per update); %lld of %ld rounds committed",
           e->model.spec, e->model.n_params, (long long)e->version,
           strategy_name(cfg->strategy.kind), codec_spec(e->codec),
           codec_wire_size(e->codec, &e->cparams), (long long)e->committed,
           cfg->rounds);
out:
  if (rc) {
    round_engine_free(e);
    return rc;
  }
  *out = e;
  return COHORT_OK;
}

static void reset_participants(round_engine *e) {
  for (size_t i = 0; i < e->n_parts; i++)
    free(e->parts[i].metric_names);
  e->n_parts = 0;
  e->n_done = 0;
  e->n_declined = 0;
}

void round_engine_free(round_engine *e) {
  if (!e)
    return;
  reset_participants(e);
  free(e->parts);
  round_select_free(e);
  aggregate_free(e->agg);
  strategy_free(e->strategy);
  round_codec_free(e);
  round_secagg_free(e);
  round_dp_free(e);
  free(e->global);
  round_model_release(e->blob);
  seen_set_free(&e->seen);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->uploaded);
  pthread_cond_destroy(&e->changed);
  free(e);
}

/* ---- scheduling ---- */

/* K for the next round: a count, or a fraction of the active clients. */
static size_t round_target(round_engine *e) {
  if (e->cfg.fraction <= 0)
    return (size_t)e->cfg.clients_per_round;
  size_t active = round_active_clients(e, clock_mono_s());
  size_t k = (size_t)ceil(e->cfg.fraction * (double)active);
  return k < (size_t)e->cfg.min_clients ? (size_t)e->cfg.min_clients : k;
}

static int open_round(round_engine *e) {
  int64_t id = e->next_round;
  round_kind kind = e->eval_due ? KIND_EVALUATE : KIND_TRAIN;
  size_t target = round_target(e);
  size_t select_max = (size_t)ceil((double)target * (1.0 + e->cfg.over_select));
  double now = clock_mono_s();
  if (kind == KIND_TRAIN && (round_dp_census_pending(e, now) ||
                             round_dp_open(e, now, &target, &select_max)))
    return COHORT_OK; /* not yet, or training is over: the budget is spent */
  store_codec sc;
  int rc = kind == KIND_TRAIN ? round_codec_new_round(e, &sc) : COHORT_OK;
  if (!rc)
    rc = store_round_open(
        e->db, id, e->version, kind == KIND_EVALUATE ? "EVALUATE" : "TRAIN",
        (int64_t)target, kind == KIND_TRAIN ? &sc : NULL, clock_wall_s());
  if (rc)
    return rc;
  e->next_round++;
  e->round = id;
  e->resumed = 0;
  e->kind = kind;
  e->target = target;
  e->select_max = select_max;
  round_set_state(e, ROUND_OPEN);
  e->opened_at = now;
  reset_participants(e);
  round_select_open(e, now);
  aggregate_reset(e->agg);
  rc = round_secagg_open(e);
  if (!rc)
    rc = round_dp_record_sampling(e);
  if (rc)
    return rc;
  if (round_dp_sampling_round(e))
    log_info("round %lld: OPEN (training) on model version %lld, sampling "
             "clients: %s",
             (long long)id, (long long)e->version,
             e->dp.sampling[0] ? e->dp.sampling
                               : "fixed-size, from the window's candidates");
  else
    log_info("round %lld: OPEN (%s) on model version %lld, selecting %zu "
             "client(s) for %zu result(s)",
             (long long)id, kind == KIND_EVALUATE ? "evaluation" : "training",
             (long long)e->version, e->select_max, target);
  return COHORT_OK;
}

/* Records how the round in progress ended, for round_last_outcome. */
static void set_outcome(round_engine *e, int committed,
                        const store_round_result *r) {
  round_outcome *o = &e->last;
  memset(o, 0, sizeof *o);
  o->round = e->round;
  o->committed = committed;
  o->evaluation = e->kind == KIND_EVALUATE;
  if (r)
    o->result = *r;
  else
    o->result = (store_round_result){.round = e->round,
                                     .clients_selected = (int64_t)e->n_parts,
                                     .clients_aggregated = (int64_t)e->n_done,
                                     .accuracy = NAN,
                                     .loss = NAN};
  o->epsilon = e->dp.on ? e->dp.epsilon : NAN;
}

int round_fail(round_engine *e, const char *reason) {
  set_outcome(e, 0, NULL);
  int rc = store_round_fail(e->db, e->round, reason, clock_wall_s());
  round_secagg_end(e, 0, reason);
  log_warn("round %lld: FAILED: %s", (long long)e->round, reason);
  if (e->kind == KIND_EVALUATE)
    e->eval_due = 0; /* not retried: training goes on */
  reset_participants(e);
  round_set_state(e, ROUND_IDLE);
  return rc;
}

int round_abort(round_engine *e, const char *reason, int64_t *round) {
  pthread_mutex_lock(&e->mu);
  int rc = COHORT_EINVAL;
  *round = e->round;
  if (e->state == ROUND_OPEN || e->state == ROUND_TRAINING)
    rc = round_fail(e, reason);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

/* The round's figures so far: participants, results and mean bytes of those
 * that answered; the evaluation is filled in later (NaN until then). */
static store_round_result round_result(round_engine *e) {
  store_round_result r = {.round = e->round,
                          .clients_selected = (int64_t)e->n_parts,
                          .clients_aggregated = (int64_t)e->n_done,
                          .accuracy = NAN,
                          .loss = NAN};
  size_t n = 0;
  for (size_t i = 0; i < e->n_parts; i++) {
    if (!e->parts[i].uploaded && !e->parts[i].reported)
      continue;
    r.bytes_up_mean += (double)e->parts[i].bytes_up;
    r.bytes_down_mean += (double)e->parts[i].bytes_down;
    n++;
  }
  r.bytes_up_mean = n ? r.bytes_up_mean / (double)n : NAN;
  r.bytes_down_mean = n ? r.bytes_down_mean / (double)n : NAN;
  return r;
}

static void print_round_line(round_engine *e, const store_round_result *r) {
  FILE *f = e->cfg.round_lines;
  if (!f)
    return;
  double secs = clock_mono_s() - e->opened_at;
  /* The slowest training of the updates used: the round's time minus it is
   * what the federation itself cost (bench/round_overhead). */
  uint32_t train_ms = 0;
  for (size_t i = 0; i < e->n_parts; i++)
    if (e->parts[i].uploaded && e->parts[i].train_ms > train_ms)
      train_ms = e->parts[i].train_ms;
  char secagg[64], dp[64];
  round_secagg_line(e, secagg, sizeof secagg);
  round_dp_line(e, dp, sizeof dp);
  char declined[48] = ""; /* only when some declined: the line as before */
  if (e->n_declined)
    snprintf(declined, sizeof declined, " declined %zu", e->n_declined);
  if (e->kind == KIND_EVALUATE)
    fprintf(f,
            "round %lld: evaluation accuracy %.4f loss %.4f clients %zu/%zu%s "
            "time %.2f s\n",
            (long long)e->round, r->accuracy, r->loss, e->n_done, e->n_parts,
            declined, secs);
  else
    fprintf(f,
            "round %lld: accuracy %.4f loss %.4f clients %zu/%zu up %.0f "
            "bytes/client down %.0f bytes/client time %.3f s train %.3f "
            "s%s%s\n",
            (long long)e->round, r->accuracy, r->loss, e->n_done, e->n_parts,
            r->bytes_up_mean, r->bytes_down_mean, secs, train_ms / 1000.0,
            secagg, dp);
  fflush(f);
}

/* How a round's updates become one vector of e->agg_dim doubles (the
 * linear domain for mean strategies): the plain aggregate, or the unmasked
 * secure sum. Called without the lock. COHORT_EABORTED: why is the whole
 * reason the round fails. */
typedef int (*combine_fn)(round_engine *e, double *combined, char *why,
                          size_t whylen);

static int combine_plain(round_engine *e, double *combined, char *why,
                         size_t whylen) {
  (void)why;
  (void)whylen;
  return aggregate_result(e->agg, combined);
}

/* Combines the updates, steps the strategy, evaluates and commits; called
 * with the lock held and the round in AGGREGATING. Drops the lock while it
 * computes: handlers refuse uploads while AGGREGATING, so the aggregate and
 * the global model are stable until it is retaken. */
static int aggregate_and_commit(round_engine *e, combine_fn combine) {
  size_t n = e->model.n_params;
  store_round_result r = round_result(e);
  pthread_mutex_unlock(&e->mu);
  /* The strategy's state before the step, to put back if the round fails:
   * the next round must start from the state of the committed model, as a
   * restarted coordinator would. */
  size_t state_len = strategy_state_bytes(e->strategy);
  size_t codec_len = round_codec_state_len(e);
  uint8_t *before = malloc(state_len), *state = malloc(state_len);
  /* Everything is allocated before any state moves, so nothing can fail
   * half way through updating it. */
  uint8_t *codec_before = codec_len ? malloc(codec_len) : NULL;
  uint8_t *codec_after = codec_len ? malloc(codec_len) : NULL;
  double *combined = malloc(e->agg_dim * sizeof *combined);
  double *delta = malloc(n * sizeof *delta);
  float *next = malloc(n * sizeof *next);
  char why[200] = "out of memory";
  int rc = before && state && combined && delta && next &&
                   (!codec_len || (codec_before && codec_after))
               ? combine(e, combined, why, sizeof why)
               : COHORT_ENOMEM;
  int aborted = rc == COHORT_EABORTED;
  int codec_saved = !rc; /* codec_finish below may move the codec state */
  if (codec_saved)
    round_codec_copy_state(e, codec_before);
  if (!rc)
    rc = round_codec_finish(e, combined, delta, why, sizeof why);
  if (!rc)
    rc = round_dp_finish(e, why, sizeof why);
  if (!rc) {
    strategy_state_save(e->strategy, before);
    rc = strategy_step(e->strategy, e->global, delta, next);
    if (!rc && wire_first_nonfinite(next, n) < n) {
      rc = COHORT_EINVAL;
      snprintf(why, sizeof why,
               "aggregation gave a non-finite model; lower "
               "the server learning rate");
    }
    if (rc)
      strategy_state_load(e->strategy, before, state_len, NULL, 0);
  }
  if (!rc && e->cfg.eval)
    nn_evaluate(&e->model.net, next, e->cfg.eval, &r.accuracy, &r.loss);
  if (!rc) {
    strategy_state_save(e->strategy, state);
    round_codec_copy_state(e, codec_after);
  } else if (codec_saved) {
    round_codec_restore_state(e, codec_before);
  }
  free(combined);
  free(delta);
  pthread_mutex_lock(&e->mu);
  if (rc) {
    free(before);
    free(next);
    free(state);
    free(codec_before);
    free(codec_after);
    char reason[240];
    snprintf(reason, sizeof reason, aborted ? "%s" : "aggregation failed: %s",
             why);
    return round_fail(e, reason);
  }
  /* The engine takes the new model only once the store holds it: a commit
   * the store refuses must not leave it serving, or building the next
   * round on, a model that was never committed. */
  int64_t parent = e->version;
  model_blob *blob = NULL;
  uint8_t sha[CRYPTO_SHA256_LEN];
  rc = model_wire(e, next, &blob, sha);
  if (rc) {
    free(next);
    free(before);
    free(state);
    free(codec_before);
    free(codec_after);
    return rc;
  }
  store_model m = {.version = parent + 1,
                   .round = e->round,
                   .parent = parent,
                   .blob = blob->bytes,
                   .blob_len = e->model.n_params * sizeof(float)};
  snprintf(m.spec, sizeof m.spec, "%s", e->model.spec);
  crypto_hex(sha, sizeof sha, m.sha256_hex);
  r.finished_at = clock_wall_s();
  store_server_state ss = {.strategy = state,
                           .strategy_len = state_len,
                           .codec = codec_after,
                           .codec_len = codec_len,
                           .privacy = round_dp_row(e)};
  rc = store_round_commit(e->db, &r, &m, &ss);
  if (rc) {
    /* Back to the committed model's strategy and codec state. The round
     * stays AGGREGATING, its updates kept in the store: the coordinator
     * stops on the failed tick, and a restart aggregates them again. */
    strategy_state_load(e->strategy, before, state_len, NULL, 0);
    round_codec_restore_state(e, codec_before);
    free(next);
    round_model_release(blob);
  } else {
    adopt_global(e, next, blob, sha, parent + 1);
  }
  free(state);
  free(codec_after);
  free(codec_before);
  free(before);
  if (rc) {
    log_error("round %lld: cannot commit: %s; model %lld stays the latest",
              (long long)e->round, store_errmsg(e->db), (long long)parent);
    return rc;
  }
  e->committed++;
  round_dp_committed(e);
  set_outcome(e, 1, &r);
  e->eval_due = eval_due_now(e);
  print_round_line(e, &r);
  round_secagg_end(e, 1, NULL);
  reset_participants(e);
  round_set_state(e, ROUND_IDLE);
  return COHORT_OK;
}

/* An evaluation round ends with the coordinator's own evaluation of the
 * same model beside the clients' reports. */
static int finish_evaluation(round_engine *e) {
  store_round_result r = round_result(e);
  pthread_mutex_unlock(&e->mu);
  if (e->cfg.eval)
    nn_evaluate(&e->model.net, e->global, e->cfg.eval, &r.accuracy, &r.loss);
  pthread_mutex_lock(&e->mu);
  r.finished_at = clock_wall_s();
  int rc = store_round_finish_eval(e->db, &r);
  if (rc) {
    log_error("round %lld: cannot record the evaluation: %s",
              (long long)e->round, store_errmsg(e->db));
    return rc;
  }
  e->eval_due = 0;
  set_outcome(e, 1, &r);
  print_round_line(e, &r);
  reset_participants(e);
  round_set_state(e, ROUND_IDLE);
  return COHORT_OK;
}

static int close_selection(round_engine *e, double now) {
  size_t m = (size_t)e->cfg.min_clients;
  if (e->sa.active && m < 2)
    m = 2; /* the protocol needs two clients */
  if (round_dp_sampling_round(e)) {
    int ready = 0;
    int rc = round_dp_close_selection(e, now, m, &ready);
    if (rc || !ready)
      return rc;
  } else {
    int rc = round_select_draw(e, now, 0);
    if (rc)
      return rc;
    int full = e->n_parts >= e->select_max;
    int waited =
        e->n_parts >= m && now - e->opened_at >= e->cfg.selection_timeout_s;
    if (!full && !waited)
      return COHORT_OK;
  }
  if (e->sa.active) {
    int failed = 0;
    int rc = round_secagg_start(e, now, &failed);
    if (rc || failed)
      return rc;
  }
  double deadline_at = clock_wall_s() + e->cfg.round_timeout_s;
  int rc =
      store_round_set_training(e->db, e->round, deadline_at, clock_wall_s());
  if (rc)
    return rc;
  round_set_state(e, ROUND_TRAINING);
  e->deadline = now + e->cfg.round_timeout_s;
  log_info("round %lld: %s with %zu client(s), deadline in %.0f s",
           (long long)e->round,
           e->kind == KIND_EVALUATE ? "EVALUATING" : "TRAINING", e->n_parts,
           e->cfg.round_timeout_s);
  return COHORT_OK;
}

/* Whether a round's TRAINING (or EVALUATING) phase has no answer left to
 * wait for: its target met, or every participant done or declined (a
 * client that declined has answered). */
static int training_settled(const round_engine *e) {
  size_t want = e->target < e->n_parts ? e->target : e->n_parts;
  return e->n_done >= want || e->n_done + e->n_declined >= e->n_parts;
}

/* The other answers change nothing the scheduler's next tick would act on
 * before its deadline (close_training), so they do not wake it: a wake
 * per update, 500 a round at N=500, cost a look at the database file and
 * two takes of the engine's lock each, for the last one's sake. */
void round_answer_arrived(round_engine *e) {
  if (training_settled(e))
    pthread_cond_broadcast(&e->uploaded);
}

/* Ends the TRAINING phase when the target is met, everyone has answered or
 * the deadline passed. */
static int close_training(round_engine *e, double now) {
  if (!training_settled(e) && now < e->deadline)
    return COHORT_OK;
  size_t want = e->target < e->n_parts ? e->target : e->n_parts;
  /* Stragglers of a round that met its target are not charged, nor the
   * clients of a round the coordinator's restart interrupted. */
  int rc = round_offenders_settle(e, e->n_done < want && !e->resumed,
                                  e->kind == KIND_EVALUATE
                                      ? "selected, no report by the deadline"
                                      : "selected, no accepted update by the "
                                        "deadline");
  if (rc)
    return rc;
  if (e->n_done < (size_t)e->cfg.min_clients) {
    char reason[160];
    char declined[48] = "";
    if (e->n_declined)
      snprintf(declined, sizeof declined, " (%zu declined)", e->n_declined);
    snprintf(reason, sizeof reason,
             "deadline passed with %zu of the %ld required %s%s", e->n_done,
             e->cfg.min_clients,
             e->kind == KIND_EVALUATE ? "reports" : "updates", declined);
    return round_fail(e, reason);
  }
  double phase = now - (e->deadline - e->cfg.round_timeout_s);
  e->training_s = e->training_s > 0 ? 0.7 * e->training_s + 0.3 * phase : phase;
  rc = store_round_set_state(e->db, e->round, "AGGREGATING", NULL,
                             clock_wall_s());
  if (rc)
    return rc;
  round_set_state(e, ROUND_AGGREGATING);
  if (e->kind == KIND_EVALUATE)
    return finish_evaluation(e);
  char why[200];
  if (round_bound_apply(e, why, sizeof why)) {
    char reason[240];
    snprintf(reason, sizeof reason, "aggregation failed: %s", why);
    return round_fail(e, reason);
  }
  return aggregate_and_commit(
      e, e->cfg.dp == ROUND_DP_CENTRAL ? round_dp_combine : combine_plain);
}

/* A secure-aggregation round's TRAINING: its phases close one by one; the
 * end of UNMASK takes it to AGGREGATING and the commit. */
static int secagg_training(round_engine *e, double now) {
  int unmask = 0;
  int rc = round_secagg_tick(e, now, &unmask);
  if (rc || !unmask)
    return rc;
  rc = round_offenders_settle(e, 1,
                              "secure-aggregation dropout: no masked input");
  if (!rc)
    rc = store_round_set_state(e->db, e->round, "AGGREGATING", NULL,
                               clock_wall_s());
  if (rc)
    return rc;
  round_set_state(e, ROUND_AGGREGATING);
  return aggregate_and_commit(e, round_secagg_combine);
}

/* One step of the state machine. */
static int tick_once(round_engine *e) {
  double now = clock_mono_s();
  switch (e->state) {
  case ROUND_IDLE:
    if (!training_over(e) || e->eval_due)
      return open_round(e);
    return COHORT_OK;
  case ROUND_OPEN:
    return close_selection(e, now);
  case ROUND_TRAINING:
    return e->sa.active ? secagg_training(e, now) : close_training(e, now);
  case ROUND_AGGREGATING:
    return COHORT_OK; /* only reached through a failed commit; the caller
                         stops */
  }
  return COHORT_OK;
}

int round_tick(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int was_done = round_done_locked(e);
  int rc = tick_once(e);
  /* The end can come without a change of state: a privacy budget that
   * admits no further round. */
  if (round_done_locked(e) != was_done)
    round_changed(e);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

/* The absolute time ms from now on the clock pthread_cond_timedwait uses. */
static struct timespec deadline_in(int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

void round_wait(round_engine *e, int ms) {
  struct timespec ts = deadline_in(ms);
  pthread_mutex_lock(&e->mu);
  pthread_cond_timedwait(&e->uploaded, &e->mu, &ts);
  pthread_mutex_unlock(&e->mu);
}

uint64_t round_changes(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  uint64_t n = e->changes;
  pthread_mutex_unlock(&e->mu);
  return n;
}

uint64_t round_wait_changes(round_engine *e, uint64_t seen, int ms) {
  struct timespec ts = deadline_in(ms);
  pthread_mutex_lock(&e->mu);
  while (e->changes == seen &&
         pthread_cond_timedwait(&e->changed, &e->mu, &ts) == 0) {
  }
  uint64_t n = e->changes;
  pthread_mutex_unlock(&e->mu);
  return n;
}

int round_federation_done(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int done = round_done_locked(e);
  pthread_mutex_unlock(&e->mu);
  return done;
}

int round_all_clients_told(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int all = round_done_locked(e);
  /* Clients that only ever took part (in a round resumed after a restart)
   * without checking in since are not waited for. */
  for (size_t i = 0; all && i < e->seen.n; i++)
    all = e->seen.items[i].told_done || !e->seen.items[i].checked_in_at;
  pthread_mutex_unlock(&e->mu);
  return all;
}

int64_t round_committed(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int64_t n = e->committed;
  pthread_mutex_unlock(&e->mu);
  return n;
}

round_state round_current(round_engine *e, int64_t *round) {
  pthread_mutex_lock(&e->mu);
  round_state s = e->state;
  if (round)
    *round = e->round;
  pthread_mutex_unlock(&e->mu);
  return s;
}

void round_last_outcome(round_engine *e, round_outcome *out) {
  pthread_mutex_lock(&e->mu);
  *out = e->last;
  pthread_mutex_unlock(&e->mu);
}
