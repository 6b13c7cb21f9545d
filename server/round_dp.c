/* The round engine's side of differential privacy (docs/privacy.md):
 * refusing configurations whose guarantee would not hold, the noise
 * multiplier from a target epsilon, each round's sampling rate against the
 * budget, central mode's clipping and noise, distributed mode's encoding
 * plan and decoding, adaptive clipping, and the privacy ledger row that
 * the commit writes. Called with e->mu held, except round_dp_decode_sum,
 * round_dp_combine and round_dp_finish (AGGREGATING, lock dropped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "dp_clip.h"
#include "dp_grid.h"
#include "errbuf.h"
#include "log.h"
#include "round_internal.h"

/* Bound on the probability that a coordinate of a distributed round's sum
 * wraps around the ring (docs/privacy.md). */
#define DP_WRAP_PROBABILITY 1e-6

int round_dp_parse(const char *s, round_dp_mode *out) {
  static const char *names[] = {"off", "central", "distributed"};
  for (int i = 0; i < 3; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (round_dp_mode)i;
      return COHORT_OK;
    }
  return COHORT_EINVAL;
}

const char *round_dp_name(round_dp_mode m) {
  return m == ROUND_DP_CENTRAL       ? "central"
         : m == ROUND_DP_DISTRIBUTED ? "distributed"
                                     : "off";
}

/* The clients a round is expected to sum: K, or the minimum when K follows
 * the active clients (--fraction). */
static double expected_clients(const round_config *c) {
  return (double)(c->fraction > 0 ? c->min_clients : c->clients_per_round);
}

/* The sampling rate the planner assumes before any client checked in:
 * --dp-sampling-rate, the fraction, or K / --dp-population (K with
 * over-selection for fixed-size rounds, which draw that many); 0 when none
 * says. A fixed-size round is charged what its draw gives, which this
 * only estimates. */
static double planned_rate(const round_config *c) {
  if (c->dp_sampling_rate > 0)
    return c->dp_sampling_rate;
  if (c->fraction > 0)
    return c->fraction;
  if (c->dp_population > 0) {
    double k = (double)c->clients_per_round;
    if (c->dp_sampling == ROUND_DP_FIXED)
      k = ceil(k * (1 + c->over_select));
    double q = k / (double)c->dp_population;
    return q < 1 ? q : 1;
  }
  return 0;
}

static int check_config(const round_engine *e, char *err, size_t errlen) {
  const round_config *c = &e->cfg;
  const char *mode = round_dp_name(c->dp);
  if ((unsigned)c->dp > ROUND_DP_DISTRIBUTED)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp must be off, central or distributed");
  if (!(c->dp_delta > 0 && c->dp_delta < 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-delta %g must be in (0, 1)", c->dp_delta);
  if (!(c->dp_clip > 0 && c->dp_clip <= 1e6))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-clip %g must be in (0, 1e6]", c->dp_clip);
  if (!(c->dp_noise_multiplier >= 0 && c->dp_noise_multiplier <= 1e4) ||
      !(c->dp_epsilon >= 0) || !(c->dp_budget >= 0) ||
      (c->dp_noise_multiplier == 0 && c->dp_epsilon == 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp %s needs --dp-noise-multiplier Z (0 < Z <= 1e4) "
                       "or --dp-epsilon E (E > 0); --dp-budget must be >= 0",
                       mode);
  if (!(c->dp_target_quantile >= 0 && c->dp_target_quantile < 1) ||
      !(c->dp_clip_lr > 0) || !(c->dp_count_stddev >= 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-target-quantile must be in [0, 1) (0: a fixed "
                       "clip), --dp-clip-lr > 0, --dp-count-stddev >= 0");
  if (c->dp_population < 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-population must be >= 0 (0: the active "
                       "clients)");
  if ((unsigned)c->dp_sampling > ROUND_DP_FIXED)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-sampling must be poisson or fixed");
  if (!(c->dp_sampling_rate >= 0 && c->dp_sampling_rate <= 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-sampling-rate %g must be in [0, 1] (0: from "
                       "--fraction, --dp-population or the active clients)",
                       c->dp_sampling_rate);
  if (c->dp_sampling == ROUND_DP_FIXED && c->dp_sampling_rate > 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-sampling-rate sets Poisson's q; --dp-sampling "
                       "fixed is charged K over the clients that checked "
                       "in, so it takes no rate");
  if (strategy_aggregation(e->strategy) != AGG_MEAN)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp %s: --strategy %s is not a mean, whose "
                       "sensitivity the clip bounds; use a mean-based "
                       "strategy",
                       mode, strategy_name(c->strategy.kind));
  if (c->dp == ROUND_DP_CENTRAL) {
    if (c->secagg != ROUND_SECAGG_OFF)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--dp central clips each update on the coordinator, "
                         "which secure aggregation keeps from it; use --dp "
                         "distributed with --secagg");
    if (e->cstate)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--dp central: --codec %s keeps sketch state on the "
                         "coordinator, which needs the linear domain; central "
                         "DP clips in the model domain",
                         codec_spec(e->codec));
  } else {
    if (c->secagg == ROUND_SECAGG_OFF)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--dp distributed needs --secagg full or plus: the "
                         "clients' noise protects only the sum");
    if (strcmp(codec_spec(e->codec), "fp32") != 0)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--dp distributed encodes updates itself (rotation, "
                         "scaling and rounding to --dp-bits); leave --codec "
                         "at fp32, not %s",
                         codec_spec(e->codec));
    if (c->dp_bits < DDP_MIN_BITS || c->dp_bits > DDP_MAX_BITS)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--dp-bits %u must be in [%d, %d]", c->dp_bits,
                         DDP_MIN_BITS, DDP_MAX_BITS);
  }
  return COHORT_OK;
}

int round_dp_setup(round_engine *e, char *err, size_t errlen) {
  const round_config *c = &e->cfg;
  round_dp *dp = &e->dp;
  if (c->dp == ROUND_DP_OFF)
    return COHORT_OK;
  int rc = check_config(e, err, errlen);
  if (rc)
    return rc;
  dp->z = c->dp_noise_multiplier;
  if (dp->z == 0) {
    double q = planned_rate(c);
    if (q == 0)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--dp-epsilon needs the sampling rate to plan "
                         "with: give --dp-sampling-rate Q, --fraction, or "
                         "--dp-population N (q = K / N), or set "
                         "--dp-noise-multiplier");
    char why[200];
    if (dp_noise_for_epsilon(c->dp_epsilon, q, (uint64_t)c->rounds, c->dp_delta,
                             &dp->z, why, sizeof why))
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "--dp-epsilon: %s",
                         why);
    log_info("dp: noise multiplier %.4f gives epsilon %g at delta %g after "
             "%ld rounds at q = %.4f",
             dp->z, c->dp_epsilon, c->dp_delta, c->rounds, q);
  }
  dp->budget = c->dp_budget > 0    ? c->dp_budget
               : c->dp_epsilon > 0 ? c->dp_epsilon
                                   : INFINITY;
  dp->z_update = dp->z;
  if (c->dp_target_quantile > 0) {
    double k = expected_clients(c);
    dp->count_stddev = c->dp_count_stddev > 0 ? c->dp_count_stddev : k / 20;
    dp->z_update = dp_adaptive_update_noise(dp->z, dp->count_stddev, k);
    if (!(dp->z_update > 0))
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "adaptive clipping: a count noise of %g over %g "
                         "clients leaves no budget for the update at noise "
                         "multiplier %g; raise --dp-count-stddev",
                         dp->count_stddev, k, dp->z);
  }
  if (c->dp == ROUND_DP_CENTRAL) {
    /* Each update is clipped where its norm means something: in the model
     * domain, after decoding. */
    e->agg_linear = 0;
    e->agg_dim = e->cparams.dim;
    /* The grid's reach depends on z alone (the clip only scales it): a
     * noise multiplier it cannot take is refused now, not in a round. */
    rc = dp_grid_plan(c->dp_clip, dp->z_update, &dp->grid, err, errlen);
    if (rc)
      return rc;
    dp->grid_sum = calloc(e->cparams.dim, sizeof *dp->grid_sum);
    if (!dp->grid_sum)
      return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                         "out of memory for the central DP sum of %zu "
                         "parameters",
                         e->cparams.dim);
  }
  dp->clip = c->dp_clip;
  dp_accountant_init(&dp->acc);
  if (prg_init_random(&dp->noise))
    return errbuf_fail(err, errlen, COHORT_EIO, NULL,
                       "cannot seed the noise generator from the CSPRNG");
  dp->noise_live = 1;
  dp->on = 1;
  return COHORT_OK;
}

void round_dp_free(round_engine *e) {
  if (e->dp.noise_live)
    prg_free(&e->dp.noise);
  e->dp.noise_live = 0;
  free(e->dp.grid_sum);
  e->dp.grid_sum = NULL;
}

/* Replaying the ledger: runs of rounds with the same (q, z) are added at
 * once (one add costs as much as one round). */
typedef struct ledger_replay {
  round_dp *dp;
  double q, z;
  uint64_t run;
} ledger_replay;

static int replay_flush(ledger_replay *r) {
  int rc =
      r->run ? dp_accountant_add(&r->dp->acc, r->q, r->z, r->run) : COHORT_OK;
  r->run = 0;
  return rc;
}

static int replay_row(void *ctx, const store_privacy *p) {
  ledger_replay *r = ctx;
  if (r->run && (p->sampling_rate != r->q || p->noise_multiplier != r->z)) {
    int rc = replay_flush(r);
    if (rc)
      return rc;
  }
  r->q = p->sampling_rate;
  r->z = p->noise_multiplier;
  r->run++;
  r->dp->clip = p->next_clip;
  return COHORT_OK;
}

int round_dp_load(round_engine *e, char *err, size_t errlen) {
  round_dp *dp = &e->dp;
  if (!dp->on)
    return COHORT_OK;
  ledger_replay replay = {.dp = dp};
  int rc = store_privacy_each(e->db, replay_row, &replay);
  if (!rc)
    rc = replay_flush(&replay);
  if (rc)
    return errbuf_fail(err, errlen, rc, NULL,
                       "cannot read the privacy ledger: %s",
                       rc == COHORT_EINVAL ? "a row has an invalid sampling "
                                             "rate or noise multiplier"
                                           : store_errmsg(e->db));
  /* Recomputed rather than read: the order list may have grown since. */
  dp->epsilon = dp_accountant_epsilon(&dp->acc, e->cfg.dp_delta, NULL);
  log_info("dp %s: noise multiplier %.4f, clip %g, epsilon spent %.4f at "
           "delta %g, budget %g",
           round_dp_name(e->cfg.dp), dp->z, dp->clip, dp->epsilon,
           e->cfg.dp_delta, dp->budget);
  return COHORT_OK;
}

void round_dp_round_reset(round_engine *e) {
  round_dp *dp = &e->dp;
  dp->q = 0;
  dp->sampling[0] = '\0';
  dp->within = 0;
  memset(&dp->row, 0, sizeof dp->row);
  if (dp->grid_sum) {
    /* Cannot fail: setup planned the same z (the clip only scales it). */
    dp_grid_plan(dp->clip, dp->z_update, &dp->grid, NULL, 0);
    memset(dp->grid_sum, 0, e->cparams.dim * sizeof *dp->grid_sum);
  }
}

int round_dp_admits(round_engine *e, double q) {
  round_dp *dp = &e->dp;
  dp_accountant next = dp->acc;
  double eps = dp_accountant_add(&next, q, dp->z, 1)
                   ? INFINITY
                   : dp_accountant_epsilon(&next, e->cfg.dp_delta, NULL);
  if (eps > dp->budget * (1 + 1e-9)) {
    dp->exhausted = 1;
    log_warn("dp: the privacy budget is spent: another round at q = %.4f "
             "would take epsilon from %.4f to %.4f, past --dp-budget %g; no "
             "more training rounds",
             q, dp->epsilon, eps, dp->budget);
    return 0;
  }
  dp->q = q;
  dp->row.epsilon = eps;
  return 1;
}

int round_dp_clip_update(round_engine *e, float *delta, uint64_t *weight) {
  if (!e->dp.on || e->cfg.dp != ROUND_DP_CENTRAL)
    return 0;
  *weight = 1;
  return dp_clip_l2(delta, e->cparams.dim, e->dp.clip) <= e->dp.clip;
}

int round_dp_add_update(round_engine *e, const float *delta) {
  if (!e->dp.on || e->cfg.dp != ROUND_DP_CENTRAL)
    return COHORT_OK;
  return dp_grid_add(&e->dp.grid, delta, e->cparams.dim, e->dp.grid_sum);
}

int round_dp_combine(round_engine *e, double *combined, char *why,
                     size_t whylen) {
  round_dp *dp = &e->dp;
  size_t n = aggregate_count(e->agg);
  if (n == 0)
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL, "no updates summed");
  /* N_Z(0, (z C / gamma)^2) on the sum in grid units is N(0, (z C)^2) on
   * the sum in model units; the mean divides it by n. */
  int rc = dp_grid_release(&dp->grid, &dp->noise, dp->grid_sum, e->cparams.dim,
                           combined);
  if (rc)
    return errbuf_fail(why, whylen, rc, NULL, "the central noise failed");
  for (size_t i = 0; i < e->cparams.dim; i++)
    combined[i] /= (double)n;
  return COHORT_OK;
}

int round_dp_plan_secagg(round_engine *e, uint32_t n, uint32_t t,
                         unsigned *ring_bits, size_t *dim, char *why,
                         size_t whylen) {
  round_dp *dp = &e->dp;
  /* The fewest inputs a committed sum can hold: t, which the protocol
   * enforces against any coordinator, and the number each client checks
   * the noise against (ddp_check_privacy). A curious coordinator's own
   * --min-clients would be more, but no client can check that it keeps
   * it. */
  uint32_t n_min = t;
  ddp_goal goal = {.dim = e->cparams.dim,
                   .bits = e->cfg.dp_bits,
                   .clip = dp->clip,
                   .noise_multiplier = dp->z_update,
                   .min_clients = n_min,
                   .max_clients = n,
                   .wrap_probability = DP_WRAP_PROBABILITY,
                   .adaptive = e->cfg.dp_target_quantile > 0,
                   .count_stddev = dp->count_stddev,
                   .expected_clients = expected_clients(&e->cfg)};
  int rc = ddp_plan(&goal, &dp->ddp, why, whylen);
  if (rc)
    return rc;
  /* Below 2 units the sum of the clients' discrete Gaussians is not close
   * enough to one for the accountant's Gaussian (Kairouz et al.'s tau term,
   * docs/privacy.md): a finer ring is needed. */
  if (dp->ddp.noise_stddev < DDP_MIN_NOISE_STDDEV)
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL,
                       "each client's noise would be %.2f integer units in "
                       "a %u-bit ring, below the %g the accounting needs; "
                       "raise --dp-bits",
                       dp->ddp.noise_stddev, dp->ddp.bits,
                       DDP_MIN_NOISE_STDDEV);
  /* The same for the adaptive clip's count, which clients refuse too. */
  if (dp->ddp.count_slot && dp->ddp.count_noise_stddev < DDP_MIN_NOISE_STDDEV)
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL,
                       "each client's noise on the clipped count would be "
                       "%.2f integer units in a %u-bit ring, below the %g "
                       "the accounting needs; raise --dp-bits or "
                       "--dp-count-stddev",
                       dp->ddp.count_noise_stddev, dp->ddp.bits,
                       DDP_MIN_NOISE_STDDEV);
  memcpy(dp->ddp.seed, e->cparams.seed, sizeof dp->ddp.seed);
  /* What the noise buys, published with the plan for the clients to
   * check: --rounds rounds like this one. */
  const round_config *c = &e->cfg;
  dp->claim = (ddp_privacy_claim){
      .epsilon = dp_epsilon(dp->q, dp->z, (uint64_t)c->rounds, c->dp_delta),
      .delta = c->dp_delta,
      .rounds = (uint64_t)c->rounds,
      .sampling_rate = dp->q,
      .noise_multiplier = dp->z};
  *ring_bits = dp->ddp.bits;
  *dim = ddp_ring_dim(&dp->ddp);
  return COHORT_OK;
}

int round_dp_decode_sum(round_engine *e, const uint64_t *sum, uint32_t inputs,
                        double *mean, char *why, size_t whylen) {
  round_dp *dp = &e->dp;
  double count = NAN;
  int rc = ddp_decode_sum(&dp->ddp, sum, mean,
                          dp->ddp.count_slot ? &count : NULL, why, whylen);
  if (rc)
    return rc;
  if (inputs == 0)
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL, "no inputs summed");
  for (size_t i = 0; i < e->cparams.dim; i++)
    mean[i] /= inputs;
  dp->row.cohort_size = inputs;
  /* The decoded count is the noised centred sum plus E / 2. */
  dp->row.unclipped_fraction = count / dp->ddp.count_expected;
  return COHORT_OK;
}

int round_dp_finish(round_engine *e, char *why, size_t whylen) {
  round_dp *dp = &e->dp;
  if (!dp->on)
    return COHORT_OK;
  const round_config *c = &e->cfg;
  store_privacy *row = &dp->row;
  if (c->dp == ROUND_DP_CENTRAL) {
    size_t n = aggregate_count(e->agg);
    row->cohort_size = (int64_t)n;
    row->unclipped_fraction = NAN;
    if (c->dp_target_quantile > 0) {
      /* The count is centred (sensitivity 1/2, Andrew et al.) and divided
       * by the public expected cohort, not by n. */
      double centred = 0;
      int rc = dp_grid_noised_count(&dp->noise, dp->within, n, dp->count_stddev,
                                    &centred);
      if (rc)
        return errbuf_fail(why, whylen, rc, NULL,
                           "the adaptive clip's count noise failed");
      row->unclipped_fraction =
          dp_adaptive_noised_fraction(centred, expected_clients(c));
    }
  }
  snprintf(row->mode, sizeof row->mode, "%s", round_dp_name(c->dp));
  row->round = e->round;
  row->noise_multiplier = dp->z;
  row->clip = dp->clip;
  row->sampling_rate = dp->q;
  snprintf(row->sampling, sizeof row->sampling, "%s", dp->sampling);
  row->delta = c->dp_delta;
  row->next_clip = dp->clip;
  if (c->dp_target_quantile > 0) {
    dp_adaptive_clip a = {.target_quantile = c->dp_target_quantile,
                          .learning_rate = c->dp_clip_lr,
                          .count_stddev = dp->count_stddev};
    row->next_clip =
        dp_adaptive_clip_next(&a, dp->clip, row->unclipped_fraction);
  }
  return COHORT_OK;
}

const store_privacy *round_dp_row(const round_engine *e) {
  return e->dp.on && e->kind == KIND_TRAIN ? &e->dp.row : NULL;
}

void round_dp_committed(round_engine *e) {
  round_dp *dp = &e->dp;
  if (!dp->on || e->kind != KIND_TRAIN)
    return;
  dp_accountant_add(&dp->acc, dp->row.sampling_rate, dp->row.noise_multiplier,
                    1);
  dp->epsilon = dp->row.epsilon;
  dp->clip = dp->row.next_clip;
}

void round_dp_line(const round_engine *e, char *out, size_t len) {
  out[0] = '\0';
  if (e->dp.on && e->kind == KIND_TRAIN)
    snprintf(out, len, " dp epsilon %.3f clip %.4g q %.4g", e->dp.row.epsilon,
             e->dp.row.clip, e->dp.row.sampling_rate);
}
