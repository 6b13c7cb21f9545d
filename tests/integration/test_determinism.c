/* With a fixed --seed, the committed global models are bit-identical across
 * runs whatever the order in which the uploads arrive: the same federation
 * runs twice, the second time with the clients started in reverse order,
 * staggered, single-threaded and paused at random (SIGSTOP), and every
 * model version must have the same SHA-256 in both databases. */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <openssl/sha.h>
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
#define CLIENTS 3
#define ROUNDS 3
#define MAX_TRIES 3 /* reruns of the second federation if its order matched */
#define SERVER_FLAGS                                                           \
  "--seed 5 --model mlp:32 --rounds 3 --clients-per-round 3 --min-clients 3 "  \
  "--round-timeout 60 --retry-ms 50 --linger 20 --enroll-token det-token "     \
  "--retry-max-ms 200"

/* How one federation is run. */
typedef struct run_plan {
  int order[CLIENTS];     /* shards in the order their processes start */
  long start_ms[CLIENTS]; /* wait before starting each, in that order */
  const char *threads;    /* --threads of every client, NULL: default */
  uint64_t pause_seed;    /* nonzero: pause random clients while running */
} run_plan;

/* What a run left behind: its database and, per round, the shards in the
 * order their updates arrived (-1: not seen). */
typedef struct run_result {
  char db[512];
  int arrival[ROUNDS + 1][CLIENTS];
} run_result;

/* The coordinator's id of the client whose log is at path, or -1. */
static long long registered_id(const char *path) {
  char *text = harness_read_file(path);
  long long id = -1;
  const char *p = text ? strstr(text, "registered as client ") : NULL;
  if (p)
    id = strtoll(p + strlen("registered as client "), NULL, 10);
  free(text);
  return id;
}

/* Fills r->arrival from the coordinator's "round R: update from client C"
 * lines, mapping ids to shards with ids[shard]. */
static void read_arrivals(const char *server_log, const long long *ids,
                          run_result *r) {
  memset(r->arrival, -1, sizeof r->arrival);
  int seen[ROUNDS + 1] = {0};
  char *text = harness_read_file(server_log);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  for (char *p = text; (p = strstr(p, "round ")); p++) {
    long long round, client;
    if (sscanf(p, "round %lld: update from client %lld", &round, &client) !=
            2 ||
        round < 1 || round > ROUNDS || seen[round] == CLIENTS)
      continue;
    for (int s = 0; s < CLIENTS; s++)
      if (ids[s] == client)
        r->arrival[round][seen[round]++] = s;
  }
  free(text);
}

/* Runs one federation to its end into a fresh database named after tag. */
static void run_federation(const char *tag, const run_plan *plan,
                           run_result *r) {
  int port = 0;
  r->db[0] = '\0';
  pid_t server =
      harness_start_server(tag, SERVER_FLAGS, &port, r->db, sizeof r->db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);

  pid_t pids[CLIENTS];
  char logs[CLIENTS][64];
  for (int j = 0; j < CLIENTS; j++) {
    int s = plan->order[j];
    clock_sleep_ms(plan->start_ms[j]);
    char shard[16];
    snprintf(shard, sizeof shard, "%d/%d", s, CLIENTS);
    snprintf(logs[s], sizeof logs[s], "%s-client%d.err", tag, s);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "det-token",
                    "--data",
                    DATA_DIR,
                    "--shard",
                    shard,
                    "--limit",
                    "500",
                    "--seed",
                    "9",
                    plan->threads ? "--threads" : NULL,
                    (char *)plan->threads,
                    NULL};
    pids[s] = harness_spawn(argv, NULL, harness_path(logs[s]));
    CU_ASSERT_FATAL(pids[s] > 0);
  }

  /* Slow devices: stop one client at a time for 20-120 ms until every
   * round has committed (or a minute has passed). */
  if (plan->pause_seed) {
    harness_rng_seed(plan->pause_seed);
    for (int i = 0; i < 600; i++) {
      if (db_peek_int(r->db, "SELECT COUNT(*) FROM rounds"
                             " WHERE state = 'COMMITTED'") >= ROUNDS)
        break;
      pid_t victim = pids[harness_rand_range(0, CLIENTS - 1)];
      harness_signal(victim, SIGSTOP);
      clock_sleep_ms(harness_rand_range(20, 120));
      harness_signal(victim, SIGCONT);
      clock_sleep_ms(harness_rand_range(0, 30));
    }
  }
  for (int s = 0; s < CLIENTS; s++)
    CU_ASSERT_EQUAL(harness_wait(pids[s], 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 60), 0);

  long long ids[CLIENTS];
  for (int s = 0; s < CLIENTS; s++) {
    ids[s] = registered_id(harness_path(logs[s]));
    CU_ASSERT(ids[s] > 0);
  }
  char server_log[64];
  snprintf(server_log, sizeof server_log, "%s.err", tag);
  read_arrivals(harness_path(server_log), ids, r);

  CU_ASSERT_EQUAL(db_peek_int(r->db, "SELECT COUNT(*) FROM rounds"
                                     " WHERE state = 'COMMITTED'"),
                  ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(r->db, "SELECT COUNT(*) FROM rounds"), ROUNDS);
  fprintf(stderr, "%s: uploads arrived from shards", tag);
  for (int round = 1; round <= ROUNDS; round++) {
    fprintf(stderr, "%s round %d:", round > 1 ? ";" : "", round);
    for (int k = 0; k < CLIENTS; k++)
      fprintf(stderr, " %d", r->arrival[round][k]);
  }
  fputc('\n', stderr);
}

static int same_arrivals(const run_result *a, const run_result *b) {
  return !memcmp(a->arrival, b->arrival, sizeof a->arrival);
}

/* Reads every model's recorded digest into shas[version], checking that the
 * blob hashes to it. Returns the number of models. */
static int read_models(const char *path, char shas[ROUNDS + 1][65]) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int n = 0;
  memset(shas, 0, (ROUNDS + 1) * sizeof shas[0]);
  CU_ASSERT_FATAL(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
                  SQLITE_OK);
  CU_ASSERT_FATAL(sqlite3_prepare_v2(db,
                                     "SELECT version, sha256, params"
                                     " FROM models ORDER BY version",
                                     -1, &st, NULL) == SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t v = sqlite3_column_int64(st, 0);
    const char *sha = (const char *)sqlite3_column_text(st, 1);
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2), d);
    char hex[65];
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
      sprintf(hex + 2 * i, "%02x", d[i]);
    CU_ASSERT_PTR_NOT_NULL(sha);
    CU_ASSERT_STRING_EQUAL(hex, sha ? sha : "");
    CU_ASSERT(v >= 0 && v <= ROUNDS);
    if (v >= 0 && v <= ROUNDS)
      memcpy(shas[v], hex, sizeof hex);
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

static void test_models_do_not_depend_on_arrival_order(void) {
  run_result a, b;
  run_plan plan_a = {.order = {0, 1, 2}, .start_ms = {0, 0, 0}};
  run_federation("detA", &plan_a, &a);

  /* The second federation differs in everything but the seeds; rerun it
   * if its uploads still arrived in the same order. */
  int tries = 0;
  do {
    char tag[16];
    snprintf(tag, sizeof tag, "detB%d", tries);
    run_plan plan_b = {.order = {2, 1, 0},
                       .start_ms = {0, 300, 300},
                       .threads = "1",
                       .pause_seed = 0x5eed0000u + (uint64_t)tries};
    run_federation(tag, &plan_b, &b);
  } while (same_arrivals(&a, &b) && ++tries < MAX_TRIES);
  CU_ASSERT(!same_arrivals(&a, &b));
  if (same_arrivals(&a, &b))
    fprintf(stderr, "determinism: the uploads arrived in the same order in "
                    "every run; the test proved nothing\n");

  char sha_a[ROUNDS + 1][65], sha_b[ROUNDS + 1][65];
  CU_ASSERT_EQUAL(read_models(a.db, sha_a), ROUNDS + 1);
  CU_ASSERT_EQUAL(read_models(b.db, sha_b), ROUNDS + 1);
  int differ = 0;
  for (int v = 0; v <= ROUNDS; v++) {
    CU_ASSERT_STRING_EQUAL(sha_a[v], sha_b[v]);
    if (strcmp(sha_a[v], sha_b[v])) {
      differ++;
      fprintf(stderr,
              "determinism: model %d is %.16s... in one run, "
              "%.16s... in the other\n",
              v, sha_a[v], sha_b[v]);
    }
  }
  fprintf(stderr,
          "determinism: %d of %d model versions identical; final "
          "model %.16s...\n",
          ROUNDS + 1 - differ, ROUNDS + 1, sha_a[ROUNDS]);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"models are bit-identical whatever the upload order",
       test_models_do_not_depend_on_arrival_order},
  };
  return test_add_suite("determinism", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
