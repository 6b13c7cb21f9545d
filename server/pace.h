/* Pace steering: how long a client that gets no task now should wait
 * before checking in again, so that a large fleet arrives at the rate the
 * next selection needs instead of all at once (Bonawitz et al., "Towards
 * Federated Learning at Scale", 2019, section 2.3).
 *
 * With P clients active and S check-ins wanted within a selection window of
 * W seconds, each client should come back at a uniformly random moment in
 *   [t_open, t_open + L],   L = P * W / (S * m),  m = PACE_MARGIN,
 * where t_open is the expected time until the next selection opens: then
 * P / L = S * m / W clients arrive per second, m times what the selection
 * needs. S is the size of the next selection (all of it, not the slots an
 * open selection has left). The wait is clamped to [min_ms, max_ms]. Pure:
 * no clocks or randomness of its own (u is the caller's uniform sample in
 * [0, 1)).
 *
 * Clients that use long polls (CheckInRequest.wait_ms) are not paced at
 * all: the coordinator holds their call and answers when it has a task.
 * Pace steering is for clients it turns away: those that poll, and long
 * polls beyond the most calls it holds (docs/rounds.md). */
#ifndef COHORT_PACE_H
#define COHORT_PACE_H

#include <stdint.h>

/* Check-ins per second aimed for, relative to what selection needs. */
#define PACE_MARGIN 1.5

typedef struct pace_inputs {
  double population;   /* P: clients that completed work within the active
                          window, plus at most S others (docs/rounds.md) */
  double wanted;       /* S: check-ins the next selection needs (>= 1) */
  double window_s;     /* W: how long selection should take to fill */
  double until_open_s; /* t_open: 0 while a selection is open */
  double min_ms, max_ms;
} pace_inputs;

uint32_t pace_retry_ms(const pace_inputs *in, double u);

/* The wait of a client that already took part in the round in progress:
 * it is wanted again when the next round opens, expected when this one
 * ends, until_end_s from now (from the mean length of the training phases
 * so far; 0 or less when unknown). Uniform in
 *   [b, b + min_ms],  b = max(t_end, min_ms),
 * at most max_ms: no population term, since the client is not one of many
 * to spread out, and min_ms of jitter so that the round's participants do
 * not return in lockstep, even while t_end is unknown. */
uint32_t pace_after_round_ms(double until_end_s, double u, double min_ms,
                             double max_ms);

#endif
