/* Update codecs end to end: a real coordinator and three client processes
 * run FedAvg rounds of logistic regression with a compressed upload. Each
 * codec must commit every round, learn, record its spec and round seed per
 * round, and upload as many bytes per client as its payload takes. A codec
 * the coordinator cannot use is refused at start with the reason. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define ROUNDS 3
#define CLIENTS 3
#define PARAMS 7850 /* logreg */

typedef struct codec_case {
  const char *tag;
  const char *flags;     /* --codec and --codec-clip */
  double min_up, max_up; /* bytes of one participation's upload calls */
  double min_accuracy;
} codec_case;

/* Runs the federation of c and checks its rounds, bytes and accuracy. */
static void run_case(const codec_case *c) {
  char flags[512];
  snprintf(flags, sizeof flags,
           "--rounds %d --clients-per-round %d --min-clients %d "
           "--round-timeout 60 --eval-data " DATA_DIR " --eval-limit 2000 "
           "--enroll-token codec-token --retry-ms 200 --linger 20 %s",
           ROUNDS, CLIENTS, CLIENTS, c->flags);
  int port = 0;
  char db_path[512] = "";
  pid_t server =
      harness_start_server(c->tag, flags, &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t clients[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    char shard[16], err[64];
    snprintf(shard, sizeof shard, "%d/%d", i, CLIENTS);
    snprintf(err, sizeof err, "%s-client%d.err", c->tag, i);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "codec-token",
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
  for (int i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);

  CU_ASSERT_EQUAL(
      db_peek_int(db_path,
                  "SELECT COUNT(*) FROM rounds WHERE state = 'COMMITTED'"),
      ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM participations"
                                       " WHERE state = 'UPLOADED'"),
                  ROUNDS * CLIENTS);
  /* Each round names its codec and a 32-byte seed of its own. */
  CU_ASSERT_EQUAL(db_peek_int(db_path,
                              "SELECT COUNT(DISTINCT codec_seed) FROM rounds"
                              " WHERE length(codec_seed) = 64"
                              " AND codec IS NOT NULL"),
                  ROUNDS);
  double min_up =
      db_peek_double(db_path, "SELECT MIN(bytes_up) FROM participations");
  double max_up =
      db_peek_double(db_path, "SELECT MAX(bytes_up) FROM participations");
  printf("\n  %s: upload %.0f-%.0f bytes per client and round\n", c->flags,
         min_up, max_up);
  CU_ASSERT(min_up >= c->min_up && max_up <= c->max_up);
  double acc = db_peek_double(
      db_path, "SELECT accuracy FROM rounds ORDER BY id DESC LIMIT 1");
  printf("  final accuracy %.4f\n", acc);
  CU_ASSERT(acc >= c->min_accuracy);
}

/* Upload bytes are the payload plus protobuf and gRPC framing (about 100
 * bytes per chunk); fp32 is 31400 bytes. */
static void test_q8_per_payload_scale(void) {
  /* 7850 bytes of levels and a 4-byte scale. */
  codec_case c = {"q8", "--codec q8", 7854, 8300, 0.70};
  run_case(&c);
}

static void test_rotated_q4_common_clip(void) {
  /* Padded to 8192 coordinates, 4 bits each: 4096 bytes. */
  codec_case c = {"rotq4", "--codec q4+rot --codec-clip 0.02", 4096, 4500,
                  0.65};
  run_case(&c);
}

static void test_randk_q8(void) {
  /* k = ceil(0.25 * 7850) = 1963 values of 8 bits and a scale. */
  codec_case c = {"randk", "--codec randk:0.25+q8", 1967, 2400, 0.65};
  run_case(&c);
}

static void test_topk_error_feedback_zstd(void) {
  /* k = 785 indices of 13 bits and 785 float32 values before zstd. */
  codec_case c = {"topk", "--codec topk:0.1+ef+zstd", 500, 4900, 0.65};
  run_case(&c);
}

static void test_sketch(void) {
  /* 3 x 1000 float32 buckets: 12000 bytes. The hashes change with every
   * round seed, so the accuracy after three rounds varies from run to run
   * (0.40-0.60 seen, on a loaded machine too); the bound shows that the
   * model learns, at three times chance (0.1). */
  codec_case c = {"sketch", "--codec sketch:3x1000+ef --lr 0.1", 12000, 12500,
                  0.30};
  run_case(&c);
}

/* A spec the coordinator cannot parse stops it at start, with the reason,
 * before it serves anything. */
static void test_bad_codec_refused_at_start(void) {
  const char *bad[][2] = {{"q17", "1..16"},
                          {"topk:0.1+sketch:2x10", "at most one"},
                          {"zip", "zip"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char err[64], db[64];
    snprintf(err, sizeof err, "badcodec%zu.err", i);
    snprintf(db, sizeof db, "badcodec%zu.db", i);
    char *argv[] = {COHORT_SERVER_BIN,
                    "--listen",
                    "127.0.0.1:0",
                    "--enroll-token",
                    "t",
                    "--db",
                    (char *)harness_path(db),
                    "--codec",
                    (char *)bad[i][0],
                    NULL};
    pid_t p = harness_spawn(argv, NULL, harness_path(err));
    CU_ASSERT_FATAL(p > 0);
    CU_ASSERT_NOT_EQUAL(harness_wait(p, 30), 0);
    char *text = harness_read_file(harness_path(err));
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "--codec"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, bad[i][1]));
    free(text);
  }
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"bad --codec refused at start", test_bad_codec_refused_at_start},
      {"q8 with a per-payload scale", test_q8_per_payload_scale},
      {"rot+q4 with a common clip", test_rotated_q4_common_clip},
      {"randk:0.25+q8", test_randk_q8},
      {"topk:0.1+ef+zstd", test_topk_error_feedback_zstd},
      {"sketch:3x1000+ef", test_sketch},
  };
  return test_add_suite("codecs", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
