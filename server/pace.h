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
 * needs. The window is clamped to [min_ms, max_ms]. Pure: no clocks or
 * randomness of its own (u is the caller's uniform sample in [0, 1)). */
#ifndef COHORT_PACE_H
#define COHORT_PACE_H

#include <stdint.h>

/* Check-ins per second aimed for, relative to what selection needs. */
#define PACE_MARGIN 1.5

typedef struct pace_inputs {
  double population;   /* P: clients seen within the active window */
  double wanted;       /* S: check-ins the next selection needs (>= 1) */
  double window_s;     /* W: how long selection should take to fill */
  double until_open_s; /* t_open: 0 while a selection is open */
  double min_ms, max_ms;
} pace_inputs;

uint32_t pace_retry_ms(const pace_inputs *in, double u);

#endif
