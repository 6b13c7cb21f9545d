/* libcohort's public API against a real cohort-server process: a training
 * callback sees the global model, the delta it makes is what the
 * coordinator aggregates, one cycle at a time or in a loop until the
 * federation ends, and failures come back as statuses with a reason. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort.h"
#include "cunit_main.h"
#include "harness.h"

#define N_PARAMS 7850
#define TOKEN "libcohort-token"

static pid_t g_server;
static char g_db[512];
static char g_target[64];

typedef struct probe {
  int calls;
  int fail; /* make the callback fail */
  uint64_t round;
  size_t n;
  float first_params[4]; /* the global model's first weights, as received */
} probe;

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  probe *p = user;
  p->calls++;
  p->round = req->round;
  p->n = n;
  memcpy(p->first_params, params, sizeof p->first_params);
  if (p->fail)
    return 1;
  for (size_t i = 0; i < n; i++)
    params[i] += 0.25f;
  result->num_examples = 3;
  return 0;
}

/* The first weights of stored model `version`. */
static int model_head(int version, float out[4]) {
  sqlite3 *db;
  int ok = 0;
  if (sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT params FROM models WHERE version = ?1", -1,
                         &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int(st, 1, version);
    if (sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_bytes(st, 0) == N_PARAMS * 4) {
      memcpy(out, sqlite3_column_blob(st, 0), 4 * sizeof(float));
      ok = 1;
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return ok;
}

static int suite_init(void) {
  const char *flags = "--rounds 2 "
                      "--clients-per-round 1 "
                      "--min-clients 1 "
                      "--enroll-token " TOKEN " "
                      "--retry-ms 100 "
                      "--linger 5 ";
  int port;
  g_server = harness_start_server("libcohort", flags, &port, g_db, sizeof g_db);
  snprintf(g_target, sizeof g_target, "127.0.0.1:%d", port);
  cohort_set_log_level(3);
  return g_server > 0 ? 0 : -1;
}

static int suite_clean(void) {
  /* Told that the federation is over, the server stops by itself. */
  return harness_wait(g_server, 30) == 0 ? 0 : -1;
}

static cohort_client_t *new_client(const char *token, probe *p) {
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = g_target;
  o.enrollment_token = token;
  o.train = train;
  o.train_user = p;
  o.rpc_timeout_ms = 5000;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_OK);
  return c;
}

static void test_options_are_checked(void) {
  cohort_client_options o;
  cohort_client_options_init(&o);
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
  o.server = g_target;
  o.enrollment_token = TOKEN;
  /* Neither a callback nor a dataset for the built-in trainer. */
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT_STRING_EQUAL(cohort_strerror(COHORT_EAUTH), "not authenticated");
}

/* The library reports the version it was built as; these headers are the
 * same release, so both agree with the macros. */
static void test_version(void) {
  CU_ASSERT_STRING_EQUAL(cohort_version(), COHORT_VERSION);
  CU_ASSERT_EQUAL(cohort_version_number(), COHORT_VERSION_NUMBER);
  char text[32];
  snprintf(text, sizeof text, "%d.%d.%d", COHORT_VERSION_MAJOR,
           COHORT_VERSION_MINOR, COHORT_VERSION_PATCH);
  CU_ASSERT_STRING_EQUAL(text, cohort_version());
  CU_ASSERT_EQUAL(cohort_version_number(), COHORT_VERSION_MAJOR * 10000u +
                                               COHORT_VERSION_MINOR * 100u +
                                               COHORT_VERSION_PATCH);
}

static void test_wrong_enrollment_token(void) {
  probe p = {0};
  cohort_client_t *c = new_client("wrong", &p);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, NULL), COHORT_EAUTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "enrollment"));
  CU_ASSERT_EQUAL(cohort_client_id(c), 0);
  CU_ASSERT_EQUAL(p.calls, 0);
  cohort_client_free(c);
}

static void test_callback_delta_is_aggregated(void) {
  probe p = {0};
  cohort_client_t *c = new_client(TOKEN, &p);

  /* A failing callback abandons the task and uploads nothing. */
  p.fail = 1;
  cohort_cycle_info info;
  int rc;
  for (int i = 0; i < 100; i++) {
    rc = cohort_client_run_once(c, &info);
    if (rc != COHORT_OK || info.outcome != COHORT_CYCLE_RETRY)
      break;
    struct timespec nap = {0, 50 * 1000000L};
    nanosleep(&nap, NULL);
  }
  CU_ASSERT_EQUAL(rc, COHORT_ECALLBACK);
  CU_ASSERT_EQUAL(p.calls, 1);
  CU_ASSERT(cohort_client_id(c) > 0);

  /* The same task again, now trained: the delta goes up. */
  p.fail = 0;
  rc = cohort_client_run_once(c, &info);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_TRAINED);
  CU_ASSERT_EQUAL(info.round, 1);
  CU_ASSERT_EQUAL(p.n, N_PARAMS);
  CU_ASSERT(info.bytes_up > N_PARAMS * 4);
  /* Downloaded once, in the first cycle; this one reused it. */
  CU_ASSERT(info.bytes_down < 1000);

  float initial[4], next[4];
  CU_ASSERT_FATAL(model_head(0, initial));
  CU_ASSERT_EQUAL(memcmp(initial, p.first_params, sizeof initial), 0);
  int committed = 0;
  for (int i = 0; i < 100 && !(committed = model_head(1, next)); i++) {
    struct timespec nap = {0, 50 * 1000000L};
    nanosleep(&nap, NULL);
  }
  CU_ASSERT_FATAL(committed);
  for (int i = 0; i < 4; i++)
    CU_ASSERT(fabsf(next[i] - (initial[i] + 0.25f)) < 1e-6f);

  /* Loop until the coordinator says the federation is over (round 2). */
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_OK);
  CU_ASSERT_EQUAL(p.round, 2);
  CU_ASSERT_EQUAL(p.calls, 3);
  cohort_client_free(c);
}

int cohort_register_suites(void) {
  CU_pSuite s = CU_add_suite("libcohort", suite_init, suite_clean);
  if (!s || !CU_add_test(s, "options are checked", test_options_are_checked) ||
      !CU_add_test(s, "the library's version", test_version) ||
      !CU_add_test(s, "a wrong enrollment token is refused",
                   test_wrong_enrollment_token) ||
      !CU_add_test(s, "the callback's delta is aggregated",
                   test_callback_delta_is_aggregated))
    return -1;
  return 0;
}
