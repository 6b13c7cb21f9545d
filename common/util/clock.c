/* Clock helpers; see clock.h. */
#include "clock.h"

#include <errno.h>
#include <time.h>

static double seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* NULL: the system clocks. */
static const clock_source *g_source;

void clock_set_source(const clock_source *src) { g_source = src; }

double clock_mono_s(void) {
  return g_source ? g_source->mono_s(g_source->ctx) : seconds(CLOCK_MONOTONIC);
}

double clock_wall_s(void) {
  return g_source ? g_source->wall_s(g_source->ctx) : seconds(CLOCK_REALTIME);
}

void clock_sleep_ms(long long ms) {
  if (ms <= 0)
    return;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
