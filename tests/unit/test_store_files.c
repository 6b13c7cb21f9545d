/* The database's files as an operator meets them: created private whatever
 * the umask, loose modes tightened, a read-only file refused by name, one
 * coordinator per database (the lock names its holder), a full database
 * marked fatal, old model versions pruned (never the latest nor a running
 * round's base), and a backup that is a private, consistent copy, never
 * made under one of the database's own file names. */
#include <CUnit/CUnit.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "log.h"
#include "store.h"
#include "store_lock.h"
#include "store_sql.h"

static char dir[128];
static int db_counter;

static int suite_init(void) {
  log_set_level(LOG_OFF); /* expected failures would log */
  return test_tmpdir_make(dir, sizeof dir, "store-files");
}

static int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

static void fresh_path(char *out, size_t len) {
  snprintf(out, len, "%s/db%d.sqlite", dir, ++db_counter);
}

static unsigned mode_of(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0xffffu;
}

static unsigned mode_of_suffix(const char *db, const char *suffix) {
  char path[512];
  snprintf(path, sizeof path, "%s%s", db, suffix);
  return mode_of(path);
}

/* A model of 64 bytes, distinct per version. */
static store_model model(int64_t version, int64_t parent) {
  store_model m = {.version = version, .round = version, .parent = parent};
  snprintf(m.spec, sizeof m.spec, "logreg");
  snprintf(m.sha256_hex, sizeof m.sha256_hex, "%064llx",
           (unsigned long long)version);
  m.blob = malloc(64);
  for (size_t i = 0; i < 64; i++)
    m.blob[i] = (uint8_t)(i + (size_t)version);
  m.blob_len = 64;
  return m;
}

/* Opens round `round` on base and commits it with model `version`. */
static void commit_round(store *s, int64_t round, int64_t base,
                         int64_t version) {
  CU_ASSERT_EQUAL_FATAL(
      store_round_open(s, round, base, "TRAIN", 1, NULL, (double)round),
      COHORT_OK);
  store_model m = model(version, base);
  store_round_result r = {.round = round, .finished_at = (double)round + 0.5};
  uint8_t state[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  store_server_state ss = {.strategy = state, .strategy_len = sizeof state};
  CU_ASSERT_EQUAL_FATAL(store_round_commit(s, &r, &m, &ss), COHORT_OK);
  store_model_clear(&m);
}

static store *open_store(const char *path) {
  store *s = NULL;
  char err[512] = "";
  int rc = store_open(path, &s, err, sizeof err);
  if (rc)
    fprintf(stderr, "store_open: %s\n", err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  return s;
}

/* A store on a fresh path holding the initial model, version 0. */
static store *open_with_initial(char *path, size_t len) {
  fresh_path(path, len);
  store *s = open_store(path);
  store_model m0 = model(0, -1);
  CU_ASSERT_EQUAL_FATAL(store_model_put_initial(s, &m0, 1.0), COHORT_OK);
  store_model_clear(&m0);
  return s;
}

static void test_created_private_under_open_umask(void) {
  char path[256];
  fresh_path(path, sizeof path);
  mode_t old = umask(0);
  store *s = open_store(path);
  store_model m0 = model(0, -1);
  CU_ASSERT_EQUAL(store_model_put_initial(s, &m0, 1.0), COHORT_OK);
  store_model_clear(&m0);
  CU_ASSERT_EQUAL(mode_of(path), 0600);
  CU_ASSERT_EQUAL(mode_of_suffix(path, "-wal"), 0600);
  CU_ASSERT_EQUAL(mode_of_suffix(path, "-shm"), 0600);
  store_close(s);
  umask(old);
}

static void test_loose_modes_tightened(void) {
  char path[256], updates[300];
  fresh_path(path, sizeof path);
  store_close(open_store(path));
  snprintf(updates, sizeof updates, "%s.updates", path);
  CU_ASSERT_EQUAL_FATAL(mkdir(updates, 0700), 0);
  CU_ASSERT_EQUAL_FATAL(chmod(path, 0644), 0);
  CU_ASSERT_EQUAL_FATAL(chmod(updates, 0755), 0);
  store *s = open_store(path);
  CU_ASSERT_EQUAL(mode_of(path), 0600);
  CU_ASSERT_EQUAL(mode_of(updates), 0700);
  store_close(s);
}

/* Root writes through any mode; test_dbops mounts the file read-only
 * instead. */
static const char *as_root(void) {
  return geteuid() == 0 ? "root writes through a 0400 mode (test_dbops "
                          "mounts the file read-only instead)"
                        : NULL;
}

static void test_read_only_file_refused_by_name(void) {
  char path[256], err[512] = "";
  fresh_path(path, sizeof path);
  store_close(open_store(path));
  CU_ASSERT_EQUAL_FATAL(chmod(path, 0400), 0);
  store *s = NULL;
  CU_ASSERT_NOT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "writing"));
}

/* --db naming a directory (or a FIFO) by mistake: refused by name, its
 * mode left alone. The tightening of loose modes made a directory 0600,
 * which no one but root could enter any more. */
static void test_directory_or_fifo_refused_mode_kept(void) {
  char path[256], err[512] = "";
  store *s = NULL;
  fresh_path(path, sizeof path);
  CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
  chmod(path, 0755); /* whatever the umask */
  CU_ASSERT_NOT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "is a directory"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
  CU_ASSERT_EQUAL(mode_of(path), 0755);
  rmdir(path);
  fresh_path(path, sizeof path);
  CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0644), 0);
  chmod(path, 0644);
  err[0] = '\0';
  CU_ASSERT_NOT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
  CU_ASSERT_EQUAL(mode_of(path), 0644);
  unlink(path);
  /* A file named like the updates folder is not made 0700 either, and is
   * refused at start (not at the first upload, with ENOTDIR). */
  char updates[300];
  fresh_path(path, sizeof path);
  snprintf(updates, sizeof updates, "%s.updates", path);
  FILE *f = fopen(updates, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fclose(f);
  chmod(updates, 0644);
  CU_ASSERT_NOT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "is not a directory"));
  CU_ASSERT_EQUAL(mode_of(updates), 0644);
  unlink(updates);
}

static void test_lock_refuses_second_holder_and_names_first(void) {
  char path[256], lock_path[300], err[512] = "", want[64];
  fresh_path(path, sizeof path);
  snprintf(lock_path, sizeof lock_path, "%s.lock", path);
  store_lock *first = NULL, *second = NULL;
  CU_ASSERT_EQUAL_FATAL(
      store_lock_take(path, "127.0.0.1:5555", &first, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL(mode_of(lock_path), 0600);
  store_lock_set_listen(first, "127.0.0.1:6666");
  /* flock belongs to the open file: a second open conflicts even here. */
  CU_ASSERT_EQUAL(
      store_lock_take(path, "127.0.0.1:7777", &second, err, sizeof err),
      COHORT_ESTATE);
  CU_ASSERT_PTR_NULL(second);
  snprintf(want, sizeof want, "pid %ld ", (long)getpid());
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "listening on 127.0.0.1:6666"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
  store_lock_release(first);
  CU_ASSERT_NOT_EQUAL(access(lock_path, F_OK), 0);
  CU_ASSERT_EQUAL(
      store_lock_take(path, "127.0.0.1:7777", &second, err, sizeof err),
      COHORT_OK);
  store_lock_release(second);
  store_lock_release(NULL);
}

static void test_full_database_is_fatal(void) {
  char path[256];
  fresh_path(path, sizeof path);
  store *s = open_store(path);
  CU_ASSERT_PTR_NULL(store_fatal(s));
  /* SQLite's own SQLITE_FULL, as on a full disk: the file may not grow. */
  int64_t pages = 0;
  CU_ASSERT_EQUAL_FATAL(store_get_int(s, "PRAGMA page_count", &pages),
                        COHORT_OK);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)pages + 2);
  CU_ASSERT_EQUAL_FATAL(store_exec(s, sql), COHORT_OK);
  int rc = COHORT_OK;
  for (int64_t v = 0; v < 64 && rc == COHORT_OK; v++) {
    store_model m = model(v, v - 1);
    m.blob = realloc(m.blob, 8192);
    m.blob_len = 8192;
    rc = store_model_put_initial(s, &m, 1.0);
    store_model_clear(&m);
  }
  CU_ASSERT_EQUAL(rc, COHORT_EDB);
  const char *why = store_fatal(s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "full"));
  store_close(s);
}

static void test_keep_models_spares_latest_and_running_base(void) {
  char path[256];
  store *s = open_with_initial(path, sizeof path);
  store_set_keep_models(s, 1);
  /* Round 1 stays unfinished on model 0 while rounds 2-4 commit 1-3. */
  CU_ASSERT_EQUAL_FATAL(store_round_open(s, 1, 0, "TRAIN", 1, NULL, 1.0),
                        COHORT_OK);
  for (int64_t v = 1; v <= 3; v++)
    commit_round(s, v + 1, v - 1, v);
  store_model got = {0};
  CU_ASSERT_EQUAL(store_model_get(s, 0, &got), COHORT_OK); /* round 1's */
  CU_ASSERT_EQUAL(got.blob_len, 64);
  store_model_clear(&got);
  CU_ASSERT_EQUAL(store_model_get(s, 1, &got), COHORT_ENOTFOUND);
  CU_ASSERT_EQUAL(store_model_get(s, 2, &got), COHORT_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(s), "pruned"));
  CU_ASSERT_EQUAL(store_model_latest(s, &got), COHORT_OK);
  CU_ASSERT_EQUAL(got.version, 3);
  CU_ASSERT_EQUAL(got.blob_len, 64);
  store_model_clear(&got);
  /* The rows stay for the record; the optimizer state only for the newest
   * kept. */
  CU_ASSERT_EQUAL(db_peek_int(path, "SELECT COUNT(*) FROM models"), 4);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT COUNT(*) FROM models WHERE size = 64"), 4);
  CU_ASSERT_EQUAL(
      db_peek_int(path, "SELECT group_concat(version) FROM strategy_state"), 3);
  store_close(s);
}

/* A database made with auto_vacuum gives pruned pages back at the next
 * checkpoint, so its file shrinks while the coordinator runs: the check
 * for a truncated database (store_file_lost) must not stop on that. A
 * plain database never shrinks, and truncating it is seen. */
static void test_self_vacuuming_database_may_shrink(void) {
  char path[256];
  fresh_path(path, sizeof path);
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL(
      sqlite3_exec(db, "PRAGMA auto_vacuum = FULL", NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(db);
  store *s = open_store(path);
  store_set_keep_models(s, 1);
  store_model m = model(0, -1);
  free(m.blob);
  m.blob_len = 1 << 20; /* pages enough to see the file shrink */
  m.blob = calloc(1, m.blob_len);
  CU_ASSERT_EQUAL_FATAL(store_model_put_initial(s, &m, 1.0), COHORT_OK);
  store_model_clear(&m);
  CU_ASSERT_PTR_NULL(store_file_lost(s));
  struct stat before, after;
  db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL(
      sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL),
      SQLITE_OK);
  CU_ASSERT_EQUAL(stat(path, &before), 0);
  CU_ASSERT_PTR_NULL(store_file_lost(s)); /* the size it has grown to */
  commit_round(s, 1, 0, 1);               /* prunes version 0's megabyte */
  CU_ASSERT_EQUAL(
      sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(db);
  CU_ASSERT_EQUAL(stat(path, &after), 0);
  CU_ASSERT(after.st_size < before.st_size);
  CU_ASSERT_PTR_NULL(store_file_lost(s));
  store_close(s);
  /* The same on a plain database is a truncation. */
  s = open_with_initial(path, sizeof path);
  CU_ASSERT_PTR_NULL(store_file_lost(s));
  CU_ASSERT_EQUAL(truncate(path, 0), 0);
  CU_ASSERT_PTR_NOT_NULL(store_file_lost(s));
  store_close(s);
}

static void test_keep_models_zero_keeps_all(void) {
  char path[256];
  store *s = open_with_initial(path, sizeof path);
  for (int64_t v = 1; v <= 3; v++)
    commit_round(s, v, v - 1, v);
  CU_ASSERT_EQUAL(db_peek_int(path,
                              "SELECT COUNT(*) FROM models WHERE length(params)"
                              " = 64"),
                  4);
  store_close(s);
}

static void test_backup_is_private_consistent_copy(void) {
  char path[256], copy[300], err[512] = "";
  store *s = open_with_initial(path, sizeof path);
  snprintf(copy, sizeof copy, "%s.backup", path);
  commit_round(s, 1, 0, 1);
  commit_round(s, 2, 1, 2);
  mode_t old = umask(0);
  /* The store stays open: a live database, its last rows still in the WAL. */
  CU_ASSERT_EQUAL_FATAL(store_backup(path, copy, err, sizeof err), COHORT_OK);
  umask(old);
  CU_ASSERT_EQUAL(mode_of(copy), 0600);
  CU_ASSERT_EQUAL(mode_of_suffix(copy, "-wal"), 0xffffu); /* one file */
  CU_ASSERT_EQUAL(mode_of_suffix(copy, ".tmp"), 0xffffu);
  store *back = NULL;
  CU_ASSERT_EQUAL_FATAL(store_open_readonly(copy, &back, err, sizeof err),
                        COHORT_OK);
  int64_t n = 0;
  CU_ASSERT_EQUAL(store_round_count_committed(back, &n), COHORT_OK);
  CU_ASSERT_EQUAL(n, 2);
  store_model got = {0};
  CU_ASSERT_EQUAL(store_model_latest(back, &got), COHORT_OK);
  CU_ASSERT_EQUAL(got.version, 2);
  store_model_clear(&got);
  store_close(back);
  /* An existing file is never overwritten. */
  CU_ASSERT_EQUAL(store_backup(path, copy, err, sizeof err), COHORT_EINVAL);
  /* A backup killed mid-copy leaves FILE.tmp, which the next one does not
   * overwrite either: it says what the file is and what to do. */
  char other[320], tmp[330];
  snprintf(other, sizeof other, "%s.second", path);
  snprintf(tmp, sizeof tmp, "%s.tmp", other);
  FILE *f = fopen(tmp, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fclose(f);
  CU_ASSERT_NOT_EQUAL(store_backup(path, other, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "was stopped before it finished"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "remove it"));
  CU_ASSERT_EQUAL(mode_of(other), 0xffffu);
  CU_ASSERT_NOT_EQUAL(mode_of(tmp), 0xffffu); /* left for the operator */
  store_close(s);
}

/* A name SQLite reads as a URI opened another file than the one whose
 * modes, lock and updates folder the store keeps (x.db under the umask,
 * beside a stray "file:x.db.updates"): refused, nothing made. */
static void test_uri_name_refused_before_anything_is_made(void) {
  char file[256], uri[300], plain[256], err[512] = "";
  fresh_path(file, sizeof file);
  snprintf(uri, sizeof uri, "file:%s", file);
  store *s = NULL;
  mode_t old = umask(0);
  CU_ASSERT_EQUAL(store_open(uri, &s, err, sizeof err), COHORT_EINVAL);
  umask(old);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "URI"));
  CU_ASSERT_EQUAL(mode_of(file), 0xffffu);
  CU_ASSERT_EQUAL(mode_of_suffix(uri, ".updates"), 0xffffu);
  CU_ASSERT_EQUAL(store_open_readonly(uri, &s, err, sizeof err), COHORT_EINVAL);
  /* A backup from or to such a name: refused too. */
  s = open_with_initial(plain, sizeof plain);
  CU_ASSERT_EQUAL(store_backup(plain, uri, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mode_of(file), 0xffffu);
  store_close(s);
}

/* With the coordinator stopped DB-wal and DB-shm do not exist; a copy
 * made there was taken by SQLite for DB's log and reset at the next start
 * (DB-journal deleted as a hot journal, DB.updates/ pruned). */
static void test_backup_refuses_the_databases_own_names(void) {
  char path[256], copy[300], err[512] = "";
  store *s = open_with_initial(path, sizeof path);
  commit_round(s, 1, 0, 1);
  store_close(s);
  CU_ASSERT_EQUAL(mode_of_suffix(path, "-wal"), 0xffffu);
  snprintf(copy, sizeof copy, "%s.updates", path);
  mkdir(copy, 0700); /* made at the first upload */
  const char *suffixes[] = {"-wal", "-shm", "-journal", ".lock",
                            ".updates/round-1"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    snprintf(copy, sizeof copy, "%s%s", path, suffixes[i]);
    err[0] = '\0';
    CU_ASSERT_EQUAL(store_backup(path, copy, err, sizeof err), COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "give another file name"));
    CU_ASSERT_EQUAL(mode_of(copy), 0xffffu);
    CU_ASSERT_EQUAL(mode_of_suffix(copy, ".tmp"), 0xffffu);
  }
  /* The same names reached through another spelling of the folder. */
  char *slash = strrchr(path, '/');
  snprintf(copy, sizeof copy, "%.*s/./%s-wal", (int)(slash - path), path,
           slash + 1);
  CU_ASSERT_EQUAL(store_backup(path, copy, err, sizeof err), COHORT_EINVAL);
  /* A name that only starts like them is a file like any other. */
  snprintf(copy, sizeof copy, "%s-wal.backup", path);
  CU_ASSERT_EQUAL(store_backup(path, copy, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(mode_of(copy), 0600);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"database, -wal and -shm are 0600 under umask 0",
       test_created_private_under_open_umask},
      {"an existing database and updates folder with loose modes are "
       "tightened",
       test_loose_modes_tightened},
      {"a read-only database is refused, naming the file",
       test_read_only_file_refused_by_name, as_root},
      {"a directory or FIFO given as the database is refused, its mode "
       "kept",
       test_directory_or_fifo_refused_mode_kept},
      {"the lock refuses a second holder and names the first",
       test_lock_refuses_second_holder_and_names_first},
      {"SQLITE_FULL marks the store fatal", test_full_database_is_fatal},
      {"--keep-models prunes, sparing the latest and a running round's base",
       test_keep_models_spares_latest_and_running_base},
      {"--keep-models 0 keeps every version", test_keep_models_zero_keeps_all},
      {"a name SQLite reads as a URI is refused before anything is made",
       test_uri_name_refused_before_anything_is_made},
      {"a self-vacuuming database may shrink; a plain one truncated is lost",
       test_self_vacuuming_database_may_shrink},
      {"a backup of a live store is a 0600, self-contained, consistent copy",
       test_backup_is_private_consistent_copy},
      {"a backup refuses the database's own -wal, -shm, -journal, .lock "
       "and .updates/ names",
       test_backup_refuses_the_databases_own_names},
  };
  return test_add_suite("store files", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
