/* Secure aggregation end to end: a real coordinator with --secagg plus and
 * ten client processes on 127.0.0.1, four of which are killed with SIGKILL
 * at different steps of the protocol (each stops right before sending
 * share, masked, consistency or unmask with --exit-at-secagg STEP --hang
 * and is killed there, its connection still open). The round must
 * commit, record who was heard in each phase, and produce the plain FedAvg
 * of the clients whose masked inputs were summed, within q8's quantization
 * error: a second federation without secure aggregation, fp32 and only
 * those clients' shards (training is deterministic for a seed) gives the
 * reference. A codec that cannot be summed is refused at start. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"
#include "wire.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define CLIENTS 10
#define PARAMS 7850 /* logreg */
#define SEED "21"
/* q8's common range. One epoch of logistic regression on 540 examples
 * moves the mean by at most about 0.035 (printed below), and a client's
 * delta is scaled by its weight (540 / W) before it is encoded, so
 * nothing saturates; the error bound below would catch it if it did. */
#define CLIP 0.05
#define CLIP_TEXT "0.05"
/* Each client's examples, before the 10% held out for evaluation. Under
 * the sanitizers the same code runs on less data. */
#ifdef COHORT_TEST_SANITIZED
#define LIMIT "200"
#else
#define LIMIT "600"
#endif
/* The example weight cap W: above every client's count, so each weight is
 * its real count scaled by 1/W (the error bound below accounts for it). */
#define MAX_EXAMPLES 1000

/* The step before which client i leaves (NULL: it stays to the end). */
static const char *const LEAVE[CLIENTS] = {
    [2] = "share", [5] = "masked", [6] = "consistency", [8] = "unmask"};

/* Its masked input is in the sum: it did not leave before uploading it. */
static int summed(int i) {
  return !LEAVE[i] || strcmp(LEAVE[i], "consistency") == 0 ||
         strcmp(LEAVE[i], "unmask") == 0;
}

/* Waits (up to 240 s) until client i, told to leave, says it stopped
 * before its step, then kills it with SIGKILL. Returns its exit status
 * (128 + SIGKILL), or -1 when it never got there. */
static int kill_at_step(int i, pid_t pid) {
  char name[64], want[96];
  snprintf(name, sizeof name, "secagg-client%d.err", i);
  snprintf(want, sizeof want, "stopped before secagg %s; waiting to be killed",
           LEAVE[i]);
  for (int tries = 0; tries < 2400; tries++) {
    char *text = harness_read_file(harness_path(name));
    int there = text && strstr(text, want);
    free(text);
    if (there) {
      harness_signal(pid, SIGKILL);
      return harness_wait(pid, 30);
    }
    nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
  }
  fprintf(stderr, "secagg: client %d never stopped before %s\n", i, LEAVE[i]);
  harness_signal(pid, SIGKILL);
  harness_wait(pid, 30);
  return -1;
}

static pid_t spawn_client(const char *tag, const char *target, int shard,
                          const char *leave) {
  char shard_text[16], log_name[64];
  snprintf(shard_text, sizeof shard_text, "%d/%d", shard, CLIENTS);
  snprintf(log_name, sizeof log_name, "%s-client%d.err", tag, shard);
  char *argv[] = {COHORT_CLIENT_BIN,
                  "--server",
                  (char *)target,
                  "--token",
                  "sa-token",
                  "--data",
                  DATA_DIR,
                  "--shard",
                  shard_text,
                  "--limit",
                  LIMIT,
                  "--seed",
                  SEED,
                  "--threads",
                  "1",
                  leave ? "--exit-at-secagg" : NULL,
                  (char *)leave,
                  "--hang",
                  NULL};
  return harness_spawn(argv, NULL, harness_path(log_name));
}

/* The parameters of model `version` in the database at path into out
 * (PARAMS floats). Returns how many it had, or -1. */
static long read_model(const char *path, int version, float *out) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  long n = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT params FROM models WHERE version = ?1", -1,
                         &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int(st, 1, version);
    if (sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_bytes(st, 0) / 4;
      if (n == PARAMS)
        wire_get_f32le(out, sqlite3_column_blob(st, 0), PARAMS);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

/* Runs the plain federation of the summed clients' shards: fp32, no secure
 * aggregation, the same seeds. Its database path goes into db. */
static void run_reference(char *db, size_t db_len) {
  int n = 0;
  for (int i = 0; i < CLIENTS; i++)
    n += summed(i);
  char flags[512];
  snprintf(flags, sizeof flags,
           "--secagg off --codec fp32 --rounds 1 --clients-per-round %d "
           "--min-clients %d --round-timeout 120 --selection-timeout 60 "
           "--seed " SEED " --enroll-token sa-token --retry-ms 100 "
           "--retry-max-ms 500 --linger 20",
           n, n);
  int port = 0;
  db[0] = '\0';
  pid_t server = harness_start_server("plain", flags, &port, db, db_len);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t pids[CLIENTS] = {0};
  for (int i = 0; i < CLIENTS; i++)
    if (summed(i)) {
      pids[i] = spawn_client("plain", target, i, NULL);
      CU_ASSERT_FATAL(pids[i] > 0);
    }
  for (int i = 0; i < CLIENTS; i++)
    if (pids[i])
      CU_ASSERT_EQUAL(harness_wait(pids[i], 180), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 60), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  1);
}

static void test_dropouts_at_four_phases(void) {
  char flags[512];
  snprintf(flags, sizeof flags,
           "--secagg plus --codec q8 --codec-clip " CLIP_TEXT
           " --secagg-max-examples %d --rounds 1 --clients-per-round %d "
           "--min-clients 7 --secagg-timeout 5 --round-timeout 20 "
           "--selection-timeout 60 --seed " SEED
           " --enroll-token sa-token --retry-ms 100 --retry-max-ms 500 "
           "--linger 20",
           MAX_EXAMPLES, CLIENTS);
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("secagg", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t pids[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    pids[i] = spawn_client("secagg", target, i, LEAVE[i]);
    CU_ASSERT_FATAL(pids[i] > 0);
  }
  /* Each client told to leave is killed once it stands at its step; the
   * others finish the federation; the coordinator then stops by itself. */
  for (int i = 0; i < CLIENTS; i++) {
    if (!LEAVE[i])
      continue;
    CU_ASSERT_EQUAL(kill_at_step(i, pids[i]), 128 + SIGKILL);
  }
  for (int i = 0; i < CLIENTS; i++) {
    if (LEAVE[i])
      continue;
    int status = harness_wait(pids[i], 240);
    CU_ASSERT_EQUAL(status, 0);
    if (status != 0)
      fprintf(stderr, "secagg: client %d ended with %d\n", i, status);
  }
  CU_ASSERT_EQUAL(harness_wait(server, 60), 0);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  1);
  /* ADVERTISE heard all ten; one left before each later step. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT secagg_advertised FROM rounds"
                                  " WHERE id = 1"),
                  10);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT secagg_shared FROM rounds WHERE id = 1"), 9);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT secagg_masked FROM rounds WHERE id = 1"), 8);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT secagg_attested FROM rounds WHERE id = 1"), 7);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT secagg_unmasked FROM rounds WHERE id = 1"), 6);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"
                                  " WHERE round = 1 AND state = 'UPLOADED'"),
                  8);
  char text[128];
  db_peek_text(db, "SELECT secagg FROM rounds WHERE id = 1", text, sizeof text);
  printf("\n  round 1: secure aggregation %s\n", text);
  CU_ASSERT(strncmp(text, "plus n=10", 9) == 0);
  /* The weights the coordinator used: each count capped at W. */
  double sum_w = db_peek_double(db, "SELECT SUM(examples) FROM participations"
                                    " WHERE round = 1 AND state = 'UPLOADED'");
  CU_ASSERT_FATAL(sum_w > 0);

  char ref[512];
  run_reference(ref, sizeof ref);

  static float a0[PARAMS], a1[PARAMS], b0[PARAMS], b1[PARAMS];
  CU_ASSERT_EQUAL_FATAL(read_model(db, 0, a0), PARAMS);
  CU_ASSERT_EQUAL_FATAL(read_model(db, 1, a1), PARAMS);
  CU_ASSERT_EQUAL_FATAL(read_model(ref, 0, b0), PARAMS);
  CU_ASSERT_EQUAL_FATAL(read_model(ref, 1, b1), PARAMS);
  CU_ASSERT(memcmp(a0, b0, sizeof a0) == 0); /* the same initial model */
  /* Client u sends q(delta_u * w_u / W) = delta_u * w_u / W + e_u with
   * |e_u| < 2 clip / 255 (one q8 step); the coordinator scales the sum by
   * W / sum(w), so each element is off by less than 8 W step / sum(w),
   * plus float rounding. */
  double step = 2 * CLIP / 255;
  double tol = 8 * MAX_EXAMPLES * step / sum_w * 1.01 + 1e-6;
  double worst = 0, moved = 0, sum_err = 0;
  for (int j = 0; j < PARAMS; j++) {
    double err = fabs((double)a1[j] - (double)b1[j]);
    worst = err > worst ? err : worst;
    sum_err += err;
    double d = fabs((double)b1[j] - (double)b0[j]);
    moved = d > moved ? d : moved;
  }
  printf("  largest mean delta %.5f (clip %.3f); secure vs plain FedAvg: "
         "largest difference %.2e, mean %.2e, bound %.2e\n",
         moved, CLIP, worst, sum_err / PARAMS, tol);
  CU_ASSERT(moved > 2 * tol); /* the round did move the model */
  CU_ASSERT(moved < CLIP);
  CU_ASSERT(worst <= tol);
}

/* Starts a coordinator with --secagg full and `flag value`, which it must
 * refuse before serving anything; returns what it said (free it). */
static char *refused_at_start(const char *tag, const char *flag,
                              const char *value) {
  char db[64], err[64];
  snprintf(db, sizeof db, "%s.db", tag);
  snprintf(err, sizeof err, "%s.err", tag);
  char *argv[] = {COHORT_SERVER_BIN,
                  "--listen",
                  "127.0.0.1:0",
                  "--enroll-token",
                  "t",
                  "--db",
                  (char *)harness_path(db),
                  "--secagg",
                  "full",
                  (char *)flag,
                  (char *)value,
                  NULL};
  pid_t p = harness_spawn(argv, NULL, harness_path(err));
  CU_ASSERT_FATAL(p > 0);
  CU_ASSERT_NOT_EQUAL(harness_wait(p, 30), 0);
  char *text = harness_read_file(harness_path(err));
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  fprintf(stderr, "secagg: the coordinator said: %s", text);
  return text;
}

/* topk is not summable: the coordinator says so, naming what is. */
static void test_unsummable_codec_refused_at_start(void) {
  char *text = refused_at_start("refused", "--codec", "topk:0.1");
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "topk:0.1"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "summable"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "q8"));
  free(text);
}

/* An adversary the finder does not know: refused, naming the two. */
static void test_unknown_adversary_refused_at_start(void) {
  char *text = refused_at_start("adversary", "--secagg-adversary", "evil");
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "--secagg-adversary 'evil'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "semi-malicious or curious"));
  free(text);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a codec that cannot be summed is refused at start",
       test_unsummable_codec_refused_at_start},
      {"an unknown --secagg-adversary is refused at start",
       test_unknown_adversary_refused_at_start},
      {"ten clients, four leaving at share, masked, consistency and unmask: "
       "the round commits the survivors' FedAvg",
       test_dropouts_at_four_phases},
  };
  return test_add_suite("secagg dropout", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
