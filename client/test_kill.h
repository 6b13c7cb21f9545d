/* A testing aid, never for production: COHORT_TEST_KILL_AT=PHASE[:MS] makes
 * a process that runs libcohort kill itself with SIGKILL at PHASE (after MS
 * milliseconds, on a timer thread, when given), so that tests can stop a
 * real client at an exact point of the protocol, as a crash or a pulled
 * plug would, without a polite goodbye. Not part of cohort.h: an app never
 * sees it, and with the variable unset nothing changes. Phases:
 *   registered            Register answered, before the first check-in
 *   checkin               as the check-in is sent (use :MS to die while the
 *                         coordinator holds it)
 *   download              the first half of the model received
 *   train                 local training begun (:MS to die during it)
 *   upload                the first half of the update accepted
 *   secagg-advertised     ADVERTISE answered, before SHARE is sent
 *   secagg-shared         SHARE answered, before the masked upload
 *   secagg-masked         the masked input uploaded, before MASKED
 *   secagg-before-unmask  CONSISTENCY answered, before UNMASK is sent
 * tests/integration/test_client_kills.c uses it. */
#ifndef COHORT_TEST_KILL_H
#define COHORT_TEST_KILL_H

/* Whether COHORT_TEST_KILL_AT names phase (download and upload then split
 * their transfer in two, so that there is a "between chunks"). */
int test_kill_armed(const char *phase);

/* Kills the process with SIGKILL when COHORT_TEST_KILL_AT names phase: at
 * once, or MS milliseconds later from a timer thread (the caller goes on
 * meanwhile). Says so on stderr first. */
void test_kill_point(const char *phase);

#endif
