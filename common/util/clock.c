/* Clock helpers; see clock.h. */
#include "clock.h"

#include <errno.h>
#include <time.h>

static double seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double clock_mono_s(void) { return seconds(CLOCK_MONOTONIC); }

double clock_wall_s(void) { return seconds(CLOCK_REALTIME); }

void clock_sleep_ms(long long ms) {
  if (ms <= 0)
    return;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
