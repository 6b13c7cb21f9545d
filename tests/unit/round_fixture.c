/* The round engine's test fixture (round_fixture.h): temporary stores,
 * engines with registered clients, fp32 updates and their uploads, and
 * reading rows back through a second SQLite connection. */
#include "round_fixture.h"

#include <grpc/status.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "db_peek.h"
#include "log.h"
#include "wire.h"

static char dir[128];
static int db_counter;

int suite_init(void) {
  log_set_level(LOG_OFF); /* refusals and failed rounds are expected */
  return test_tmpdir_make(dir, sizeof dir, "round");
}

int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s,
                        .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* ---- the fixture: a store, an engine, registered clients ---- */

round_config default_config(void) {
  round_config c;
  round_config_init(&c);
  c.rounds = 2;
  c.clients_per_round = 2;
  c.min_clients = 1;
  c.round_timeout_s = 0.3;
  c.selection_timeout_s = 0.2;
  c.retry_ms = 100;
  /* First come, first served, and no exclusions: a check-in gets its task
   * at once, whatever earlier rounds did. test_sybil covers the draw and
   * the offenders. */
  c.selection_window_s = 0;
  c.offender_failures = 0;
  c.epochs = 1;
  c.batch_size = 8;
  c.learning_rate = 0.1;
  c.seed = 1;
  /* The arithmetic tests compare with plain FedAvg of updates chosen for
   * the sums; test_round's poisoning tests turn the bounds on. */
  c.max_update_norm = -1;
  c.bound_multiplier = 1e6;
  return c;
}

void fx_identity(int n, sign_key **key, uint8_t pub[SIGN_PUBLIC_LEN]) {
  uint8_t seed[SIGN_SEED_LEN];
  memset(seed, n, sizeof seed);
  sign_key *k = NULL;
  CU_ASSERT_EQUAL_FATAL(sign_key_from_seed(seed, &k), COHORT_OK);
  sign_key_public(k, pub);
  if (key)
    *key = k;
  else
    sign_key_free(k);
}

round_registration fx_registration(const char *token, const uint8_t *pub) {
  return (round_registration){.enrollment_token = token,
                              .platform = "test",
                              .identity_key = pub,
                              .identity_key_len = SIGN_PUBLIC_LEN};
}

void fx_prove_at(round_registration *r, int n, int64_t time_ms,
                 uint8_t sig[SIGN_LEN]) {
  sign_key *k = NULL;
  uint8_t pub[SIGN_PUBLIC_LEN];
  fx_identity(n, &k, pub);
  CU_ASSERT_EQUAL_FATAL(sign_possession(k, r->enrollment_token, time_ms, sig),
                        COHORT_OK);
  sign_key_free(k);
  r->possession = sig;
  r->possession_len = SIGN_LEN;
  r->possession_time_ms = time_ms;
}

void fx_prove(round_registration *r, int n, uint8_t sig[SIGN_LEN]) {
  fx_prove_at(r, n, (int64_t)(clock_wall_s() * 1000.0), sig);
}

int new_engine(fixture *f) {
  char err[256] = "";
  int rc = round_engine_new(&f->cfg, f->db, &f->e, err, sizeof err);
  if (rc)
    fprintf(stderr, "round_engine_new: %s\n", err);
  if (!rc)
    rc = round_add_enrollment_token(f->e, ENROLL);
  return rc;
}

int fx_init(fixture *f) { return fx_init_with(f, NULL); }

int fx_init_with(fixture *f, const store_options *opt) {
  memset(f, 0, sizeof *f);
  if (opt)
    f->opt = *opt;
  snprintf(f->path, sizeof f->path, "%s/round%d.sqlite", dir, ++db_counter);
  char err[256] = "";
  if (store_open_with(f->path, &f->opt, &f->db, err, sizeof err)) {
    fprintf(stderr, "store_open: %s\n", err);
    return -1;
  }
  f->lines = tmpfile();
  f->cfg = default_config();
  f->cfg.round_lines = f->lines;
  return f->lines ? 0 : -1;
}

int fx_start(fixture *f, int n) {
  if (n > MAX_CLIENTS || new_engine(f))
    return -1;
  for (int i = 0; i < n; i++) {
    fx_identity(i + 1, NULL, f->key[i]);
    round_registration r = fx_registration(ENROLL, f->key[i]);
    uint8_t proof[SIGN_LEN]; /* as libcohort sends one */
    fx_prove(&r, i + 1, proof);
    if (round_register(f->e, &r, &f->id[i], f->token[i]).code)
      return -1;
  }
  return 0;
}

int fx_open(fixture *f, int n) { return fx_init(f) ? -1 : fx_start(f, n); }

void fx_close(fixture *f) {
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

void restart_engine(fixture *f) {
  round_engine_free(f->e);
  f->e = NULL;
  CU_ASSERT_EQUAL_FATAL(new_engine(f), COHORT_OK);
}

void restart_coordinator(fixture *f) {
  round_engine_free(f->e);
  f->e = NULL;
  store_close(f->db);
  f->db = NULL;
  char err[256] = "";
  int rc = store_open_with(f->path, &f->opt, &f->db, err, sizeof err);
  if (rc)
    fprintf(stderr, "store_open: %s\n", err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(new_engine(f), COHORT_OK);
}

const char *round_state_in_db(fixture *f, int64_t round, char *buf,
                              size_t len) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT state FROM rounds WHERE id = %lld",
           (long long)round);
  return db_peek_text(f->path, sql, buf, len);
}

int64_t count(fixture *f, const char *sql) { return db_peek_int(f->path, sql); }

int db_exec(const char *path, const char *sql, const void *blob, size_t len) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  }
  if (rc == SQLITE_OK && blob)
    rc = sqlite3_bind_blob64(st, 1, blob, len, SQLITE_TRANSIENT);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc;
}

int stored_model(fixture *f, int64_t version, float *out, uint8_t *blob,
                 int64_t *got_version, char sha_hex[65]) {
  store_model m;
  int rc = version < 0 ? store_model_latest(f->db, &m)
                       : store_model_get(f->db, version, &m);
  if (rc)
    return rc;
  if (m.blob_len != MODEL_BYTES) {
    store_model_clear(&m);
    return -1;
  }
  if (out)
    wire_get_f32le(out, m.blob, NP);
  if (blob)
    memcpy(blob, m.blob, MODEL_BYTES);
  if (got_version)
    *got_version = m.version;
  if (sha_hex)
    memcpy(sha_hex, m.sha256_hex, 65);
  store_model_clear(&m);
  return 0;
}

int latest_model(fixture *f, float *out, int64_t *version, char sha_hex[65]) {
  return stored_model(f, -1, out, NULL, version, sha_hex);
}

int same_bits(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * sizeof *a) == 0;
}

float middle_of_3(float a, float b, float c) {
  float lo = a < b ? a : b, hi = a < b ? b : a;
  return c < lo ? lo : c > hi ? hi : c;
}

void assert_nothing_stored(fixture *f) {
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM participations"), 2);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM participations WHERE "
                           "state = 'SELECTED' AND update_sha256 IS NULL AND "
                           "examples = 0 AND uploaded_at IS NULL AND "
                           "late_at IS NULL"),
                  2);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM updates"), 0);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM models"), 1);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM rounds"), 1);
  CU_ASSERT_EQUAL(count(f, "SELECT late_uploads FROM rounds"), 0);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM metrics"), 0);
}

/* ---- updates ---- */

void encode(update *u) {
  wire_put_f32le(u->blob, u->delta, NP);
  crypto_sha256(u->blob, MODEL_BYTES, u->sha);
}

update *make_update(int kind) {
  update *u = malloc(sizeof *u);
  CU_ASSERT_PTR_NOT_NULL_FATAL(u);
  for (size_t i = 0; i < NP; i++)
    u->delta[i] = kind == 0   ? 0.001f * (float)(i % 13) - 0.005f
                  : kind == 1 ? 0.003f - 0.002f * (float)(i % 7)
                              : 0.01f * (float)((i + (size_t)kind) % 5);
  encode(u);
  return u;
}

round_verdict send_chunk(fixture *f, int64_t client, int64_t round,
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
                    .wire_bytes = len + 100,
                    /* A training time the round line can be checked by. */
                    .train_ms = (uint32_t)(examples % 100000)};
  return round_upload(f->e, client, &c, next, complete);
}

round_verdict send_all(fixture *f, int64_t client, int64_t round,
                       const update *u, uint64_t examples) {
  uint64_t next = 0;
  int complete = 0;
  round_verdict v = send_chunk(f, client, round, u, 0, MODEL_BYTES, examples,
                               &next, &complete);
  if (v.code == GRPC_STATUS_OK) {
    CU_ASSERT_EQUAL(complete, 1);
    CU_ASSERT_EQUAL(next, MODEL_BYTES);
  } else {
    CU_ASSERT_EQUAL(complete, 0);
  }
  return v;
}

round_verdict checkin(fixture *f, int i, checkin_result *r) {
  return round_checkin(f->e, f->id[i], FX_DECLARED, 0, NULL, NULL, r);
}

void start_round_n(fixture *f, int64_t r, int n) {
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "OPEN");
  for (int i = 0; i < n; i++) {
    checkin_result res;
    round_verdict v = checkin(f, i, &res);
    CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(res.kind, CHECKIN_TASK);
    CU_ASSERT_EQUAL(res.task.round, r);
  }
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "TRAINING");
}

void start_round(fixture *f, int64_t r) { start_round_n(f, r, 2); }
