/* Clients killed at every phase (issue 21, Faults): real cohort-client
 * processes die by SIGKILL, with no goodbye, at an exact point of the
 * protocol (the testing aid COHORT_TEST_KILL_AT, client/test_kill.h): after
 * registering, while a check-in is held, between the two halves of the
 * model's download, during local training, between the two halves of the
 * update's upload, and under secure aggregation after ADVERTISE, after
 * SHARE, after the masked upload and before UNMASK. Honest clients keep
 * running. After each kill the coordinator is still up, the round the
 * victim was in either commits with the survivors or fails at its
 * deadline, a later round commits, and the database passes integrity_check
 * with every committed round's model and digest unchanged (kill_loop.c). */
#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "clock.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"
#include "kill_loop.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define SHARDS 8

typedef struct phase {
  const char *kill_at; /* COHORT_TEST_KILL_AT */
  const char *limit;   /* the victim's --limit */
  int selected;        /* whether it dies holding a task */
  /* Started as soon as the victim before it died, while that one's round
   * waits for its deadline with no place free: its check-in is held. */
  int overlap;
  /* Its update is in the sum all the same (a masked input uploaded). */
  int in_sum;
  /* Secure aggregation: the last phase count that heard it and the first
   * that did not (rounds.secagg_*). */
  const char *heard, *lost;
} phase;

/* Whether pid is running (not gone, not a zombie). */
static int alive(pid_t pid) {
  char path[64], stat[256] = "";
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char *close = strrchr(stat, ')');
  return close && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}

static int64_t peek(const char *db, const char *fmt, int64_t arg) {
  char sql[512];
  snprintf(sql, sizeof sql, fmt, (long long)arg);
  return db_peek_int(db, sql);
}

/* Waits up to seconds for sql (with arg) to give a non-zero integer. */
static int wait_for(const char *db, double seconds, const char *fmt,
                    int64_t arg) {
  double end = clock_mono_s() + seconds;
  while (clock_mono_s() < end) {
    int64_t v = peek(db, fmt, arg);
    if (v != DB_PEEK_NO_ROW && v != 0)
      return 1;
    clock_sleep_ms(20);
  }
  return 0;
}

static pid_t spawn_client(const char *tag, const char *target, int shard,
                          const char *limit, const char *kill_at) {
  char shard_text[16], log[64];
  snprintf(shard_text, sizeof shard_text, "%d/%d", shard, SHARDS);
  snprintf(log, sizeof log, "%s-client%d.err", tag, shard);
  char *argv[] = {COHORT_CLIENT_BIN,
                  "--server",
                  (char *)target,
                  "--token",
                  "ck-token",
                  "--data",
                  DATA_DIR,
                  "--shard",
                  shard_text,
                  "--limit",
                  (char *)limit,
                  "--seed",
                  "3",
                  "--threads",
                  "1",
                  NULL};
  if (kill_at)
    setenv("COHORT_TEST_KILL_AT", kill_at, 1);
  pid_t pid = harness_spawn(argv, NULL, harness_path(log));
  unsetenv("COHORT_TEST_KILL_AT");
  return pid;
}

/* Runs a federation with `survivors` honest clients and one victim per
 * phase, one after the other, checking the coordinator and its database
 * after each. */
static void run_phases(const char *tag, const char *flags, int survivors,
                       const phase *phases, int n_phases) {
  double t0 = clock_mono_s();
  char all[1024];
  snprintf(all, sizeof all,
           "--rounds 250 --round-timeout 6 --selection-timeout 1 "
           "--selection-window 0 --offender-failures 0 --retry-ms 50 "
           "--retry-max-ms 200 --linger 3 --enroll-token ck-token %s",
           flags);
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server(tag, all, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t honest[SHARDS];
  for (int i = 0; i < survivors; i++) {
    honest[i] = spawn_client(tag, target, i, "200", NULL);
    CU_ASSERT_FATAL(honest[i] > 0);
  }
  CU_ASSERT_FATAL(wait_for(db, 60,
                           "SELECT COUNT(*) >= %lld FROM rounds WHERE"
                           " state = 'COMMITTED'",
                           1));
  kill_history h;
  kill_history_init(&h);
  CU_ASSERT_EQUAL(kill_check_db(db, &h, 0, 0, NULL), 0);

  pid_t victim = 0;
  for (int k = 0; k < n_phases; k++) {
    const phase *p = &phases[k];
    if (!p->overlap)
      victim =
          spawn_client(tag, target, survivors + k % 2, p->limit, p->kill_at);
    CU_ASSERT_FATAL(victim > 0);
    int status = harness_wait(victim, 60);
    if (k + 1 < n_phases && phases[k + 1].overlap)
      victim = spawn_client(tag, target, survivors + (k + 1) % 2,
                            phases[k + 1].limit, phases[k + 1].kill_at);
    CU_ASSERT_EQUAL(status, 128 + SIGKILL);
    char log[64];
    snprintf(log, sizeof log, "%s-client%d.err", tag, survivors + k % 2);
    char *text = harness_read_file(harness_path(log));
    char want[96];
    snprintf(want, sizeof want, "COHORT_TEST_KILL_AT=%s", p->kill_at);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, want));
    free(text);
    CU_ASSERT_FATAL(alive(server));

    /* The survivors registered first, then the victims one by one; the
     * round this one was in, if any. */
    int64_t id = survivors + k + 1;
    int64_t round = peek(db,
                         "SELECT round FROM participations WHERE"
                         " client_id = %lld",
                         id);
    int64_t newest = db_peek_int(db, "SELECT MAX(id) FROM rounds");
    if (!p->selected) {
      CU_ASSERT_EQUAL(round, DB_PEEK_NO_ROW);
      round = newest;
    }
    CU_ASSERT_FATAL(round != DB_PEEK_NO_ROW);
    /* Its round ends, committed with the survivors or failed at its
     * deadline; a later one commits. */
    CU_ASSERT(wait_for(db, 30,
                       "SELECT state IN ('COMMITTED', 'FAILED') FROM"
                       " rounds WHERE id = %lld",
                       round));
    char how[256], sql[256];
    snprintf(sql, sizeof sql,
             "SELECT state || ' ' || clients_aggregated || '/' ||"
             " clients_selected || ' ' || COALESCE(reason, '') FROM rounds"
             " WHERE id = %lld",
             (long long)round);
    db_peek_text(db, sql, how, sizeof how);
    if (p->selected && !strncmp(how, "COMMITTED", 9)) {
      snprintf(sql, sizeof sql,
               "SELECT clients_selected - clients_aggregated = %d FROM"
               " rounds WHERE id = %%lld",
               p->in_sum ? 0 : 1);
      CU_ASSERT_EQUAL(peek(db, sql, round), 1);
    }
    if (p->heard) {
      snprintf(sql, sizeof sql,
               "SELECT %s = clients_selected AND %s = clients_selected - 1"
               " FROM rounds WHERE id = %%lld",
               p->heard, p->lost);
      CU_ASSERT_EQUAL(peek(db, sql, round), 1);
    }
    if (!strncmp(how, "FAILED", 6))
      CU_ASSERT(strstr(how, "deadline") || strstr(how, "secure"));
    CU_ASSERT(wait_for(db, 30,
                       "SELECT COUNT(*) FROM rounds WHERE id > %lld AND"
                       " state = 'COMMITTED'",
                       round));
    CU_ASSERT_FATAL(alive(server));
    CU_ASSERT_EQUAL(kill_check_db(db, &h, k + 1, 0, NULL), 0);
    fprintf(stderr, "%s: victim %s (client %lld): round %lld %s\n", tag,
            p->kill_at, (long long)id, (long long)round, how);
  }

  CU_ASSERT_EQUAL(harness_stop(server, 30), 0);
  for (int i = 0; i < survivors; i++) {
    harness_signal(honest[i], SIGKILL);
    harness_wait(honest[i], 10);
  }
  CU_ASSERT_EQUAL(kill_check_db(db, &h, n_phases + 1, 0, NULL), 0);
  /* Every round but one the stop may have cut short ended, with a reason
   * if it failed. */
  CU_ASSERT(db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state NOT"
                            " IN ('COMMITTED', 'FAILED')") <= 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE"
                                  " state = 'FAILED' AND (reason IS NULL"
                                  " OR reason = '')"),
                  0);
  fprintf(stderr, "%s: %d victims, %lld rounds committed, %.1f s\n", tag,
          n_phases,
          (long long)db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE"
                                     " state = 'COMMITTED'"),
          clock_mono_s() - t0);
}

static void test_plain_phases(void) {
  /* download before checkin: the round it leaves waits for its deadline,
   * which holds the next victim's check-in. The trainer gets more data, so
   * that 2 ms fall within its training (the whole share, 6,750
   * examples). */
  static const phase phases[] = {
      {.kill_at = "registered", .limit = "200"},
      {.kill_at = "download", .limit = "200", .selected = 1},
      {.kill_at = "checkin:300", .limit = "200", .overlap = 1},
      {.kill_at = "train:2", .limit = "0", .selected = 1},
      {.kill_at = "upload", .limit = "200", .selected = 1},
  };
  run_phases("plain", "--clients-per-round 3 --min-clients 2", 2, phases,
             sizeof phases / sizeof phases[0]);
}

static void test_secagg_phases(void) {
  static const phase phases[] = {
      {"secagg-advertised", "200", 1, 0, 0, "secagg_advertised",
       "secagg_shared"},
      {"secagg-shared", "200", 1, 0, 0, "secagg_shared", "secagg_masked"},
      {"secagg-masked", "200", 1, 0, 1, "secagg_masked", "secagg_attested"},
      {"secagg-before-unmask", "200", 1, 0, 1, "secagg_attested",
       "secagg_unmasked"},
  };
  run_phases("secagg",
             "--clients-per-round 5 --min-clients 4 --secagg full --codec q8 "
             "--codec-clip 0.05 --secagg-max-examples 1000 "
             "--secagg-timeout 2",
             4, phases, sizeof phases / sizeof phases[0]);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"clients SIGKILLed after registering, in a held check-in, mid-download, "
       "mid-training and mid-upload: the coordinator stays up, rounds commit, "
       "nothing committed changes",
       test_plain_phases},
      {"clients SIGKILLed after ADVERTISE, after SHARE, after the masked "
       "upload and before UNMASK: the same under secure aggregation",
       test_secagg_phases},
  };
  return test_add_suite("client kills", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
