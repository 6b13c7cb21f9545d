/* Testing aids of libcohort: exported so that cohort-client and the tests
 * can reach them through the shared library, but not installed and not
 * part of the API or its ABI promise (cohort.h). Never use them in an
 * app. */
#ifndef COHORT_TESTING_H
#define COHORT_TESTING_H

#include "cohort.h"

/* For checking that a round survives a malicious insider (docs/secagg.md,
 * "A malicious insider"): with on set, in every secure-aggregation round c
 * sends random bytes in place of its sealed shares, as the hostile client
 * of issue 21 did, and the coordinator drops it. Default off. */
COHORT_API void cohort_testing_set_secagg_insider(cohort_client_t *c, int on);

/* Lets COHORT_TEST_KILL_AT (client/test_kill.h) kill this process at the
 * phase it names: cohort-client calls it at start, for the fault tests; an
 * app that never calls it is never killed whatever its environment holds. */
COHORT_API void cohort_testing_enable_kill_points(void);

#endif
