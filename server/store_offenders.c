/* Each client's failed rounds in the store; see store_offenders.h. */
#include "store_offenders.h"

#include "cohort_status.h"
#include "store_sql.h"

/* Version 11: a record per client of rounds failed (selected and not
 * completed), for excluding repeat offenders from selection for a while. */
const char *const STORE_MIGRATE_V11 =
    "ALTER TABLE clients ADD COLUMN rounds_failed INTEGER NOT NULL"
    "  DEFAULT 0;"
    "ALTER TABLE clients ADD COLUMN excluded_until REAL;"
    "CREATE TABLE client_failures ("
    "  client_id INTEGER NOT NULL REFERENCES clients(id),"
    "  round INTEGER NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  failed_at REAL NOT NULL,"
    "  PRIMARY KEY (client_id, round));"
    "PRAGMA user_version = 11;";

/* Runs sql with client bound to ?1 and round to ?2 (if it has one). */
static int run_for(store *s, const char *sql, int64_t client, int64_t round,
                   const char *what) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, sql, &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, client);
  if (sqlite3_bind_parameter_count(st) > 1)
    sqlite3_bind_int64(st, 2, round);
  return store_run(s, st, what);
}

static int count_failures(store *s, int64_t client, int64_t *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s, "SELECT count(*) FROM client_failures WHERE client_id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, client);
  if (sqlite3_step(st) == SQLITE_ROW)
    *out = sqlite3_column_int64(st, 0);
  else
    rc = store_fail(s, "count client failures");
  store_release(s, st);
  return rc;
}

int store_client_failed(store *s, int64_t client, int64_t round,
                        const char *reason, int64_t window, double now,
                        int64_t *recent) {
  int rc = store_begin(s);
  if (rc)
    return rc;
  sqlite3_stmt *st;
  rc = store_prepare(s,
                     "INSERT OR IGNORE INTO client_failures"
                     " (client_id, round, reason, failed_at)"
                     " VALUES (?1, ?2, ?3, ?4)",
                     &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, client);
    sqlite3_bind_int64(st, 2, round);
    sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, now);
    rc = store_run(s, st, "record a failed round");
  }
  if (!rc && sqlite3_changes(s->db) == 1)
    rc = run_for(s,
                 "UPDATE clients SET rounds_failed = rounds_failed + 1"
                 " WHERE id = ?1",
                 client, 0, "count a failed round");
  if (!rc)
    rc = run_for(s,
                 "DELETE FROM client_failures WHERE client_id = ?1"
                 " AND round <= ?2",
                 client, round - window, "forget old failed rounds");
  if (!rc)
    rc = count_failures(s, client, recent);
  return store_finish(s, rc);
}

int store_client_exclude(store *s, int64_t client, double until) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s, "UPDATE clients SET excluded_until = ?2 WHERE id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, client);
  sqlite3_bind_double(st, 2, until);
  return store_run(s, st, "exclude a client");
}

int store_client_recovered(store *s, int64_t client) {
  int rc = store_begin(s);
  if (!rc)
    rc = run_for(s, "DELETE FROM client_failures WHERE client_id = ?1", client,
                 0, "forget failed rounds");
  if (!rc)
    rc = run_for(s, "UPDATE clients SET excluded_until = NULL WHERE id = ?1",
                 client, 0, "end an exclusion");
  return store_finish(s, rc);
}

int store_client_offences(store *s, int64_t client, int64_t *recent,
                          double *excluded_until) {
  *recent = 0;
  *excluded_until = 0;
  sqlite3_stmt *st;
  int rc =
      store_prepare(s, "SELECT excluded_until FROM clients WHERE id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, client);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
    *excluded_until = sqlite3_column_double(st, 0);
  else if (step != SQLITE_ROW && step != SQLITE_DONE)
    rc = store_fail(s, "read a client's exclusion");
  store_release(s, st);
  return rc ? rc : count_failures(s, client, recent);
}
