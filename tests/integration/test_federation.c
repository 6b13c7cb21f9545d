/* End to end: a real cohort-server and three cohort-client processes on
 * 127.0.0.1 run three FedAvg rounds of logistic regression on a subset of
 * Fashion-MNIST. Checks the round lines, the accuracy, the database and
 * that every process ends by itself with status 0. */
#include <CUnit/CUnit.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define ROUNDS 3
#define CLIENTS 3

static void test_three_rounds_three_clients(void) {
  const char *flags = "--rounds 3 "
                      "--clients-per-round 3 "
                      "--min-clients 3 "
                      "--round-timeout 60 "
                      "--eval-data " DATA_DIR " "
                      "--enroll-token it-token "
                      "--retry-ms 200 "
                      "--linger 20 ";
  int port = 0;
  char db_path[512] = "";
  pid_t server =
      harness_start_server("federation", flags, &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);

  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t clients[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    char shard[16], out[32];
    snprintf(shard, sizeof shard, "%d/%d", i, CLIENTS);
    snprintf(out, sizeof out, "client%d.err", i);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "it-token",
                    "--data",
                    DATA_DIR,
                    "--shard",
                    shard,
                    "--limit",
                    "6000",
                    "--seed",
                    "7",
                    NULL};
    clients[i] = harness_spawn(argv, NULL, harness_path(out));
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  /* Every process must end by itself: the clients when told the
   * federation is over, the server once they all know. */
  for (int i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);

  char *lines = harness_read_file(harness_path("federation.out"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
  int seen = 0;
  double last_accuracy = 0;
  for (char *line = strtok(lines, "\n"); line; line = strtok(NULL, "\n")) {
    int r, c, k;
    double acc, loss, up, down, secs;
    char tail[4];
    int got = sscanf(line,
                     "round %d: accuracy %lf loss %lf clients %d/%d up %lf "
                     "bytes/client down %lf bytes/client time %lf %3s",
                     &r, &acc, &loss, &c, &k, &up, &down, &secs, tail);
    CU_ASSERT_EQUAL(got, 9);
    if (got != 9)
      continue;
    seen++;
    CU_ASSERT_EQUAL(r, seen);
    CU_ASSERT_EQUAL(c, CLIENTS);
    CU_ASSERT_EQUAL(k, CLIENTS);
    CU_ASSERT_STRING_EQUAL(tail, "s");
    /* 7850 float32 parameters are 31400 bytes, plus protobuf framing. */
    CU_ASSERT(up >= 31400 && up < 33000);
    CU_ASSERT(down >= 31400 && down < 33000);
    CU_ASSERT(loss > 0 && loss < 2.5);
    last_accuracy = acc;
  }
  free(lines);
  CU_ASSERT_EQUAL(seen, ROUNDS);
  CU_ASSERT(last_accuracy > 0.70);

  sqlite3 *db;
  CU_ASSERT_FATAL(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) ==
                  SQLITE_OK);
  CU_ASSERT_EQUAL(
      db_peek_int(db_path,
                  "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM rounds"), ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db_path,
                              "SELECT COUNT(*) FROM rounds r JOIN models m"
                              " ON m.version = r.model_version"
                              " WHERE r.state = 'COMMITTED'"),
                  ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM participations"
                                       " WHERE state = 'UPLOADED'"),
                  ROUNDS * CLIENTS);
  CU_ASSERT(db_peek_int(db_path, "SELECT MIN(accuracy) > 0.5 FROM rounds") ==
            1);
  /* Federated evaluation: each participant reported on the global model. */
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM metrics"
                                       " WHERE name = 'global_accuracy'"),
                  ROUNDS * CLIENTS);

  /* Every stored model matches its recorded SHA-256. */
  sqlite3_stmt *st;
  CU_ASSERT_FATAL(sqlite3_prepare_v2(db, "SELECT sha256, params FROM models",
                                     -1, &st, NULL) == SQLITE_OK);
  int models = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), d);
    char hex[65];
    for (int i = 0; i < 32; i++)
      sprintf(hex + 2 * i, "%02x", d[i]);
    CU_ASSERT_STRING_EQUAL(hex, (const char *)sqlite3_column_text(st, 0));
    CU_ASSERT_EQUAL(sqlite3_column_bytes(st, 1), 7850 * 4);
    models++;
  }
  sqlite3_finalize(st);
  CU_ASSERT_EQUAL(models, ROUNDS + 1); /* the initial model and one a round */
  sqlite3_close(db);
}

/* Under the sanitizers the CNN runs some fifty times slower, so that build
 * trains and evaluates on less data: the same code, a smaller workload. */
#ifdef COHORT_TEST_SANITIZED
#define CNN_LIMIT "200"
#define CNN_EVAL_LIMIT "300"
#else
#define CNN_LIMIT "600"
#define CNN_EVAL_LIMIT "2000"
#endif

/* The training engine end to end: the FedAvg CNN on label-skewed shares
 * (dirichlet:0.5) of two clients, evaluated by the coordinator. */
static void test_cnn_on_skewed_partition(void) {
  const char *flags = "--rounds 2 --clients-per-round 2 --min-clients 2 "
                      "--model cnn --lr 0.05 --threads 1 "
                      "--round-timeout 120 --eval-data " DATA_DIR " "
                      "--eval-limit " CNN_EVAL_LIMIT " "
                      "--enroll-token it-token --retry-ms 200 --linger 20 ";
  int port = 0;
  char db_path[512] = "";
  pid_t server =
      harness_start_server("cnn", flags, &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t clients[2];
  for (int i = 0; i < 2; i++) {
    char shard[16], out[32];
    snprintf(shard, sizeof shard, "%d/2", i);
    snprintf(out, sizeof out, "cnn-client%d.err", i);
    char *argv[] = {
        COHORT_CLIENT_BIN, "--server", target,    "--token", "it-token",
        "--data",          DATA_DIR,   "--shard", shard,     "--partition",
        "dirichlet:0.5",   "--limit",  CNN_LIMIT, "--seed",  "3",
        "--threads",       "1",        NULL};
    clients[i] = harness_spawn(argv, NULL, harness_path(out));
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 240), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 60), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(db_path,
                  "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      2);
  /* 1,663,370 float32 parameters in every model. */
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM models WHERE "
                                       "length(params) = 1663370 * 4"),
                  3);
  CU_ASSERT_EQUAL(
      db_peek_int(db_path, "SELECT COUNT(*) FROM models WHERE spec = 'cnn'"),
      3);
  /* Chance is 0.10; two short rounds on skewed shares of a working CNN get
   * well past it, and the second round improves on the first. */
  CU_ASSERT(db_peek_int(db_path, "SELECT accuracy > 0.25 FROM rounds "
                                 "WHERE id = 2") == 1);
  CU_ASSERT(db_peek_int(db_path,
                        "SELECT (SELECT loss FROM rounds WHERE id = 2)"
                        " < (SELECT loss FROM rounds WHERE id = 1)") == 1);
}

/* --partition-summary prints every client's share without a coordinator. */
static void test_partition_summary(void) {
  char *argv[] = {COHORT_CLIENT_BIN,
                  "--data",
                  DATA_DIR,
                  "--partition",
                  "shards:2",
                  "--shard",
                  "0/5",
                  "--seed",
                  "1",
                  "--partition-summary",
                  NULL};
  pid_t pid = harness_spawn(argv, harness_path("summary.out"), NULL);
  CU_ASSERT_FATAL(pid > 0);
  CU_ASSERT_EQUAL(harness_wait(pid, 60), 0);
  char *text = harness_read_file(harness_path("summary.out"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  int clients = 0, two_labels = 0;
  long total = -1;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    int id, labels;
    long n;
    if (sscanf(line, " %d %ld %d", &id, &n, &labels) == 3) {
      clients++;
      two_labels += labels == 2;
    } else if (sscanf(line, " total %ld", &n) == 1) {
      total = n;
    }
  }
  free(text);
  CU_ASSERT_EQUAL(clients, 5);
  CU_ASSERT(two_labels >= 4); /* the pathological non-IID split */
  CU_ASSERT_EQUAL(total, 60000);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"three rounds with three client processes",
       test_three_rounds_three_clients},
      {"the CNN on a label-skewed partition", test_cnn_on_skewed_partition},
      {"partition summary of every client", test_partition_summary},
  };
  return test_add_suite("federation", NULL, NULL, tests,
                        sizeof tests / sizeof *tests);
}
