/* Time for deadlines, timestamps and waits, in one place: seconds as
 * doubles, monotonic for intervals, the wall clock for stored times. */
#ifndef COHORT_CLOCK_H
#define COHORT_CLOCK_H

/* Seconds on the monotonic clock: for deadlines and intervals. */
double clock_mono_s(void);
/* Seconds since the Unix epoch: for times stored or shown. */
double clock_wall_s(void);
/* Sleeps ms milliseconds, resuming after signals (ms <= 0: no wait). */
void clock_sleep_ms(long long ms);

/* Where clock_mono_s and clock_wall_s read the time: a simulation
 * (cohort-sim) runs the coordinator's deadlines and waits on its own clock,
 * so a round of thousands of clients costs no real seconds. Both functions
 * get ctx. clock_set_source(NULL) goes back to the system clocks. Set it
 * before other threads read the clock; it is not synchronised. */
typedef struct clock_source {
  double (*mono_s)(void *ctx);
  double (*wall_s)(void *ctx);
  void *ctx;
} clock_source;
void clock_set_source(const clock_source *src); /* borrowed */

#endif
