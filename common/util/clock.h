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

#endif
