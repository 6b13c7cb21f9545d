/* An app compiled against the 0.1 release's headers (tests/abi/v0_1, not
 * client/include) and linked to the library as built now: its options,
 * sized by the old headers, make a client that trains through a
 * federation with a real cohort-server, declining the evaluation round as
 * a training-only app of that release does, and the cycle info the
 * library fills is no bigger than the old struct. */
#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cohort.h"
#include "cunit_main.h"
#include "harness.h"

#define TOKEN "abi-token"

/* These are the old headers, not the ones the library was built with. */
_Static_assert(COHORT_VERSION_MAJOR == 0 && COHORT_VERSION_MINOR == 1,
               "test_abi_v0_1 must compile against tests/abi/v0_1");

static int trains;

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  (void)user;
  (void)req;
  for (size_t i = 0; i < n; i++)
    params[i] += 0.5f;
  result->num_examples = 4;
  trains++;
  return 0;
}

/* The old struct inside a bigger buffer: the library must not write past
 * the size the old header gave it. */
typedef struct guarded_info {
  cohort_cycle_info info;
  unsigned char canary[256];
} guarded_info;

static void test_old_app_runs_a_federation(void) {
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server(
      "abi",
      "--rounds 2 --clients-per-round 1 --min-clients 1 --eval-every 2 "
      "--enroll-token " TOKEN " --retry-ms 50 --linger 2",
      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);

  cohort_client_options o;
  CU_ASSERT_EQUAL_FATAL(cohort_client_options_init(&o), COHORT_OK);
  CU_ASSERT_EQUAL(o.struct_size, sizeof o);
  CU_ASSERT_EQUAL(o.rpc_timeout_ms, 30000);
  o.server = target;
  o.enrollment_token = TOKEN;
  o.train = train;
  o.long_poll_ms = -1;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);

  guarded_info g;
  memset(&g, 0xcd, sizeof g);
  int rc = COHORT_OK;
  for (int i = 0; i < 200; i++) {
    rc = cohort_client_run_once(c, &g.info);
    if (rc != COHORT_OK || g.info.outcome != COHORT_CYCLE_RETRY)
      break;
    struct timespec nap = {0, 20 * 1000000L};
    nanosleep(&nap, NULL);
  }
  CU_ASSERT_EQUAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(g.info.outcome, COHORT_CYCLE_TRAINED);
  CU_ASSERT_EQUAL(g.info.round, 1);
  for (size_t i = 0; i < sizeof g.canary; i++)
    CU_ASSERT_EQUAL_FATAL(g.canary[i], 0xcd);

  /* Round 2, then its evaluation round, which this app declines. */
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_OK);
  CU_ASSERT_EQUAL(trains, 2);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  cohort_client_free(c);
}

int cohort_register_suites(void) {
  cohort_set_log_level(3);
  CU_pSuite s = CU_add_suite("abi v0.1", NULL, NULL);
  if (!s || !CU_add_test(s, "an app built on 0.1's headers runs a federation",
                         test_old_app_runs_a_federation))
    return -1;
  return 0;
}
