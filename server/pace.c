/* See pace.h. */
#include "pace.h"

uint32_t pace_retry_ms(const pace_inputs *in, double u) {
  double wanted = in->wanted >= 1.0 ? in->wanted : 1.0;
  double window = in->window_s > 0.0 ? in->window_s : 1.0;
  double population = in->population >= 1.0 ? in->population : 1.0;
  double spread_s = population * window / (wanted * PACE_MARGIN);
  double until = in->until_open_s > 0.0 ? in->until_open_s : 0.0;
  double ms = 1000.0 * (until + u * spread_s);
  if (ms < in->min_ms)
    ms = in->min_ms;
  if (ms > in->max_ms)
    ms = in->max_ms;
  return (uint32_t)ms;
}

uint32_t pace_wanted_at_ms(double until_s, double u, double min_ms,
                           double max_ms) {
  double ms = 1000.0 * until_s;
  if (ms < min_ms)
    ms = min_ms;
  ms += u * min_ms;
  if (ms > max_ms)
    ms = max_ms;
  return (uint32_t)ms;
}

size_t pace_hold_cap(size_t wanted) {
  size_t h = wanted > SIZE_MAX / PACE_HOLD_FACTOR ? SIZE_MAX
                                                  : wanted * PACE_HOLD_FACTOR;
  return h > PACE_HOLD_MIN ? h : PACE_HOLD_MIN;
}

int pace_crowded(size_t active, size_t hold_cap) { return active > hold_cap; }

size_t pace_hold_limit(size_t max_held, size_t wanted, size_t active,
                       int took_part, int candidate) {
  if (max_held)
    return max_held;
  size_t cap = pace_hold_cap(wanted);
  if (took_part && pace_crowded(active, cap))
    return 0;
  return candidate && cap <= SIZE_MAX - wanted ? cap + wanted : cap;
}
