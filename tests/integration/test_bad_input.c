/* Bad input against a real cohort-server process: every case gets a gRPC
 * status with a one-line reason, nothing is stored, and the server keeps
 * serving. The test speaks the protocol itself through the rpc layer, so it
 * can send what a well-behaved client never would. */
#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <math.h>
#include <openssl/sha.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "fl_client.h"
#include "harness.h"
#include "pb.h"

#define N_PARAMS 7850 /* logreg 784 -> 10 */
#define TOKEN "bad-input-token"

static pid_t g_server;
static rpc_channel *g_ch;
static char g_db[512];
static char g_session[65]; /* a registered client's token, for the fuzz test */

/* Asserts the code and that the reason is one non-empty line. */
#define ASSERT_REFUSED(r, want)                                                \
  do {                                                                         \
    CU_ASSERT_EQUAL((r).code, (want));                                         \
    CU_ASSERT((r).detail[0] != '\0');                                          \
    CU_ASSERT_PTR_NULL(strchr((r).detail, '\n'));                              \
  } while (0)

/* Nothing of an update has been stored: no UPLOADED row, only the initial
 * model, no round committed. */
static void assert_nothing_stored(void) {
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM participations"
                                    " WHERE state = 'UPLOADED'"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM models"), 1);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM rounds"
                                    " WHERE state = 'COMMITTED'"),
                  0);
}

/* Every parameter of model 1 differs from model 0 by delta. */
static void assert_model_moved_by(float delta) {
  sqlite3 *db;
  CU_ASSERT_FATAL(sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READONLY, NULL) ==
                  SQLITE_OK);
  sqlite3_stmt *st;
  CU_ASSERT_FATAL(sqlite3_prepare_v2(db,
                                     "SELECT a.params, b.params FROM models a,"
                                     " models b WHERE a.version = 0 AND"
                                     " b.version = 1",
                                     -1, &st, NULL) == SQLITE_OK);
  CU_ASSERT_FATAL(sqlite3_step(st) == SQLITE_ROW);
  CU_ASSERT_EQUAL_FATAL(sqlite3_column_bytes(st, 0), N_PARAMS * 4);
  CU_ASSERT_EQUAL_FATAL(sqlite3_column_bytes(st, 1), N_PARAMS * 4);
  const float *before = sqlite3_column_blob(st, 0);
  const float *after = sqlite3_column_blob(st, 1);
  int off = 0;
  for (size_t i = 0; i < N_PARAMS; i++)
    off += fabsf(after[i] - before[i] - delta) > 1e-6f;
  CU_ASSERT_EQUAL(off, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static int suite_init(void) {
  const char *flags = "--rounds 1 "
                      "--clients-per-round 2 "
                      "--min-clients 2 "
                      "--round-timeout 60 "
                      "--enroll-token " TOKEN " "
                      "--retry-ms 100 "
                      "--linger 3 ";
  int port;
  g_server = harness_start_server("bad-input", flags, &port, g_db, sizeof g_db);
  if (g_server <= 0)
    return -1;
  g_ch = fl_connect(port);
  return g_ch ? 0 : -1;
}

static int suite_clean(void) {
  rpc_channel_free(g_ch);
  return harness_stop(g_server, 30) == 0 ? 0 : -1;
}

/* Registers a client with a fresh identity key and returns its session
 * token. */
static void register_client(char token[65]) {
  uint8_t key[SIGN_PUBLIC_LEN];
  CU_ASSERT_EQUAL_FATAL(harness_identity_key(key), 0);
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  req.enrollment_token = TOKEN;
  req.identity_key.data = key;
  req.identity_key.len = sizeof key;
  fl_reply r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &req.base,
                       &cohort__v1__register_response__descriptor);
  CU_ASSERT_EQUAL_FATAL(r.code, GRPC_STATUS_OK);
  Cohort__V1__RegisterResponse *resp = (Cohort__V1__RegisterResponse *)r.msg;
  CU_ASSERT_EQUAL_FATAL(strlen(resp->session_token), 64);
  snprintf(token, 65, "%s", resp->session_token);
  fl_reply_free(&r);
}

/* Checks in until the coordinator hands out a task or says to retry; the
 * task's round is returned, or 0. */
static uint64_t check_in(const char *token, int want_task) {
  for (int i = 0; i < 100; i++) {
    Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
    fl_reply r = fl_call(g_ch, PB_METHOD_CHECKIN, token, &req.base,
                         &cohort__v1__check_in_response__descriptor);
    CU_ASSERT_EQUAL_FATAL(r.code, GRPC_STATUS_OK);
    Cohort__V1__CheckInResponse *resp = (Cohort__V1__CheckInResponse *)r.msg;
    uint64_t round =
        resp->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK
            ? resp->task->round
            : 0;
    fl_reply_free(&r);
    if (round || !want_task)
      return round;
    struct timespec nap = {0, 50 * 1000000L};
    nanosleep(&nap, NULL);
  }
  return 0;
}

typedef struct update {
  uint8_t bytes[N_PARAMS * 4];
  uint8_t sha[32];
} update;

static void make_update(update *u, float fill, size_t bad_index,
                        float bad_value) {
  float v[N_PARAMS];
  for (size_t i = 0; i < N_PARAMS; i++)
    v[i] = fill;
  if (bad_index < N_PARAMS)
    v[bad_index] = bad_value;
  memcpy(u->bytes, v, sizeof v);
  SHA256(u->bytes, sizeof u->bytes, u->sha);
}

static fl_reply upload(const char *token, uint64_t round, const update *u,
                       uint64_t total, const uint8_t *data, size_t len) {
  Cohort__V1__UploadRequest req = COHORT__V1__UPLOAD_REQUEST__INIT;
  req.round = round;
  req.total_size = total;
  req.offset = 0;
  req.data.data = (uint8_t *)data;
  req.data.len = len;
  req.update_sha256.data = (uint8_t *)u->sha;
  req.update_sha256.len = 32;
  req.num_examples = 100;
  return fl_call(g_ch, PB_METHOD_UPLOAD, token, &req.base,
                 &cohort__v1__upload_response__descriptor);
}

static fl_reply upload_whole(const char *token, uint64_t round,
                             const update *u) {
  return upload(token, round, u, sizeof u->bytes, u->bytes, sizeof u->bytes);
}

static void test_bad_input_is_refused_and_nothing_stored(void) {
  /* An unknown method gets UNIMPLEMENTED from the catch-all. */
  fl_reply r =
      fl_call_raw(g_ch, "/cohort.v1.Coordinator/Nope", NULL, NULL, 0, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_UNIMPLEMENTED);

  /* Enrollment with an unknown or missing token. */
  Cohort__V1__RegisterRequest reg = COHORT__V1__REGISTER_REQUEST__INIT;
  reg.enrollment_token = "not-the-token";
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_UNAUTHENTICATED);
  reg.enrollment_token = "";
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_UNAUTHENTICATED);
  /* The right token, but no identity key, a short one, one that is not a
   * point of the curve (y = 2), and a key bound to another client. */
  reg.enrollment_token = TOKEN;
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "identity key of 0 bytes"));
  uint8_t key[SIGN_PUBLIC_LEN] = {2};
  reg.identity_key.data = key;
  reg.identity_key.len = sizeof key - 1;
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  reg.identity_key.len = sizeof key;
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "not a point"));
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM clients"), 0);
  CU_ASSERT_EQUAL_FATAL(harness_identity_key(key), 0);
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base,
              &cohort__v1__register_response__descriptor);
  CU_ASSERT_EQUAL(r.code, GRPC_STATUS_OK);
  fl_reply_free(&r);
  r = fl_call(g_ch, PB_METHOD_REGISTER, NULL, &reg.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "already bound"));
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM clients"), 1);

  /* Calls without a session token or with an unknown one. */
  Cohort__V1__CheckInRequest ci = COHORT__V1__CHECK_IN_REQUEST__INIT;
  r = fl_call(g_ch, PB_METHOD_CHECKIN, NULL, &ci.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_UNAUTHENTICATED);
  r = fl_call(g_ch, PB_METHOD_CHECKIN, "0123456789abcdef", &ci.base, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_UNAUTHENTICATED);

  char a[65], b[65], c[65];
  register_client(a);
  register_client(b);
  register_client(c);
  memcpy(g_session, a, sizeof g_session);

  /* A client not selected for any round cannot open an Upload: refused
   * at its headers, before its message is read. */
  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
  r = fl_call_raw(g_ch, PB_METHOD_UPLOAD, a, junk, sizeof junk, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_PERMISSION_DENIED);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "was not selected"));

  uint64_t round = check_in(a, 1);
  CU_ASSERT_FATAL(round == 1);
  CU_ASSERT_EQUAL_FATAL(check_in(b, 1), round);
  CU_ASSERT_EQUAL(check_in(c, 0), 0); /* two per round: c must wait */

  /* Bytes that are not a protobuf message, from a selected client. */
  r = fl_call_raw(g_ch, PB_METHOD_UPLOAD, a, junk, sizeof junk, NULL);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);

  update good, nan_update, inf_update;
  make_update(&good, 0.01f, N_PARAMS, 0);
  make_update(&nan_update, 0.01f, 17, NAN);
  make_update(&inf_update, 0.01f, 18, INFINITY);

  /* An upload from a client not selected for the round. */
  r = upload_whole(c, round, &good);
  ASSERT_REFUSED(r, GRPC_STATUS_PERMISSION_DENIED);
  /* A round that is not current. */
  r = upload_whole(a, round + 5, &good);
  ASSERT_REFUSED(r, GRPC_STATUS_FAILED_PRECONDITION);
  /* Wrong element count. */
  r = upload(a, round, &good, (N_PARAMS - 1) * 4, good.bytes,
             (N_PARAMS - 1) * 4);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "elements"));
  /* NaN and Inf in an update. */
  r = upload_whole(a, round, &nan_update);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "NaN"));
  r = upload_whole(a, round, &inf_update);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "infinite"));
  /* An oversize chunk: over 1 MiB, though within the message limit. */
  size_t big = PB_MAX_CHUNK_BYTES + 1;
  uint8_t *chunk = calloc(1, big);
  CU_ASSERT_PTR_NOT_NULL_FATAL(chunk);
  r = upload(a, round, &good, big, chunk, big);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "chunk"));
  free(chunk);
  /* A digest that does not match the bytes. */
  update lying = good;
  lying.sha[0] ^= 1;
  r = upload_whole(a, round, &lying);
  ASSERT_REFUSED(r, GRPC_STATUS_INVALID_ARGUMENT);
  assert_nothing_stored();

  /* The server still serves: a good upload is accepted. */
  r = upload_whole(a, round, &good);
  CU_ASSERT_EQUAL_FATAL(r.code, GRPC_STATUS_OK);
  CU_ASSERT_TRUE(((Cohort__V1__UploadResponse *)r.msg)->complete);
  fl_reply_free(&r);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM participations"
                                    " WHERE state = 'UPLOADED'"),
                  1);

  /* A duplicate of the same bytes is a no-op; different bytes are
   * refused. Either way the stored upload is unchanged. */
  r = upload_whole(a, round, &good);
  CU_ASSERT_EQUAL(r.code, GRPC_STATUS_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.detail, "duplicate"));
  fl_reply_free(&r);
  update other;
  make_update(&other, 0.02f, N_PARAMS, 0);
  r = upload_whole(a, round, &other);
  ASSERT_REFUSED(r, GRPC_STATUS_ALREADY_EXISTS);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM participations"
                                    " WHERE state = 'UPLOADED'"),
                  1);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM rounds"
                                    " WHERE state = 'COMMITTED'"),
                  0);

  /* The second participant completes the round; FedAvg of two equal
   * example counts of 0.01 and 0.02 moves every weight by 0.015 (both
   * within the default norm bound, twice the smaller norm). */
  update third;
  make_update(&third, 0.02f, N_PARAMS, 0);
  r = upload_whole(b, round, &third);
  CU_ASSERT_EQUAL(r.code, GRPC_STATUS_OK);
  fl_reply_free(&r);
  for (int i = 0;
       i < 100 && db_peek_int(g_db, "SELECT COUNT(*) FROM rounds WHERE state = "
                                    "'COMMITTED'") != 1;
       i++) {
    struct timespec nap = {0, 50 * 1000000L};
    nanosleep(&nap, NULL);
  }
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT clients_aggregated FROM rounds"
                                    " WHERE id = 1 AND state = 'COMMITTED'"),
                  2);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM models"), 2);
  assert_model_moved_by(0.015f);

  /* Late: the round is over. */
  r = upload_whole(b, round, &third);
  ASSERT_REFUSED(r, GRPC_STATUS_FAILED_PRECONDITION);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM participations"
                                    " WHERE state = 'UPLOADED'"),
                  2);
}

/* splitmix64: reproducible junk for the fuzz test. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static void test_random_bytes_change_nothing(void) {
  static const char *methods[] = {PB_METHOD_REGISTER, PB_METHOD_CHECKIN,
                                  PB_METHOD_GETMODEL, PB_METHOD_UPLOAD,
                                  PB_METHOD_REPORT};
  int64_t clients = db_peek_int(g_db, "SELECT COUNT(*) FROM clients");
  int64_t uploads = db_peek_int(g_db, "SELECT COUNT(*) FROM participations");
  int64_t models = db_peek_int(g_db, "SELECT COUNT(*) FROM models");
  uint64_t rng = 42;
  uint8_t body[512];
  int answered = 0, sent = 0;
  for (int m = 0; m < 5; m++) {
    for (int i = 0; i < 60; i++) {
      size_t len = next_random(&rng) % sizeof body;
      for (size_t k = 0; k < len; k++)
        body[k] = (uint8_t)next_random(&rng);
      fl_reply r = fl_call_raw(g_ch, methods[m], i % 2 ? g_session : NULL, body,
                               len, NULL);
      sent++;
      answered += r.code >= 0 && !strchr(r.detail, '\n');
    }
  }
  CU_ASSERT_EQUAL(answered, sent);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM clients"), clients);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM participations"),
                  uploads);
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM models"), models);
  /* Still serving: a check-in answers, within three tries a second apart
   * (the junk spent this session's check-in burst, and sanitized on a
   * starved machine one call once outlasted its 5 s deadline). */
  Cohort__V1__CheckInRequest ci = COHORT__V1__CHECK_IN_REQUEST__INIT;
  fl_reply r = {.code = -1};
  for (int try = 0; try < 3 && r.code != GRPC_STATUS_OK; try++) {
    if (try)
      nanosleep(&(struct timespec){1, 0}, NULL);
    r = fl_call(g_ch, PB_METHOD_CHECKIN, g_session, &ci.base, NULL);
    if (r.code != GRPC_STATUS_OK)
      printf("\n  check-in after the junk: status %d: %s\n", r.code, r.detail);
  }
  CU_ASSERT_EQUAL(r.code, GRPC_STATUS_OK);
}

int cohort_register_suites(void) {
  CU_pSuite s = CU_add_suite("bad input", suite_init, suite_clean);
  if (!s ||
      !CU_add_test(s, "bad input is refused and nothing is stored",
                   test_bad_input_is_refused_and_nothing_stored) ||
      !CU_add_test(s, "random bytes to every method change nothing",
                   test_random_bytes_change_nothing))
    return -1;
  return 0;
}
