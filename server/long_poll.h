/* Long-poll check-ins: CheckIn calls the coordinator holds while it has no
 * task for their client (CheckInRequest.wait_ms), answered as soon as the
 * round engine would answer them differently (a round opened and selected
 * the client, the federation ended: round_changes), when their hold runs
 * out (RetryLater after 0 ms: check in again at once), or when the
 * coordinator stops. A held call costs no thread: one thread re-evaluates
 * them all, in the order they arrived, whenever the engine's state moves.
 * See docs/rounds.md, "Check-in". */
#ifndef COHORT_LONG_POLL_H
#define COHORT_LONG_POLL_H

#include <stddef.h>
#include <stdint.h>

#include "round.h"
#include "rpc_server.h"

typedef struct long_poll long_poll;

/* Writes the CheckIn reply for an engine answer (the service's packing). */
typedef void (*long_poll_answer_fn)(const checkin_result *res, rpc_reply *rep);

typedef struct long_poll_config {
  int max_hold_ms; /* a client's wait_ms is capped here */
  size_t max_held; /* calls held at once; check-ins beyond it are answered
                      at once, with pace steering's RetryLater; 0: by the
                      next selection's size (pace_hold_cap) */
  int poll_ms;     /* how often expiries and vanished clients are looked
                      at when nothing changes (default 50) */
} long_poll_config;

/* Starts the thread. COHORT_OK, COHORT_EINVAL or COHORT_ENOMEM. */
int long_poll_start(round_engine *e, const long_poll_config *cfg,
                    long_poll_answer_fn answer, long_poll **out);

/* One check-in as its client sent it; the strings are copied. */
typedef struct long_poll_checkin {
  int64_t client;
  uint64_t num_examples;
  size_t n_attributes; /* at most ROUND_MAX_ATTRIBUTES */
  const char *const *names;
  const double *values;
} long_poll_checkin;

/* Holds call h, whose engine answer res was a RetryLater, for up to
 * hold_ms. COHORT_OK when held; otherwise the caller answers h itself:
 * COHORT_ESTATE (turned away: answer with res->crowded_after_ms), or
 * COHORT_ENOMEM or COHORT_EINVAL (answer with res as it is).
 *
 * Turned away: any check-in once the poller is stopping, and those
 * beyond pace_hold_limit (pace.h: --max-held N, or with --max-held 0
 * twice the next selection, at least 1,000, with the cases described
 * there). */
int long_poll_hold(long_poll *lp, rpc_held *h, const long_poll_checkin *c,
                   const checkin_result *res, int hold_ms);

/* Calls held now. */
size_t long_poll_held(long_poll *lp);

/* Answers every held call (FederationDone when the federation is over,
 * else UNAVAILABLE: the client checks in again, with a coordinator that
 * restarts) and stops the thread; handlers may still call long_poll_hold,
 * which refuses from now on. Must come before rpc_server_stop, since the
 * server waits for held calls. Accepts NULL. */
void long_poll_stop(long_poll *lp);
/* Frees it, once no handler can call it: after rpc_server_stop. */
void long_poll_free(long_poll *lp);

#endif
