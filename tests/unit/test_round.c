/* Tests of the round engine, driven directly (no network) on a temporary
 * store: enrollment and session tokens, selection and check-in, model
 * download, upload validation (every refusal stores nothing), chunk
 * assembly, idempotent retries, the FedAvg commit against a hand
 * computation, deadlines, reports, restart recovery and the end of the
 * federation. Rows are checked through a second sqlite3 connection. */
#include <grpc/status.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "log.h"
#include "pb.h"
#include "round.h"
#include "store.h"
#include "wire.h"

#define NP 7850 /* logreg 784 -> 10 */
#define MODEL_BYTES (NP * 4)
#define ENROLL "enroll-secret-for-tests"

static char dir[128];
static int db_counter;

static int suite_init(void) {
  log_set_level(LOG_OFF); /* refusals and failed rounds are expected */
  return test_tmpdir_make(dir, sizeof dir, "round");
}

static int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

static void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s,
                        .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* ---- the fixture: a store, an engine, registered clients ---- */

typedef struct fixture {
  char path[256];
  store *db;
  round_engine *e;
  round_config cfg;
  FILE *lines;
  int64_t id[4];
  char token[4][65];
} fixture;

static round_config default_config(void) {
  round_config c = {.rounds = 2,
                    .clients_per_round = 2,
                    .min_clients = 1,
                    .round_timeout_s = 0.3,
                    .selection_timeout_s = 0.2,
                    .retry_ms = 100,
                    .epochs = 1,
                    .batch_size = 8,
                    .learning_rate = 0.1,
                    .seed = 1,
                    .model_spec = "logreg",
                    .input = {.c = 1, .h = 28, .w = 28},
                    .classes = 10,
                    .eval = NULL,
                    .round_lines = NULL};
  return c;
}

static int new_engine(fixture *f) {
  char err[256] = "";
  int rc = round_engine_new(&f->cfg, f->db, &f->e, err, sizeof err);
  if (rc)
    fprintf(stderr, "round_engine_new: %s\n", err);
  if (!rc)
    rc = round_add_enrollment_token(f->e, ENROLL);
  return rc;
}

/* Opens a fresh store and engine and registers n clients. */
static int fx_open(fixture *f, int n) {
  memset(f, 0, sizeof *f);
  snprintf(f->path, sizeof f->path, "%s/round%d.sqlite", dir, ++db_counter);
  char err[256] = "";
  if (store_open(f->path, &f->db, err, sizeof err)) {
    fprintf(stderr, "store_open: %s\n", err);
    return -1;
  }
  f->lines = tmpfile();
  f->cfg = default_config();
  f->cfg.round_lines = f->lines;
  if (!f->lines || new_engine(f))
    return -1;
  for (int i = 0; i < n; i++) {
    round_verdict v =
        round_register(f->e, ENROLL, "test", &f->id[i], f->token[i]);
    if (v.code)
      return -1;
  }
  return 0;
}

static void fx_close(fixture *f) {
  round_engine_free(f->e);
  store_close(f->db);
  if (f->lines)
    fclose(f->lines);
  const char *suffix[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    char p[300];
    snprintf(p, sizeof p, "%s%s", f->path, suffix[i]);
    unlink(p);
  }
  memset(f, 0, sizeof *f);
}

#define FX_OPEN(f, n) CU_ASSERT_EQUAL_FATAL(fx_open(&(f), (n)), 0)

static const char *round_state_in_db(fixture *f, int64_t round, char *buf,
                                     size_t len) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT state FROM rounds WHERE id = %lld",
           (long long)round);
  return db_peek_text(f->path, sql, buf, len);
}

#define ASSERT_ROUND_STATE(f, r, want)                                         \
  do {                                                                         \
    char st_[32];                                                              \
    CU_ASSERT_STRING_EQUAL(round_state_in_db(&(f), (r), st_, sizeof st_),      \
                           (want));                                            \
  } while (0)

/* The engine's latest model, from the store, as floats. */
static int latest_model(fixture *f, float *out, int64_t *version,
                        char sha_hex[65]) {
  store_model m;
  int rc = store_model_latest(f->db, &m);
  if (rc)
    return rc;
  if (m.blob_len != MODEL_BYTES) {
    store_model_clear(&m);
    return -1;
  }
  if (out)
    wire_get_f32le(out, m.blob, NP);
  if (version)
    *version = m.version;
  if (sha_hex)
    memcpy(sha_hex, m.sha256_hex, 65);
  store_model_clear(&m);
  return 0;
}

/* ---- updates ---- */

typedef struct update {
  float delta[NP];
  uint8_t blob[MODEL_BYTES];
  uint8_t sha[32];
} update;

static void encode(update *u) {
  wire_put_f32le(u->blob, u->delta, NP);
  crypto_sha256(u->blob, MODEL_BYTES, u->sha);
}

static update *make_update(int kind) {
  update *u = malloc(sizeof *u);
  CU_ASSERT_PTR_NOT_NULL_FATAL(u);
  for (size_t i = 0; i < NP; i++)
    u->delta[i] = kind == 0   ? 0.001f * (float)(i % 13) - 0.005f
                  : kind == 1 ? 0.003f - 0.002f * (float)(i % 7)
                              : 0.01f * (float)((i + (size_t)kind) % 5);
  encode(u);
  return u;
}

/* One chunk [off, off + len) of u. */
static round_verdict send(fixture *f, int64_t client, int64_t round,
                          const update *u, uint64_t off, size_t len,
                          uint64_t examples, uint64_t *next, int *complete) {
  upload_chunk c = {.round = round,
                    .total_size = MODEL_BYTES,
                    .offset = off,
                    .data = u->blob + off,
                    .len = len,
                    .sha256 = u->sha,
                    .sha256_len = 32,
                    .num_examples = examples,
                    .wire_bytes = len + 100};
  return round_upload(f->e, client, &c, next, complete);
}

/* The whole update in one chunk. */
static round_verdict send_all(fixture *f, int64_t client, int64_t round,
                              const update *u, uint64_t examples) {
  uint64_t next = 0;
  int complete = 0;
  round_verdict v =
      send(f, client, round, u, 0, MODEL_BYTES, examples, &next, &complete);
  if (v.code == GRPC_STATUS_OK) {
    CU_ASSERT_EQUAL(complete, 1);
    CU_ASSERT_EQUAL(next, MODEL_BYTES);
  } else {
    CU_ASSERT_EQUAL(complete, 0);
  }
  return v;
}

/* Ticks round r open, checks clients 0 and 1 in (each gets a task) and
 * ticks it to TRAINING. */
static void start_round(fixture *f, int64_t r) {
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "OPEN");
  for (int i = 0; i < 2; i++) {
    checkin_result res;
    round_verdict v = round_checkin(f->e, f->id[i], &res);
    CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(res.kind, CHECKIN_TASK);
    CU_ASSERT_EQUAL(res.task.round, r);
  }
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "TRAINING");
}

static int64_t count(fixture *f, const char *sql) {
  return db_peek_int(f->path, sql);
}

/* ---- enrollment and authentication ---- */

static void test_register_refuses_bad_enrollment(void) {
  fixture f;
  FX_OPEN(f, 0);
  int64_t id = -1;
  char tok[65] = "";
  round_verdict v = round_register(f.e, "wrong-token", "x", &id, tok);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_NOT_EQUAL(v.detail[0], '\0');
  v = round_register(f.e, "", "x", &id, tok);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  v = round_register(f.e, NULL, "x", &id, tok);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  /* A prefix of the real token is not the token. */
  v = round_register(f.e, "enroll-secret", "x", &id, tok);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(id, -1);
  /* An over-long platform name is refused before anything is stored. */
  char platform[100];
  memset(platform, 'p', sizeof platform - 1);
  platform[sizeof platform - 1] = '\0';
  v = round_register(f.e, ENROLL, platform, &id, tok);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients"), 0);
  CU_ASSERT_EQUAL(round_add_enrollment_token(f.e, ""), COHORT_EINVAL);
  CU_ASSERT_EQUAL(round_add_enrollment_token(f.e, NULL), COHORT_EINVAL);
  fx_close(&f);
}

static int is_lower_hex64(const char *s) {
  if (strlen(s) != 64)
    return 0;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return 0;
  return 1;
}

/* Whether the file holds needle anywhere in its bytes. */
static int file_contains(const char *path, const char *needle) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return 0;
  size_t n = strlen(needle), cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
    len += got;
    if (len == cap) {
      char *b = realloc(buf, cap * 2);
      if (!b)
        break;
      buf = b;
      cap *= 2;
    }
  }
  fclose(fp);
  int found = 0;
  for (size_t i = 0; buf && !found && i + n <= len; i++)
    found = memcmp(buf + i, needle, n) == 0;
  free(buf);
  return found;
}

static void test_register_and_authenticate(void) {
  fixture f;
  FX_OPEN(f, 0);
  int64_t a = 0, b = 0, who = -1;
  char ta[65], tb[65];
  round_verdict v = round_register(f.e, ENROLL, "linux-x86_64", &a, ta);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  v = round_register(f.e, ENROLL, NULL, &b, tb);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_TRUE(a > 0);
  CU_ASSERT_TRUE(b > 0);
  CU_ASSERT_NOT_EQUAL(a, b);
  CU_ASSERT_TRUE(is_lower_hex64(ta));
  CU_ASSERT_TRUE(is_lower_hex64(tb));
  CU_ASSERT_STRING_NOT_EQUAL(ta, tb);

  v = round_authenticate(f.e, ta, &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(who, a);
  v = round_authenticate(f.e, tb, &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(who, b);
  v = round_authenticate(f.e, NULL, &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  v = round_authenticate(f.e, "", &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  char wrong[65];
  memcpy(wrong, ta, sizeof wrong);
  wrong[63] = wrong[63] == '0' ? '1' : '0';
  v = round_authenticate(f.e, wrong, &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  /* The enrollment token is not a session token. */
  v = round_authenticate(f.e, ENROLL, &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);

  /* Only the SHA-256 hex of each token is stored. */
  char hash[65], text[128], sql[160];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_hex(ta, hash), COHORT_OK);
  snprintf(sql, sizeof sql, "SELECT token_sha256 FROM clients WHERE id = %lld",
           (long long)a);
  CU_ASSERT_STRING_EQUAL(db_peek_text(f.path, sql, text, sizeof text), hash);
  snprintf(sql, sizeof sql, "SELECT platform FROM clients WHERE id = %lld",
           (long long)a);
  CU_ASSERT_STRING_EQUAL(db_peek_text(f.path, sql, text, sizeof text),
                         "linux-x86_64");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients"), 2);

  /* And the raw bytes of the database never hold a token. The hash is
   * found, so the search itself works. */
  char wal[300];
  snprintf(wal, sizeof wal, "%s-wal", f.path);
  CU_ASSERT_TRUE(file_contains(f.path, hash) || file_contains(wal, hash));
  CU_ASSERT_FALSE(file_contains(f.path, ta));
  CU_ASSERT_FALSE(file_contains(wal, ta));
  CU_ASSERT_FALSE(file_contains(f.path, tb));
  CU_ASSERT_FALSE(file_contains(wal, tb));
  CU_ASSERT_FALSE(file_contains(f.path, ENROLL));
  CU_ASSERT_FALSE(file_contains(wal, ENROLL));
  fx_close(&f);
}

/* ---- selection and check-in ---- */

static void test_checkin_selects_up_to_k(void) {
  fixture f;
  FX_OPEN(f, 3);
  checkin_result r;
  /* Before the first tick there is no round: retry later. */
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);

  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "OPEN");
  CU_ASSERT_EQUAL(count(&f, "SELECT base_version FROM rounds WHERE id = 1"), 0);
  char sha_hex[65], task_hex[65];
  int64_t version = -1;
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, NULL, &version, sha_hex), 0);
  CU_ASSERT_EQUAL(version, 0);

  checkin_result t[2];
  for (int i = 0; i < 2; i++) {
    round_verdict v = round_checkin(f.e, f.id[i], &t[i]);
    CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(t[i].kind, CHECKIN_TASK);
    CU_ASSERT_EQUAL(t[i].task.round, 1);
    CU_ASSERT_EQUAL(t[i].task.model_version, 0);
    CU_ASSERT_EQUAL(t[i].task.model_size, NP * 4);
    CU_ASSERT_STRING_EQUAL(t[i].task.model_spec, "logreg");
    CU_ASSERT_EQUAL(t[i].task.epochs, 1);
    CU_ASSERT_EQUAL(t[i].task.batch_size, 8);
    CU_ASSERT_DOUBLE_EQUAL(t[i].task.learning_rate, 0.1, 1e-12);
    /* OPEN: the upload window is selection + round timeouts, 0.5 s. */
    CU_ASSERT(t[i].task.deadline_ms >= 490 && t[i].task.deadline_ms <= 500);
    crypto_hex(t[i].task.model_sha256, 32, task_hex);
    CU_ASSERT_STRING_EQUAL(task_hex, sha_hex);
  }
  CU_ASSERT_EQUAL(
      count(&f, "SELECT COUNT(*) FROM participations WHERE round = 1 AND "
                "state = 'SELECTED'"),
      2);

  /* K = 2 are selected: the third is told to retry, with jitter around
   * retry_ms = 100. */
  for (int i = 0; i < 30; i++) {
    round_verdict v = round_checkin(f.e, f.id[2], &r);
    CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
    CU_ASSERT(r.retry_after_ms >= 50 && r.retry_after_ms <= 150);
  }
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations"), 2);

  /* A selected client checking in again gets the same task. */
  checkin_result again;
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &again).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(again.kind, CHECKIN_TASK);
  CU_ASSERT_EQUAL(again.task.round, t[0].task.round);
  CU_ASSERT_EQUAL(again.task.model_version, t[0].task.model_version);
  CU_ASSERT_EQUAL(memcmp(again.task.model_sha256, t[0].task.model_sha256, 32),
                  0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations"), 2);

  /* K reached: the next tick closes selection. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "TRAINING");
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[2], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
  /* In TRAINING the deadline counts down from round_timeout_s. */
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[1], &again).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(again.kind, CHECKIN_TASK);
  CU_ASSERT(again.task.deadline_ms <= 300);
  fx_close(&f);
}

static void test_selection_timeout_with_min_clients(void) {
  fixture f;
  FX_OPEN(f, 1);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  checkin_result r;
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_TASK);
  /* 1 of K = 2 but >= M = 1: selection closes only after its timeout. */
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "OPEN");
  sleep_s(0.25);
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "TRAINING");
  fx_close(&f);
}

/* ---- model download ---- */

static void test_get_model(void) {
  fixture f;
  FX_OPEN(f, 2);
  start_round(&f, 1);
  uint8_t *all = malloc(MODEL_BYTES);
  uint8_t buf[4096], sha[32], first_sha[32];
  CU_ASSERT_PTR_NOT_NULL_FATAL(all);
  uint64_t off = 0, total = 0;
  int chunks = 0;
  while (off < MODEL_BYTES && chunks < 100) {
    size_t len = 0;
    round_verdict v = round_get_model(f.e, f.id[0], 0, off, buf, sizeof buf,
                                      &len, &total, sha);
    CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(total, MODEL_BYTES);
    CU_ASSERT_TRUE(len > 0 && len <= sizeof buf);
    if (chunks == 0)
      memcpy(first_sha, sha, 32);
    CU_ASSERT_EQUAL(memcmp(sha, first_sha, 32), 0);
    memcpy(all + off, buf, len);
    off += len;
    chunks++;
  }
  CU_ASSERT_EQUAL(off, MODEL_BYTES);
  CU_ASSERT_EQUAL(chunks, (MODEL_BYTES + 4095) / 4096);
  /* The pieces reassemble into the stored model with that digest. */
  uint8_t got[32];
  crypto_sha256(all, MODEL_BYTES, got);
  CU_ASSERT_EQUAL(memcmp(got, sha, 32), 0);
  store_model m;
  CU_ASSERT_EQUAL_FATAL(store_model_latest(f.db, &m), COHORT_OK);
  CU_ASSERT_EQUAL(m.blob_len, MODEL_BYTES);
  CU_ASSERT_EQUAL(memcmp(m.blob, all, MODEL_BYTES), 0);
  char hex[65];
  crypto_hex(sha, 32, hex);
  CU_ASSERT_STRING_EQUAL(hex, m.sha256_hex);
  store_model_clear(&m);
  /* The initial model is not all zeros (seeded initialisation). */
  int nonzero = 0;
  for (size_t i = 0; i < MODEL_BYTES; i++)
    nonzero |= all[i];
  CU_ASSERT_TRUE(nonzero);

  size_t len = 0;
  round_verdict v =
      round_get_model(f.e, f.id[0], 1, 0, buf, sizeof buf, &len, &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_NOT_FOUND);
  v = round_get_model(f.e, f.id[0], -1, 0, buf, sizeof buf, &len, &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_NOT_FOUND);
  v = round_get_model(f.e, f.id[0], 0, MODEL_BYTES + 1, buf, sizeof buf, &len,
                      &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OUT_OF_RANGE);
  len = 99;
  v = round_get_model(f.e, f.id[0], 0, MODEL_BYTES, buf, sizeof buf, &len,
                      &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(len, 0);
  free(all);
  fx_close(&f);
}

/* ---- uploads ---- */

/* Nothing of an upload is stored: the participation rows are both still
 * SELECTED with no digest, and no model or round changed. */
static void assert_nothing_stored(fixture *f) {
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM participations"), 2);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM participations WHERE "
                           "state = 'SELECTED' AND update_sha256 IS NULL AND "
                           "examples = 0 AND uploaded_at IS NULL"),
                  2);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM models"), 1);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM rounds"), 1);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM metrics"), 0);
}

static void test_upload_refusals_store_nothing(void) {
  fixture f;
  FX_OPEN(f, 3);
  start_round(&f, 1);
  int64_t a = f.id[0];
  update *good = make_update(0);
  round_verdict v;
  uint64_t next = 77;
  int complete = 7;

  /* Wrong element count, both short and long. */
  uint64_t sizes[] = {MODEL_BYTES - 4, MODEL_BYTES + 4, 784 * 4, 0};
  for (size_t i = 0; i < 4; i++) {
    upload_chunk c = {.round = 1,
                      .total_size = sizes[i],
                      .offset = 0,
                      .data = good->blob,
                      .len = sizes[i] < MODEL_BYTES ? (size_t)sizes[i]
                                                    : MODEL_BYTES,
                      .sha256 = good->sha,
                      .sha256_len = 32,
                      .num_examples = 10,
                      .wire_bytes = 1};
    v = round_upload(f.e, a, &c, &next, &complete);
    CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "7850"));
    CU_ASSERT_EQUAL(complete, 0);
  }
  assert_nothing_stored(&f);

  /* A NaN element, with a correct digest of the bad bytes. */
  update *bad = make_update(0);
  bad->delta[1234] = NAN;
  encode(bad);
  v = send_all(&f, a, 1, bad, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "NaN"));
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "1234"));
  assert_nothing_stored(&f);

  /* Infinity, positive and negative. */
  bad->delta[1234] = 0;
  bad->delta[NP - 1] = INFINITY;
  encode(bad);
  v = send_all(&f, a, 1, bad, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "infinite"));
  bad->delta[NP - 1] = 0;
  bad->delta[0] = -INFINITY;
  encode(bad);
  v = send_all(&f, a, 1, bad, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  assert_nothing_stored(&f);

  /* A chunk over the protocol's chunk limit. */
  uint8_t *huge = calloc(PB_MAX_CHUNK_BYTES + 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
  upload_chunk c = {.round = 1,
                    .total_size = MODEL_BYTES,
                    .offset = 0,
                    .data = huge,
                    .len = PB_MAX_CHUNK_BYTES + 1,
                    .sha256 = good->sha,
                    .sha256_len = 32,
                    .num_examples = 10,
                    .wire_bytes = 1};
  v = round_upload(f.e, a, &c, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  free(huge);
  assert_nothing_stored(&f);

  /* A chunk that runs past the end of the update. */
  v = send(&f, a, 1, good, MODEL_BYTES - 100, 200, 10, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);

  /* No examples, or an unbelievable number. */
  v = send(&f, a, 1, good, 0, MODEL_BYTES, 0, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  v = send(&f, a, 1, good, 0, MODEL_BYTES, 2000000000ULL, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  assert_nothing_stored(&f);

  /* The wrong round, before or after the current one. */
  v = send_all(&f, a, 2, good, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
  v = send_all(&f, a, 0, good, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
  assert_nothing_stored(&f);

  /* A registered client that was not selected. */
  v = send_all(&f, f.id[2], 1, good, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_PERMISSION_DENIED);
  assert_nothing_stored(&f);

  /* A digest that does not match the bytes, and one of the wrong size. */
  update *liar = make_update(0);
  liar->sha[5] ^= 0x40;
  v = send_all(&f, a, 1, liar, 10);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "digest"));
  c = (upload_chunk){.round = 1,
                     .total_size = MODEL_BYTES,
                     .offset = 0,
                     .data = good->blob,
                     .len = MODEL_BYTES,
                     .sha256 = good->sha,
                     .sha256_len = 16,
                     .num_examples = 10,
                     .wire_bytes = 1};
  v = round_upload(f.e, a, &c, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  assert_nothing_stored(&f);

  /* After all that, the good update is still accepted, and it alone is
   * what the round commits (none of the refused ones was folded in). */
  float *g0 = malloc(NP * sizeof *g0), *g1 = malloc(NP * sizeof *g1);
  CU_ASSERT_FATAL(g0 && g1);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, g0, NULL, NULL), 0);
  v = send_all(&f, a, 1, good, 10);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations WHERE "
                            "state = 'UPLOADED'"),
                  1);
  sleep_s(0.35); /* past the deadline, with 1 of 2 uploads (M = 1) */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL(count(&f, "SELECT clients_aggregated FROM rounds"), 1);
  CU_ASSERT_EQUAL(count(&f, "SELECT clients_selected FROM rounds"), 2);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, g1, NULL, NULL), 0);
  int same = 1;
  for (size_t i = 0; i < NP; i++)
    same &= fabsf(g1[i] - (g0[i] + good->delta[i])) <= 1e-6f;
  CU_ASSERT_TRUE(same);
  free(g0);
  free(g1);
  free(good);
  free(bad);
  free(liar);
  fx_close(&f);
}

/* The round line, as documented: "round R: accuracy A loss L clients
 * n/k up U bytes/client down D bytes/client time S s". */
#define LINE_FMT                                                               \
  "round %lld: accuracy %15s loss %15s clients %d/%d up %lf bytes/client "     \
  "down %lf bytes/client time %lf s%n"

static void test_chunked_upload_idempotent_and_commit(void) {
  fixture f;
  FX_OPEN(f, 2);
  start_round(&f, 1);
  int64_t a = f.id[0], b = f.id[1];
  const uint64_t na = 10, nb = 30;
  update *ua = make_update(0), *ub = make_update(1), *other = make_update(2);
  float *g0 = malloc(NP * sizeof *g0), *g1 = malloc(NP * sizeof *g1);
  CU_ASSERT_FATAL(g0 && g1);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, g0, NULL, NULL), 0);
  round_count_download(f.e, a, 5000);
  round_count_download(f.e, b, 7000);
  round_count_download(f.e, f.id[0] + 1000, 1); /* not a participant */

  /* a: two pieces, with an out-of-order chunk in between. */
  uint64_t next = 0;
  int complete = -1;
  round_verdict v = send(&f, a, 1, ua, 0, 20000, na, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(next, 20000);
  CU_ASSERT_EQUAL(complete, 0);
  v = send(&f, a, 1, ua, 30000, MODEL_BYTES - 30000, na, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(next, 20000); /* resume where the coordinator is */
  CU_ASSERT_EQUAL(complete, 0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations WHERE "
                            "state = 'UPLOADED'"),
                  0);
  v = send(&f, a, 1, ua, 20000, MODEL_BYTES - 20000, na, &next, &complete);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(next, MODEL_BYTES);
  CU_ASSERT_EQUAL(complete, 1);
  char sql[200], text[128], hex[65];
  crypto_hex(ua->sha, 32, hex);
  snprintf(sql, sizeof sql,
           "SELECT state || ':' || examples || ':' || update_sha256 || ':' || "
           "bytes_up || ':' || bytes_down FROM participations WHERE "
           "client_id = %lld",
           (long long)a);
  char want[160];
  /* bytes_up counts the two accepted chunks (len + 100 each), not the
   * out-of-order one. */
  snprintf(want, sizeof want, "UPLOADED:%llu:%s:%d:5000",
           (unsigned long long)na, hex, MODEL_BYTES + 200);
  CU_ASSERT_STRING_EQUAL(db_peek_text(f.path, sql, text, sizeof text), want);

  /* The same update again: OK, complete, nothing changes. */
  v = send_all(&f, a, 1, ua, na);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  v = send(&f, a, 1, ua, 0, 1000, na, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(complete, 1);
  CU_ASSERT_EQUAL(next, MODEL_BYTES);
  /* A different update from the same client is refused. */
  v = send_all(&f, a, 1, other, na);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_ALREADY_EXISTS);
  CU_ASSERT_STRING_EQUAL(db_peek_text(f.path, sql, text, sizeof text), want);

  /* b: an empty chunk (protobuf-c gives empty bytes a NULL pointer) is
   * harmless and moves nothing. */
  upload_chunk empty = {.round = 1,
                        .total_size = MODEL_BYTES,
                        .offset = 0,
                        .data = NULL,
                        .len = 0,
                        .sha256 = ub->sha,
                        .sha256_len = 32,
                        .num_examples = nb,
                        .wire_bytes = 0};
  next = 99;
  v = round_upload(f.e, b, &empty, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(next, 0);
  CU_ASSERT_EQUAL(complete, 0);
  /* b: a first chunk that is not at offset 0 is told to start over. */
  v = send(&f, b, 1, ub, 100, 1000, nb, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(next, 0);
  CU_ASSERT_EQUAL(complete, 0);
  /* b starts one update, then switches to another: the first is dropped. */
  v = send(&f, b, 1, other, 0, 1000, nb, &next, &complete);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(next, 1000);
  v = send_all(&f, b, 1, ub, nb);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations WHERE "
                            "state = 'UPLOADED'"),
                  2);

  /* Both in: the tick commits round 1 without waiting for the deadline. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL(count(&f, "SELECT model_version FROM rounds WHERE id = 1"),
                  1);
  CU_ASSERT_EQUAL(count(&f, "SELECT clients_aggregated FROM rounds"), 2);
  CU_ASSERT_EQUAL(count(&f, "SELECT accuracy IS NULL AND loss IS NULL FROM "
                            "rounds"),
                  1);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models WHERE version = 1 "
                            "AND round = 1 AND parent = 0"),
                  1);
  CU_ASSERT_EQUAL(round_committed(f.e), 1);
  CU_ASSERT_FALSE(round_federation_done(f.e));

  /* The round line. b's bytes: the 1000-byte chunk of the abandoned update
   * and the whole one (offset-100 chunk not accepted). */
  double up_a = MODEL_BYTES + 200, up_b = 1100 + MODEL_BYTES + 100;
  char line[512] = "";
  rewind(f.lines);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof line, f.lines));
  long long r = 0;
  char acc[16], loss[16];
  int got = 0, sel = 0, end = 0;
  double up = 0, down = 0, secs = -1;
  int fields = sscanf(line, LINE_FMT, &r, acc, loss, &got, &sel, &up, &down,
                      &secs, &end);
  CU_ASSERT_EQUAL_FATAL(fields, 8);
  CU_ASSERT_EQUAL(r, 1);
  CU_ASSERT_STRING_EQUAL(acc, "nan");
  CU_ASSERT_STRING_EQUAL(loss, "nan");
  CU_ASSERT_EQUAL(got, 2);
  CU_ASSERT_EQUAL(sel, 2);
  CU_ASSERT_DOUBLE_EQUAL(up, (up_a + up_b) / 2, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(down, 6000, 0.5);
  CU_ASSERT(secs >= 0 && secs < 10);
  CU_ASSERT_EQUAL(line[end], '\n');
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(f.path, "SELECT bytes_up_mean FROM rounds WHERE id = 1"),
      (up_a + up_b) / 2, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(f.path, "SELECT bytes_down_mean FROM rounds WHERE id = 1"),
      6000, 1e-9);

  /* The committed model is global + the example-weighted mean of the
   * deltas, the duplicate not counted twice. */
  int64_t version = -1;
  char sha_hex[65];
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, g1, &version, sha_hex), 0);
  CU_ASSERT_EQUAL(version, 1);
  const size_t idx[] = {0, 1, 6, 12, 13, 100, 4321, NP - 1};
  int distinguishes = 0;
  for (size_t k = 0; k < sizeof idx / sizeof idx[0]; k++) {
    size_t i = idx[k];
    double da = ua->delta[i], db = ub->delta[i];
    double want_i = g0[i] + (10.0 * da + 30.0 * db) / 40.0;
    double doubled = g0[i] + (20.0 * da + 30.0 * db) / 50.0;
    CU_ASSERT_DOUBLE_EQUAL(g1[i], want_i, 1e-6);
    distinguishes |= fabs(doubled - want_i) > 1e-4;
  }
  CU_ASSERT_TRUE(distinguishes); /* the check above would see a doubling */
  int all_ok = 1;
  for (size_t i = 0; i < NP; i++)
    all_ok &=
        fabs(g1[i] - (g0[i] + (10.0 * ua->delta[i] + 30.0 * ub->delta[i]) /
                                  40.0)) <= 1e-6;
  CU_ASSERT_TRUE(all_ok);

  /* The new model is served; the old one is not. */
  uint8_t buf[64], sha[32];
  size_t len = 0;
  uint64_t total = 0;
  v = round_get_model(f.e, a, 1, 0, buf, sizeof buf, &len, &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  crypto_hex(sha, 32, hex);
  CU_ASSERT_STRING_EQUAL(hex, sha_hex);
  v = round_get_model(f.e, a, 0, 0, buf, sizeof buf, &len, &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_NOT_FOUND);
  /* And a retry of round 1's upload is now for a past round. */
  v = send_all(&f, a, 1, ua, na);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);

  free(g0);
  free(g1);
  free(ua);
  free(ub);
  free(other);
  fx_close(&f);
}

static void test_deadline_fails_round(void) {
  fixture f;
  FX_OPEN(f, 2);
  start_round(&f, 1);
  /* Before the deadline the tick waits. */
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "TRAINING");
  sleep_s(0.4);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "FAILED");
  char text[200];
  db_peek_text(f.path, "SELECT reason FROM rounds WHERE id = 1", text,
               sizeof text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "deadline"));
  CU_ASSERT_EQUAL(count(&f, "SELECT finished_at IS NOT NULL FROM rounds "
                            "WHERE id = 1"),
                  1);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM events WHERE round = 1 AND "
                            "kind = 'round_failed'"),
                  1);
  CU_ASSERT_EQUAL(round_committed(f.e), 0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models"), 1);
  /* A failed round writes no round line. */
  CU_ASSERT_EQUAL(ftell(f.lines), 0);
  /* The next tick opens round 2 on the same model. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 2, "OPEN");
  CU_ASSERT_EQUAL(count(&f, "SELECT base_version FROM rounds WHERE id = 2"), 0);
  update *u = make_update(0);
  round_verdict v = send_all(&f, f.id[0], 1, u, 5);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
  checkin_result r;
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_TASK);
  CU_ASSERT_EQUAL(r.task.round, 2);
  CU_ASSERT_EQUAL(r.task.model_version, 0);
  free(u);
  fx_close(&f);
}

/* ---- reports ---- */

static void test_report(void) {
  fixture f;
  FX_OPEN(f, 3);
  start_round(&f, 1);
  int64_t a = f.id[0];
  const char *names[] = {"accuracy", "loss", "eval.top_5"};
  const double values[] = {0.75, 1.25, 0.9};
  round_verdict v = round_report(f.e, a, 1, 50, 3, names, values);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT value FROM metrics WHERE round = 1 AND client_id = %lld "
           "AND name = 'loss'",
           (long long)a);
  CU_ASSERT_DOUBLE_EQUAL(db_peek_double(f.path, sql), 1.25, 0);
  snprintf(sql, sizeof sql,
           "SELECT value FROM metrics WHERE round = 1 AND client_id = %lld "
           "AND name = 'eval_examples'",
           (long long)a);
  CU_ASSERT_DOUBLE_EQUAL(db_peek_double(f.path, sql), 50, 0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"), 4);
  /* A second report replaces the values. */
  const double values2[] = {0.8, 1.0, 0.95};
  v = round_report(f.e, a, 1, 0, 3, names, values2);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"), 4);

  /* Bad names: each refused, and the good ones beside them not stored. */
  const char *bad_names[] = {"Accuracy",
                             "",
                             "a b",
                             "x-y",
                             "drop;table",
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                             "aaaaaaaaaaaaaaaaaaa"};
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    const char *n2[] = {"fresh_metric", bad_names[i]};
    const double v2[] = {1, 2};
    v = round_report(f.e, a, 1, 0, 2, n2, v2);
    CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  }
  /* Non-finite values. */
  const char *n2[] = {"fresh_metric", "other"};
  const double nan_v[] = {1, NAN}, inf_v[] = {INFINITY, 1};
  v = round_report(f.e, a, 1, 0, 2, n2, nan_v);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  v = round_report(f.e, a, 1, 0, 2, n2, inf_v);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  /* Too many metrics. */
  enum { MANY = ROUND_MAX_METRICS + 1 };
  const char *many_names[MANY];
  double many_values[MANY];
  char storage[MANY][16];
  for (int i = 0; i < MANY; i++) {
    snprintf(storage[i], sizeof storage[i], "m%d", i);
    many_names[i] = storage[i];
    many_values[i] = i;
  }
  v = round_report(f.e, a, 1, 0, MANY, many_names, many_values);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"), 4);
  CU_ASSERT_EQUAL(
      count(&f, "SELECT COUNT(*) FROM metrics WHERE name = 'fresh_metric'"), 0);
  /* Exactly the maximum is fine. */
  v = round_report(f.e, a, 1, 0, ROUND_MAX_METRICS, many_names, many_values);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"),
                  4 + ROUND_MAX_METRICS);

  /* Wrong round, and a client that was not selected. */
  v = round_report(f.e, a, 2, 0, 1, names, values);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
  v = round_report(f.e, f.id[2], 1, 0, 1, names, values);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_PERMISSION_DENIED);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"),
                  4 + ROUND_MAX_METRICS);
  fx_close(&f);
}

/* ---- restart and the end of the federation ---- */

/* Clients 0 and 1 upload ua (10 examples) and ub (30) to round r, in
 * TRAINING, and the next tick commits it. */
static void upload_and_commit(fixture *f, int64_t r, const update *ua,
                              const update *ub) {
  CU_ASSERT_EQUAL_FATAL(send_all(f, f->id[0], r, ua, 10).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(send_all(f, f->id[1], r, ub, 30).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "COMMITTED");
}

/* Opens round r with clients 0 and 1, uploads ua and ub and commits it. */
static void commit_round(fixture *f, int64_t r, const update *ua,
                         const update *ub) {
  start_round(f, r);
  upload_and_commit(f, r, ua, ub);
}

/* Frees the engine and starts a new one with f->cfg on the same store, as
 * a restarted coordinator does. */
static void restart_engine(fixture *f) {
  round_engine_free(f->e);
  f->e = NULL;
  CU_ASSERT_EQUAL_FATAL(new_engine(f), COHORT_OK);
}

static void test_restart_recovers(void) {
  fixture f;
  FX_OPEN(f, 2);
  f.cfg.rounds = 3;
  restart_engine(&f);
  update *ua = make_update(0), *ub = make_update(1);
  commit_round(&f, 1, ua, ub);
  char sha1[65];
  int64_t version = -1;
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, NULL, &version, sha1), 0);
  CU_ASSERT_EQUAL(version, 1);

  /* Interrupted in TRAINING, with one update already in. */
  start_round(&f, 2);
  CU_ASSERT_EQUAL(send_all(&f, f.id[0], 2, ua, 10).code, GRPC_STATUS_OK);
  restart_engine(&f);
  ASSERT_ROUND_STATE(f, 2, "FAILED");
  char text[128];
  CU_ASSERT_STRING_EQUAL(db_peek_text(f.path,
                                      "SELECT reason FROM rounds WHERE id "
                                      "= 2",
                                      text, sizeof text),
                         "coordinator restarted");
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL(round_committed(f.e), 1);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models"), 2);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models WHERE version = 0"),
                  1);
  /* The next round continues from the committed model, not a fresh one. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 3, "OPEN");
  CU_ASSERT_EQUAL(count(&f, "SELECT base_version FROM rounds WHERE id = 3"), 1);
  checkin_result r;
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(r.kind, CHECKIN_TASK);
  CU_ASSERT_EQUAL(r.task.round, 3);
  CU_ASSERT_EQUAL(r.task.model_version, 1);
  char hex[65];
  crypto_hex(r.task.model_sha256, 32, hex);
  CU_ASSERT_STRING_EQUAL(hex, sha1);
  /* Sessions survive the restart: tokens live in the store. */
  int64_t who_id = -1;
  CU_ASSERT_EQUAL(round_authenticate(f.e, f.token[1], &who_id).code,
                  GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(who_id, f.id[1]);

  /* Interrupted in OPEN. */
  restart_engine(&f);
  ASSERT_ROUND_STATE(f, 3, "FAILED");
  CU_ASSERT_EQUAL(round_committed(f.e), 1);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 4, "OPEN");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM rounds WHERE state = "
                            "'FAILED' AND reason = 'coordinator restarted'"),
                  2);

  /* A model of another shape in the database is refused with a reason. */
  round_engine_free(f.e);
  f.e = NULL;
  round_config other = f.cfg;
  other.input = (nn_shape){.c = 100, .h = 1, .w = 1};
  round_engine *e2 = NULL;
  char err[256] = "";
  CU_ASSERT_NOT_EQUAL(round_engine_new(&other, f.db, &e2, err, sizeof err),
                      COHORT_OK);
  CU_ASSERT_PTR_NULL(e2);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "logreg"));
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models"), 2);
  free(ua);
  free(ub);
  fx_close(&f);
}

static void test_federation_done(void) {
  fixture f;
  FX_OPEN(f, 3);
  update *ua = make_update(0), *ub = make_update(1);
  /* The third client checks in (and is told to retry) during the rounds. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  checkin_result r;
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[1], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[2], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  upload_and_commit(&f, 1, ua, ub);
  CU_ASSERT_FALSE(round_federation_done(f.e));
  CU_ASSERT_FALSE(round_all_clients_told(f.e));

  commit_round(&f, 2, ub, ua);
  CU_ASSERT_EQUAL(round_committed(f.e), 2);
  CU_ASSERT_TRUE(round_federation_done(f.e));
  /* Two round lines, one per commit. */
  char line[512];
  rewind(f.lines);
  int lines = 0;
  while (fgets(line, sizeof line, f.lines)) {
    char want[32];
    snprintf(want, sizeof want, "round %d: ", ++lines);
    CU_ASSERT_EQUAL(strncmp(line, want, strlen(want)), 0);
  }
  CU_ASSERT_EQUAL(lines, 2);
  /* Done: no further round opens. */
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT MAX(id) FROM rounds"), 2);

  CU_ASSERT_FALSE(round_all_clients_told(f.e));
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[0], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_DONE);
  CU_ASSERT_EQUAL(r.rounds_committed, 2);
  CU_ASSERT_FALSE(round_all_clients_told(f.e));
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[1], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_DONE);
  /* Client 2 was seen but has not been told yet. */
  CU_ASSERT_FALSE(round_all_clients_told(f.e));
  CU_ASSERT_EQUAL(round_checkin(f.e, f.id[2], &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_DONE);
  CU_ASSERT_TRUE(round_all_clients_told(f.e));
  /* Uploads after the end are for no current round. */
  CU_ASSERT_EQUAL(send_all(&f, f.id[0], 2, ua, 10).code,
                  GRPC_STATUS_FAILED_PRECONDITION);
  free(ua);
  free(ub);
  fx_close(&f);
}

static void test_engine_config_checked(void) {
  fixture f;
  FX_OPEN(f, 0);
  round_config bad[4];
  for (int i = 0; i < 4; i++)
    bad[i] = f.cfg;
  bad[0].min_clients = 3; /* > clients_per_round */
  bad[1].clients_per_round = 0;
  bad[2].rounds = -1;
  bad[3].model_spec = "resnet152";
  for (int i = 0; i < 4; i++) {
    round_engine *e = NULL;
    char err[256] = "";
    CU_ASSERT_NOT_EQUAL(round_engine_new(&bad[i], f.db, &e, err, sizeof err),
                        COHORT_OK);
    CU_ASSERT_PTR_NULL(e);
    CU_ASSERT_NOT_EQUAL(err[0], '\0');
  }
  fx_close(&f);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"register refuses unknown/empty enrollment tokens",
       test_register_refuses_bad_enrollment},
      {"register/authenticate; only token hashes stored",
       test_register_and_authenticate},
      {"check-in selects K clients, others retry",
       test_checkin_selects_up_to_k},
      {"selection closes with M clients after its timeout",
       test_selection_timeout_with_min_clients},
      {"model download in chunks with digest", test_get_model},
      {"every refused upload stores nothing",
       test_upload_refusals_store_nothing},
      {"chunked, idempotent uploads commit weighted FedAvg",
       test_chunked_upload_idempotent_and_commit},
      {"deadline fails the round, next one opens", test_deadline_fails_round},
      {"report stores valid metrics, refuses bad ones", test_report},
      {"restart fails interrupted rounds, keeps the model",
       test_restart_recovers},
      {"federation done after `rounds` commits", test_federation_done},
      {"engine refuses bad configurations", test_engine_config_checked},
  };
  return test_add_suite("round", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
