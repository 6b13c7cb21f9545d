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
 * polls beyond the most calls it holds, pace_hold_cap (docs/rounds.md). */
#ifndef COHORT_PACE_H
#define COHORT_PACE_H

#include <stddef.h>
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

/* The wait of a client wanted back at a known moment, until_s from now
 * (0 or less when unknown): one that already took part in the round in
 * progress, wanted when the next round opens, expected when this one ends
 * (from the mean length of the training phases so far); a candidate of an
 * open round's draw, wanted at the draw; any client near the federation's
 * expected end. Uniform in
 *   [b, b + min_ms],  b = max(t, min_ms),
 * at most max_ms: no population term, since the client is not one of many
 * to spread out, and min_ms of jitter so that such clients do not return
 * in lockstep, even while t is unknown. */
uint32_t pace_wanted_at_ms(double until_s, double u, double min_ms,
                           double max_ms);

/* The most check-ins held at once with --max-held 0, the opt-in cap (the
 * default --max-held 50000 holds every client of most fleets):
 *   H = max(PACE_HOLD_MIN, PACE_HOLD_FACTOR * S)
 * S: the size of the next selection. Twice a selection keeps one whole
 * selection's worth of candidates waiting when a round opens, and what
 * is left after the draw is the start of the next; PACE_HOLD_MIN keeps
 * every client of a federation of up to 1,000 held whatever S is. A held
 * call costs gRPC about 12.5 KB (docs/reliability.md), so a fleet of
 * 10,000 and rounds of 1,000 hold 2,000: 25 MB instead of 125 MB. The
 * clients beyond H are paced (pace_crowded), and poll: 3.5 times the
 * check-ins and 45% more coordinator CPU in that fleet
 * (docs/benchmarks.md, "Holding fewer check-ins"). */
#define PACE_HOLD_MIN 1000
#define PACE_HOLD_FACTOR 2
size_t pace_hold_cap(size_t wanted);

/* The fleet is crowded when more clients are active than H: then a client
 * turned away from a full hold, and one that already took part in the
 * round in progress, is one of many to spread out, and waits
 * pace_retry_ms with P = every active client (not only the workers: the
 * hold is full, so there are more than H check-ins to spread). */
int pace_crowded(size_t active, size_t hold_cap);

/* How many calls may be held, this one included, for a check-in of a
 * client that gets no task now (0: it is not held, but paced):
 *   - max_held > 0 (--max-held N): max_held, for everyone;
 *   - max_held 0, with H = pace_hold_cap(wanted):
 *     0 for a client that took part in the round in progress while the
 *     fleet is crowded (it would take a held place ahead of the clients
 *     that did not; it is paced like them);
 *     H + S for a candidate of an open draw (it is answered at the draw,
 *     within --selection-window, and a drawn client that polled would
 *     hold up the round; at most one selection beyond H);
 *     H for any other. */
size_t pace_hold_limit(size_t max_held, size_t wanted, size_t active,
                       int took_part, int candidate);

#endif
