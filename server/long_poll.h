/* Long polls: CheckIn calls the coordinator holds while it has no task
 * for their client (CheckInRequest.wait_ms), and SecAgg polls it holds
 * while their step is open (SecAggRequest.wait_ms), each answered as soon
 * as the round engine would answer it differently (a round opened and
 * selected the client, a secure-aggregation phase closed, the federation
 * ended: round_changes), when its hold runs out (RetryLater, or Wait,
 * after 0 ms: ask again at once), or when the coordinator stops. A held
 * call costs no thread: one thread re-evaluates them all, in the order
 * they arrived, whenever the engine's state moves. See docs/rounds.md,
 * "Check-in", and "Secure aggregation". */
#ifndef COHORT_LONG_POLL_H
#define COHORT_LONG_POLL_H

#include <stddef.h>
#include <stdint.h>

#include "round.h"
#include "rpc_server.h"

typedef struct long_poll long_poll;

/* Write the CheckIn and the SecAgg reply for an engine answer (the
 * service's packing). */
typedef void (*long_poll_answer_fn)(const checkin_result *res, rpc_reply *rep);
typedef void (*long_poll_secagg_answer_fn)(const round_secagg_reply *out,
                                           rpc_reply *rep);

/* SecAgg polls held at once with --max-held 0 (otherwise --max-held, which
 * check-ins share): they come only from selected clients, one each. */
#define LONG_POLL_SECAGG_MAX_HELD 1000

typedef struct long_poll_config {
  int max_hold_ms; /* a client's wait_ms is capped here */
  size_t max_held; /* calls held at once; check-ins beyond it are answered
                      at once, with pace steering's RetryLater; 0: by the
                      next selection's size (pace_hold_cap) */
  int poll_ms;     /* how often expiries and vanished clients are looked
                      at when nothing changes (default 50) */
  /* Called (when not NULL) for each held check-in answered with a task
   * that selected its client (checkin_result.fresh), before the answer
   * goes: the service gives back the check-in's rate-limit token. */
  void (*selected)(void *ctx, int64_t client);
  void *selected_ctx;
} long_poll_config;

/* Starts the thread. COHORT_OK, COHORT_EINVAL or COHORT_ENOMEM. */
int long_poll_start(round_engine *e, const long_poll_config *cfg,
                    long_poll_answer_fn answer,
                    long_poll_secagg_answer_fn secagg_answer, long_poll **out);

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

/* One SecAgg poll whose engine answer was Wait. */
typedef struct long_poll_secagg {
  int64_t client;
  int64_t round;
  int step;
  uint64_t changes; /* round_changes() taken before the engine answered */
} long_poll_secagg;

/* Holds call h, the poll p, for up to hold_ms. COHORT_OK when held;
 * otherwise the caller answers h itself with the Wait it got: COHORT_ESTATE
 * (the poller is stopping, the limit above is reached, or a poll of this
 * client is held already: one each), COHORT_EINVAL. */
int long_poll_hold_secagg(long_poll *lp, rpc_held *h, const long_poll_secagg *p,
                          int hold_ms);

/* Calls held now. */
size_t long_poll_held(long_poll *lp);

/* Answers every held call (a check-in FederationDone when the federation
 * is over, else UNAVAILABLE: the client asks again, of a coordinator that
 * restarts) and stops the thread; handlers may still call long_poll_hold,
 * which refuses from now on. Must come before rpc_server_stop, since the
 * server waits for held calls. Accepts NULL. */
void long_poll_stop(long_poll *lp);
/* Frees it, once no handler can call it: after rpc_server_stop. */
void long_poll_free(long_poll *lp);

#endif
