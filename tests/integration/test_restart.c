/* A coordinator killed with SIGKILL in the middle of a federation and
 * started again on the same database and port: nothing committed is lost,
 * the interrupted round is resumed, the database is intact, the clients
 * reconnect by themselves with their sessions, and the federation finishes. */
#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define CLIENTS 2
#define ROUNDS 4

static void test_kill_and_restart_loses_nothing(void) {
  const char *flags = "--rounds 4 "
                      "--clients-per-round 2 "
                      "--min-clients 2 "
                      "--round-timeout 30 "
                      "--enroll-token restart-token "
                      "--retry-ms 100 "
                      "--linger 20 ";
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("restart", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);

  pid_t clients[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    char shard[16], log[32];
    snprintf(shard, sizeof shard, "%d/%d", i, CLIENTS);
    snprintf(log, sizeof log, "restart-client%d.err", i);
    char *argv[] = {COHORT_CLIENT_BIN, "--server",      target,
                    "--token",         "restart-token", "--data",
                    DATA_DIR,          "--shard",       shard,
                    "--limit",         "3000",          NULL};
    clients[i] = harness_spawn(argv, NULL, harness_path(log));
    CU_ASSERT_FATAL(clients[i] > 0);
  }

  /* Kill the coordinator in the middle of round 3: two rounds committed,
   * clients already selected for the third. */
  int64_t selected = 0;
  for (int i = 0; i < 1200 && selected < 1; i++) {
    clock_sleep_ms(10);
    selected = db_peek_int(db, "SELECT COUNT(*) FROM participations"
                               " WHERE round = 3");
  }
  CU_ASSERT_FATAL(selected >= 1);
  int64_t before = db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                   " WHERE state = 'COMMITTED'");
  harness_signal(server, SIGKILL);
  CU_ASSERT_EQUAL(harness_wait(server, 10), 128 + SIGKILL);

  char integrity[32];
  CU_ASSERT_STRING_EQUAL(
      db_peek_text(db, "PRAGMA integrity_check", integrity, sizeof integrity),
      "ok");
  int64_t committed = db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                      " WHERE state = 'COMMITTED'");
  CU_ASSERT(committed >= before);

  /* Same database, same port: the clients find it again. */
  int again = port;
  server = harness_start_server("restart2", flags, &again, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  CU_ASSERT_EQUAL(again, port);

  for (int i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 150), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 40), 0);

  CU_ASSERT_STRING_EQUAL(
      db_peek_text(db, "PRAGMA integrity_check", integrity, sizeof integrity),
      "ok");
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  ROUNDS);
  /* Every committed round names a stored model, and the models form one
   * chain from the initial one. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds r"
                                  " LEFT JOIN models m"
                                  " ON m.version = r.model_version"
                                  " WHERE r.state = 'COMMITTED'"
                                  " AND m.version IS NULL"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"), ROUNDS + 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"
                                  " WHERE parent <> version - 1"),
                  0);
  /* The interrupted round was resumed, not abandoned: round 3 committed
   * with the clients selected before the kill, nothing failed and nothing
   * is left open or kept. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE id = 3"
                                  " AND state = 'COMMITTED'"),
                  1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"), ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM updates"), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state"
                                  " NOT IN ('COMMITTED', 'FAILED')"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'FAILED'"
                                  " AND reason IS NULL"),
                  0);
  /* The clients kept their sessions: no one had to enroll again. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), CLIENTS);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"SIGKILL and restart lose nothing committed",
       test_kill_and_restart_loses_nothing},
  };
  return test_add_suite("restart", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
