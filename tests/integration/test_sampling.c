/* Round management with real processes on 127.0.0.1: over-selection and
 * refused late uploads, the upload deadline with a stopped straggler,
 * --eligible conditions, --fraction of the active clients and evaluation
 * rounds. Each case checks the coordinator's database and that every
 * process ends by itself with status 0. */
#include <CUnit/CUnit.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define TOKEN "samp-token"
/* Fast pacing for every case. The selection timeout is left to each case:
 * it runs from the moment a round opens, the first one opens as the
 * coordinator starts, and a client needs about a second (several under
 * sanitizers) to load its data, so a short one would close a selection
 * before the slower clients check in. */
#define FAST_FLAGS                                                             \
  "--enroll-token " TOKEN " --retry-ms 50 --retry-max-ms 300 --linger 10 "
#define MAX_CLIENTS 4

/* Starts a client of the coordinator on port with the given share and
 * --limit, its log in "<log>.err", plus the NULL-terminated extra
 * arguments (extra may be NULL). One training thread: the machine is shared
 * with the coordinator and the other clients. */
static pid_t spawn_client(int port, const char *log, const char *shard,
                          const char *limit, const char *extra[]) {
  char target[64], err[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  snprintf(err, sizeof err, "%s.err", log);
  char *argv[32] = {
      COHORT_CLIENT_BIN, "--server", target,    "--token",     TOKEN,
      "--data",          DATA_DIR,   "--shard", (char *)shard, "--limit",
      (char *)limit,     "--seed",   "5",       "--threads",   "1"};
  int n = 15;
  for (int i = 0; extra && extra[i] && n < 31; i++)
    argv[n++] = (char *)extra[i];
  argv[n] = NULL;
  return harness_spawn(argv, NULL, harness_path(err));
}

/* Polls sql on a read-only connection about every millisecond until it
 * gives a row whose first column is not NULL, and returns that value, or
 * DB_PEEK_NO_ROW after seconds. The connection stays open, so a poll costs
 * one query and notices a new row within a millisecond or two. */
static int64_t poll_db(const char *path, const char *sql, double seconds) {
  double end = clock_mono_s() + seconds;
  int64_t v = DB_PEEK_NO_ROW;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    fprintf(stderr, "poll_db: %s: %s\n", sql, sqlite3_errmsg(db));
    goto out;
  }
  sqlite3_busy_timeout(db, 100);
  while (clock_mono_s() < end) {
    if (sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) != SQLITE_NULL) {
      v = sqlite3_column_int64(st, 0);
      break;
    }
    sqlite3_reset(st);
    clock_sleep_ms(1);
  }
out:
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

/* 1 when the file at path contains needle. */
static int log_has(const char *path, const char *needle) {
  char *text = harness_read_file(path);
  int found = text && strstr(text, needle);
  free(text);
  return found;
}

/* Waits for n clients and then the coordinator; each must end by itself
 * with status 0. */
static void wait_all(const pid_t *clients, int n, pid_t server) {
  for (int i = 0; i < n; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 90), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
}

/* Starts a client alone, with a large share, and stops it with SIGSTOP as
 * soon as the database shows it selected for round 1, before it can
 * upload: the --epochs 2 the coordinator hands out over 27,000 examples
 * take tens of milliseconds, the poll a millisecond or two. Returns its
 * pid (-1 on failure) and its client id in *id; the caller checks that its
 * participation is still SELECTED. */
static pid_t start_stopped_client(int port, const char *db, const char *log,
                                  int64_t *id) {
  pid_t pid = spawn_client(port, log, "0/1", "30000", NULL);
  if (pid <= 0)
    return -1;
  *id = poll_db(db,
                "SELECT client_id FROM participations"
                " WHERE round = 1 LIMIT 1",
                60);
  harness_signal(pid, SIGSTOP);
  return *id == DB_PEEK_NO_ROW ? -1 : pid;
}

/* State of client id's round-1 participation, into out. */
static const char *round1_state(const char *db, int64_t id, char *out,
                                size_t len) {
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT state FROM participations WHERE round = 1"
           " AND client_id = %lld",
           (long long)id);
  return db_peek_text(db, sql, out, len);
}

/* K = 2 with --over-select 0.5: every round selects three clients, closes
 * at the second update, and refuses and records the third. */
static void test_over_selection_refuses_the_straggler(void) {
  const char *flags = FAST_FLAGS "--rounds 3 --clients-per-round 2 "
                                 "--over-select 0.5 --min-clients 2 "
                                 "--round-timeout 30 --selection-timeout 20";
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("over", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  pid_t clients[3];
  for (int i = 0; i < 3; i++) {
    char log[32], shard[16];
    snprintf(log, sizeof log, "over-client%d", i);
    snprintf(shard, sizeof shard, "%d/3", i);
    clients[i] = spawn_client(port, log, shard, "300", NULL);
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  wait_all(clients, 3, server);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"), 3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"
                                  " AND kind = 'TRAIN'"),
                  3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'FAILED'"),
                  0);
  /* ceil(2 * 1.5) = 3 selected, 2 aggregated, in every round. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE clients_selected = 3"
                                  " AND clients_aggregated = 2"
                                  " AND target = 2"),
                  3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds r WHERE"
                                  " (SELECT COUNT(*) FROM participations p"
                                  " WHERE p.round = r.id) = 3 AND"
                                  " (SELECT COUNT(*) FROM participations p"
                                  " WHERE p.round = r.id"
                                  " AND p.state = 'UPLOADED') = 2"),
                  3);
  /* The third update of some round came after the second closed it: it was
   * refused and recorded once, on a participation that did not upload. */
  int64_t late = db_peek_int(db, "SELECT SUM(late_uploads) FROM rounds");
  CU_ASSERT(late >= 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"
                                  " WHERE late_at IS NOT NULL"),
                  late);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"
                                  " WHERE late_at IS NOT NULL"
                                  " AND state = 'UPLOADED'"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds r"
                                  " WHERE late_uploads <> (SELECT COUNT(*)"
                                  " FROM participations p WHERE p.round = r.id"
                                  " AND p.late_at IS NOT NULL)"),
                  0);
  /* Only the two aggregated updates were stored, and dropped at commit. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM updates"), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"), 4);
}

/* K = 3, M = 2, a 3 s deadline: one selected client is stopped with
 * SIGSTOP; round 1 waits for it until the deadline, then commits with the
 * other two updates. Resumed, it finishes the federation with the others. */
static void test_deadline_commits_without_stopped_client(void) {
  const char *flags = FAST_FLAGS "--rounds 2 --clients-per-round 3 "
                                 "--min-clients 2 --round-timeout 3 "
                                 "--selection-timeout 20 --epochs 2";
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("deadline", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  /* The straggler starts alone, so its participation is the first one of
   * round 1. */
  pid_t clients[3];
  int64_t slow_id = 0;
  clients[0] = start_stopped_client(port, db, "deadline-slow", &slow_id);
  CU_ASSERT_FATAL(clients[0] > 0);
  char state[32], sql[256];
  CU_ASSERT_STRING_EQUAL_FATAL(round1_state(db, slow_id, state, sizeof state),
                               "SELECTED"); /* stopped in time */

  for (int i = 1; i < 3; i++) {
    char log[32], shard[16];
    snprintf(log, sizeof log, "deadline-client%d", i);
    snprintf(shard, sizeof shard, "%d/3", i);
    clients[i] = spawn_client(port, log, shard, "300", NULL);
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  int64_t committed = poll_db(db,
                              "SELECT id FROM rounds WHERE id = 1"
                              " AND state IN ('COMMITTED', 'FAILED')",
                              60);
  harness_signal(clients[0], SIGCONT);
  CU_ASSERT_EQUAL(committed, 1);
  wait_all(clients, 3, server);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  2);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state <> 'COMMITTED'"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT clients_selected * 10 +"
                                  " clients_aggregated FROM rounds"
                                  " WHERE id = 1"),
                  32);
  /* Committed at the deadline, not before (nor long after). */
  double wait = db_peek_double(db, "SELECT finished_at - deadline_at"
                                   " FROM rounds WHERE id = 1");
  CU_ASSERT(wait >= -0.05 && wait < 2.5);
  if (!(wait >= -0.05 && wait < 2.5))
    fprintf(stderr, "\nround 1 finished %.3f s after its deadline\n", wait);
  CU_ASSERT(db_peek_double(db, "SELECT finished_at - started_at FROM rounds"
                               " WHERE id = 1") >= 3.0);
  /* The stopped client never uploaded for round 1; if its update came in
   * after the commit, it was refused and recorded as late. */
  snprintf(sql, sizeof sql,
           "SELECT state = 'SELECTED' AND update_sha256 IS NULL"
           " AND (late_at IS NULL OR late_at >= (SELECT finished_at"
           " FROM rounds WHERE id = 1))"
           " FROM participations WHERE round = 1 AND client_id = %lld",
           (long long)slow_id);
  CU_ASSERT_EQUAL(db_peek_int(db, sql), 1);
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM participations WHERE round = 1"
           " AND state = 'UPLOADED' AND client_id <> %lld",
           (long long)slow_id);
  CU_ASSERT_EQUAL(db_peek_int(db, sql), 2);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT late_uploads = (SELECT COUNT(*)"
                                  " FROM participations WHERE round = 1"
                                  " AND late_at IS NOT NULL)"
                                  " FROM rounds WHERE id = 1"),
                  1);
}

/* --eligible charging=1: clients without the attribute, or with 0, check
 * in first and are never selected; the eligible one does all the rounds. */
static void test_eligibility_selects_only_matching_clients(void) {
  const char *flags = FAST_FLAGS "--rounds 2 --clients-per-round 1 "
                                 "--min-clients 1 --eligible charging=1 "
                                 "--round-timeout 30 --selection-timeout 1";
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("elig", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  const char *not_charging[] = {"--attribute", "charging=0", NULL};
  const char *charging[] = {"--attribute", "charging=1", NULL};
  pid_t clients[3];
  clients[0] = spawn_client(port, "elig-none", "0/3", "300", NULL);
  clients[1] = spawn_client(port, "elig-zero", "1/3", "300", not_charging);
  CU_ASSERT_FATAL(clients[0] > 0 && clients[1] > 0);
  /* Both have checked in (last_seen moves at the first check-in) while
   * round 1 was open with a free slot, and neither took it. */
  CU_ASSERT_EQUAL(
      poll_db(db,
              "SELECT 1 FROM clients WHERE last_seen > registered_at"
              " GROUP BY 1 HAVING COUNT(*) = 2",
              60),
      1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"), 0);
  char state[32];
  CU_ASSERT_STRING_EQUAL(db_peek_text(db,
                                      "SELECT state FROM rounds WHERE id = 1",
                                      state, sizeof state),
                         "OPEN");
  clients[2] = spawn_client(port, "elig-charging", "2/3", "300", charging);
  CU_ASSERT_FATAL(clients[2] > 0);
  wait_all(clients, 3, server);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  2);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"), 2);
  /* The charging client registered last. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"
                                  " WHERE client_id <> (SELECT MAX(id)"
                                  " FROM clients)"),
                  0);
}

/* --fraction 0.5: K is half the clients seen within --active-window, at
 * least M. Round 1 opens before anyone has checked in (K = M = 1); its
 * client is held with SIGSTOP until the three others have checked in, so
 * every later round sees four active clients and aims for K = 2. */
static void test_fraction_of_active_clients(void) {
  const char *flags = FAST_FLAGS "--rounds 3 --fraction 0.5 --min-clients 1 "
                                 "--round-timeout 30 --selection-timeout 1 "
                                 "--epochs 2";
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("fraction", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  pid_t clients[MAX_CLIENTS];
  int64_t first = 0;
  clients[0] = start_stopped_client(port, db, "fraction-first", &first);
  CU_ASSERT_FATAL(clients[0] > 0);
  char state[32];
  CU_ASSERT_STRING_EQUAL_FATAL(round1_state(db, first, state, sizeof state),
                               "SELECTED");
  for (int i = 1; i < MAX_CLIENTS; i++) {
    char log[32], shard[16];
    snprintf(log, sizeof log, "fraction-client%d", i);
    snprintf(shard, sizeof shard, "%d/%d", i, MAX_CLIENTS);
    clients[i] = spawn_client(port, log, shard, "300", NULL);
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  /* last_seen moves at a client's first check-in. */
  int64_t seen = poll_db(db,
                         "SELECT COUNT(*) FROM clients"
                         " WHERE last_seen > registered_at"
                         " HAVING COUNT(*) = 4",
                         60);
  harness_signal(clients[0], SIGCONT);
  CU_ASSERT_EQUAL(seen, 4);
  wait_all(clients, MAX_CLIENTS, server);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"), 3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 4);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT target * 10 + clients_aggregated"
                                  " FROM rounds WHERE id = 1"),
                  11);
  /* ceil(0.5 * 4) = 2 for the rounds opened once all four had checked in,
   * each selecting and aggregating two. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE id > 1 AND started_at >"
                                  " (SELECT MAX(last_seen) FROM clients)"
                                  " AND target = 2 AND clients_selected = 2"
                                  " AND clients_aggregated = 2"),
                  2);
}

/* --eval-every 1: after each training round an EVALUATE round in which the
 * clients report on the model; it is committed with the federated and the
 * coordinator's accuracy and makes no model. */
static void test_evaluation_rounds(void) {
  const char *flags = FAST_FLAGS "--rounds 2 --eval-every 1 "
                                 "--clients-per-round 2 --min-clients 2 "
                                 "--round-timeout 30 --selection-timeout 20 "
                                 "--eval-data " DATA_DIR;
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("eval", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  pid_t clients[2];
  for (int i = 0; i < 2; i++) {
    char log[32], shard[16];
    snprintf(log, sizeof log, "eval-client%d", i);
    snprintf(shard, sizeof shard, "%d/2", i);
    clients[i] = spawn_client(port, log, shard, "300", NULL);
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  wait_all(clients, 2, server);

  /* TRAIN, EVALUATE, TRAIN, EVALUATE. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"), 4);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE kind ="
                                  " CASE WHEN id % 2 = 1 THEN 'TRAIN'"
                                  " ELSE 'EVALUATE' END"),
                  4);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  4);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE kind = 'EVALUATE'"
                                  " AND fed_accuracy IS NOT NULL"
                                  " AND accuracy IS NOT NULL"
                                  " AND fed_examples > 0"
                                  " AND clients_aggregated = 2"),
                  2);
  /* Each evaluation is of the model the training round before made. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds e"
                                  " JOIN rounds t ON t.id = e.id - 1"
                                  " WHERE e.kind = 'EVALUATE'"
                                  " AND e.base_version = t.model_version"),
                  2);
  /* One model per training round plus the initial one. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"), 3);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models m"
                                  " JOIN rounds r ON r.id = m.round"
                                  " WHERE r.kind = 'EVALUATE'"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations p"
                                  " JOIN rounds r ON r.id = p.round"
                                  " WHERE r.kind = 'EVALUATE'"
                                  " AND p.reported_at IS NOT NULL"),
                  4);
  for (int i = 0; i < 2; i++) {
    char log[32];
    snprintf(log, sizeof log, "eval-client%d.err", i);
    CU_ASSERT(log_has(harness_path(log), "round 2: evaluated the model"));
    CU_ASSERT(log_has(harness_path(log), "round 4: evaluated the model"));
  }
  CU_ASSERT(log_has(harness_path("eval.out"), "round 2: evaluation accuracy"));
  CU_ASSERT(log_has(harness_path("eval.out"), "round 4: evaluation accuracy"));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"over-selection refuses and records the straggler's update",
       test_over_selection_refuses_the_straggler},
      {"the deadline commits a round without a stopped client",
       test_deadline_commits_without_stopped_client},
      {"--eligible selects only the clients that meet it",
       test_eligibility_selects_only_matching_clients},
      {"--fraction aims for a share of the active clients",
       test_fraction_of_active_clients},
      {"evaluation rounds report on each model and make none",
       test_evaluation_rounds},
  };
  return test_add_suite("sampling", NULL, NULL, tests,
                        sizeof tests / sizeof *tests);
}
