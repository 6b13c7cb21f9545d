/* Selection that fast pollers cannot capture (docs/rounds.md, "Selection"):
 * while a round is OPEN, every eligible client that checks in becomes a
 * candidate once, however often it polls, and at the end of each selection
 * window the open slots are drawn uniformly at random (CSPRNG) among the
 * candidates. The window ends early when every active client has checked
 * in since the open, and there is none when every active client fits in
 * the slots, so an honest fleet does not wait for it. Plain rounds
 * only: a DP training round samples its own way (round_dp_sampling.c).
 * Called with e->mu held. */
#include <stdlib.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "log.h"
#include "round_internal.h"

int round_select_by_draw(const round_engine *e) {
  return e->cfg.selection_window_s > 0 && !round_dp_sampling_round(e);
}

void round_select_open(round_engine *e, double now) {
  e->n_cands = 0;
  e->n_checked_in = 0;
  e->draw_at = now + e->cfg.selection_window_s;
}

void round_select_free(round_engine *e) {
  free(e->cands);
  e->cands = NULL;
  e->n_cands = e->cap_cands = 0;
}

void round_select_seen(round_engine *e, seen_client *seen) {
  if (e->state != ROUND_OPEN || seen->open_round == e->round)
    return;
  seen->open_round = e->round;
  e->n_checked_in++;
}

int round_select_candidate(round_engine *e, seen_client *seen) {
  if (seen->cand_round == e->round)
    return COHORT_OK; /* a second poll earns nothing */
  if (e->n_cands == e->cap_cands) {
    size_t cap = e->cap_cands ? 2 * e->cap_cands : 64;
    int64_t *c = realloc(e->cands, cap * sizeof *c);
    if (!c)
      return COHORT_ENOMEM;
    e->cands = c;
    e->cap_cands = cap;
  }
  seen->cand_round = e->round;
  e->cands[e->n_cands++] = seen->id;
  return COHORT_OK;
}

/* A uniform index in [0, n) from the CSPRNG, without modulo bias. */
static int uniform_below(size_t n, size_t *out) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
  do {
    int rc = crypto_random(&r, sizeof r);
    if (rc)
      return rc;
  } while (r >= limit);
  *out = (size_t)(r % n);
  return COHORT_OK;
}

int round_select_draw(round_engine *e, double now, int64_t caller) {
  if (e->state != ROUND_OPEN || !round_select_by_draw(e) || !e->n_cands ||
      e->n_parts >= e->select_max)
    return COHORT_OK;
  /* Every client active now checked in since the open: waiting longer
   * can only add clients that were not active when it opened. Or every
   * active client fits in the slots: there is nothing to draw, and each
   * is taken as it comes, as the first one would be by a draw. */
  size_t active = round_active_clients(e, now);
  int all_in = e->n_checked_in >= active;
  int all_fit = active <= e->select_max;
  if (now < e->draw_at && !all_in && !all_fit)
    return COHORT_OK;
  size_t k = e->select_max - e->n_parts;
  if (k > e->n_cands)
    k = e->n_cands;
  size_t pool = e->n_cands, drawn = 0;
  int64_t last = 0;
  int rc = COHORT_OK;
  /* A partial Fisher-Yates shuffle: the drawn ones move to the end, the
   * rest stay candidates for the next window. A candidate the operator
   * revoked since its check-in (or whose session expired) is taken out
   * as if drawn, and not selected. */
  while (!rc && drawn < k && pool) {
    size_t j = 0;
    rc = uniform_below(pool, &j);
    if (rc)
      break;
    int64_t id = e->cands[j];
    e->cands[j] = e->cands[--pool];
    e->cands[pool] = id;
    rc = round_candidate_live_locked(e, id);
    if (rc == COHORT_EAUTH) {
      rc = COHORT_OK;
      continue;
    }
    if (!rc)
      rc = store_participation_select(e->db, e->round, id, clock_wall_s());
    if (!rc && !round_add_participant(e, id))
      rc = COHORT_ENOMEM;
    drawn++;
    last = id;
  }
  size_t offered = e->n_cands;
  e->n_cands = pool; /* the drawn ones are participants now, or lost to a
                        store that failed */
  if (rc)
    return rc;
  if (drawn == 1)
    log_info("round %lld: selected client %lld (%zu/%zu)", (long long)e->round,
             (long long)last, e->n_parts, e->select_max);
  else
    log_info("round %lld: drew %zu of %zu candidate(s) (%zu/%zu selected)",
             (long long)e->round, drawn, offered, e->n_parts, e->select_max);
  e->draw_at = now + e->cfg.selection_window_s;
  /* Held check-ins learn of a draw by a change; a caller drawn alone hears
   * it in its answer, and waking every held call for it would cost a pass
   * over them per selected client. */
  if (!(drawn == 1 && last == caller))
    round_changed(e);
  return COHORT_OK;
}
