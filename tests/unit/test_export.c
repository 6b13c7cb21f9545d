/* Tests of cohort-server --export (export_model): a committed model of a
 * coordinator's database, written by the round engine, comes out as a
 * safetensors file that loads back to exactly the stored parameters with
 * its version, round and digest in the metadata; bad databases, versions
 * and tampered models are refused with a reason and no file. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "export.h"
#include "log.h"
#include "nn_model_io.h"
#include "nn_safetensors.h"
#include "round.h"
#include "sign.h"
#include "store.h"
#include "wire.h"

#define NP 7850 /* logreg 784 -> 10 */
#define MODEL_BYTES (NP * 4)
#define ENROLL "export-test-enrollment"

static char dir[128];
static char db_path[256];

/* One coordinator's database with model 0 (initial) and model 1 (from one
 * committed round), made by the round engine as cohort-server makes it. */
static int make_database(const char *path) {
  store *db = NULL;
  round_engine *e = NULL;
  char err[256] = "";
  round_config cfg;
  round_config_init(&cfg);
  cfg.rounds = 1;
  cfg.clients_per_round = 1;
  cfg.round_timeout_s = 30;
  cfg.seed = 7;
  int rc = store_open(path, &db, err, sizeof err);
  if (!rc)
    rc = round_engine_new(&cfg, db, &e, err, sizeof err);
  if (!rc)
    rc = round_add_enrollment_token(e, ENROLL);
  int64_t client = 0;
  char token[65];
  uint8_t seed[SIGN_SEED_LEN] = {7}, pub[SIGN_PUBLIC_LEN];
  sign_key *identity = NULL;
  if (!rc)
    rc = sign_key_from_seed(seed, &identity);
  round_registration reg = {.enrollment_token = ENROLL,
                            .platform = "test",
                            .identity_key = pub,
                            .identity_key_len = sizeof pub};
  if (!rc) {
    sign_key_public(identity, pub);
    rc = round_register(e, &reg, &client, token).code;
  }
  sign_key_free(identity);
  checkin_result cr;
  if (!rc)
    rc = round_tick(e);
  if (!rc)
    rc = round_checkin(e, client, 10, 0, NULL, NULL, &cr).code;
  if (!rc)
    rc = cr.kind == CHECKIN_TASK ? round_tick(e) : -1;
  static float delta[NP];
  static uint8_t blob[MODEL_BYTES];
  uint8_t sha[32];
  for (size_t i = 0; i < NP; i++)
    delta[i] = 0.01f * (float)((int)(i % 9) - 4);
  wire_put_f32le(blob, delta, NP);
  crypto_sha256(blob, MODEL_BYTES, sha);
  upload_chunk c = {.round = 1,
                    .total_size = MODEL_BYTES,
                    .data = blob,
                    .len = MODEL_BYTES,
                    .sha256 = sha,
                    .sha256_len = 32,
                    .num_examples = 10,
                    .wire_bytes = MODEL_BYTES};
  uint64_t next = 0;
  int complete = 0;
  if (!rc)
    rc = round_upload(e, client, &c, &next, &complete).code;
  if (!rc)
    rc = round_tick(e);
  if (!rc && round_committed(e) != 1)
    rc = -1;
  if (rc)
    fprintf(stderr, "make_database: %d %s\n", rc, err);
  round_engine_free(e);
  store_close(db);
  return rc;
}

static int suite_init(void) {
  log_set_level(LOG_OFF);
  if (test_tmpdir_make(dir, sizeof dir, "export"))
    return -1;
  snprintf(db_path, sizeof db_path, "%s/coordinator.sqlite", dir);
  return make_database(db_path);
}

static int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* A copy of the suite's database (with its WAL folded in) at path, to
 * tamper with. */
static int copy_database(const char *path) {
  sqlite3 *src = NULL;
  char sql[400];
  snprintf(sql, sizeof sql, "VACUUM INTO '%s'", path);
  int rc = sqlite3_open_v2(db_path, &src, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(src, sql, NULL, NULL, NULL);
  sqlite3_close(src);
  return rc;
}

static int db_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_close(db);
  return rc;
}

/* Exports `version` and checks the file against the stored model. */
static void check_export(const char *version, int64_t want_version,
                         int64_t want_round) {
  char file[300], err[256] = "";
  snprintf(file, sizeof file, "%s/model-%s.safetensors", dir, version);
  CU_ASSERT_EQUAL_FATAL(export_model(db_path, version, file, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_TRUE(exists(file));

  store *db = NULL;
  store_model sm = {0};
  CU_ASSERT_EQUAL_FATAL(store_open(db_path, &db, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_model_get(db, want_version, &sm), COHORT_OK);
  store_close(db);
  CU_ASSERT_EQUAL_FATAL(sm.blob_len, MODEL_BYTES);

  nn_model m;
  CU_ASSERT_EQUAL_FATAL(nn_zoo_resolve("logreg",
                                       (nn_shape){.c = 1, .h = 28, .w = 28}, 10,
                                       &m, err, sizeof err),
                        COHORT_OK);
  float *got = malloc(MODEL_BYTES), *want = malloc(MODEL_BYTES);
  CU_ASSERT_FATAL(got && want);
  CU_ASSERT_EQUAL(nn_model_load(&m, got, file, err, sizeof err), COHORT_OK);
  wire_get_f32le(want, sm.blob, NP);
  CU_ASSERT_EQUAL(memcmp(got, want, MODEL_BYTES), 0);

  nn_st_file st;
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(file, &st, err, sizeof err),
                        COHORT_OK);
  char text[32];
  const char *v = nn_st_meta_get(&st, "version");
  snprintf(text, sizeof text, "%lld", (long long)want_version);
  CU_ASSERT_PTR_NOT_NULL(v);
  if (v)
    CU_ASSERT_STRING_EQUAL(v, text);
  const char *r = nn_st_meta_get(&st, "round");
  snprintf(text, sizeof text, "%lld", (long long)want_round);
  CU_ASSERT_PTR_NOT_NULL(r);
  if (r)
    CU_ASSERT_STRING_EQUAL(r, text);
  const char *sha = nn_st_meta_get(&st, "sha256");
  CU_ASSERT_PTR_NOT_NULL(sha);
  if (sha)
    CU_ASSERT_STRING_EQUAL(sha, sm.sha256_hex);
  /* The digest is of the stored bytes, which the file's data equal. */
  uint8_t digest[32];
  char hex[65];
  crypto_sha256(sm.blob, sm.blob_len, digest);
  crypto_hex(digest, sizeof digest, hex);
  CU_ASSERT_STRING_EQUAL(hex, sm.sha256_hex);
  const char *spec = nn_st_meta_get(&st, "model_spec");
  CU_ASSERT_PTR_NOT_NULL(spec);
  if (spec)
    CU_ASSERT_STRING_EQUAL(spec, "logreg");
  nn_safetensors_free(&st);
  store_model_clear(&sm);
  free(got);
  free(want);
}

static void test_export_latest(void) { check_export("latest", 1, 1); }

static void test_export_initial(void) { check_export("0", 0, 0); }

static void test_export_latest_is_its_number(void) {
  char a[300], b[300], err[256];
  snprintf(a, sizeof a, "%s/diff-latest.safetensors", dir);
  snprintf(b, sizeof b, "%s/diff-1.safetensors", dir);
  CU_ASSERT_EQUAL_FATAL(export_model(db_path, "latest", a, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(export_model(db_path, "1", b, err, sizeof err),
                        COHORT_OK);
  nn_st_file fa, fb;
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(a, &fa, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(b, &fb, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(fa.n_floats, NP);
  CU_ASSERT_EQUAL(fb.n_floats, NP);
  CU_ASSERT_EQUAL(memcmp(fa.data, fb.data, MODEL_BYTES), 0);
  nn_safetensors_free(&fa);
  nn_safetensors_free(&fb);
}

/* A refused export: a non-zero status, a reason containing `needle`, and
 * no file (an existing one left as it was). */
static void refused(const char *db, const char *version, const char *needle) {
  char file[300], err[256] = "";
  snprintf(file, sizeof file, "%s/refused.safetensors", dir);
  unlink(file);
  CU_ASSERT_NOT_EQUAL(export_model(db, version, file, err, sizeof err),
                      COHORT_OK);
  CU_ASSERT_NOT_EQUAL(err[0], '\0');
  CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
  if (!strstr(err, needle))
    fprintf(stderr, "\n  export %s %s: '%s' lacks '%s'\n", db, version, err,
            needle);
  CU_ASSERT_FALSE(exists(file));
  /* Nor is an existing file replaced. */
  FILE *fp = fopen(file, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fputs("keep", fp);
  fclose(fp);
  CU_ASSERT_NOT_EQUAL(export_model(db, version, file, err, sizeof err),
                      COHORT_OK);
  char buf[16] = "";
  fp = fopen(file, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  CU_ASSERT_PTR_NOT_NULL(fgets(buf, sizeof buf, fp));
  fclose(fp);
  CU_ASSERT_STRING_EQUAL(buf, "keep");
  unlink(file);
}

static void test_export_missing_database(void) {
  char missing[300];
  snprintf(missing, sizeof missing, "%s/no-such.sqlite", dir);
  refused(missing, "latest", "no-such.sqlite");
  /* The export did not create it either. */
  CU_ASSERT_FALSE(exists(missing));
}

static void test_export_bad_version_text(void) {
  const char *bad[] = {"x",      "-1",  "",
                       "1x",     " 1",  "+1",
                       "LATEST", "0x1", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    refused(db_path, bad[i], "expected a number or 'latest'");
}

static void test_export_unknown_version(void) {
  refused(db_path, "99", "no model version 99");
  refused(db_path, "2", "no model version 2");
}

/* A version --keep-models pruned keeps its row with empty parameters: the
 * refusal says so, rather than that there is no such version. */
static void test_export_pruned_version(void) {
  char copy[300];
  snprintf(copy, sizeof copy, "%s/pruned.sqlite", dir);
  unlink(copy);
  CU_ASSERT_EQUAL_FATAL(copy_database(copy), SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(
      db_exec(copy, "UPDATE models SET params = x'' WHERE version = 0"),
      SQLITE_OK);
  refused(copy, "0", "model version 0 in");
  refused(copy, "0", "was pruned (--keep-models)");
  refused(copy, "2", "no model version 2");
}

static void test_export_tampered_model(void) {
  char copy[300];
  snprintf(copy, sizeof copy, "%s/tampered.sqlite", dir);
  unlink(copy);
  CU_ASSERT_EQUAL_FATAL(copy_database(copy), SQLITE_OK);
  /* The right size, other bytes: the digest no longer matches. */
  CU_ASSERT_EQUAL_FATAL(
      db_exec(copy, "UPDATE models SET params = zeroblob(31400) WHERE "
                    "version = 1"),
      SQLITE_OK);
  refused(copy, "latest", "SHA-256");
  refused(copy, "1", "SHA-256");
  /* The other model is untouched and still exports. */
  char file[300], err[256];
  snprintf(file, sizeof file, "%s/from-tampered-0.safetensors", dir);
  CU_ASSERT_EQUAL(export_model(copy, "0", file, err, sizeof err), COHORT_OK);
  /* The wrong size. */
  CU_ASSERT_EQUAL_FATAL(
      db_exec(copy, "UPDATE models SET params = x'00010203' WHERE version = 0"),
      SQLITE_OK);
  refused(copy, "0", "size");
}

static void test_export_not_a_coordinator_database(void) {
  /* Not a database at all. */
  char junk[300];
  snprintf(junk, sizeof junk, "%s/junk.sqlite", dir);
  FILE *fp = fopen(junk, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  for (int i = 0; i < 200; i++)
    fputs("this is not an SQLite database. ", fp);
  fclose(fp);
  char file[300], err[256] = "";
  snprintf(file, sizeof file, "%s/junk.safetensors", dir);
  CU_ASSERT_NOT_EQUAL(export_model(junk, "latest", file, err, sizeof err),
                      COHORT_OK);
  CU_ASSERT_NOT_EQUAL(err[0], '\0');
  CU_ASSERT_FALSE(exists(file));
  /* A database without the federation's settings does not say which model
   * it holds. */
  char bare[300];
  snprintf(bare, sizeof bare, "%s/bare.sqlite", dir);
  unlink(bare);
  CU_ASSERT_EQUAL_FATAL(copy_database(bare), SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(db_exec(bare, "DELETE FROM settings"), SQLITE_OK);
  refused(bare, "latest", "settings");
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"export latest: parameters and metadata exact", test_export_latest},
      {"export version 0: the initial model", test_export_initial},
      {"'latest' and its number give the same file",
       test_export_latest_is_its_number},
      {"missing database refused, not created", test_export_missing_database},
      {"bad version text refused", test_export_bad_version_text},
      {"unknown version refused", test_export_unknown_version},
      {"pruned version refused as pruned", test_export_pruned_version},
      {"tampered model refused, no file", test_export_tampered_model},
      {"non-database and settings-less database refused",
       test_export_not_a_coordinator_database},
  };
  return test_add_suite("export", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
