/* SQLite store of the coordinator; see store.h. Statements are prepared per
 * call with bound parameters (never string-built SQL); transactions wrap
 * every multi-row change. */
#include "store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "log.h"

struct store {
  sqlite3 *db;
};

static const char *SCHEMA_V1 =
    "CREATE TABLE clients ("
    "  id INTEGER PRIMARY KEY,"
    "  token_sha256 TEXT NOT NULL UNIQUE,"
    "  platform TEXT NOT NULL DEFAULT '',"
    "  registered_at REAL NOT NULL,"
    "  last_seen REAL NOT NULL);"
    "CREATE TABLE models ("
    "  version INTEGER PRIMARY KEY,"
    "  round INTEGER NOT NULL,"
    "  parent INTEGER NOT NULL,"
    "  spec TEXT NOT NULL,"
    "  sha256 TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  params BLOB NOT NULL,"
    "  created_at REAL NOT NULL);"
    "CREATE TABLE rounds ("
    "  id INTEGER PRIMARY KEY,"
    "  state TEXT NOT NULL CHECK (state IN ('OPEN','TRAINING','AGGREGATING',"
    "    'COMMITTED','FAILED')),"
    "  reason TEXT,"
    "  base_version INTEGER NOT NULL,"
    "  model_version INTEGER REFERENCES models(version),"
    "  clients_selected INTEGER NOT NULL DEFAULT 0,"
    "  clients_aggregated INTEGER NOT NULL DEFAULT 0,"
    "  accuracy REAL,"
    "  loss REAL,"
    "  bytes_up_mean REAL,"
    "  bytes_down_mean REAL,"
    "  started_at REAL NOT NULL,"
    "  updated_at REAL NOT NULL,"
    "  finished_at REAL);"
    "CREATE TABLE participations ("
    "  round INTEGER NOT NULL REFERENCES rounds(id),"
    "  client_id INTEGER NOT NULL REFERENCES clients(id),"
    "  state TEXT NOT NULL CHECK (state IN ('SELECTED','UPLOADED')),"
    "  bytes_down INTEGER NOT NULL DEFAULT 0,"
    "  bytes_up INTEGER NOT NULL DEFAULT 0,"
    "  examples INTEGER NOT NULL DEFAULT 0,"
    "  update_sha256 TEXT,"
    "  selected_at REAL NOT NULL,"
    "  uploaded_at REAL,"
    "  PRIMARY KEY (round, client_id));"
    "CREATE TABLE metrics ("
    "  round INTEGER NOT NULL,"
    "  client_id INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  value REAL NOT NULL,"
    "  PRIMARY KEY (round, client_id, name));"
    "CREATE TABLE events ("
    "  id INTEGER PRIMARY KEY,"
    "  at REAL NOT NULL,"
    "  round INTEGER,"
    "  kind TEXT NOT NULL,"
    "  detail TEXT NOT NULL);"
    "PRAGMA user_version = 1;";

const char *store_errmsg(store *s) {
  return s && s->db ? sqlite3_errmsg(s->db) : "no database";
}

static int fail(store *s, const char *what) {
  log_error("store: %s: %s", what, store_errmsg(s));
  return COHORT_EDB;
}

static int exec(store *s, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    log_error("store: %s", msg ? msg : sqlite3_errmsg(s->db));
    sqlite3_free(msg);
    return COHORT_EDB;
  }
  return COHORT_OK;
}

static int prepare(store *s, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
    return fail(s, "prepare");
  return COHORT_OK;
}

/* Steps a statement that returns no rows and finalizes it. */
static int run(store *s, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? COHORT_OK : fail(s, what);
}

static int get_int(store *s, const char *sql, int64_t *out) {
  sqlite3_stmt *st;
  int rc = prepare(s, sql, &st);
  if (rc)
    return rc;
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    return fail(s, sql);
  }
  *out = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return COHORT_OK;
}

int store_open(const char *path, store **out, char *err, size_t errlen) {
  store *s = calloc(1, sizeof *s);
  if (!s)
    return COHORT_ENOMEM;
  int rc = COHORT_EDB;
  int64_t version = 0;
  if (sqlite3_open_v2(path, &s->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                          SQLITE_OPEN_FULLMUTEX,
                      NULL) != SQLITE_OK) {
    snprintf(err, errlen, "database %s: %s", path, store_errmsg(s));
    goto out;
  }
  sqlite3_busy_timeout(s->db, 5000);
  /* WAL keeps readers (the admin CLI, sqlite3) off the writer's back;
   * synchronous=FULL makes a committed round survive power loss too. */
  if (exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
              "PRAGMA foreign_keys=ON;") ||
      get_int(s, "PRAGMA user_version", &version)) {
    snprintf(err, errlen, "database %s: %s", path, store_errmsg(s));
    goto out;
  }
  if (version > STORE_SCHEMA_VERSION) {
    snprintf(err, errlen,
             "database %s has schema version %lld; this build knows up to %d",
             path, (long long)version, STORE_SCHEMA_VERSION);
    goto out;
  }
  if (version == 0) {
    int failed = exec(s, "BEGIN IMMEDIATE");
    if (!failed) {
      failed = exec(s, SCHEMA_V1);
      failed = exec(s, failed ? "ROLLBACK" : "COMMIT") || failed;
    }
    if (failed) {
      snprintf(err, errlen, "database %s: cannot create schema: %s", path,
               store_errmsg(s));
      goto out;
    }
  }
  rc = COHORT_OK;
out:
  if (rc) {
    store_close(s);
    return rc;
  }
  *out = s;
  return COHORT_OK;
}

void store_close(store *s) {
  if (!s)
    return;
  sqlite3_close(s->db);
  free(s);
}

/* ---- clients ---- */

int store_client_add(store *s, const char *token_sha256_hex,
                     const char *platform, double now, int64_t *id) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO clients (token_sha256, platform, registered_at,"
                   " last_seen) VALUES (?1, ?2, ?3, ?3)",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, token_sha256_hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, platform ? platform : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, now);
  rc = run(s, st, "add client");
  if (!rc)
    *id = sqlite3_last_insert_rowid(s->db);
  return rc;
}

int store_client_by_token(store *s, const char *token_sha256_hex, int64_t *id) {
  sqlite3_stmt *st;
  int rc = prepare(s, "SELECT id FROM clients WHERE token_sha256 = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, token_sha256_hex, -1, SQLITE_TRANSIENT);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    *id = sqlite3_column_int64(st, 0);
    rc = COHORT_OK;
  } else {
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND : fail(s, "find client");
  }
  sqlite3_finalize(st);
  return rc;
}

int store_client_touch(store *s, int64_t id, double now) {
  sqlite3_stmt *st;
  int rc = prepare(s, "UPDATE clients SET last_seen = ?2 WHERE id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_double(st, 2, now);
  return run(s, st, "touch client");
}

/* ---- models ---- */

void store_model_clear(store_model *m) {
  if (!m)
    return;
  free(m->blob);
  memset(m, 0, sizeof *m);
}

static int read_model(store *s, sqlite3_stmt *st, store_model *out) {
  int step = sqlite3_step(st);
  if (step != SQLITE_ROW) {
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? COHORT_ENOTFOUND : fail(s, "read model");
  }
  memset(out, 0, sizeof *out);
  out->version = sqlite3_column_int64(st, 0);
  out->round = sqlite3_column_int64(st, 1);
  out->parent = sqlite3_column_int64(st, 2);
  snprintf(out->spec, sizeof out->spec, "%s",
           (const char *)sqlite3_column_text(st, 3));
  snprintf(out->sha256_hex, sizeof out->sha256_hex, "%s",
           (const char *)sqlite3_column_text(st, 4));
  const void *blob = sqlite3_column_blob(st, 5);
  size_t n = (size_t)sqlite3_column_bytes(st, 5);
  out->blob = malloc(n ? n : 1);
  if (!out->blob) {
    sqlite3_finalize(st);
    return COHORT_ENOMEM;
  }
  if (n)
    memcpy(out->blob, blob, n);
  out->blob_len = n;
  sqlite3_finalize(st);
  return COHORT_OK;
}

#define MODEL_COLUMNS "version, round, parent, spec, sha256, params"

int store_model_latest(store *s, store_model *out) {
  sqlite3_stmt *st;
  int rc = prepare(
      s, "SELECT " MODEL_COLUMNS " FROM models ORDER BY version DESC LIMIT 1",
      &st);
  return rc ? rc : read_model(s, st, out);
}

int store_model_get(store *s, int64_t version, store_model *out) {
  sqlite3_stmt *st;
  int rc = prepare(s, "SELECT " MODEL_COLUMNS " FROM models WHERE version = ?1",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, version);
  return read_model(s, st, out);
}

static int insert_model(store *s, const store_model *m, double now) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO models (version, round, parent, spec, sha256,"
                   " size, params, created_at)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, m->version);
  sqlite3_bind_int64(st, 2, m->round);
  sqlite3_bind_int64(st, 3, m->parent);
  sqlite3_bind_text(st, 4, m->spec, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 5, m->sha256_hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)m->blob_len);
  sqlite3_bind_blob64(st, 7, m->blob, m->blob_len, SQLITE_STATIC);
  sqlite3_bind_double(st, 8, now);
  return run(s, st, "insert model");
}

int store_model_put_initial(store *s, const store_model *m, double now) {
  return insert_model(s, m, now);
}

/* ---- rounds ---- */

int store_round_max(store *s, int64_t *id) {
  return get_int(s, "SELECT COALESCE(MAX(id), 0) FROM rounds", id);
}

int store_round_count_committed(store *s, int64_t *n) {
  return get_int(s, "SELECT COUNT(*) FROM rounds WHERE state = 'COMMITTED'", n);
}

int store_round_open(store *s, int64_t id, int64_t base_version, double now) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO rounds (id, state, base_version, started_at,"
                   " updated_at) VALUES (?1, 'OPEN', ?2, ?3, ?3)",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, base_version);
  sqlite3_bind_double(st, 3, now);
  return run(s, st, "open round");
}

int store_round_set_state(store *s, int64_t id, const char *state,
                          const char *reason, double now) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "UPDATE rounds SET state = ?2, reason = ?3, updated_at = ?4,"
                   " finished_at = CASE WHEN ?2 = 'FAILED' THEN ?4 END"
                   " WHERE id = ?1",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
  if (reason)
    sqlite3_bind_text(st, 3, reason, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, 3);
  sqlite3_bind_double(st, 4, now);
  return run(s, st, "set round state");
}

static void bind_real_or_null(sqlite3_stmt *st, int i, double v) {
  if (v == v)
    sqlite3_bind_double(st, i, v);
  else
    sqlite3_bind_null(st, i); /* NaN: not measured */
}

int store_round_commit(store *s, const store_round_result *r,
                       const store_model *m) {
  int rc = exec(s, "BEGIN IMMEDIATE");
  if (rc)
    return rc;
  rc = insert_model(s, m, r->finished_at);
  if (rc)
    goto out;
  sqlite3_stmt *st;
  rc = prepare(s,
               "UPDATE rounds SET state = 'COMMITTED', reason = NULL,"
               " model_version = ?2, clients_selected = ?3,"
               " clients_aggregated = ?4, accuracy = ?5, loss = ?6,"
               " bytes_up_mean = ?7, bytes_down_mean = ?8, updated_at = ?9,"
               " finished_at = ?9 WHERE id = ?1",
               &st);
  if (rc)
    goto out;
  sqlite3_bind_int64(st, 1, r->round);
  sqlite3_bind_int64(st, 2, m->version);
  sqlite3_bind_int64(st, 3, r->clients_selected);
  sqlite3_bind_int64(st, 4, r->clients_aggregated);
  bind_real_or_null(st, 5, r->accuracy);
  bind_real_or_null(st, 6, r->loss);
  sqlite3_bind_double(st, 7, r->bytes_up_mean);
  sqlite3_bind_double(st, 8, r->bytes_down_mean);
  sqlite3_bind_double(st, 9, r->finished_at);
  rc = run(s, st, "commit round");
  if (!rc && sqlite3_changes(s->db) != 1)
    rc = COHORT_ENOTFOUND;
out:
  if (rc) {
    exec(s, "ROLLBACK");
    return rc;
  }
  return exec(s, "COMMIT");
}

int store_round_fail_unfinished(store *s, const char *reason, double now,
                                int *count) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "UPDATE rounds SET state = 'FAILED', reason = ?1,"
                   " updated_at = ?2, finished_at = ?2"
                   " WHERE state NOT IN ('COMMITTED', 'FAILED')",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, reason, -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 2, now);
  rc = run(s, st, "fail unfinished rounds");
  if (!rc && count)
    *count = sqlite3_changes(s->db);
  return rc;
}

/* ---- participations ---- */

int store_participation_select(store *s, int64_t round, int64_t client,
                               double now) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO participations (round, client_id, state,"
                   " selected_at) VALUES (?1, ?2, 'SELECTED', ?3)",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, round);
  sqlite3_bind_int64(st, 2, client);
  sqlite3_bind_double(st, 3, now);
  return run(s, st, "select participant");
}

int store_participation_uploaded(store *s, const store_upload *u) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "UPDATE participations SET state = 'UPLOADED',"
                   " bytes_down = ?3, bytes_up = ?4, examples = ?5,"
                   " update_sha256 = ?6, uploaded_at = ?7"
                   " WHERE round = ?1 AND client_id = ?2",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, u->round);
  sqlite3_bind_int64(st, 2, u->client);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)u->bytes_down);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)u->bytes_up);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)u->examples);
  sqlite3_bind_text(st, 6, u->sha256_hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 7, u->uploaded_at);
  rc = run(s, st, "record upload");
  if (!rc && sqlite3_changes(s->db) != 1)
    rc = COHORT_ENOTFOUND;
  return rc;
}

int store_metrics_put(store *s, int64_t round, int64_t client, size_t n,
                      const char *const *names, const double *values) {
  int rc = exec(s, "BEGIN IMMEDIATE");
  if (rc)
    return rc;
  sqlite3_stmt *st = NULL;
  rc = prepare(s,
               "INSERT OR REPLACE INTO metrics (round, client_id, name,"
               " value) VALUES (?1, ?2, ?3, ?4)",
               &st);
  for (size_t i = 0; !rc && i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, round);
    sqlite3_bind_int64(st, 2, client);
    sqlite3_bind_text(st, 3, names[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 4, values[i]);
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = fail(s, "put metric");
  }
  sqlite3_finalize(st);
  if (rc) {
    exec(s, "ROLLBACK");
    return rc;
  }
  return exec(s, "COMMIT");
}

int store_event(store *s, double now, int64_t round, const char *kind,
                const char *detail) {
  sqlite3_stmt *st;
  int rc = prepare(s,
                   "INSERT INTO events (at, round, kind, detail)"
                   " VALUES (?1, ?2, ?3, ?4)",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_double(st, 1, now);
  if (round > 0)
    sqlite3_bind_int64(st, 2, round);
  else
    sqlite3_bind_null(st, 2);
  sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, detail, -1, SQLITE_TRANSIENT);
  return run(s, st, "record event");
}
