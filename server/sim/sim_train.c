/* cohort-sim's local training; see sim_train.h. */
#include "sim_train.h"

#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "nn_pool.h"
#include "nn_rng.h"
#include "nn_train.h"
#include "sim_mpi.h"
#include "wire.h"

int sim_selected_add(sim_selected *s, size_t k, const round_task *t,
                     double at) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    sim_selected_client *p = realloc(s->items, cap * sizeof *p);
    if (!p)
      return COHORT_ENOMEM;
    s->items = p;
    s->cap = cap;
  }
  sim_selected_client *c = &s->items[s->n++];
  memset(c, 0, sizeof *c);
  c->k = k;
  c->task = *t;
  c->task_at = at;
  return COHORT_OK;
}

void sim_selected_clear(sim_selected *s) { s->n = 0; }

void sim_selected_free(sim_selected *s) {
  free(s->items);
  memset(s, 0, sizeof *s);
}

int sim_trainer_reserve(sim_trainer *tr, size_t n) {
  if (n <= tr->cap)
    return COHORT_OK;
  sim_slot *p = realloc(tr->slot, n * sizeof *p);
  if (!p)
    return COHORT_ENOMEM;
  tr->slot = p;
  for (size_t i = tr->cap; i < n; i++) {
    memset(&p[i], 0, sizeof p[i]);
    void *block = NULL;
    if (posix_memalign(&block, 64, tr->n_params * sizeof(float)))
      return COHORT_ENOMEM;
    p[i].delta = block;
    tr->cap = i + 1;
  }
  return COHORT_OK;
}

int sim_trainer_init(sim_trainer *tr, const sim_loop_config *lc,
                     const sim_world *w, char *err, size_t errlen) {
  (void)w;
  memset(tr, 0, sizeof *tr);
  tr->lc = lc;
  tr->n_params = lc->model.n_params;
  /* A wave: twice the threads of every rank, so none idles while the
   * slowest client of a wave trains. Over MPI a wave costs a round trip
   * between the ranks, so it holds up to 16 clients a rank, as long as
   * their updates fit in 64 MiB. */
  tr->slots = 2 * (size_t)sim_mpi_threads();
  size_t ranks = (size_t)sim_mpi_size(),
         fit = (64u << 20) / (tr->n_params * 4 + 1);
  if (ranks > 1 && tr->slots < 16 * ranks)
    tr->slots = fit > 16 * ranks  ? 16 * ranks
                : fit > tr->slots ? fit
                                  : tr->slots;
  tr->global = malloc(tr->n_params * sizeof *tr->global);
  tr->blob = malloc(tr->n_params * sizeof(float));
  if (!tr->global || !tr->blob || sim_trainer_reserve(tr, tr->slots))
    return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                       "out of memory for %zu clients in flight", tr->slots);
  return COHORT_OK;
}

int sim_trainer_round(sim_trainer *tr, round_engine *e, const sim_world *w,
                      const sim_selected *sel, char *err, size_t errlen) {
  if (!sel->n)
    return COHORT_OK;
  const round_task *t = &sel->items[0].task;
  size_t want = tr->n_params * sizeof(float);
  if (t->model_size != want)
    return errbuf_fail(err, errlen, COHORT_EPROTO, NULL,
                       "the coordinator serves a %llu-byte model; the "
                       "clients' %s has %zu bytes",
                       (unsigned long long)t->model_size, t->model_spec, want);
  /* Not counted as anyone's download: the clients' own are (sim_loop.c). */
  uint64_t offset = 0, total = want;
  while (offset < total) {
    size_t len = 0;
    uint8_t sha[32];
    round_verdict v = round_get_model(
        e, w->clients[sel->items[0].k].id, t->model_version, offset,
        tr->blob + offset, want - offset, &len, &total, sha);
    if (v.code || len == 0 || total != want)
      return errbuf_fail(err, errlen, COHORT_EPROTO, NULL,
                         "cannot read the global model: %s", v.detail);
    offset += len;
  }
  wire_get_f32le(tr->global, tr->blob, tr->n_params);
  int rc = sim_mpi_send_model(tr, t->round);
  if (rc)
    return errbuf_fail(err, errlen, rc, NULL,
                       "cannot send round %lld's model to the other ranks",
                       (long long)t->round);
  codec *c = NULL;
  char why[200];
  if (codec_parse(t->codec[0] ? t->codec : "fp32", &c, why, sizeof why))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "codec %s: %s",
                       t->codec, why);
  codec_params p = {.dim = tr->n_params, .clip = t->codec_clip};
  memcpy(p.seed, t->codec_seed, sizeof p.seed);
  tr->wire_size = codec_wire_size(c, &p);
  codec_free(c);
  return COHORT_OK;
}

double sim_train_flops(const sim_trainer *tr, int epochs, size_t examples) {
  return 6.0 * (double)tr->n_params * (double)examples * (double)epochs;
}

/* What a pass over a wave does to each client. */
typedef enum wave_work {
  WAVE_TRAIN,        /* its delta */
  WAVE_TRAIN_ENCODE, /* its delta, then its encoded update */
  WAVE_ENCODE        /* its encoded update, from the delta in its slot */
} wave_work;

typedef struct wave {
  sim_trainer *tr;
  sim_world *w;
  int64_t round;
  const sim_selected_client *items;
  sim_slot *slots; /* items[j]'s is slots[j] */
  wave_work work;
} wave;

/* The seed of client k's draws in round (stochastic rounding): the run's
 * seed, the round and the client, so a client draws the same numbers on
 * whichever worker it trains. */
static void client_seed(uint64_t seed, int64_t round, size_t k,
                        uint8_t out[32]) {
  uint64_t words[4];
  for (int i = 0; i < 4; i++)
    words[i] = nn_rng_mix(
        nn_rng_mix(nn_rng_mix(seed, 0xc0dec000u + i), (uint64_t)round), k);
  memcpy(out, words, 32);
}

/* Client it's delta into s: trained from the round's global model with a
 * seed of the run, the client and the round only, so it is the same on
 * whichever thread or rank trains it. */
static void train_delta(wave *wv, const sim_selected_client *it, sim_slot *s) {
  sim_trainer *tr = wv->tr;
  const round_task *t = &it->task;
  size_t n = tr->n_params;
  s->err[0] = '\0';
  nn_dataset share;
  s->rc = sim_client_share(wv->w, it->k, &share);
  if (s->rc) {
    snprintf(s->err, sizeof s->err, "cannot gather its examples");
    return;
  }
  memcpy(s->delta, tr->global, n * sizeof *s->delta);
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.epochs = t->epochs;
  o.batch_size = t->batch_size;
  o.optim.learning_rate = (float)t->learning_rate;
  o.optim.momentum = tr->lc->momentum;
  o.optim.weight_decay = tr->lc->weight_decay;
  o.fedprox_mu = t->fedprox_mu;
  /* As cohort-client seeds its built-in trainer: the client and the
   * round. */
  o.seed =
      nn_rng_mix(nn_rng_mix(wv->w->seed, (uint64_t)it->k), (uint64_t)wv->round);
  double loss = 0;
  s->rc = nn_train_in_place(&tr->lc->model.net, s->delta, tr->global, &share,
                            &o, &loss, s->err, sizeof s->err);
  nn_dataset_close(&share);
  if (s->rc)
    return;
  for (size_t i = 0; i < n; i++)
    s->delta[i] -= tr->global[i];
  size_t bad = wire_first_nonfinite(s->delta, n);
  if (bad < n) {
    s->rc = COHORT_EINVAL;
    snprintf(s->err, sizeof s->err,
             "training gave a non-finite update (element %zu); lower --lr",
             bad);
  }
}

/* Client it's delta in s encoded with the task's codec and the client's
 * error-feedback memory, its draws from a stream of its own. */
static void encode_update(wave *wv, const sim_selected_client *it,
                          sim_slot *s) {
  const round_task *t = &it->task;
  uint8_t seed[32];
  client_seed(wv->w->seed, wv->round, it->k, seed);
  /* The calling thread runs a share of the wave too (nn_parallel_for), and
   * it is the main thread, whose own stream (the engine's draws) must go
   * on where it was, not end with this client's. */
  crypto_simulated_stream *own = crypto_random_simulate_save();
  s->rc = crypto_random_simulate(seed);
  if (!s->rc)
    s->rc = update_codec_encode(&wv->w->clients[it->k].codec, t->codec,
                                t->codec_seed, sizeof t->codec_seed,
                                t->codec_clip, s->delta, wv->tr->n_params,
                                &s->wire, &s->wire_len, s->err, sizeof s->err);
  crypto_random_simulate_restore(own);
  /* Codecs without client memory are parsed again next time rather than
   * kept by every one of thousands of clients. */
  if (!wv->w->clients[it->k].codec.residual)
    update_codec_free(&wv->w->clients[it->k].codec);
}

static void work_one(wave *wv, size_t j) {
  sim_slot *s = &wv->slots[j];
  const sim_selected_client *it = &wv->items[j];
  free(s->wire);
  s->wire = NULL;
  s->wire_len = 0;
  if (wv->work != WAVE_ENCODE) {
    train_delta(wv, it, s);
    if (s->rc)
      return;
  }
  if (wv->work != WAVE_TRAIN)
    encode_update(wv, it, s);
}

static void work_range(void *ctx, size_t begin, size_t end) {
  for (size_t j = begin; j < end; j++)
    work_one(ctx, j);
}

/* One pass over items[0..n) into slots[0..n) on this process's pool; the
 * first failure with its reason in err. */
static int run_pass(sim_trainer *tr, sim_world *w, int64_t round,
                    const sim_selected_client *items, size_t n, sim_slot *slots,
                    wave_work work, char *err, size_t errlen) {
  wave wv = {.tr = tr,
             .w = w,
             .round = round,
             .items = items,
             .slots = slots,
             .work = work};
  nn_parallel_for(n, 1, work_range, &wv);
  for (size_t j = 0; j < n; j++)
    if (slots[j].rc)
      return errbuf_fail(err, errlen, slots[j].rc, NULL,
                         "client %zu, round %lld: %s", items[j].k,
                         (long long)round, slots[j].err);
  return COHORT_OK;
}

int sim_train_here(sim_trainer *tr, sim_world *w, int64_t round,
                   const sim_selected_client *items, size_t n, size_t first,
                   char *err, size_t errlen) {
  if (first + n > tr->cap)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "%zu clients in flight, room for %zu", first + n,
                       tr->cap);
  return run_pass(tr, w, round, items, n, tr->slot + first, WAVE_TRAIN, err,
                  errlen);
}

int sim_train_wave(sim_trainer *tr, sim_world *w, int64_t round,
                   const sim_selected_client *items, size_t n, int encode,
                   char *err, size_t errlen) {
  if (n > tr->cap)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "%zu clients in flight, room for %zu", n, tr->cap);
  if (sim_mpi_size() == 1)
    return run_pass(tr, w, round, items, n, tr->slot,
                    encode ? WAVE_TRAIN_ENCODE : WAVE_TRAIN, err, errlen);
  /* Spread over the ranks, the deltas gathered here; encoded here, so that
   * codec memory and the engine stay on this rank. */
  int rc = sim_mpi_wave(tr, w, round, items, n, err, errlen);
  if (!rc && encode)
    rc = run_pass(tr, w, round, items, n, tr->slot, WAVE_ENCODE, err, errlen);
  return rc;
}

void sim_train_accepted(sim_client *c) { update_codec_accepted(&c->codec); }

void sim_trainer_free(sim_trainer *tr) {
  for (size_t i = 0; i < tr->cap; i++) {
    free(tr->slot[i].delta);
    free(tr->slot[i].wire);
  }
  free(tr->slot);
  free(tr->global);
  free(tr->blob);
  memset(tr, 0, sizeof *tr);
}
