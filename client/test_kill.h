/* A testing aid, never for production: COHORT_TEST_KILL_AT=PHASE[:MS] makes
 * a process that runs libcohort kill itself with SIGKILL at PHASE (after MS
 * milliseconds, on a timer thread, when given), so that tests can stop a
 * real client at an exact point of the protocol, as a crash or a pulled
 * plug would, without a polite goodbye. Not part of cohort.h: only a
 * process that called cohort_testing_enable_kill_points (cohort-client
 * does) reads the variable; with it unset nothing changes. Phases:
 *   registered            Register answered, before the first check-in
 *   checkin               as the check-in is sent (use :MS to die while the
 *                         coordinator holds it)
 *   download              the first half of the model received
 *   train                 local training begun (:MS to die during it, at
 *                         its end at the latest)
 *   upload                the first half of the update accepted
 *   secagg-advertised     ADVERTISE answered, before SHARE is sent
 *   secagg-shared         SHARE answered, before the masked upload
 *   secagg-masked         the masked input uploaded, before MASKED
 *   secagg-before-unmask  CONSISTENCY answered, before UNMASK is sent
 * tests/integration/test_client_kills.c uses it. */
#ifndef COHORT_TEST_KILL_H
#define COHORT_TEST_KILL_H

#include "cohort_status.h" /* COHORT_API */

/* Exported for cohort-client through cohort_testing.h, which declares it
 * too. */
COHORT_API void cohort_testing_enable_kill_points(void);

/* Whether COHORT_TEST_KILL_AT names phase (download and upload then split
 * their transfer in two, so that there is a "between chunks"). */
int test_kill_armed(const char *phase);

/* Kills the process with SIGKILL when COHORT_TEST_KILL_AT names phase: at
 * once, or MS milliseconds later from a timer thread (the caller goes on
 * meanwhile). Says so on stderr first. */
void test_kill_point(const char *phase);
/* Where a phase with a delay ends: kills the process at once when
 * COHORT_TEST_KILL_AT names phase, so that a timer thread that a loaded
 * machine ran late cannot let it get past the phase (the training's end,
 * for train:MS). */
void test_kill_by_end_of(const char *phase);

#endif
