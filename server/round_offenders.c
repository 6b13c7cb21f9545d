/* Repeat offenders (docs/rounds.md, "Offenders"): a client selected for a
 * round that it then does not complete (no accepted update or report by
 * the deadline, a secure-aggregation dropout) is charged a failed round in
 * the store; one that failed --offender-failures of its last
 * --offender-rounds rounds is kept out of selection for
 * --offender-exclusion, so that identities which take slots and never
 * work cannot fail rounds again and again. Completing work again clears
 * the record. Called with e->mu held. */
#include <stdio.h>

#include "clock.h"
#include "cohort_status.h"
#include "log.h"
#include "round_internal.h"
#include "store_offenders.h"

static int load_offences(round_engine *e, seen_client *c) {
  if (c->offences_known)
    return COHORT_OK;
  int rc =
      store_client_offences(e->db, c->id, &c->failures, &c->excluded_until);
  c->offences_known = !rc;
  return rc;
}

/* Charges client c one failed round; excludes it at N. */
static int charge(round_engine *e, seen_client *c, const char *reason,
                  double wall) {
  int rc = load_offences(e, c);
  if (!rc)
    rc = store_client_failed(e->db, c->id, e->round, reason,
                             e->cfg.offender_rounds, wall, &c->failures);
  if (rc || e->cfg.offender_failures <= 0 ||
      c->failures < e->cfg.offender_failures)
    return rc;
  double until = wall + e->cfg.offender_exclusion_s;
  rc = store_client_exclude(e->db, c->id, until);
  if (rc)
    return rc;
  c->excluded_until = until;
  log_warn("client %lld excluded from selection for %.0f s: it failed %lld "
           "of its last %ld rounds (round %lld: %s)",
           (long long)c->id, e->cfg.offender_exclusion_s,
           (long long)c->failures, e->cfg.offender_rounds, (long long)e->round,
           reason);
  return COHORT_OK;
}

/* Client c completed work: its record of failures is cleared. */
static int recovered(round_engine *e, seen_client *c) {
  int rc = load_offences(e, c);
  if (rc || (!c->failures && !(c->excluded_until > 0)))
    return rc;
  rc = store_client_recovered(e->db, c->id);
  if (rc)
    return rc;
  log_info("client %lld completed round %lld: its %lld failed round(s) are "
           "forgiven",
           (long long)c->id, (long long)e->round, (long long)c->failures);
  c->failures = 0;
  c->excluded_until = 0;
  return COHORT_OK;
}

int round_offenders_settle(round_engine *e, int charge_missing,
                           const char *reason) {
  double now = clock_mono_s(), wall = clock_wall_s();
  int rc = COHORT_OK;
  for (size_t i = 0; !rc && i < e->n_parts; i++) {
    const participant *p = &e->parts[i];
    seen_client *c = seen_set_find(&e->seen, p->client);
    if (!c)
      continue;
    if (p->uploaded || p->reported) {
      c->worked_at = now;
      rc = recovered(e, c);
    } else if (charge_missing && !p->declined) {
      rc = charge(e, c, reason, wall);
    }
  }
  size_t workers = 0;
  for (size_t i = 0; i < e->seen.n; i++) {
    double at = e->seen.items[i].worked_at;
    workers += at > 0 && now - at <= e->cfg.active_window_s;
  }
  e->workers = workers;
  return rc;
}

int round_offender_excluded(round_engine *e, seen_client *c, char *why,
                            size_t whylen, double *left_s) {
  if (e->cfg.offender_failures <= 0 || load_offences(e, c))
    return 0;
  double left = c->excluded_until - clock_wall_s();
  if (!(left > 0))
    return 0;
  snprintf(why, whylen,
           "excluded from selection for %.0f s more: it failed %lld of its "
           "last %ld rounds",
           left, (long long)c->failures, e->cfg.offender_rounds);
  *left_s = left;
  return 1;
}
