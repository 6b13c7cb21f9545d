/* The store's kept statements (server/store_stmt.c): handed out again
 * reset and unbound, never twice at once, bounded in number, and all
 * finalized before the connection closes; and a kept PRAGMA still takes
 * effect each time (SQLite carries out PRAGMA synchronous=FULL while
 * compiling it: were it not compiled again, a round's commit would run at
 * NORMAL). */
#include <CUnit/CUnit.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "log.h"
#include "store.h"
#include "store_sql.h"

static char dir[128];
static int db_counter;

static int suite_init(void) {
  log_set_level(LOG_OFF); /* the refused COMMIT below would log */
  return test_tmpdir_make(dir, sizeof dir, "store-stmt");
}

static int suite_cleanup(void) {
  test_tmpdir_remove(dir);
  return 0;
}

static store *open_fresh(void) {
  char path[256], err[256] = "";
  snprintf(path, sizeof path, "%s/db%d.sqlite", dir, ++db_counter);
  store *s = NULL;
  CU_ASSERT_EQUAL(store_open(path, &s, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  return s;
}

/* Statements alive on the connection, kept or not. */
static int statements_alive(sqlite3 *db) {
  int n = 0;
  for (sqlite3_stmt *st = sqlite3_next_stmt(db, NULL); st;
       st = sqlite3_next_stmt(db, st))
    n++;
  return n;
}

/* The connection's synchronous level, read by a statement compiled now. */
static int synchronous_level(sqlite3 *db) {
  sqlite3_stmt *st;
  int level = -1;
  if (sqlite3_prepare_v2(db, "PRAGMA synchronous", -1, &st, NULL) ==
      SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      level = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
  }
  return level;
}

static void test_kept_statement_comes_back_reset_and_unbound(void) {
  store *s = open_fresh();
  sqlite3_stmt *first, *again;
  CU_ASSERT_EQUAL_FATAL(store_prepare(s, "SELECT ?1", &first), COHORT_OK);
  sqlite3_bind_int(first, 1, 7);
  CU_ASSERT_EQUAL(sqlite3_step(first), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_column_int(first, 0), 7);
  store_release(s, first); /* mid-result: released before SQLITE_DONE */
  CU_ASSERT_EQUAL_FATAL(store_prepare(s, "SELECT ?1", &again), COHORT_OK);
  CU_ASSERT_PTR_EQUAL(again, first);
  CU_ASSERT_EQUAL(sqlite3_step(again), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_column_type(again, 0), SQLITE_NULL);
  store_release(s, again);
  store_close(s);
}

static void test_statement_in_use_is_not_handed_out_twice(void) {
  store *s = open_fresh();
  const int alive = statements_alive(s->db);
  sqlite3_stmt *outer, *inner;
  CU_ASSERT_EQUAL_FATAL(store_prepare(s, "SELECT ?1", &outer), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_prepare(s, "SELECT ?1", &inner), COHORT_OK);
  CU_ASSERT_PTR_NOT_EQUAL(inner, outer);
  sqlite3_bind_int(outer, 1, 1);
  sqlite3_bind_int(inner, 1, 2);
  CU_ASSERT_EQUAL(sqlite3_step(outer), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_step(inner), SQLITE_ROW);
  CU_ASSERT_EQUAL(sqlite3_column_int(outer, 0), 1);
  CU_ASSERT_EQUAL(sqlite3_column_int(inner, 0), 2);
  store_release(s, inner);
  store_release(s, outer);
  /* The first is kept; the second, made while the first was out, is
   * finalized, so using a statement in a loop of its own leaks nothing. */
  CU_ASSERT_EQUAL(statements_alive(s->db), alive + 1);
  store_close(s);
}

static void test_durable_transaction_is_full_every_time(void) {
  store *s = open_fresh();
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL_FATAL(store_begin_durable(s), COHORT_OK);
    CU_ASSERT_EQUAL(synchronous_level(s->db), 2); /* FULL */
    CU_ASSERT_EQUAL(store_finish_durable(s, COHORT_OK), COHORT_OK);
    CU_ASSERT_EQUAL(synchronous_level(s->db), 1); /* NORMAL */
  }
  store_close(s);
}

static void test_kept_statements_are_bounded(void) {
  store *s = open_fresh();
  for (int i = 0; i < STORE_KEPT_MAX + 50; i++) {
    char sql[32];
    snprintf(sql, sizeof sql, "SELECT %d", i);
    int64_t v = -1;
    CU_ASSERT_EQUAL(store_get_int(s, sql, &v), COHORT_OK);
    CU_ASSERT_EQUAL(v, i);
  }
  CU_ASSERT_EQUAL(s->n_kept, STORE_KEPT_MAX);
  CU_ASSERT_EQUAL(statements_alive(s->db), STORE_KEPT_MAX);
  store_release_all(s);
  CU_ASSERT_EQUAL(statements_alive(s->db), 0);
  store_close(s);
}

static void test_failed_statement_names_the_problem_each_time(void) {
  store *s = open_fresh();
  for (int i = 0; i < 2; i++) { /* compiled, then kept */
    CU_ASSERT_EQUAL(store_exec(s, "COMMIT"), COHORT_EDB);
    CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(s), "no transaction"));
  }
  CU_ASSERT_EQUAL(store_exec(s, "BEGIN IMMEDIATE"), COHORT_OK);
  CU_ASSERT_EQUAL(store_exec(s, "COMMIT"), COHORT_OK);
  store_close(s);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a kept statement comes back reset and without its bindings",
       test_kept_statement_comes_back_reset_and_unbound},
      {"a statement in use is not handed out twice, and the extra one is "
       "finalized",
       test_statement_in_use_is_not_handed_out_twice},
      {"a kept PRAGMA takes effect each time: each durable transaction runs "
       "at synchronous=FULL",
       test_durable_transaction_is_full_every_time},
      {"at most STORE_KEPT_MAX statements are kept, all finalized at close",
       test_kept_statements_are_bounded},
      {"a failed statement names the problem, compiled or kept",
       test_failed_statement_names_the_problem_each_time},
  };
  return test_add_suite("store statements", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
