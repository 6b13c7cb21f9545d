/* Secure aggregation with malicious insiders, end to end (issue 21,
 * finding 6): a real coordinator with --secagg full and seven client
 * processes on 127.0.0.1, two of which send random bytes in place of their
 * sealed shares in every round (--secagg-insider), as the review's hostile
 * client did. Before, every honest client aborted, the round failed, and
 * the clients re-sent ADVERTISE until it ended. Now both rounds commit the
 * five honest clients' masked inputs, the insiders are dropped in each
 * after their neighbours' complaints, no ADVERTISE is ever refused, and
 * each insider fails each round once and sends nothing more for it but
 * check-ins at the coordinator's pace. The exact sums are
 * test_secagg_insider's and test_round_secagg's. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define CLIENTS 7
#define ROUNDS 2

static int insider(int i) { return i == 1 || i == 4; }

static pid_t spawn_client(const char *target, int shard) {
  char shard_text[16], log_name[64];
  snprintf(shard_text, sizeof shard_text, "%d/%d", shard, CLIENTS);
  snprintf(log_name, sizeof log_name, "insider-client%d.err", shard);
  char *argv[] = {COHORT_CLIENT_BIN,
                  "--server",
                  (char *)target,
                  "--token",
                  "in-token",
                  "--data",
                  DATA_DIR,
                  "--shard",
                  shard_text,
                  "--limit",
                  "200",
                  "--threads",
                  "1",
                  insider(shard) ? "--secagg-insider" : NULL,
                  NULL};
  return harness_spawn(argv, NULL, harness_path(log_name));
}

/* How many lines of text contain needle. */
static int lines_with(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; p && (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static void test_two_insiders_every_round_commits(void) {
  char flags[512];
  snprintf(flags, sizeof flags,
           "--secagg full --codec q8 --codec-clip 0.05 --rounds %d "
           "--clients-per-round %d --min-clients 5 --secagg-timeout 15 "
           "--round-timeout 20 --selection-timeout 60 --enroll-token "
           "in-token --retry-ms 100 --retry-max-ms 500 --linger 20",
           ROUNDS, CLIENTS);
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("insider", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t pids[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    pids[i] = spawn_client(target, i);
    CU_ASSERT_FATAL(pids[i] > 0);
  }
  /* Every client, the insiders too, sees the federation end. */
  for (int i = 0; i < CLIENTS; i++) {
    int status = harness_wait(pids[i], 180);
    CU_ASSERT_EQUAL(status, 0);
    if (status != 0)
      fprintf(stderr, "insider: client %d ended with %d\n", i, status);
  }
  CU_ASSERT_EQUAL(harness_wait(server, 60), 0);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'FAILED'"),
                  0);
  for (int r = 1; r <= ROUNDS; r++) {
    char q[160];
    snprintf(q, sizeof q,
             "SELECT secagg_shared * 100 + secagg_masked FROM rounds"
             " WHERE id = %d",
             r);
    CU_ASSERT_EQUAL(db_peek_int(db, q), CLIENTS * 100 + CLIENTS - 2);
    snprintf(q, sizeof q,
             "SELECT COUNT(*) FROM participations WHERE round = %d"
             " AND state = 'UPLOADED'",
             r);
    CU_ASSERT_EQUAL(db_peek_int(db, q), CLIENTS - 2);
  }
  for (int i = 0; i < CLIENTS; i++) {
    char name[64];
    snprintf(name, sizeof name, "insider-client%d.err", i);
    char *log = harness_read_file(harness_path(name));
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    /* No fresh keys after its round ended: ADVERTISE is never refused. */
    CU_ASSERT_EQUAL(lines_with(log, "different ADVERTISE"), 0);
    for (int r = 1; r <= ROUNDS; r++) {
      char round[32];
      snprintf(round, sizeof round, "round %d: secure aggregation", r);
      /* An insider's round ends once, when it is told it was dropped;
       * an honest client's never ends early. */
      int failures = lines_with(log, round);
      CU_ASSERT_EQUAL(failures, insider(i) ? 1 : 0);
      if (failures != (insider(i) ? 1 : 0))
        fprintf(stderr, "insider: client %d, round %d:\n%s\n", i, r, log);
    }
    if (insider(i)) {
      CU_ASSERT_EQUAL(lines_with(log, "is dropped from round"), ROUNDS);
      const char *line = strstr(log, "round 1: secure aggregation");
      if (line)
        printf("\n  client %d: %.*s", i, (int)strcspn(line, "\n"), line);
    }
    free(log);
  }
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"two insiders sending random sealed shares: every round commits the "
       "five honest inputs, each insider fails each round once, no "
       "ADVERTISE is refused",
       test_two_insiders_every_round_commits},
  };
  return test_add_suite("insider federation", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
