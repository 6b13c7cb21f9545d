/* How a DP training round picks its clients so that the rate the privacy
 * ledger charges is the rate each client really faces (docs/privacy.md,
 * "Sampling"): Poisson sampling, one coin per client and round from the
 * coordinator's CSPRNG, or a fixed-size round drawn uniformly from the
 * clients that checked in during the selection window and charged K over
 * them. The population behind a rate is the clients seen at check-in
 * within --active-window, never the registrations, which anyone with an
 * enrollment token can inflate. Called with e->mu held. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "dp_sample.h"
#include "log.h"
#include "round_internal.h"

/* The most clients a Poisson round without secure aggregation may draw; a
 * draw above it (or above secure aggregation's limit) fails the round, so
 * that no client's chance depends on who came before it. */
#define POISSON_MAX_CLIENTS (1 << 20)

int round_dp_sampling_parse(const char *s, round_dp_sampling *out) {
  if (strcmp(s, "poisson") == 0)
    *out = ROUND_DP_POISSON;
  else if (strcmp(s, "fixed") == 0)
    *out = ROUND_DP_FIXED;
  else
    return COHORT_EINVAL;
  return COHORT_OK;
}

const char *round_dp_sampling_name(round_dp_sampling m) {
  return m == ROUND_DP_FIXED ? "fixed" : "poisson";
}

int round_dp_sampling_round(const round_engine *e) {
  return e->dp.on && e->kind == KIND_TRAIN;
}

/* Poisson's q comes from the clients seen at check-in. */
static int rate_from_active(const round_config *c) {
  return c->dp_sampling == ROUND_DP_POISSON && c->dp_sampling_rate <= 0 &&
         c->fraction <= 0 && c->dp_population <= 0;
}

int round_dp_census_pending(const round_engine *e, double now) {
  return e->dp.on && rate_from_active(&e->cfg) &&
         now - e->started_at < e->cfg.selection_timeout_s;
}

/* Poisson's q for a round that wants k results, and where it comes from
 * (into why): --dp-sampling-rate, --fraction, K / --dp-population, or K
 * over the clients active now. */
static double poisson_rate(round_engine *e, size_t k, double now, char *why,
                           size_t len) {
  const round_config *c = &e->cfg;
  if (c->dp_sampling_rate > 0) {
    snprintf(why, len, "--dp-sampling-rate");
    return c->dp_sampling_rate;
  }
  if (c->fraction > 0) {
    snprintf(why, len, "--fraction");
    return c->fraction;
  }
  double n = (double)c->dp_population;
  if (n > 0) {
    snprintf(why, len, "K=%zu of --dp-population %ld", k, c->dp_population);
  } else {
    size_t active = round_active_clients(e, now);
    n = (double)active;
    snprintf(why, len, "K=%zu of %zu active", k, active);
  }
  return n > (double)k ? (double)k / n : 1;
}

static size_t poisson_cap(const round_engine *e) {
  return e->cfg.secagg != ROUND_SECAGG_OFF ? SECAGG_MAX_CLIENTS
                                           : POISSON_MAX_CLIENTS;
}

int round_dp_open(round_engine *e, double now, size_t *target,
                  size_t *select_max) {
  round_dp *dp = &e->dp;
  if (!dp->on)
    return 0;
  if (dp->exhausted)
    return 1;
  round_dp_round_reset(e);
  if (e->cfg.dp_sampling == ROUND_DP_FIXED)
    return 0; /* its rate is known, and checked, once it has drawn */
  char why[64];
  double q = poisson_rate(e, *target, now, why, sizeof why);
  if (!round_dp_admits(e, q))
    return 1;
  snprintf(dp->sampling, sizeof dp->sampling, "poisson q=%.6g (%s)", q, why);
  /* What the round expects; it waits for every client its coins pick. */
  double expected = ceil(q * (double)round_active_clients(e, now));
  *target = expected >= 1 ? (size_t)expected : 1;
  *select_max = poisson_cap(e);
  return 0;
}

int round_dp_record_sampling(round_engine *e) {
  if (!round_dp_sampling_round(e) || !(e->dp.q > 0))
    return COHORT_OK;
  return store_round_set_sampling(e->db, e->round, (int64_t)e->target, e->dp.q,
                                  e->dp.sampling);
}

int round_dp_check_in(round_engine *e, seen_client *seen, int *take) {
  *take = 0;
  if (seen->sampled_round == e->round) {
    /* Its answer for this round is given: the same again. */
    *take = e->cfg.dp_sampling == ROUND_DP_POISSON && seen->sampled;
    return COHORT_OK;
  }
  seen->sampled_round = e->round;
  if (e->cfg.dp_sampling == ROUND_DP_FIXED) {
    seen->sampled = 1; /* a candidate for the draw at the window's end */
    return COHORT_OK;
  }
  seen->sampled = dp_sample_coin(&e->dp.noise, e->dp.q);
  if (seen->sampled && e->n_parts >= e->select_max) {
    char reason[200];
    snprintf(reason, sizeof reason,
             "Poisson sampling at q=%.6g drew more than the %zu clients a "
             "round can take; nothing was released or charged",
             e->dp.q, e->select_max);
    return round_fail(e, reason);
  }
  *take = seen->sampled;
  return COHORT_OK;
}

/* Every client active now has checked in since the round opened (and there
 * is at least one): waiting longer can only add clients that were not
 * active when it opened. */
static int all_active_checked_in(const round_engine *e, double now) {
  size_t active = 0;
  for (size_t i = 0; i < e->seen.n; i++) {
    const seen_client *s = &e->seen.items[i];
    if (now - s->checked_in_at > e->cfg.active_window_s)
      continue;
    if (s->checked_in_at < e->opened_at)
      return 0;
    active++;
  }
  return active > 0;
}

static int close_poisson(round_engine *e, double now, size_t m, int *ready) {
  int window_over = now - e->opened_at >= e->cfg.selection_timeout_s;
  int all_in = all_active_checked_in(e, now);
  if (e->n_parts >= m && (window_over || all_in)) {
    e->target = e->n_parts; /* every client the coins picked */
    *ready = 1;
    return round_dp_record_sampling(e);
  }
  if (!(window_over && all_in))
    return COHORT_OK; /* active clients may still get their coin */
  char reason[240];
  snprintf(reason, sizeof reason,
           "Poisson sampling at q=%.6g drew %zu of the %zu clients a round "
           "needs; nothing was released or charged, the next round draws "
           "afresh",
           e->dp.q, e->n_parts, m);
  return round_fail(e, reason);
}

/* The candidates of this round (their ids into *ids, malloc'd, *n of
 * them), less those the operator revoked since they checked in (or whose
 * session expired): they would take a slot no update fills. COHORT_OK, or
 * COHORT_ENOMEM or the store's error (*ids NULL). */
static int candidates(round_engine *e, int64_t **ids, size_t *n) {
  *n = 0;
  *ids = malloc((e->seen.n ? e->seen.n : 1) * sizeof **ids);
  if (!*ids)
    return COHORT_ENOMEM;
  for (size_t i = 0; i < e->seen.n; i++) {
    const seen_client *c = &e->seen.items[i];
    if (c->sampled_round != e->round || !c->sampled)
      continue;
    int rc = round_candidate_live_locked(e, c->id);
    if (rc == COHORT_EAUTH)
      continue;
    if (rc) {
      free(*ids);
      *ids = NULL;
      return rc;
    }
    (*ids)[(*n)++] = c->id;
  }
  return COHORT_OK;
}

static int close_fixed(round_engine *e, double now, size_t m, int *ready) {
  int window_over = now - e->opened_at >= e->cfg.selection_timeout_s;
  if (!window_over && !all_active_checked_in(e, now))
    return COHORT_OK;
  int64_t *ids = NULL;
  size_t n = 0;
  int rc = candidates(e, &ids, &n);
  if (rc)
    return rc;
  if (n < m)
    goto out; /* selection stays open, as a plain round's does */
  size_t k = e->select_max < n ? e->select_max : n;
  double q = (double)k / (double)n;
  if (!round_dp_admits(e, q)) {
    rc = round_fail(e, "the privacy budget admits no round at the rate "
                       "this draw gives");
    goto out;
  }
  snprintf(e->dp.sampling, sizeof e->dp.sampling, "fixed %zu of %zu candidates",
           k, n);
  dp_sample_draw(&e->dp.noise, ids, n, k);
  for (size_t i = 0; !rc && i < k; i++) {
    rc = store_participation_select(e->db, e->round, ids[i], clock_wall_s());
    if (!rc && !round_add_participant(e, ids[i]))
      rc = COHORT_ENOMEM;
  }
  if (!rc) {
    if (e->target > k)
      e->target = k;
    *ready = 1;
    rc = round_dp_record_sampling(e);
    log_info("round %lld: drew %zu of %zu candidates (q = %.4g)",
             (long long)e->round, k, n, q);
  }
out:
  free(ids);
  return rc;
}

int round_dp_close_selection(round_engine *e, double now, size_t m,
                             int *ready) {
  *ready = 0;
  return e->cfg.dp_sampling == ROUND_DP_FIXED ? close_fixed(e, now, m, ready)
                                              : close_poisson(e, now, m, ready);
}

int round_dp_resume(round_engine *e, const store_round_info *info, char *why,
                    size_t whylen) {
  round_dp *dp = &e->dp;
  if (!dp->on)
    return 0;
  if (!(info->dp_sampling_rate > 0)) {
    snprintf(why, whylen,
             "coordinator restarted; the round's sampling rate was not "
             "recorded");
    return 1;
  }
  round_dp_round_reset(e);
  if (dp->exhausted || !round_dp_admits(e, info->dp_sampling_rate)) {
    snprintf(why, whylen,
             "coordinator restarted; the privacy budget admits no further "
             "round");
    return 1;
  }
  snprintf(dp->sampling, sizeof dp->sampling, "%s", info->dp_sampling);
  return 0;
}
