/* The store's WAL checkpoints run on their own thread (store_checkpoint.h):
 * commits that take the WAL past 1,000 pages wake it, the WAL stays
 * bounded while the store writes, the store's own connection runs no
 * checkpoint, and everything written reads back after a close. */
#include <CUnit/CUnit.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "log.h"
#include "store.h"
#include "store_sql.h"

static char dir[128];

static int suite_init(void) {
  log_set_level(LOG_OFF);
  return test_tmpdir_make(dir, sizeof dir, "store-ckpt");
}

static int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* 40 bursts of 32 commits of 32 KB each, 40 MB in all, with a pause
 * between bursts as between a round's uploads: the WAL, which SQLite
 * would not checkpoint by itself (wal_autocheckpoint 0 on the store's
 * connection), stays a few MB. */
static void test_wal_checkpointed_by_its_thread(void) {
  char path[256], wal[300], err[256] = "";
  snprintf(path, sizeof path, "%s/ckpt.sqlite", dir);
  snprintf(wal, sizeof wal, "%s-wal", path);
  store *s = NULL;
  CU_ASSERT_EQUAL_FATAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s->checkpointer);
  CU_ASSERT_EQUAL_FATAL(sqlite3_exec(s->db,
                                     "CREATE TABLE t(k INTEGER PRIMARY KEY, "
                                     "v BLOB)",
                                     NULL, NULL, NULL),
                        SQLITE_OK);
  /* The store's connection hands checkpoints off: its automatic ones are
   * off (SQLite reports 0 while another hook than its own is set). */
  sqlite3_stmt *st;
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_prepare_v2(s->db, "PRAGMA wal_autocheckpoint", -1, &st, NULL),
      SQLITE_OK);
  CU_ASSERT_EQUAL(sqlite3_step(st), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 0), 0);
  sqlite3_finalize(st);
  long long largest = 0;
  for (int burst = 0; burst < 40; burst++) {
    for (int i = 0; i < 32; i++) {
      char sql[128];
      snprintf(sql, sizeof sql, "INSERT INTO t(k, v) VALUES (%d, zeroblob(%d))",
               burst * 32 + i, 32 * 1024);
      CU_ASSERT_EQUAL_FATAL(sqlite3_exec(s->db, sql, NULL, NULL, NULL),
                            SQLITE_OK);
    }
    long long n = file_size(wal);
    largest = n > largest ? n : largest;
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  printf("\n    checkpoints run: %lu, largest WAL %.1f MB ",
         store_checkpointer_runs(s->checkpointer), largest / 1e6);
  CU_ASSERT(store_checkpointer_runs(s->checkpointer) >= 5);
  CU_ASSERT(largest < 16 * 1000 * 1000);
  store_close(s);
  /* Every row is there after the close. */
  sqlite3 *db = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_prepare_v2(db, "SELECT COUNT(*), SUM(length(v)) FROM t", -1, &st,
                         NULL),
      SQLITE_OK);
  CU_ASSERT_EQUAL(sqlite3_step(st), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_column_int(st, 0), 40 * 32);
  CU_ASSERT_EQUAL(sqlite3_column_int64(st, 1), 40LL * 32 * 32 * 1024);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"commits past 1,000 WAL pages wake the checkpoint thread: 40 MB of "
       "commits leave the WAL under 16 MB, every row reads back",
       test_wal_checkpointed_by_its_thread},
  };
  return test_add_suite("store checkpoints", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
