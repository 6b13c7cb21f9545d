/* Crash consistency with secure aggregation and distributed differential
 * privacy on (issue 21, Faults): the coordinator is SIGKILLed 50 times at
 * random moments of a federation of four clients whose rounds run SecAgg
 * with each client adding its share of the noise. After every kill the
 * database must be intact, and the committed rounds, their models'
 * digests and the privacy ledger (the epsilon charged for each committed
 * round) must be exactly what they were; a secure-aggregation round the
 * kill interrupted is FAILED at the restart (its keys were only in memory)
 * and never charged. In the end the federation finishes by itself.
 * COHORT_KILL_SEED=S repeats a run's kill timings (kill_loop.c). */
#include <CUnit/CUnit.h>

#include "cunit_main.h"
#include "kill_loop.h"

static void test_sigkill_loop_secagg_dp(void) {
  kill_loop_run(&(kill_loop_config){
      .tag = "sakill",
      .flags = "--rounds 10 --clients-per-round 4 --min-clients 4 "
               "--secagg full --dp distributed --dp-noise-multiplier 0.05 "
               "--dp-clip 2 --dp-bits 16 --dp-population 4 "
               "--secagg-timeout 3 --round-timeout 5 --selection-timeout 2 "
               "--retry-ms 50 --retry-max-ms 200 --linger 20 "
               "--enroll-token sakill-token",
      .token = "sakill-token",
      .clients = 4,
      .limit = "300",
      .rounds = 10,
      .kills = 50,
      .ledger = 1,
  });
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"50 SIGKILLs under SecAgg and distributed DP change no committed "
       "round, model or ledger row",
       test_sigkill_loop_secagg_dp},
  };
  return test_add_suite("kill loop, secure aggregation and DP", NULL, NULL,
                        tests, sizeof tests / sizeof tests[0]);
}
