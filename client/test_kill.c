/* COHORT_TEST_KILL_AT (test_kill.h): a client that dies by SIGKILL at a
 * chosen phase, for the fault tests. A testing aid only. */
#include "test_kill.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"

static atomic_int g_enabled;

void cohort_testing_enable_kill_points(void) { atomic_store(&g_enabled, 1); }

/* The phase named by the variable and its delay; 0 when it names another
 * phase, is unset, or the process never enabled kill points. */
static int named(const char *phase, long *ms) {
  if (!atomic_load(&g_enabled))
    return 0;
  const char *v = getenv("COHORT_TEST_KILL_AT");
  size_t n = strlen(phase);
  if (!v || !*v || !*phase || strncmp(v, phase, n) != 0 ||
      (v[n] != '\0' && v[n] != ':'))
    return 0;
  *ms = v[n] == ':' ? strtol(v + n + 1, NULL, 10) : 0;
  if (*ms < 0)
    *ms = 0;
  return 1;
}

int test_kill_armed(const char *phase) {
  long ms;
  return named(phase, &ms);
}

/* Says the variable's whole value (PHASE:MS), whichever point fired. */
static void die(void) {
  fprintf(stderr, "testing aid: COHORT_TEST_KILL_AT=%s reached; SIGKILL\n",
          getenv("COHORT_TEST_KILL_AT"));
  fflush(stderr);
  kill(getpid(), SIGKILL);
}

static void *die_later(void *arg) {
  long *ms = arg;
  clock_sleep_ms(*ms);
  die();
  return NULL;
}

void test_kill_point(const char *phase) {
  static long delay;
  if (!named(phase, &delay))
    return;
  pthread_t t;
  if (delay == 0 || pthread_create(&t, NULL, die_later, &delay) != 0) {
    die();
    return;
  }
  fprintf(stderr, "testing aid: COHORT_TEST_KILL_AT=%s: SIGKILL in %ld ms\n",
          phase, delay);
  pthread_detach(t);
}

void test_kill_by_end_of(const char *phase) {
  if (test_kill_armed(phase))
    die();
}
