/* Tests of the coordinator's SQLite store, each in a fresh database under a
 * mkdtemp directory, with the rows checked through a second, plain sqlite3
 * connection: schema and WAL, version refusal, the upgrade from schema 5,
 * clients and their identity keys, models, the round commit transaction,
 * crash recovery, participations, the kept updates' files and metrics. */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "log.h"
#include "store.h"
#include "store_tokens.h"

static char dir[128];
static int db_counter;

static int suite_init(void) {
  log_set_level(LOG_OFF); /* expected failures would log SQLite errors */
  return test_tmpdir_make(dir, sizeof dir, "store");
}

static int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

/* A path for a database no other test uses. */
static void fresh_path(char *out, size_t len) {
  snprintf(out, len, "%s/db%d.sqlite", dir, ++db_counter);
}

/* Opens a store on a fresh path; the test stops here if that fails. */
static store *open_fresh(char *path, size_t len) {
  fresh_path(path, len);
  store *s = NULL;
  char err[256] = "";
  int rc = store_open(path, &s, err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_OK);
  if (rc)
    fprintf(stderr, "store_open: %s\n", err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  return s;
}

/* The state of round 1, the round most tests open. */
static const char *round1_state(const char *path) {
  static char text[32];
  return db_peek_text(path, "SELECT state FROM rounds WHERE id = 1", text,
                      sizeof text);
}

/* ---- fixtures ---- */

static const char *HASH_A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char *HASH_B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/* Identity keys: the store keeps bytes (the round engine checks that they
 * are Ed25519 points). */
static const uint8_t KEY_A[SIGN_PUBLIC_LEN] = {0xa1, 0xa2, 0xa3};
static const uint8_t KEY_B[SIGN_PUBLIC_LEN] = {0xb1, 0xb2, 0xb3};
static const uint8_t KEY_C[SIGN_PUBLIC_LEN] = {0xc1, 0xc2, 0xc3};

/* A model whose blob is len bytes 0, 1, 2, ... plus salt. */
static store_model make_model(int64_t version, int64_t round, int64_t parent,
                              size_t len, uint8_t salt) {
  store_model m = {.version = version, .round = round, .parent = parent};
  snprintf(m.spec, sizeof m.spec, "logreg");
  snprintf(m.sha256_hex, sizeof m.sha256_hex, "%064x", (unsigned)salt);
  m.blob = malloc(len);
  for (size_t i = 0; i < len; i++)
    m.blob[i] = (uint8_t)(i + salt);
  m.blob_len = len;
  return m;
}

/* Puts the initial model, version 0 of len bytes, into s. */
static void put_initial(store *s, size_t len) {
  store_model m0 = make_model(0, 0, -1, len, 0);
  CU_ASSERT_EQUAL_FATAL(store_model_put_initial(s, &m0, 1.0), COHORT_OK);
  store_model_clear(&m0);
}

/* ---- tests ---- */

static void test_open_creates_schema_in_wal(void) {
  char path[256], text[64];
  store *s = open_fresh(path, sizeof path);
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"),
                  STORE_SCHEMA_VERSION);
  CU_ASSERT_STRING_EQUAL(
      db_peek_text(path, "PRAGMA journal_mode", text, sizeof text), "wal");
  const char *tables[] = {"clients",        "models",  "rounds",
                          "participations", "metrics", "events"};
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND "
             "name='%s'",
             tables[i]);
    CU_ASSERT_EQUAL(db_peek_int(path, sql), 1);
  }
  store_close(s);
  store_close(NULL);
}

static void test_reopen_keeps_data(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  int64_t id = 0, found = 0;
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_A, "linux", KEY_A, NULL, 1.0, &id), COHORT_OK);
  store_close(s);
  s = NULL;
  char err[256] = "";
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(store_client_by_token(s, HASH_A, &found), COHORT_OK);
  CU_ASSERT_EQUAL(found, id);
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"),
                  STORE_SCHEMA_VERSION);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM clients"), 1);
  store_close(s);
}

static void test_newer_schema_refused(void) {
  char path[256], err[256] = "";
  fresh_path(path, sizeof path);
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL(sqlite3_exec(db,
                               "CREATE TABLE t (x); PRAGMA user_version = 99;",
                               NULL, NULL, NULL),
                  SQLITE_OK);
  sqlite3_close(db);
  store *s = (store *)(uintptr_t)1; /* must not be written on failure */
  CU_ASSERT_NOT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_EQUAL(s, (store *)(uintptr_t)1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "99"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "version"));
  /* A reader (cohort tokens, --export) refuses it too, without telling
   * the operator to start a coordinator on it, which refuses it as well. */
  CU_ASSERT_NOT_EQUAL(store_open_readonly(path, &s, err, sizeof err),
                      COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "schema version 99"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "a newer build made it"));
  CU_ASSERT_PTR_NULL(strstr(err, "upgrade"));
  /* The schema was not touched. */
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"), 99);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM sqlite_master WHERE "
                                    "name='clients'"),
                  0);
}

static void test_open_bad_path_fails_with_reason(void) {
  char path[300], err[256] = "";
  snprintf(path, sizeof path, "%s/no/such/dir/db.sqlite", dir);
  store *s = NULL;
  CU_ASSERT_NOT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
}

static void test_clients_add_find(void) {
  char path[256], text[128];
  store *s = open_fresh(path, sizeof path);
  int64_t a = 0, b = 0, found = -1;
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_A, "linux", KEY_A, NULL, 10.0, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_B, NULL, KEY_B, NULL, 11.0, &b), COHORT_OK);
  CU_ASSERT_TRUE(a > 0);
  CU_ASSERT_TRUE(b > 0);
  CU_ASSERT_NOT_EQUAL(a, b);
  CU_ASSERT_EQUAL(store_client_by_token(s, HASH_A, &found), COHORT_OK);
  CU_ASSERT_EQUAL(found, a);
  CU_ASSERT_EQUAL(store_client_by_token(s, HASH_B, &found), COHORT_OK);
  CU_ASSERT_EQUAL(found, b);
  found = -1;
  CU_ASSERT_EQUAL(store_client_by_token(s, "cccc", &found), COHORT_ENOTFOUND);
  CU_ASSERT_EQUAL(found, -1);
  /* A second client with the same token hash is refused. */
  int64_t dup = -1;
  CU_ASSERT_NOT_EQUAL(
      store_client_add(s, HASH_A, "other", KEY_C, NULL, 12.0, &dup), COHORT_OK);
  CU_ASSERT_EQUAL(dup, -1);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM clients"), 2);
  CU_ASSERT_STRING_EQUAL(
      db_peek_text(path, "SELECT platform FROM clients ORDER BY id LIMIT 1",
                   text, sizeof text),
      "linux");
  CU_ASSERT_STRING_EQUAL(
      db_peek_text(path,
                   "SELECT platform FROM clients ORDER BY id DESC LIMIT 1",
                   text, sizeof text),
      ""); /* NULL platform stored as empty */
  /* touch moves last_seen only. */
  CU_ASSERT_EQUAL(store_client_touch(s, a, 99.5), COHORT_OK);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT last_seen FROM clients WHERE id = %lld",
           (long long)a);
  CU_ASSERT_DOUBLE_EQUAL(db_peek_double(path, sql), 99.5, 0);
  snprintf(sql, sizeof sql, "SELECT registered_at FROM clients WHERE id = %lld",
           (long long)a);
  CU_ASSERT_DOUBLE_EQUAL(db_peek_double(path, sql), 10.0, 0);
  store_close(s);
}

/* The identity store_client_identity gives for id: want (32 bytes) and
 * cert (NULL: none). */
static void assert_identity(store *s, int64_t id, const uint8_t *want,
                            const uint8_t *cert) {
  uint8_t pub[SIGN_PUBLIC_LEN], got_cert[SIGN_CERT_LEN];
  memset(got_cert, 0xee, sizeof got_cert);
  int has_cert = -1;
  CU_ASSERT_EQUAL_FATAL(store_client_identity(s, id, pub, got_cert, &has_cert),
                        COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(pub, want, sizeof pub), 0);
  CU_ASSERT_EQUAL(has_cert, cert != NULL);
  uint8_t zero[SIGN_CERT_LEN] = {0};
  CU_ASSERT_EQUAL(memcmp(got_cert, cert ? cert : zero, sizeof got_cert), 0);
}

static void test_client_identity(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  uint8_t cert[SIGN_CERT_LEN];
  for (size_t i = 0; i < sizeof cert; i++)
    cert[i] = (uint8_t)(3 * i + 1);
  int64_t a = 0, b = 0, found = -1, dup = -1;
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_A, "linux", KEY_A, NULL, 1.0, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_B, "linux", KEY_B, cert, 1.0, &b), COHORT_OK);
  assert_identity(s, a, KEY_A, NULL);
  assert_identity(s, b, KEY_B, cert);
  CU_ASSERT_EQUAL(store_client_by_identity(s, KEY_B, &found), COHORT_OK);
  CU_ASSERT_EQUAL(found, b);
  found = -1;
  CU_ASSERT_EQUAL(store_client_by_identity(s, KEY_C, &found), COHORT_ENOTFOUND);
  CU_ASSERT_EQUAL(found, -1);
  uint8_t pub[SIGN_PUBLIC_LEN], got_cert[SIGN_CERT_LEN];
  int has_cert = 0;
  CU_ASSERT_EQUAL(store_client_identity(s, b + 1, pub, got_cert, &has_cert),
                  COHORT_ENOTFOUND);
  /* One client per key, even if the caller forgot to look first. */
  CU_ASSERT_EQUAL(store_client_add(s, "cccc", "x", KEY_A, NULL, 2.0, &dup),
                  COHORT_EDB);
  CU_ASSERT_EQUAL(dup, -1);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM clients"), 2);
  store_close(s);
}

/* Back from schema 13 to 12: a kept update's checksum column named as
 * before (it held the client's SHA-256 then). */
#define CHECKSUM_V12 "ALTER TABLE updates RENAME COLUMN checksum TO sha256;"

/* Back from schema 12 to 11: no time of the last proof of possession. */
#define POSSESSION_V11 "ALTER TABLE clients DROP COLUMN possession_ms;"

/* Back from schema 11 to 10: no record of failed rounds. */
#define OFFENDERS_V10                                                          \
  "DROP TABLE client_failures;"                                                \
  "ALTER TABLE clients DROP COLUMN rounds_failed;"                             \
  "ALTER TABLE clients DROP COLUMN excluded_until;"

/* Schema 10's tables and columns removed, as schemas 1 to 9 were. */
#define TOKENS_V9                                                              \
  "DROP TABLE enrollment_tokens;"                                              \
  "ALTER TABLE clients DROP COLUMN enrollment_token;"                          \
  "ALTER TABLE clients DROP COLUMN session_expires_at;"                        \
  "ALTER TABLE clients DROP COLUMN revoked_at;"

/* The updates table as schemas 2 to 8 had it, the bytes in the row. */
#define UPDATES_V8                                                             \
  "DROP TABLE updates;"                                                        \
  "CREATE TABLE updates ("                                                     \
  "  round INTEGER NOT NULL REFERENCES rounds(id),"                            \
  "  client_id INTEGER NOT NULL REFERENCES clients(id),"                       \
  "  examples INTEGER NOT NULL,"                                               \
  "  sha256 TEXT NOT NULL,"                                                    \
  "  delta BLOB NOT NULL,"                                                     \
  "  PRIMARY KEY (round, client_id));"

/* A database as schema 5 left it: migration 6 only adds the identity
 * columns and their index to clients, migration 7 one column to rounds,
 * migration 8 two to rounds and one to the ledger and migration 9 two to
 * updates (and lets its delta be NULL), so taking them away again gives the
 * old schema, with a client that registered before identity keys. */
static void make_v5_database(const char *path) {
  store *s = NULL;
  char err[256] = "";
  int64_t id = 0;
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_A, "old", KEY_A, NULL, 1.0, &id), COHORT_OK);
  store_close(s);
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL(
      sqlite3_exec(db,
                   "DROP INDEX clients_identity_key;"
                   "ALTER TABLE clients DROP COLUMN identity_key;"
                   "ALTER TABLE clients DROP COLUMN "
                   "enrollment_cert;"
                   "ALTER TABLE rounds DROP COLUMN "
                   "secagg_attested;"
                   "ALTER TABLE rounds DROP COLUMN "
                   "dp_sampling_rate;"
                   "ALTER TABLE rounds DROP COLUMN dp_sampling;"
                   "ALTER TABLE privacy_ledger DROP COLUMN "
                   "sampling;" UPDATES_V8 POSSESSION_V11 OFFENDERS_V10 TOKENS_V9
                   "PRAGMA user_version = 5;",
                   NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(db);
  CU_ASSERT_EQUAL_FATAL(db_peek_int(path, "PRAGMA user_version"), 5);
}

static void test_v5_database_migrates(void) {
  char path[256], err[256] = "";
  fresh_path(path, sizeof path);
  make_v5_database(path);
  /* A reader refuses the old schema; the coordinator upgrades it. */
  store *s = NULL;
  CU_ASSERT_NOT_EQUAL(store_open_readonly(path, &s, err, sizeof err),
                      COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "schema version 5"));
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"),
                  STORE_SCHEMA_VERSION);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(secagg_attested) FROM "
                                    "rounds"),
                  0);
  /* The old client is still there, with its token and no identity. */
  int64_t old = 0, b = 0, dup = -1;
  CU_ASSERT_EQUAL(store_client_by_token(s, HASH_A, &old), COHORT_OK);
  uint8_t pub[SIGN_PUBLIC_LEN], cert[SIGN_CERT_LEN];
  int has_cert = 0;
  CU_ASSERT_EQUAL(store_client_identity(s, old, pub, cert, &has_cert),
                  COHORT_ENOTFOUND);
  /* New clients bind keys, and the index keeps them apart. */
  CU_ASSERT_EQUAL_FATAL(
      store_client_add(s, HASH_B, "new", KEY_B, NULL, 2.0, &b), COHORT_OK);
  assert_identity(s, b, KEY_B, NULL);
  CU_ASSERT_EQUAL(store_client_add(s, "cccc", "x", KEY_B, NULL, 3.0, &dup),
                  COHORT_EDB);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM clients"), 2);
  store_close(s);
}

static void test_model_round_trip(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  store_model got = {0};
  CU_ASSERT_EQUAL(store_model_latest(s, &got), COHORT_ENOTFOUND);
  store_model m = make_model(0, 0, -1, 1000, 7);
  CU_ASSERT_EQUAL_FATAL(store_model_put_initial(s, &m, 5.0), COHORT_OK);

  CU_ASSERT_EQUAL_FATAL(store_model_latest(s, &got), COHORT_OK);
  CU_ASSERT_EQUAL(got.version, 0);
  CU_ASSERT_EQUAL(got.round, 0);
  CU_ASSERT_EQUAL(got.parent, -1);
  CU_ASSERT_STRING_EQUAL(got.spec, "logreg");
  CU_ASSERT_STRING_EQUAL(got.sha256_hex, m.sha256_hex);
  CU_ASSERT_EQUAL_FATAL(got.blob_len, m.blob_len);
  CU_ASSERT_EQUAL(memcmp(got.blob, m.blob, m.blob_len), 0);
  store_model_clear(&got);
  CU_ASSERT_PTR_NULL(got.blob);

  CU_ASSERT_EQUAL_FATAL(store_model_get(s, 0, &got), COHORT_OK);
  CU_ASSERT_EQUAL(got.blob_len, 1000);
  CU_ASSERT_EQUAL(memcmp(got.blob, m.blob, m.blob_len), 0);
  store_model_clear(&got);
  CU_ASSERT_EQUAL(store_model_get(s, 1, &got), COHORT_ENOTFOUND);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT size FROM models WHERE version = 0"), 1000);
  /* A second initial model with version 0 is refused, the first kept. */
  store_model again = make_model(0, 0, -1, 10, 9);
  CU_ASSERT_NOT_EQUAL(store_model_put_initial(s, &again, 6.0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM models"), 1);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT size FROM models"), 1000);
  store_model_clear(&again);
  store_model_clear(&m);
  store_model_clear(NULL);
  store_close(s);
}

static void test_round_commit_writes_model_and_state(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  put_initial(s, 64);
  int64_t n = -1;
  CU_ASSERT_EQUAL(store_round_max(s, &n), COHORT_OK);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 2.0),
                        COHORT_OK);
  CU_ASSERT_STRING_EQUAL(round1_state(path), "OPEN");
  CU_ASSERT_NOT_EQUAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 2.0),
                      COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_round_set_state(s, 1, "TRAINING", NULL, 3.0),
                        COHORT_OK);
  CU_ASSERT_STRING_EQUAL(round1_state(path), "TRAINING");
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT finished_at IS NULL FROM rounds"),
                  1);
  /* The CHECK constraint keeps states to the known ones. */
  CU_ASSERT_NOT_EQUAL(store_round_set_state(s, 1, "BOGUS", NULL, 3.5),
                      COHORT_OK);

  store_model m1 = make_model(1, 1, 0, 64, 3);
  store_round_result r = {.round = 1,
                          .clients_selected = 3,
                          .clients_aggregated = 2,
                          .accuracy = 0.875,
                          .loss = 0.25,
                          .bytes_up_mean = 1234,
                          .bytes_down_mean = 5678,
                          .finished_at = 4.0};
  CU_ASSERT_EQUAL_FATAL(store_round_commit(s, &r, &m1, NULL), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(round1_state(path), "COMMITTED");
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT model_version FROM rounds WHERE id = 1"), 1);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT accuracy FROM rounds WHERE id = 1"), 0.875,
      0);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT loss FROM rounds WHERE id = 1"), 0.25, 0);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT clients_selected FROM rounds WHERE id = 1"), 3);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT clients_aggregated FROM rounds WHERE id = 1"),
      2);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT bytes_up_mean FROM rounds WHERE id = 1"),
      1234, 0);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT finished_at FROM rounds WHERE id = 1"), 4.0,
      0);
  CU_ASSERT_EQUAL(
      db_peek_int(path,
                  "SELECT COUNT(*) FROM models WHERE version = 1 AND round = 1"
                  " AND parent = 0 AND size = 64"),
      1);
  CU_ASSERT_EQUAL(store_round_count_committed(s, &n), COHORT_OK);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_EQUAL(store_round_max(s, &n), COHORT_OK);
  CU_ASSERT_EQUAL(n, 1);
  store_model got = {0};
  CU_ASSERT_EQUAL_FATAL(store_model_latest(s, &got), COHORT_OK);
  CU_ASSERT_EQUAL(got.version, 1);
  CU_ASSERT_EQUAL(memcmp(got.blob, m1.blob, 64), 0);
  store_model_clear(&got);
  store_model_clear(&m1);
  store_close(s);
}

static void test_commit_missing_round_rolls_back(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  put_initial(s, 16);
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 2.0),
                        COHORT_OK);

  /* Round 42 does not exist: the model insert must be undone. */
  store_model m = make_model(1, 42, 0, 16, 1);
  store_round_result r = {
      .round = 42, .accuracy = NAN, .loss = NAN, .finished_at = 3.0};
  CU_ASSERT_NOT_EQUAL(store_round_commit(s, &r, &m, NULL), COHORT_OK);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT COUNT(*) FROM models WHERE version = 1"), 0);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM models"), 1);
  store_model got = {0};
  CU_ASSERT_EQUAL(store_model_latest(s, &got), COHORT_OK);
  CU_ASSERT_EQUAL(got.version, 0);
  store_model_clear(&got);

  /* A model version that already exists fails the commit, and the round
   * is not marked COMMITTED. */
  store_model dup = make_model(0, 1, 0, 16, 2);
  r.round = 1;
  CU_ASSERT_NOT_EQUAL(store_round_commit(s, &r, &dup, NULL), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(round1_state(path), "OPEN");

  /* No transaction was left open: the same model version commits now. */
  m.round = 1;
  CU_ASSERT_EQUAL(store_round_commit(s, &r, &m, NULL), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM models"), 2);
  CU_ASSERT_STRING_EQUAL(round1_state(path), "COMMITTED");
  store_model_clear(&dup);
  store_model_clear(&m);
  store_close(s);
}

static void test_nan_accuracy_stored_as_null(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 1.0),
                        COHORT_OK);
  store_model m = make_model(1, 1, 0, 8, 0);
  put_initial(s, 8);
  store_round_result r = {
      .round = 1, .accuracy = NAN, .loss = NAN, .finished_at = 2.0};
  CU_ASSERT_EQUAL_FATAL(store_round_commit(s, &r, &m, NULL), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT accuracy IS NULL FROM rounds"), 1);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT loss IS NULL FROM rounds"), 1);
  /* Measured figures stay numbers. */
  char text[32];
  CU_ASSERT_STRING_EQUAL(db_peek_text(path,
                                      "SELECT typeof(bytes_up_mean) FROM "
                                      "rounds",
                                      text, sizeof text),
                         "real");
  store_model_clear(&m);
  store_close(s);
}

static void test_fail_unfinished(void) {
  char path[256], text[128];
  store *s = open_fresh(path, sizeof path);
  put_initial(s, 8);
  for (int64_t id = 1; id <= 5; id++)
    CU_ASSERT_EQUAL_FATAL(store_round_open(s, id, 0, "TRAIN", 1, NULL, 1.0),
                          COHORT_OK);
  store_model m1 = make_model(1, 1, 0, 8, 1);
  store_round_result r = {
      .round = 1, .accuracy = 0.5, .loss = 1, .finished_at = 2.0};
  CU_ASSERT_EQUAL_FATAL(store_round_commit(s, &r, &m1, NULL), COHORT_OK);
  CU_ASSERT_EQUAL(store_round_set_state(s, 2, "FAILED", "earlier", 2.0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(store_round_set_state(s, 4, "TRAINING", NULL, 2.0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(store_round_set_state(s, 5, "AGGREGATING", NULL, 2.0),
                  COHORT_OK);
  /* round 3 stays OPEN */
  int count = -1;
  CU_ASSERT_EQUAL_FATAL(store_round_fail_unfinished(s, "crash", 7.0, &count),
                        COHORT_OK);
  CU_ASSERT_EQUAL(count, 3);
  CU_ASSERT_STRING_EQUAL(round1_state(path), "COMMITTED");
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT reason IS NULL FROM rounds WHERE id = 1"), 1);
  CU_ASSERT_STRING_EQUAL(db_peek_text(path,
                                      "SELECT reason FROM rounds WHERE id = 2",
                                      text, sizeof text),
                         "earlier");
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT finished_at FROM rounds WHERE id = 2"), 2.0,
      0);
  for (int id = 3; id <= 5; id++) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT state || ':' || reason || ':' || "
             "finished_at FROM rounds WHERE id = %d",
             id);
    CU_ASSERT_STRING_EQUAL(db_peek_text(path, sql, text, sizeof text),
                           "FAILED:crash:7.0");
  }
  CU_ASSERT_EQUAL(store_round_fail_unfinished(s, "again", 8.0, &count),
                  COHORT_OK);
  CU_ASSERT_EQUAL(count, 0);
  CU_ASSERT_EQUAL(store_round_fail_unfinished(s, "again", 8.0, NULL),
                  COHORT_OK);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT COUNT(*) FROM rounds WHERE reason = 'again'"),
      0);
  int64_t n = 0;
  CU_ASSERT_EQUAL(store_round_count_committed(s, &n), COHORT_OK);
  CU_ASSERT_EQUAL(n, 1);
  store_model_clear(&m1);
  store_close(s);
}

/* Clients a and b registered and round 1 open, on s. */
static void two_clients_round_1(store *s, int64_t *a, int64_t *b) {
  CU_ASSERT_EQUAL_FATAL(store_client_add(s, HASH_A, "", KEY_A, NULL, 1.0, a),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_client_add(s, HASH_B, "", KEY_B, NULL, 1.0, b),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 1.0),
                        COHORT_OK);
}

/* A batch of writes in one transaction (store_begin): the writes that
 * make a transaction of their own nest in it as savepoints, so a refused
 * one takes back only itself; nothing shows before the batch commits, and
 * a batch rolled back leaves nothing. */
static void test_writes_nest_in_a_batch(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  int64_t a = 0, b = 0;
  two_clients_round_1(s, &a, &b);

  CU_ASSERT_EQUAL_FATAL(store_begin(s), COHORT_OK);
  CU_ASSERT_EQUAL(store_participation_select(s, 1, a, 2.0), COHORT_OK);
  store_upload u = {.round = 1, .client = b, .examples = 3, .uploaded_at = 3};
  snprintf(u.sha256_hex, sizeof u.sha256_hex, "%s", HASH_B);
  /* b was not selected: refused inside the batch, which goes on. */
  CU_ASSERT_NOT_EQUAL(store_participation_uploaded(s, &u, NULL, 0), COHORT_OK);
  u.client = a;
  CU_ASSERT_EQUAL(store_participation_uploaded(s, &u, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 0);
  CU_ASSERT_EQUAL(store_finish(s, COHORT_OK), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"
                                    " WHERE state = 'UPLOADED'"),
                  1);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 1);

  CU_ASSERT_EQUAL_FATAL(store_begin(s), COHORT_OK);
  CU_ASSERT_EQUAL(store_participation_select(s, 1, b, 2.0), COHORT_OK);
  CU_ASSERT_EQUAL(store_finish(s, COHORT_EDB), COHORT_EDB);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 1);
  /* Nothing is open now: finishing again is a caller's error. */
  CU_ASSERT_EQUAL(store_finish(s, COHORT_OK), COHORT_ESTATE);
  CU_ASSERT_EQUAL(store_participation_select(s, 1, b, 2.0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 2);
  store_close(s);
}

/* store_begin_now with the write lock held by another connection: refused
 * at once (not after the 5 s busy timeout that store_begin waits out),
 * nothing begun; with the lock free, a transaction. */
static void test_begin_now_does_not_wait(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  sqlite3 *holder = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &holder), SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  double t0 = clock_mono_s();
  CU_ASSERT_EQUAL(store_begin_now(s), COHORT_EUNAVAIL);
  CU_ASSERT(clock_mono_s() - t0 < 2.5); /* half the busy timeout */
  CU_ASSERT_EQUAL(store_finish(s, COHORT_OK), COHORT_ESTATE);
  CU_ASSERT_EQUAL(sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL),
                  SQLITE_OK);
  sqlite3_close(holder);
  CU_ASSERT_EQUAL(store_begin_now(s), COHORT_OK);
  CU_ASSERT_EQUAL(store_finish(s, COHORT_OK), COHORT_OK);
  store_close(s);
}

static void test_participations(void) {
  char path[256], text[128];
  store *s = open_fresh(path, sizeof path);
  int64_t a = 0, b = 0;
  two_clients_round_1(s, &a, &b);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, 1, a, 2.0), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(
      db_peek_text(path, "SELECT state FROM participations", text, sizeof text),
      "SELECTED");
  /* Selecting twice, or an unknown client or round, is refused. */
  CU_ASSERT_NOT_EQUAL(store_participation_select(s, 1, a, 2.0), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(store_participation_select(s, 1, 9999, 2.0), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(store_participation_select(s, 77, b, 2.0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 1);

  store_upload u = {.round = 1,
                    .client = a,
                    .bytes_down = 100,
                    .bytes_up = 200,
                    .examples = 30,
                    .uploaded_at = 3.0};
  snprintf(u.sha256_hex, sizeof u.sha256_hex, "%s", HASH_B);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, NULL, 0),
                        COHORT_OK);
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT state || ':' || bytes_down || ':' || bytes_up || ':' || "
           "examples || ':' || update_sha256 || ':' || uploaded_at FROM "
           "participations WHERE round = 1 AND client_id = %lld",
           (long long)a);
  char want[160];
  snprintf(want, sizeof want, "UPLOADED:100:200:30:%s:3.0", HASH_B);
  CU_ASSERT_STRING_EQUAL(db_peek_text(path, sql, text, sizeof text), want);

  /* b was not selected: an error, and no row appears for it. */
  store_upload ub = u;
  ub.client = b;
  CU_ASSERT_NOT_EQUAL(store_participation_uploaded(s, &ub, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 1);
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM participations WHERE client_id = %lld",
           (long long)b);
  CU_ASSERT_EQUAL(db_peek_int(path, sql), 0);
  /* Nor for a round the client was not selected in. */
  ub = u;
  ub.round = 2;
  CU_ASSERT_NOT_EQUAL(store_participation_uploaded(s, &ub, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM participations"), 1);
  store_close(s);
}

/* ---- kept updates ---- */

/* What store_round_participants passed, copied out of the callback. */
typedef struct kept {
  size_t n;
  int64_t client[4];
  int uploaded[4];
  char sha[4][65];
  uint8_t *delta[4]; /* NULL when none was passed */
  size_t len[4];
} kept;

static int collect(void *ctx, const store_participant *p) {
  kept *k = ctx;
  if (k->n >= 4)
    return COHORT_EINVAL;
  size_t i = k->n++;
  k->client[i] = p->client;
  k->uploaded[i] = p->uploaded;
  snprintf(k->sha[i], sizeof k->sha[i], "%s", p->sha256_hex);
  k->len[i] = p->delta_len;
  k->delta[i] = NULL;
  if (p->delta) {
    k->delta[i] = malloc(p->delta_len ? p->delta_len : 1);
    memcpy(k->delta[i], p->delta, p->delta_len);
  }
  return COHORT_OK;
}

static void kept_clear(kept *k) {
  for (size_t i = 0; i < k->n; i++)
    free(k->delta[i]);
  memset(k, 0, sizeof *k);
}

static kept participants(store *s, int64_t round) {
  kept k = {0};
  CU_ASSERT_EQUAL(store_round_participants(s, round, collect, &k), COHORT_OK);
  return k;
}

/* len bytes from salt on, their SHA-256 in hex (the name the client gives
 * them) and their checksum, in u. */
static void make_update(uint8_t *buf, size_t len, uint8_t salt,
                        store_upload *u) {
  for (size_t i = 0; i < len; i++)
    buf[i] = (uint8_t)(salt + 7 * i);
  uint8_t digest[CRYPTO_SHA256_LEN];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256(buf, len, digest), COHORT_OK);
  crypto_hex(digest, sizeof digest, u->sha256_hex);
  u->checksum = checksum_xxh64(buf, len);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

enum { UPD_LEN = 100 };

/* A store with clients a and b selected in round `round` (opened TRAINING)
 * and both uploads accepted: ua and ub get their bytes. */
static store *two_uploads(char *path, size_t len, int64_t round,
                          uint8_t ua[UPD_LEN], uint8_t ub[UPD_LEN], int64_t *a,
                          int64_t *b) {
  store *s = open_fresh(path, len);
  CU_ASSERT_EQUAL_FATAL(store_client_add(s, HASH_A, "", KEY_A, NULL, 1.0, a),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_client_add(s, HASH_B, "", KEY_B, NULL, 1.0, b),
                        COHORT_OK);
  put_initial(s, 8);
  for (int64_t r = 1; r <= round; r++)
    CU_ASSERT_EQUAL_FATAL(store_round_open(s, r, 0, "TRAIN", 2, NULL, 1.0),
                          COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, round, *a, 2.0),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, round, *b, 2.0),
                        COHORT_OK);
  store_upload u = {.round = round, .client = *a, .examples = 3};
  make_update(ua, UPD_LEN, 1, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ua, UPD_LEN),
                        COHORT_OK);
  u.client = *b;
  make_update(ub, UPD_LEN, 2, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ub, UPD_LEN),
                        COHORT_OK);
  return s;
}

static void round_file(const char *db, int64_t round, char *out, size_t len) {
  snprintf(out, len, "%s.updates/round-%lld", db, (long long)round);
}

/* The store keeps an update with the XXH64 of its bytes ("xxh64:"), and a
 * row from before schema 13, which holds the client's SHA-256, is still
 * checked by that: a round in progress across the upgrade resumes, and
 * bytes that are not the recorded ones are not passed either way. */
static void test_kept_update_checksums(void) {
  char path[256], err[256] = "", sql[512], want[40];
  uint8_t ua[UPD_LEN], ub[UPD_LEN];
  int64_t a = 0, b = 0;
  store *s = two_uploads(path, sizeof path, 1, ua, ub, &a, &b);
  snprintf(sql, sizeof sql,
           "SELECT checksum FROM updates WHERE client_id = %lld", (long long)a);
  snprintf(want, sizeof want, "xxh64:%016llx",
           (unsigned long long)checksum_xxh64(ua, UPD_LEN));
  char text[80];
  CU_ASSERT_STRING_EQUAL(db_peek_text(path, sql, text, sizeof text), want);
  store_close(s);
  /* As schema 12 had them: a's row with its bytes' SHA-256, b's with the
   * SHA-256 of other bytes. */
  store_upload old_a, old_other;
  uint8_t other[UPD_LEN];
  make_update(ua, UPD_LEN, 1, &old_a);
  make_update(other, UPD_LEN, 3, &old_other);
  snprintf(sql, sizeof sql,
           CHECKSUM_V12 "UPDATE updates SET sha256 = '%s' WHERE client_id = "
                        "%lld; UPDATE updates SET sha256 = '%s' WHERE "
                        "client_id = %lld; PRAGMA user_version = 12;",
           old_a.sha256_hex, (long long)a, old_other.sha256_hex, (long long)b);
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"),
                  STORE_SCHEMA_VERSION);
  kept k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], ua, UPD_LEN) == 0);
  CU_ASSERT_PTR_NULL(k.delta[1]);
  kept_clear(&k);
  /* A new row's checksum catches a changed byte in the file too. */
  CU_ASSERT_EQUAL_FATAL(store_participation_unupload(s, 1, a), COHORT_OK);
  store_upload u = {.round = 1, .client = a, .examples = 3};
  make_update(ua, UPD_LEN, 9, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ua, UPD_LEN),
                        COHORT_OK);
  char file[300];
  round_file(path, 1, file, sizeof file);
  FILE *fp = fopen(file, "r+b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  CU_ASSERT_EQUAL(fseek(fp, 2 * UPD_LEN + 5, SEEK_SET), 0);
  fputc(ua[5] ^ 0x01, fp);
  fclose(fp);
  k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT_PTR_NULL(k.delta[0]);
  kept_clear(&k);
  store_close(s);
}

/* An update in chunks: a place reserved at the end of the round's file,
 * its chunks written into it in any order and read back whole, then rows
 * that name it; a write past what was reserved, or for a round whose file
 * is not the open one, is refused and writes nothing. */
static void test_update_in_chunks(void) {
  char path[256];
  uint8_t ua[UPD_LEN], ub[UPD_LEN], chunk[UPD_LEN];
  int64_t a = 0, b = 0;
  store *s = two_uploads(path, sizeof path, 1, ua, ub, &a, &b);
  for (size_t i = 0; i < UPD_LEN; i++)
    chunk[i] = (uint8_t)(200 - i);
  uint64_t at = 0;
  CU_ASSERT_EQUAL_FATAL(store_update_reserve(s, 1, UPD_LEN, &at), COHORT_OK);
  CU_ASSERT_EQUAL(at, 2 * UPD_LEN);
  CU_ASSERT_EQUAL(store_update_write(s, 1, at + 60, chunk + 60, UPD_LEN - 60),
                  COHORT_OK);
  CU_ASSERT_EQUAL(store_update_write(s, 1, at, chunk, 60), COHORT_OK);
  CU_ASSERT_EQUAL(store_update_write(s, 1, at + 1, chunk, UPD_LEN),
                  COHORT_ENOTFOUND);
  CU_ASSERT_EQUAL(store_update_write(s, 2, 0, chunk, 10), COHORT_ENOTFOUND);
  uint8_t *back = NULL;
  CU_ASSERT_EQUAL_FATAL(store_update_read(s, 1, at, UPD_LEN, &back), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(back, chunk, UPD_LEN), 0);
  free(back);
  CU_ASSERT_EQUAL_FATAL(store_participation_unupload(s, 1, a), COHORT_OK);
  store_upload u = {.round = 1, .client = a, .examples = 3};
  make_update(ua, UPD_LEN, 0, &u); /* the name; the bytes are chunk's */
  u.checksum = checksum_xxh64(chunk, UPD_LEN);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded_at(s, &u, at, UPD_LEN),
                        COHORT_OK);
  kept k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT_EQUAL(k.client[0], a);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], chunk, UPD_LEN) == 0);
  kept_clear(&k);
  store_close(s);
}

static void test_upload_bytes_in_round_file(void) {
  char path[256], file[300], updir[300];
  uint8_t ua[UPD_LEN], ub[UPD_LEN];
  int64_t a = 0, b = 0;
  store *s = two_uploads(path, sizeof path, 1, ua, ub, &a, &b);
  /* The bytes are in the round's file, private to the coordinator; the
   * rows only say where. */
  round_file(path, 1, file, sizeof file);
  snprintf(updir, sizeof updir, "%s.updates", path);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(file, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  CU_ASSERT_EQUAL(st.st_size, 2 * UPD_LEN);
  CU_ASSERT_EQUAL_FATAL(stat(updir, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0700);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM updates WHERE"
                                    " delta IS NULL AND length = 100"),
                  2);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT offset FROM updates WHERE client_id = %lld",
           (long long)b);
  CU_ASSERT_EQUAL(db_peek_int(path, sql), UPD_LEN);
  kept k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT_EQUAL(k.client[0], a);
  CU_ASSERT(k.uploaded[0] && k.uploaded[1]);
  CU_ASSERT_EQUAL_FATAL(k.len[0], UPD_LEN);
  CU_ASSERT_EQUAL_FATAL(k.len[1], UPD_LEN);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], ua, UPD_LEN) == 0);
  CU_ASSERT(k.delta[1] && memcmp(k.delta[1], ub, UPD_LEN) == 0);
  kept_clear(&k);
  /* A restarted coordinator reads them back, and appends after them. */
  store_close(s);
  char err[256] = "";
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_unupload(s, 1, a), COHORT_OK);
  store_upload u = {.round = 1, .client = a, .examples = 3};
  make_update(ua, UPD_LEN, 9, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ua, UPD_LEN),
                        COHORT_OK);
  CU_ASSERT_EQUAL(stat(file, &st), 0);
  CU_ASSERT_EQUAL(st.st_size, 3 * UPD_LEN);
  k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], ua, UPD_LEN) == 0);
  CU_ASSERT(k.delta[1] && memcmp(k.delta[1], ub, UPD_LEN) == 0);
  kept_clear(&k);
  /* The round's end removes the file with the rows. */
  store_model m1 = make_model(1, 1, 0, 8, 1);
  store_round_result r = {.round = 1, .finished_at = 3.0};
  CU_ASSERT_EQUAL_FATAL(store_round_commit(s, &r, &m1, NULL), COHORT_OK);
  CU_ASSERT_FALSE(file_exists(file));
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM updates"), 0);
  store_model_clear(&m1);
  store_close(s);
}

static void test_round_file_cut_or_gone(void) {
  char path[256], file[300];
  uint8_t ua[UPD_LEN], ub[UPD_LEN];
  int64_t a = 0, b = 0;
  store *s = two_uploads(path, sizeof path, 1, ua, ub, &a, &b);
  round_file(path, 1, file, sizeof file);
  store_close(s); /* as after a crash */
  char err[256] = "";
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  /* Cut in b's update: a's is whole, b's is not passed. */
  CU_ASSERT_EQUAL_FATAL(truncate(file, UPD_LEN + UPD_LEN / 2), 0);
  kept k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], ua, UPD_LEN) == 0);
  CU_ASSERT_PTR_NULL(k.delta[1]);
  CU_ASSERT_EQUAL(k.len[1], 0);
  CU_ASSERT(k.uploaded[1]); /* the engine reselects it */
  kept_clear(&k);
  /* Other bytes than the recorded ones are not passed either. */
  FILE *f = fopen(file, "r+b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputc(ua[0] ^ 0xff, f);
  fclose(f);
  k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT_PTR_NULL(k.delta[0]);
  CU_ASSERT_PTR_NULL(k.delta[1]);
  kept_clear(&k);
  /* Nor anything when the file is gone. */
  CU_ASSERT_EQUAL_FATAL(unlink(file), 0);
  k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT(k.uploaded[0] && k.uploaded[1]);
  CU_ASSERT_PTR_NULL(k.delta[0]);
  CU_ASSERT_PTR_NULL(k.delta[1]);
  CU_ASSERT_STRING_NOT_EQUAL(k.sha[0], "");
  kept_clear(&k);
  store_close(s);
}

static void test_round_end_removes_files(void) {
  char path[256], file1[300], file2[300], err[256] = "";
  uint8_t ua[UPD_LEN], ub[UPD_LEN];
  int64_t a = 0, b = 0;
  /* A failed round's file goes with it. */
  store *s = two_uploads(path, sizeof path, 1, ua, ub, &a, &b);
  round_file(path, 1, file1, sizeof file1);
  round_file(path, 2, file2, sizeof file2);
  CU_ASSERT_TRUE(file_exists(file1));
  CU_ASSERT_EQUAL(store_round_fail(s, 1, "deadline", 3.0), COHORT_OK);
  CU_ASSERT_FALSE(file_exists(file1));
  /* A crash between a round's end and the unlink left a file: the next
   * open removes it, and keeps the file of the round still in progress. */
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 2, 0, "TRAIN", 2, NULL, 4.0),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, 2, a, 4.0), COHORT_OK);
  store_upload u = {.round = 2, .client = a, .examples = 3};
  make_update(ua, UPD_LEN, 5, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ua, UPD_LEN),
                        COHORT_OK);
  store_close(s);
  FILE *f = fopen(file1, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_FALSE(file_exists(file1));
  CU_ASSERT_TRUE(file_exists(file2));
  kept k = participants(s, 2);
  CU_ASSERT_EQUAL_FATAL(k.n, 1);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], ua, UPD_LEN) == 0);
  kept_clear(&k);
  /* Failing every unfinished round removes every file. */
  CU_ASSERT_EQUAL(store_round_fail_unfinished(s, "crash", 5.0, NULL),
                  COHORT_OK);
  CU_ASSERT_FALSE(file_exists(file2));
  store_close(s);
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : -1;
}

/* An ended round's file is parked as the spare, cut to that round's bytes
 * (a smaller round leaves none of a larger one's), and the next round
 * writes over it from its start; bytes left from the
 * earlier round are never passed as an update, a resumed round appends
 * after them, and the spare goes at the coordinator's close, not at an
 * admin store's. */
static void test_round_file_reused(void) {
  char path[256], file1[300], file2[300], spare[300], err[256] = "";
  uint8_t ua[UPD_LEN], ub[UPD_LEN];
  int64_t a = 0, b = 0;
  store *s = two_uploads(path, sizeof path, 1, ua, ub, &a, &b);
  round_file(path, 1, file1, sizeof file1);
  round_file(path, 2, file2, sizeof file2);
  snprintf(spare, sizeof spare, "%s.updates/round-spare", path);
  store_model m1 = make_model(1, 1, 0, 8, 1);
  store_round_result r = {.round = 1, .finished_at = 3.0};
  CU_ASSERT_EQUAL_FATAL(store_round_commit(s, &r, &m1, NULL), COHORT_OK);
  store_model_clear(&m1);
  CU_ASSERT_FALSE(file_exists(file1));
  CU_ASSERT_EQUAL(file_size(spare), 2 * UPD_LEN);
  struct stat st;
  CU_ASSERT(stat(spare, &st) == 0 && (st.st_mode & 0777) == 0600);
  /* Round 2 takes it and writes from offset 0: 100 stale bytes follow. */
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 2, 1, "TRAIN", 2, NULL, 4.0),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, 2, a, 4.0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, 2, b, 4.0), COHORT_OK);
  store_upload u = {.round = 2, .client = a, .examples = 3};
  make_update(ua, UPD_LEN, 11, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ua, UPD_LEN),
                        COHORT_OK);
  CU_ASSERT_FALSE(file_exists(spare));
  CU_ASSERT_EQUAL(file_size(file2), 2 * UPD_LEN);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT offset FROM updates"), 0);
  /* Restarted: the round resumes from its file and appends after all of
   * it, the stale bytes included; only the recorded updates are passed. */
  store_close(s);
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  u.client = b;
  make_update(ub, UPD_LEN, 12, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ub, UPD_LEN),
                        COHORT_OK);
  CU_ASSERT_EQUAL(file_size(file2), 3 * UPD_LEN);
  kept k = participants(s, 2);
  CU_ASSERT_EQUAL_FATAL(k.n, 2);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], ua, UPD_LEN) == 0);
  CU_ASSERT(k.delta[1] && memcmp(k.delta[1], ub, UPD_LEN) == 0);
  kept_clear(&k);
  /* A failed round parks its file too; close removes the spare. */
  CU_ASSERT_EQUAL(store_round_fail(s, 2, "deadline", 5.0), COHORT_OK);
  CU_ASSERT_FALSE(file_exists(file2));
  CU_ASSERT_EQUAL(file_size(spare), 3 * UPD_LEN);
  /* A smaller round after it leaves only its own bytes in the spare. */
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 3, 1, "TRAIN", 2, NULL, 6.0),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, 3, a, 6.0), COHORT_OK);
  u = (store_upload){.round = 3, .client = a, .examples = 3};
  make_update(ua, UPD_LEN, 13, &u);
  CU_ASSERT_EQUAL_FATAL(store_participation_uploaded(s, &u, ua, UPD_LEN),
                        COHORT_OK);
  CU_ASSERT_EQUAL(store_round_fail(s, 3, "deadline", 7.0), COHORT_OK);
  CU_ASSERT_EQUAL(file_size(spare), UPD_LEN);
  /* The admin CLI's store, read-only or not, leaves the running
   * coordinator's spare alone when it closes. */
  store *admin = NULL;
  CU_ASSERT_EQUAL_FATAL(store_open_readonly(path, &admin, err, sizeof err),
                        COHORT_OK);
  store_close(admin);
  CU_ASSERT_EQUAL_FATAL(store_open_admin(path, &admin, err, sizeof err),
                        COHORT_OK);
  store_close(admin);
  CU_ASSERT_EQUAL(file_size(spare), UPD_LEN);
  store_close(s);
  CU_ASSERT_FALSE(file_exists(spare));
}

/* A round in progress when a schema 8 coordinator stopped, its update in
 * the row: the upgraded store still passes it. */
static void test_v8_blob_updates_resume(void) {
  char path[256], err[256] = "";
  store *s = open_fresh(path, sizeof path);
  int64_t a = 0;
  CU_ASSERT_EQUAL_FATAL(store_client_add(s, HASH_A, "", KEY_A, NULL, 1.0, &a),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 1.0),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_participation_select(s, 1, a, 2.0), COHORT_OK);
  store_close(s);
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  char sql[1024];
  snprintf(sql, sizeof sql,
           UPDATES_V8 POSSESSION_V11 OFFENDERS_V10 TOKENS_V9
           "INSERT INTO updates VALUES (1, %lld, 3, '%s',"
           " X'0102030405');"
           "UPDATE participations SET state = 'UPLOADED',"
           " update_sha256 = '%s', uploaded_at = 3;"
           "PRAGMA user_version = 8;",
           (long long)a, HASH_B, HASH_B);
  CU_ASSERT_EQUAL(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"),
                  STORE_SCHEMA_VERSION);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM updates WHERE"
                                    " offset IS NULL AND length(delta) = 5"),
                  1);
  kept k = participants(s, 1);
  CU_ASSERT_EQUAL_FATAL(k.n, 1);
  CU_ASSERT(k.uploaded[0]);
  CU_ASSERT_STRING_EQUAL(k.sha[0], HASH_B);
  CU_ASSERT_EQUAL_FATAL(k.len[0], 5);
  CU_ASSERT(k.delta[0] && memcmp(k.delta[0], "\x01\x02\x03\x04\x05", 5) == 0);
  kept_clear(&k);
  /* The round ends as any other. */
  CU_ASSERT_EQUAL(store_round_fail(s, 1, "restart", 4.0), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM updates"), 0);
  store_close(s);
}

static int put_metric(store *s, int64_t round, int64_t client, const char *name,
                      double value) {
  return store_metrics_put(s, round, client, 1, &name, &value);
}

static void test_metrics_put_replace(void) {
  char path[256];
  store *s = open_fresh(path, sizeof path);
  CU_ASSERT_EQUAL(put_metric(s, 1, 5, "accuracy", 0.5), COHORT_OK);
  CU_ASSERT_EQUAL(put_metric(s, 1, 5, "loss", 2.0), COHORT_OK);
  CU_ASSERT_EQUAL(put_metric(s, 1, 6, "accuracy", 0.25), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM metrics"), 3);
  /* Same (round, client, name): replaced, not duplicated. */
  CU_ASSERT_EQUAL(put_metric(s, 1, 5, "accuracy", 0.9), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM metrics"), 3);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT value FROM metrics WHERE round = 1 AND "
                           "client_id = 5 AND name = 'accuracy'"),
      0.9, 0);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(path, "SELECT value FROM metrics WHERE round = 1 AND "
                           "client_id = 6 AND name = 'accuracy'"),
      0.25, 0);
  /* A report is all or nothing: a bad row (NULL name) rolls back the
   * metrics stored before it in the same call. */
  const char *names[] = {"fresh", NULL};
  const double values[] = {1.0, 2.0};
  CU_ASSERT_NOT_EQUAL(store_metrics_put(s, 2, 5, 2, names, values), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM metrics"), 3);
  CU_ASSERT_EQUAL(store_metrics_put(s, 2, 5, 1, names, values), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM metrics"), 4);
  store_close(s);
}

static void test_events(void) {
  char path[256], text[128];
  store *s = open_fresh(path, sizeof path);
  CU_ASSERT_EQUAL(store_event(s, 1.0, 3, "round_failed", "deadline"),
                  COHORT_OK);
  CU_ASSERT_EQUAL(store_event(s, 2.0, 0, "restart", "coordinator restarted"),
                  COHORT_OK);
  CU_ASSERT_STRING_EQUAL(
      db_peek_text(path,
                   "SELECT kind || ':' || round || ':' || detail FROM events "
                   "WHERE id = 1",
                   text, sizeof text),
      "round_failed:3:deadline");
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT round IS NULL FROM events WHERE id = 2"), 1);
  store_close(s);
}

/* A schema 10 database (clients, no record of failed rounds) upgrades:
 * its clients have failed no round, are excluded from nothing and have
 * shown no proof of possession yet (any proof renews them). */
static void test_v10_database_migrates(void) {
  char path[256], err[256] = "";
  store *s = open_fresh(path, sizeof path);
  int64_t a = 0;
  CU_ASSERT_EQUAL_FATAL(store_client_add(s, HASH_A, "", KEY_A, NULL, 1.0, &a),
                        COHORT_OK);
  store_close(s);
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL(sqlite3_exec(db,
                               CHECKSUM_V12 POSSESSION_V11 OFFENDERS_V10
                               "PRAGMA user_version = 10;",
                               NULL, NULL, NULL),
                  SQLITE_OK);
  sqlite3_close(db);
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(db_peek_int(path, "PRAGMA user_version"),
                  STORE_SCHEMA_VERSION);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT rounds_failed FROM clients"), 0);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT possession_ms FROM clients"), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT excluded_until IS NULL FROM clients"), 1);
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM client_failures"), 0);
  store_close(s);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"open creates the schema in WAL mode", test_open_creates_schema_in_wal},
      {"reopen keeps data", test_reopen_keeps_data},
      {"newer schema version is refused", test_newer_schema_refused},
      {"clients: identity keys and certificates, one client per key",
       test_client_identity},
      {"a schema 5 database upgrades to identity keys",
       test_v5_database_migrates},
      {"unopenable path fails with a reason",
       test_open_bad_path_fails_with_reason},
      {"clients add/find/touch, duplicate hash refused", test_clients_add_find},
      {"initial model put/latest/get round trip", test_model_round_trip},
      {"round commit writes model and COMMITTED together",
       test_round_commit_writes_model_and_state},
      {"commit of a missing round rolls back the model",
       test_commit_missing_round_rolls_back},
      {"NaN accuracy and loss stored as NULL",
       test_nan_accuracy_stored_as_null},
      {"fail_unfinished fails only unfinished rounds", test_fail_unfinished},
      {"participations select/uploaded", test_participations},
      {"writes nest in a batch as savepoints; a refused one takes back only "
       "itself, a rolled back batch everything",
       test_writes_nest_in_a_batch},
      {"store_begin_now does not wait for a write lock held elsewhere",
       test_begin_now_does_not_wait},
      {"an update's bytes are in its round's 0600 file, until the commit",
       test_upload_bytes_in_round_file},
      {"an update in chunks: a place reserved, written in any order, read "
       "back, named by its rows",
       test_update_in_chunks},
      {"kept updates are checked by their XXH64; a schema 12 row by its "
       "SHA-256",
       test_kept_update_checksums},
      {"a cut, changed or deleted round file passes no update",
       test_round_file_cut_or_gone},
      {"failing a round, and reopening after a crash, remove ended rounds' "
       "files",
       test_round_end_removes_files},
      {"an ended round's file is reused by the next from its start; stale "
       "bytes never pass; the spare goes at the coordinator's close, not an "
       "admin's",
       test_round_file_reused},
      {"a schema 8 database's kept updates (in rows) still resume",
       test_v8_blob_updates_resume},
      {"a schema 10 database upgrades to records of failed rounds",
       test_v10_database_migrates},
      {"metrics put and replace", test_metrics_put_replace},
      {"events recorded", test_events},
  };
  return test_add_suite("store", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
