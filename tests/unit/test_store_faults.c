/* A disk that fills up or fails, and a database another connection holds
 * locked, met by the round engine in the middle of a federation (issue 21,
 * Faults). The store goes through a VFS that fails writes or syncs on demand
 * (tests/support/faulty_vfs.c), so the failure lands exactly on the call
 * under test. Every failing call must return an error that names the
 * problem, the engine must not crash or run ahead of the store, nothing
 * half-written may be visible, and once the fault is gone the database must
 * pass integrity_check with every committed round, model and privacy-ledger
 * row unchanged, and the federation must go on. */
#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "faulty_vfs.h"
#include "round.h"
#include "round_fixture.h"
#include "store.h"

/* A fixture whose store goes through the faulty VFS and waits briefly for
 * locks, with n clients registered. */
static void open_faulty(fixture *f, int n, int rounds) {
  CU_ASSERT_EQUAL_FATAL(faulty_vfs_register(), SQLITE_OK);
  store_options o = {.vfs = FAULTY_VFS, .busy_timeout_ms = 100};
  CU_ASSERT_EQUAL_FATAL(fx_init_with(f, &o), 0);
  f->cfg.rounds = rounds;
  /* Central DP, so that each commit writes a privacy-ledger row too;
   * every client that checks in joins (q = 1). */
  f->cfg.dp = ROUND_DP_CENTRAL;
  f->cfg.dp_noise_multiplier = 0.5;
  f->cfg.dp_clip = 1;
  f->cfg.dp_population = f->cfg.clients_per_round;
  CU_ASSERT_EQUAL_FATAL(fx_start(f, n), 0);
}

/* PRAGMA integrity_check on a connection of its own: "ok". */
static void assert_intact(fixture *f) {
  char text[256];
  db_peek_text(f->path, "PRAGMA integrity_check", text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "ok");
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM pragma_foreign_key_check"), 0);
}

/* What must never change once committed: each committed round's model
 * version and digest, and the ledger's rows, as one text. */
static void durable_text(fixture *f, char *out, size_t len) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  size_t used = 0;
  out[0] = '\0';
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  const char *sql =
      "SELECT 'round ' || r.id || ' model ' || m.version || ' ' || m.sha256"
      " || ' ' || hex(sha3(m.params)) FROM rounds r JOIN models m"
      " ON m.version = r.model_version WHERE r.state = 'COMMITTED'"
      " UNION ALL SELECT 'ledger ' || round || ' ' || mode || ' ' || epsilon"
      " || ' ' || noise_multiplier || ' ' || cohort_size FROM privacy_ledger"
      " ORDER BY 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    /* No sha3() in this SQLite: the stored digest stands for the bytes. */
    sql = "SELECT 'round ' || r.id || ' model ' || m.version || ' ' ||"
          " m.sha256 || ' ' || length(m.params) FROM rounds r JOIN models m"
          " ON m.version = r.model_version WHERE r.state = 'COMMITTED'"
          " UNION ALL SELECT 'ledger ' || round || ' ' || mode || ' ' ||"
          " epsilon || ' ' || noise_multiplier || ' ' || cohort_size FROM"
          " privacy_ledger ORDER BY 1";
    CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(db, sql, -1, &st, NULL),
                          SQLITE_OK);
  }
  while (sqlite3_step(st) == SQLITE_ROW && used + 1 < len) {
    int n = snprintf(out + used, len - used, "%s\n",
                     (const char *)sqlite3_column_text(st, 0));
    used += n > 0 ? (size_t)n : 0;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

/* Every line of before is a line of after: nothing durable changed or
 * went away, whatever was added. */
static int keeps_all(const char *before, const char *after) {
  for (const char *l = before; *l;) {
    const char *nl = strchr(l, '\n');
    size_t n = nl ? (size_t)(nl - l) + 1 : strlen(l);
    int found = 0;
    for (const char *p = after; *p && !found;) {
      const char *q = strchr(p, '\n');
      size_t m = q ? (size_t)(q - p) + 1 : strlen(p);
      found = m == n && strncmp(p, l, n) == 0;
      p += m;
    }
    if (!found)
      return 0;
    l += n;
  }
  return 1;
}

/* A new client's Register (identity 9, always the same: a refused one may
 * be sent again). */
static round_verdict register_new(fixture *f) {
  uint8_t key[SIGN_PUBLIC_LEN];
  fx_identity(9, NULL, key);
  round_registration reg = fx_registration(ENROLL, key);
  int64_t id = 0;
  char token[65];
  return round_register(f->e, &reg, &id, token);
}

/* Round r (already TRAINING with clients 0 and 1) gets both updates. */
static void upload_both(fixture *f, int64_t r) {
  update *u0 = make_update(0), *u1 = make_update(1);
  CU_ASSERT_EQUAL(send_all(f, f->id[0], r, u0, 100).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(send_all(f, f->id[1], r, u1, 100).code, GRPC_STATUS_OK);
  free(u0);
  free(u1);
}

/* The engine serves model `version` with the stored digest of that
 * version: it has not moved on to a model the store does not hold. */
static void assert_serves(fixture *f, int64_t version) {
  static uint8_t buf[MODEL_BYTES];
  size_t len = 0;
  uint64_t total = 0;
  uint8_t sha[32];
  round_verdict v = round_get_model(f->e, f->id[0], version, 0, buf, sizeof buf,
                                    &len, &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  char hex[65], stored[65];
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", sha[i]);
  CU_ASSERT_EQUAL_FATAL(stored_model(f, version, NULL, NULL, NULL, stored), 0);
  CU_ASSERT_STRING_EQUAL(hex, stored);
  v = round_get_model(f->e, f->id[0], version + 1, 0, buf, sizeof buf, &len,
                      &total, sha);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_NOT_FOUND);
}

/* A fault (rc on the operations in mask, after `after` of them succeed)
 * during the tick that ends round 2: moving it to AGGREGATING, then the
 * commit's transaction. When it lands, the tick fails with the store's
 * reason (fatal, the coordinator's signal to stop, unless a lock); round 2
 * is not committed, model 2 does not exist, and the engine still serves
 * model 1; once the fault is gone a restarted coordinator commits round 2
 * from the kept updates. Returns whether the fault landed. */
static int tick_meets_fault(int mask, int rc, int after, const char *words,
                            int fatal) {
  fixture f;
  open_faulty(&f, 2, 3);
  start_round(&f, 1);
  upload_both(&f, 1);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  char before[2048];
  durable_text(&f, before, sizeof before);
  CU_ASSERT_PTR_NOT_NULL(strstr(before, "round 1 model 1 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(before, "ledger 1 central "));

  start_round(&f, 2);
  upload_both(&f, 2);
  faulty_vfs_arm(mask, rc, after);
  int tick = round_tick(f.e);
  int landed = faulty_vfs_failures() > 0;
  faulty_vfs_disarm();
  if (!landed) { /* past the tick's last such operation */
    CU_ASSERT_EQUAL(tick, COHORT_OK);
    ASSERT_ROUND_STATE(f, 2, "COMMITTED");
    fx_close(&f);
    return 0;
  }
  CU_ASSERT_NOT_EQUAL(tick, COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(f.db), words));
  if (fatal) {
    CU_ASSERT_PTR_NOT_NULL(store_fatal(f.db));
  } else {
    CU_ASSERT_PTR_NULL(store_fatal(f.db));
  }
  fprintf(stderr, "\n  fault after %d: %s", after, store_errmsg(f.db));

  /* Nothing of the commit is visible; what was committed is unchanged. */
  assert_intact(&f);
  char now[2048];
  durable_text(&f, now, sizeof now);
  CU_ASSERT_STRING_EQUAL(now, before);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models"), 2);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM rounds WHERE id = 2 AND"
                            " state IN ('TRAINING', 'AGGREGATING')"),
                  1);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM updates WHERE round = 2"), 2);
  assert_serves(&f, 1);

  /* The fault is gone and the coordinator started again: round 2 is
   * aggregated from the kept updates and commits, on model 1. */
  restart_coordinator(&f);
  CU_ASSERT_PTR_NULL(store_fatal(f.db));
  for (int i = 0; i < 3 && count(&f, "SELECT COUNT(*) FROM rounds WHERE"
                                     " id = 2 AND state = 'COMMITTED'") == 0;
       i++)
    CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 2, "COMMITTED");
  CU_ASSERT_EQUAL(count(&f, "SELECT parent FROM models WHERE version = 2"), 1);
  assert_intact(&f);
  durable_text(&f, now, sizeof now);
  CU_ASSERT(keeps_all(before, now));
  CU_ASSERT_PTR_NOT_NULL(strstr(now, "round 2 model 2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(now, "ledger 2 central "));
  assert_serves(&f, 2);
  fx_close(&f);
  return 1;
}

/* The fault at every operation of the tick in turn, until one lands past
 * them all; returns how many landed. */
static int fault_at_every_step(int mask, int rc, const char *words, int fatal) {
  int landed = 0;
  for (int after = 0; after < 200; after++) {
    if (!tick_meets_fault(mask, rc, after, words, fatal))
      break;
    landed++;
  }
  fprintf(stderr, "\n  %d fault points\n", landed);
  return landed;
}

static void test_disk_full_at_commit(void) {
  /* Some writes of the state change, more of the commit's pages. */
  CU_ASSERT(fault_at_every_step(FAULTY_WRITE, SQLITE_FULL, "full", 1) >= 4);
}

static void test_fsync_fails_at_commit(void) {
  CU_ASSERT(fault_at_every_step(FAULTY_SYNC, SQLITE_IOERR_FSYNC, "I/O error",
                                1) >= 1);
}

static void test_lock_refused_at_commit(void) {
  /* The state change's write lock, then the commit's. */
  CU_ASSERT(fault_at_every_step(FAULTY_LOCK, SQLITE_BUSY, "locked", 0) >= 2);
}

/* A full disk as a client uploads or registers: the client is told to come
 * back (UNAVAILABLE, no SQLite text), the store names the problem, no row
 * of the upload exists, and after a restart the same upload is taken. */
static void test_disk_full_at_upload_and_register(void) {
  fixture f;
  open_faulty(&f, 3, 2);
  start_round(&f, 1);
  update *u0 = make_update(0);
  faulty_vfs_arm(FAULTY_WRITE, SQLITE_FULL, 0);
  round_verdict v = send_all(&f, f.id[0], 1, u0, 100);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAVAILABLE);
  CU_ASSERT_PTR_NULL(strstr(v.detail, "SQLITE"));
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(f.db), "full"));
  v = register_new(&f);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAVAILABLE);
  faulty_vfs_disarm();
  CU_ASSERT_PTR_NOT_NULL(store_fatal(f.db));
  assert_intact(&f);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM updates"), 0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations WHERE"
                            " state = 'UPLOADED'"),
                  0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients"), 3);

  restart_coordinator(&f);
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  v = send_all(&f, f.id[0], 1, u0, 100);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(register_new(&f).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients"), 4);
  free(u0);
  assert_intact(&f);
  fx_close(&f);
}

/* A batch of check-ins of the first two clients, as a long poll's pass
 * asks them (round_checkin_batch). */
static void ask_first_two(fixture *f, round_checkin_ask asks[2]) {
  for (int i = 0; i < 2; i++)
    asks[i] =
        (round_checkin_ask){.client = f->id[i], .num_examples = FX_DECLARED};
}

/* Runs the batch: both clients get their task, both selections are
 * stored, and the database is intact. */
static void assert_batch_selected(fixture *f, round_checkin_ask asks[2]) {
  round_checkin_batch(f->e, asks, 2);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(asks[i].v.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(asks[i].out.kind, CHECKIN_TASK);
  }
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM participations"), 2);
  assert_intact(f);
}

/* A full disk as a long poll's batch of check-ins commits
 * (round_checkin_batch): no client of the batch is handed the task whose
 * selection was not stored (UNAVAILABLE), no row exists, the store is
 * fatal; after a restart the same batch is selected. */
static void test_disk_full_at_checkin_batch(void) {
  fixture f;
  open_faulty(&f, 3, 2);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "OPEN");
  round_checkin_ask asks[2];
  ask_first_two(&f, asks);
  faulty_vfs_arm(FAULTY_WRITE, SQLITE_FULL, 0);
  round_checkin_batch(f.e, asks, 2);
  faulty_vfs_disarm();
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(asks[i].v.code, GRPC_STATUS_UNAVAILABLE);
    CU_ASSERT_PTR_NULL(strstr(asks[i].v.detail, "SQLITE"));
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(f.db), "full"));
  CU_ASSERT_PTR_NOT_NULL(store_fatal(f.db));
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations"), 0);
  assert_intact(&f);

  restart_coordinator(&f);
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  assert_batch_selected(&f, asks);
  fx_close(&f);
}

/* A batch's transaction is begun only if the write lock is free now
 * (store_begin_now): with another connection holding it, the engine's
 * lock is not held through the busy timeout; the batch's check-ins go one
 * at a time, a selection failing "locked" (UNAVAILABLE, not fatal); once
 * the lock is free, the batch is one transaction again. */
static void test_batch_with_lock_taken(void) {
  fixture f;
  open_faulty(&f, 3, 2);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  sqlite3 *holder = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(f.path, &holder), SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  /* At once, and nothing begun that a finish could end. */
  CU_ASSERT_EQUAL(store_begin_now(f.db), COHORT_EUNAVAIL);
  CU_ASSERT_EQUAL(store_finish(f.db, COHORT_OK), COHORT_ESTATE);

  round_checkin_ask asks[2];
  ask_first_two(&f, asks);
  round_checkin_batch(f.e, asks, 2);
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL(asks[i].v.code, GRPC_STATUS_UNAVAILABLE);
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(f.db), "locked"));
  CU_ASSERT_PTR_NULL(store_fatal(f.db));

  CU_ASSERT_EQUAL(sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL),
                  SQLITE_OK);
  sqlite3_close(holder);
  assert_batch_selected(&f, asks);
  fx_close(&f);
}

/* Another connection (an operator's sqlite3 shell, a script) holds the
 * write lock: registrations, uploads and the commit wait out the busy
 * timeout and fail with "database is locked", which is not fatal; nothing
 * is half-written; once the lock is released the same calls succeed and
 * the round commits, with nothing committed before changed. */
static void test_busy_database(void) {
  fixture f;
  open_faulty(&f, 3, 3);
  start_round(&f, 1);
  upload_both(&f, 1);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  char before[2048];
  durable_text(&f, before, sizeof before);
  start_round(&f, 2);

  sqlite3 *holder = NULL;
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(f.path, &holder), SQLITE_OK);
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);

  update *u0 = make_update(0), *u1 = make_update(1);
  round_verdict v = send_all(&f, f.id[0], 2, u0, 100);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAVAILABLE);
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(f.db), "locked"));
  CU_ASSERT_EQUAL(register_new(&f).code, GRPC_STATUS_UNAVAILABLE);
  CU_ASSERT_PTR_NULL(store_fatal(f.db)); /* a lock passes */

  /* Released: the upload is taken. With the lock held again, the commit
   * fails; the round is neither committed nor lost. */
  sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL);
  CU_ASSERT_EQUAL(send_all(&f, f.id[0], 2, u0, 100).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(send_all(&f, f.id[1], 2, u1, 100).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(
      sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  CU_ASSERT_NOT_EQUAL(round_tick(f.e), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(store_errmsg(f.db), "locked"));
  CU_ASSERT_PTR_NULL(store_fatal(f.db));
  sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(holder);
  assert_intact(&f);
  char after[2048];
  durable_text(&f, after, sizeof after);
  CU_ASSERT_STRING_EQUAL(after, before);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models"), 2);

  /* The coordinator stops on a failed tick and is started again: round 2
   * commits from the kept updates, and registrations work. */
  restart_coordinator(&f);
  for (int i = 0; i < 3 && count(&f, "SELECT COUNT(*) FROM rounds WHERE"
                                     " id = 2 AND state = 'COMMITTED'") == 0;
       i++)
    CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 2, "COMMITTED");
  CU_ASSERT_EQUAL(register_new(&f).code, GRPC_STATUS_OK);
  durable_text(&f, after, sizeof after);
  CU_ASSERT(keeps_all(before, after));
  assert_intact(&f);
  free(u0);
  free(u1);
  fx_close(&f);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a full disk at each write of a round's end: a clean error, nothing "
       "committed half, the engine not ahead, the round commits after a "
       "restart",
       test_disk_full_at_commit},
      {"a failing fsync at a round's commit: the same",
       test_fsync_fails_at_commit},
      {"a write lock refused at a round's commit: \"locked\", not fatal, "
       "the same",
       test_lock_refused_at_commit},
      {"a full disk at an upload and a registration: UNAVAILABLE, no row, "
       "taken after a restart",
       test_disk_full_at_upload_and_register},
      {"a full disk as a batch of check-ins commits: no task handed out, no "
       "row; selected after a restart",
       test_disk_full_at_checkin_batch},
      {"a batch of check-ins with the write lock taken elsewhere: begun "
       "without waiting for it, one at a time, \"locked\" and not fatal; "
       "selected once it is free",
       test_batch_with_lock_taken},
      {"a database locked by another connection: \"locked\", not fatal, "
       "nothing half-written, the round commits once it is free",
       test_busy_database},
  };
  return test_add_suite("store faults", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
