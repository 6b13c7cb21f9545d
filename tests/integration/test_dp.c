/* Differential privacy end to end: a real coordinator and client processes
 * on 127.0.0.1. Central mode stops training when the next round would take
 * epsilon past --dp-budget, with the ledger and the round lines saying what
 * was spent; distributed mode runs under secure aggregation, each client
 * noising its own update, and still learns; a distributed configuration
 * without secure aggregation is refused at start with the reason. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "dp_accountant.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

/* Starts a coordinator with flags and n clients (2000 examples each), waits
 * for all of them; the database path goes to db_path. */
static void run_federation(const char *tag, const char *flags, int n,
                           char *db_path, size_t db_len) {
  char all[768];
  snprintf(all, sizeof all,
           "--clients-per-round %d --min-clients %d --round-timeout 60 "
           "--eval-data " DATA_DIR " --eval-limit 2000 --enroll-token "
           "dp-token --retry-ms 200 --linger 20 %s",
           n, n, flags);
  int port = 0;
  db_path[0] = '\0';
  pid_t server = harness_start_server(tag, all, &port, db_path, db_len);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t clients[8];
  for (int i = 0; i < n; i++) {
    char shard[32], err[64];
    snprintf(shard, sizeof shard, "%d/%d", i, n);
    snprintf(err, sizeof err, "%s-client%d.err", tag, i);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "dp-token",
                    "--data",
                    DATA_DIR,
                    "--shard",
                    shard,
                    "--limit",
                    "2000",
                    "--seed",
                    "5",
                    NULL};
    clients[i] = harness_spawn(argv, NULL, harness_path(err));
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  for (int i = 0; i < n; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 180), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
}

/* Round lines of tag's coordinator that contain needle. */
static int lines_with(const char *tag, const char *needle) {
  char name[64];
  snprintf(name, sizeof name, "%s.out", tag);
  char *text = harness_read_file(harness_path(name));
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++)
    n++;
  free(text);
  return n;
}

/* q = 3 / 3 = 1 and z = 1: the budget sits between two and three rounds'
 * epsilon, so of --rounds 5 two commit and the coordinator ends. */
static void test_central_stops_at_budget(void) {
  double e2 = dp_epsilon(1, 1, 2, 1e-5), e3 = dp_epsilon(1, 1, 3, 1e-5);
  char flags[256], db[512];
  snprintf(flags, sizeof flags,
           "--rounds 5 --dp central --dp-noise-multiplier 1 --dp-clip 0.5 "
           "--dp-population 3 --dp-budget %.6f",
           (e2 + e3) / 2);
  run_federation("central", flags, 3, db, sizeof db);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state = 'COMMITTED'"),
      2);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM privacy_ledger "
                                  "WHERE mode = 'central' AND cohort_size = 3"),
                  2);
  double eps = db_peek_double(db, "SELECT MAX(epsilon) FROM privacy_ledger");
  CU_ASSERT_DOUBLE_EQUAL(eps, e2, 1e-6 * e2);
  CU_ASSERT_EQUAL(lines_with("central", " dp epsilon "), 2);
  char *log = harness_read_file(harness_path("central.err"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  CU_ASSERT_PTR_NOT_NULL(strstr(log, "privacy budget is spent"));
  free(log);
}

/* Four clients under SecAgg, each adding its share of the noise in a 16-bit
 * ring: the rounds commit, the ledger says distributed, the model learns. */
static void test_distributed_under_secagg(void) {
  char db[512];
  run_federation("distributed",
                 "--rounds 3 --secagg full --dp distributed "
                 "--dp-noise-multiplier 0.05 --dp-clip 2 --dp-bits 16 "
                 "--dp-population 4",
                 4, db, sizeof db);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state = 'COMMITTED'"),
      3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM privacy_ledger WHERE "
                                  "mode = 'distributed' AND cohort_size = 4"),
                  3);
  /* Uploads are 16-bit ring elements: about half of fp32's 31400 bytes. */
  double up = db_peek_double(db, "SELECT MAX(bytes_up) FROM participations");
  CU_ASSERT(up < 31400);
  double acc = db_peek_double(
      db, "SELECT accuracy FROM rounds ORDER BY id DESC LIMIT 1");
  printf("\n  distributed DP: accuracy %.4f, epsilon %.3f\n", acc,
         db_peek_double(db, "SELECT MAX(epsilon) FROM privacy_ledger"));
  CU_ASSERT(acc >= 0.5);
}

static void test_distributed_without_secagg_refused(void) {
  char *argv[] = {COHORT_SERVER_BIN,
                  "--listen",
                  "127.0.0.1:0",
                  "--enroll-token",
                  "t",
                  "--db",
                  (char *)harness_path("refused.db"),
                  "--dp",
                  "distributed",
                  "--dp-noise-multiplier",
                  "1",
                  NULL};
  pid_t p = harness_spawn(argv, NULL, harness_path("refused.err"));
  CU_ASSERT_FATAL(p > 0);
  CU_ASSERT_EQUAL(harness_wait(p, 30), 2);
  char *text = harness_read_file(harness_path("refused.err"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "needs --secagg"));
  free(text);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"distributed without --secagg refused at start",
       test_distributed_without_secagg_refused},
      {"central: two rounds fit the budget, then training ends",
       test_central_stops_at_budget},
      {"distributed under SecAgg: rounds commit, ledger, model learns",
       test_distributed_under_secagg},
  };
  return test_add_suite("dp", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
