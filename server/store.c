/* SQLite store of the coordinator; see store.h. Statements take bound
 * parameters (never string-built SQL) and are kept prepared between calls
 * (store_stmt.c); transactions wrap every multi-row change. */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort_status.h"
#include "log.h"
#include "store_files.h"
#include "store_offenders.h"
#include "store_sql.h"
#include "store_tokens.h"

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

/* Version 2: resumable rounds (updates kept until the round ends, the
 * upload deadline), evaluation rounds and federated-evaluation figures,
 * late uploads, the server optimizer's state and the federation's
 * settings. */
static const char *MIGRATE_V2 =
    "ALTER TABLE rounds ADD COLUMN kind TEXT NOT NULL DEFAULT 'TRAIN'"
    "  CHECK (kind IN ('TRAIN','EVALUATE'));"
    "ALTER TABLE rounds ADD COLUMN target INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE rounds ADD COLUMN deadline_at REAL;"
    "ALTER TABLE rounds ADD COLUMN fed_accuracy REAL;"
    "ALTER TABLE rounds ADD COLUMN fed_loss REAL;"
    "ALTER TABLE rounds ADD COLUMN fed_examples INTEGER;"
    "ALTER TABLE rounds ADD COLUMN late_uploads INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE participations ADD COLUMN late_at REAL;"
    "ALTER TABLE participations ADD COLUMN reported_at REAL;"
    "CREATE TABLE updates ("
    "  round INTEGER NOT NULL REFERENCES rounds(id),"
    "  client_id INTEGER NOT NULL REFERENCES clients(id),"
    "  examples INTEGER NOT NULL,"
    "  sha256 TEXT NOT NULL,"
    "  delta BLOB NOT NULL,"
    "  PRIMARY KEY (round, client_id));"
    "CREATE TABLE strategy_state ("
    "  version INTEGER PRIMARY KEY REFERENCES models(version),"
    "  state BLOB NOT NULL);"
    "CREATE TABLE settings ("
    "  key TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL);"
    "PRAGMA user_version = 2;";

/* Version 3: update codecs. Each training round records its codec, round
 * seed and clip (a restarted coordinator decodes the updates it kept with
 * them); the codec's coordinator state is kept with the strategy's. */
static const char *MIGRATE_V3 =
    "ALTER TABLE rounds ADD COLUMN codec TEXT;"
    "ALTER TABLE rounds ADD COLUMN codec_seed TEXT;"
    "ALTER TABLE rounds ADD COLUMN codec_clip REAL;"
    "ALTER TABLE strategy_state ADD COLUMN codec_state BLOB;"
    "PRAGMA user_version = 3;";

/* Version 4: secure aggregation. Which rounds used it, and how many
 * clients sent their message in each of its phases. */
static const char *MIGRATE_V4 =
    "ALTER TABLE rounds ADD COLUMN secagg TEXT;"
    "ALTER TABLE rounds ADD COLUMN secagg_advertised INTEGER;"
    "ALTER TABLE rounds ADD COLUMN secagg_shared INTEGER;"
    "ALTER TABLE rounds ADD COLUMN secagg_masked INTEGER;"
    "ALTER TABLE rounds ADD COLUMN secagg_unmasked INTEGER;"
    "PRAGMA user_version = 4;";

/* Version 5: differential privacy. The privacy ledger: one row per
 * committed training round of a DP federation, written in the commit's
 * transaction, from which a restarted coordinator rebuilds its accountant
 * and its (adaptive) clip. */
static const char *MIGRATE_V5 =
    "CREATE TABLE privacy_ledger ("
    "  round INTEGER PRIMARY KEY REFERENCES rounds(id),"
    "  mode TEXT NOT NULL,"
    "  noise_multiplier REAL NOT NULL,"
    "  clip REAL NOT NULL,"
    "  next_clip REAL NOT NULL,"
    "  sampling_rate REAL NOT NULL,"
    "  cohort_size INTEGER NOT NULL,"
    "  delta REAL NOT NULL,"
    "  epsilon REAL NOT NULL,"
    "  unclipped_fraction REAL);"
    "PRAGMA user_version = 5;";

/* Version 6: client identities. Each client's Ed25519 identity key (one
 * client per key) and, when an enrollment authority certified it, the
 * certificate. Clients registered before have neither. */
static const char *MIGRATE_V6 =
    "ALTER TABLE clients ADD COLUMN identity_key BLOB"
    "  CHECK (identity_key IS NULL OR length(identity_key) = 32);"
    "ALTER TABLE clients ADD COLUMN enrollment_cert BLOB"
    "  CHECK (enrollment_cert IS NULL OR length(enrollment_cert) = 64);"
    "CREATE UNIQUE INDEX clients_identity_key ON clients(identity_key);"
    "PRAGMA user_version = 6;";

/* Version 7: secure aggregation's consistency round, between MASKED and
 * UNMASK: how many survivors attested to their survivor list. */
static const char *MIGRATE_V7 =
    "ALTER TABLE rounds ADD COLUMN secagg_attested INTEGER;"
    "PRAGMA user_version = 7;";

/* Version 8: sampling that matches the accountant. How each DP training
 * round sampled its clients and the rate it is charged: on the round as
 * soon as it is known (a restarted coordinator charges a resumed round
 * what it sampled with) and in the ledger row. */
static const char *MIGRATE_V8 =
    "ALTER TABLE rounds ADD COLUMN dp_sampling_rate REAL;"
    "ALTER TABLE rounds ADD COLUMN dp_sampling TEXT;"
    "ALTER TABLE privacy_ledger ADD COLUMN sampling TEXT;"
    "PRAGMA user_version = 8;";

/* Version 9: the kept updates' bytes move to a file per round next to the
 * database (store_updates.c); a row names their place in it (offset,
 * length). delta, no longer NOT NULL, still holds the bytes of a row
 * written before, so a round in progress across the upgrade resumes. SQLite
 * cannot drop a NOT NULL, hence the table is rebuilt. */
static const char *MIGRATE_V9 =
    "CREATE TABLE updates_v9 ("
    "  round INTEGER NOT NULL REFERENCES rounds(id),"
    "  client_id INTEGER NOT NULL REFERENCES clients(id),"
    "  examples INTEGER NOT NULL,"
    "  sha256 TEXT NOT NULL,"
    "  delta BLOB,"
    "  offset INTEGER CHECK (offset >= 0),"
    "  length INTEGER CHECK (length >= 0),"
    "  CHECK (delta IS NOT NULL OR (offset IS NOT NULL AND length IS NOT"
    "   NULL)),"
    "  PRIMARY KEY (round, client_id));"
    "INSERT INTO updates_v9 (round, client_id, examples, sha256, delta)"
    "  SELECT round, client_id, examples, sha256, delta FROM updates;"
    "DROP TABLE updates;"
    "ALTER TABLE updates_v9 RENAME TO updates;"
    "PRAGMA user_version = 9;";

/* Version 13: a kept update's bytes are checked against the XXH64 its
 * upload was checked by ("xxh64:" and 16 hex digits), no longer against the
 * SHA-256 the client named its update by (which the coordinator does not
 * compute when the client sends an XXH64: docs/protocol.md). Rows from
 * before hold that SHA-256 as 64 hex digits, still checked as such. */
static const char *MIGRATE_V13 =
    "ALTER TABLE updates RENAME COLUMN sha256 TO checksum;"
    "PRAGMA user_version = 13;";

const char *store_errmsg(store *s) {
  if (!s || !s->db)
    return "no database";
  return s->last_error[0] ? s->last_error : sqlite3_errmsg(s->db);
}

void store_set_fatal(store *s, const char *why) {
  if (atomic_load(&s->fatal))
    return;
  snprintf(s->fatal_why, sizeof s->fatal_why, "%s", why);
  atomic_store(&s->fatal, 1);
}

const char *store_fatal(store *s) {
  return s && atomic_load(&s->fatal) ? s->fatal_why : NULL;
}

const char *store_file_lost(store *s) {
  int moved = 0;
  if (!s || !s->db ||
      sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) !=
          SQLITE_OK)
    return NULL;
  if (moved)
    return "was deleted, renamed or replaced";
  const char *path = sqlite3_db_filename(s->db, "main");
  struct stat st;
  if (!path || !path[0] || stat(path, &st) != 0)
    return NULL;
  if ((int64_t)st.st_size < s->file_size_seen && !s->may_shrink)
    return "shrank";
  s->file_size_seen = (int64_t)st.st_size;
  return NULL;
}

/* Failures that the next call would meet again: the coordinator stops on
 * them rather than fail every client's call in a loop. */
static void note_fatal(store *s, int code) {
  switch (code & 0xff) {
  case SQLITE_FULL:
  case SQLITE_READONLY:
  case SQLITE_IOERR:
  case SQLITE_CANTOPEN:
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB:
    store_set_fatal(s, s->last_error);
    break;
  default:
    break;
  }
}

int store_fail(store *s, const char *what) {
  snprintf(s->last_error, sizeof s->last_error, "%s: %s", what,
           sqlite3_errmsg(s->db));
  log_error("store: %s", s->last_error);
  note_fatal(s, sqlite3_extended_errcode(s->db));
  return COHORT_EDB;
}

int store_fail_with(store *s, int rc, const char *what, const char *why) {
  snprintf(s->last_error, sizeof s->last_error, "%s: %s", what, why);
  log_error("store: %s", s->last_error);
  return rc;
}

int store_exec(store *s, const char *sql) {
  char *msg = NULL;
  int rc;
  if (strchr(sql, ';')) { /* several statements: a schema step, run once */
    rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
  } else { /* BEGIN, COMMIT: every upload runs them, so kept prepared */
    sqlite3_stmt *st;
    if (store_prepare(s, sql, &st))
      return COHORT_EDB;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
      ;
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    if (rc != SQLITE_OK) /* before the reset, which may change the code */
      msg = sqlite3_mprintf("%s", sqlite3_errmsg(s->db));
    store_release(s, st);
  }
  if (rc != SQLITE_OK) {
    snprintf(s->last_error, sizeof s->last_error, "%s",
             msg ? msg : sqlite3_errmsg(s->db));
    log_error("store: %s", s->last_error);
    sqlite3_free(msg);
    note_fatal(s, sqlite3_extended_errcode(s->db));
    return COHORT_EDB;
  }
  return COHORT_OK;
}

int store_run(store *s, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  store_release(s, st);
  return rc == SQLITE_DONE ? COHORT_OK : store_fail(s, what);
}

int store_get_int(store *s, const char *sql, int64_t *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, sql, &st);
  if (rc)
    return rc;
  if (sqlite3_step(st) != SQLITE_ROW) {
    store_release(s, st);
    return store_fail(s, sql);
  }
  *out = sqlite3_column_int64(st, 0);
  store_release(s, st);
  return COHORT_OK;
}

void store_bind_real_or_null(sqlite3_stmt *st, int i, double v) {
  if (v == v)
    sqlite3_bind_double(st, i, v);
  else
    sqlite3_bind_null(st, i);
}

/* Room for one more level of store_begin. */
static int begin_room(store *s) {
  return s->depth < 32 ? COHORT_OK
                       : store_fail_with(s, COHORT_ESTATE, "begin",
                                         "transactions 32 deep");
}

/* Records a level begun: a savepoint (nested) or the transaction. */
static void begun(store *s, int nested) {
  s->nested = (s->nested << 1) | (uint32_t)nested;
  s->depth++;
}

int store_begin(store *s) {
  int rc = begin_room(s);
  if (rc)
    return rc;
  int nested = !sqlite3_get_autocommit(s->db);
  rc = store_exec(s, nested ? "SAVEPOINT nested" : "BEGIN IMMEDIATE");
  if (!rc)
    begun(s, nested);
  return rc;
}

int store_begin_now(store *s) {
  if (!sqlite3_get_autocommit(s->db))
    return store_begin(s); /* a savepoint waits for nothing */
  int rc = begin_room(s);
  if (rc)
    return rc;
  sqlite3_busy_timeout(s->db, 0);
  rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  sqlite3_busy_timeout(s->db, s->busy_ms);
  if (rc != SQLITE_OK)
    return COHORT_EUNAVAIL;
  begun(s, 0);
  return COHORT_OK;
}

int store_finish(store *s, int rc) {
  if (s->depth == 0) /* a caller's bug: nothing begun */
    return store_fail_with(s, COHORT_ESTATE, "finish", "no transaction");
  int nested = s->nested & 1;
  s->nested >>= 1;
  s->depth--;
  if (rc) {
    if (nested) { /* the savepoint stays until released */
      store_exec(s, "ROLLBACK TO nested");
      store_exec(s, "RELEASE nested");
    } else {
      store_exec(s, "ROLLBACK");
    }
    return rc;
  }
  rc = store_exec(s, nested ? "RELEASE nested" : "COMMIT");
  /* SQLite may leave a transaction whose COMMIT failed open; the next
   * write must not land in it. */
  if (rc && !nested && !sqlite3_get_autocommit(s->db))
    store_exec(s, "ROLLBACK");
  return rc;
}

int store_begin_durable(store *s) {
  int rc = store_exec(s, "PRAGMA synchronous=FULL");
  if (!rc)
    rc = store_begin(s);
  if (rc)
    store_exec(s, "PRAGMA synchronous=NORMAL");
  return rc;
}

int store_finish_durable(store *s, int rc) {
  rc = store_finish(s, rc);
  int back = store_exec(s, "PRAGMA synchronous=NORMAL");
  return rc ? rc : back;
}

/* Runs sql (a schema step) in its own transaction. */
static int migrate(store *s, const char *sql) {
  int rc = store_begin(s);
  if (!rc)
    rc = store_finish(s, store_exec(s, sql));
  return rc;
}

int store_open_readonly(const char *path, store **out, char *err,
                        size_t errlen) {
  return store_open_existing(path, SQLITE_OPEN_READONLY, out, err, errlen);
}

int store_open_existing(const char *path, int mode, store **out, char *err,
                        size_t errlen) {
  if (store_files_name_check(path, err, errlen))
    return COHORT_EINVAL;
  store *s = calloc(1, sizeof *s);
  if (!s || store_updates_open(path, 0, &s->updates)) {
    free(s);
    return COHORT_ENOMEM;
  }
  int64_t version = 0;
  int rc = COHORT_EDB;
  if (sqlite3_open_v2(path, &s->db, mode | SQLITE_OPEN_FULLMUTEX, NULL) !=
          SQLITE_OK ||
      store_get_int(s, "PRAGMA user_version", &version)) {
    snprintf(err, errlen, "database %s: %s", path, store_errmsg(s));
  } else if (version > STORE_SCHEMA_VERSION) {
    /* A coordinator of this build refuses it too: no advice to start one. */
    snprintf(err, errlen,
             "database %s has schema version %lld; this build knows up to %d "
             "(a newer build made it: use that build's programs)",
             path, (long long)version, STORE_SCHEMA_VERSION);
  } else if (version != STORE_SCHEMA_VERSION) {
    snprintf(err, errlen,
             "database %s has schema version %lld, not %d (start the "
             "coordinator on it once to upgrade it)",
             path, (long long)version, STORE_SCHEMA_VERSION);
  } else {
    s->busy_ms = 5000;
    sqlite3_busy_timeout(s->db, s->busy_ms);
    rc = COHORT_OK;
  }
  if (rc) {
    store_close(s);
    return rc;
  }
  *out = s;
  return COHORT_OK;
}

/* Whether round is still in progress, so its update file is needed; an
 * unknown round has ended (or never began). */
static int round_unfinished(void *ctx, int64_t round) {
  store *s = ctx;
  sqlite3_stmt *st;
  if (store_prepare(s,
                    "SELECT COUNT(*) FROM rounds WHERE id = ?1"
                    " AND state NOT IN ('COMMITTED', 'FAILED')",
                    &st))
    return 1; /* keep it rather than lose a resumable update */
  sqlite3_bind_int64(st, 1, round);
  int keep = sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int64(st, 0) > 0;
  store_release(s, st);
  return keep;
}

int store_open(const char *path, store **out, char *err, size_t errlen) {
  return store_open_with(path, NULL, out, err, errlen);
}

int store_open_with(const char *path, const store_options *opt, store **out,
                    char *err, size_t errlen) {
  store_options none = {0};
  opt = opt ? opt : &none;
  int rc = store_files_name_check(path, err, errlen);
  if (!rc)
    rc = store_files_prepare(path, err, errlen);
  if (rc)
    return rc;
  store *s = calloc(1, sizeof *s);
  if (!s || store_updates_open(path, 1, &s->updates)) {
    free(s);
    return COHORT_ENOMEM;
  }
  rc = COHORT_EDB;
  int64_t version = 0;
  if (sqlite3_open_v2(path, &s->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                          SQLITE_OPEN_FULLMUTEX,
                      opt->vfs) != SQLITE_OK) {
    snprintf(err, errlen, "database %s: %s", path, store_errmsg(s));
    goto out;
  }
  /* SQLite falls back to read-only when it cannot write the file; every
   * registration would then fail. */
  if (sqlite3_db_readonly(s->db, "main") == 1) {
    snprintf(err, errlen,
             "database %s is read-only: the coordinator writes to it; give "
             "a writable --db",
             path);
    goto out;
  }
  s->busy_ms = opt->busy_timeout_ms > 0 ? opt->busy_timeout_ms : 5000;
  sqlite3_busy_timeout(s->db, s->busy_ms);
  /* WAL keeps readers (the admin CLI, sqlite3) off the writer's back. With
   * synchronous=NORMAL a transaction is in the WAL, safe from a crash of
   * the process, when it commits, but fsynced only with a later durable
   * one (store_begin_durable: a round's end) or a checkpoint; the per-client
   * rows of a round (a selection, an update) cost no fsync each, which at
   * 1 ms apiece would be most of a large round (docs/benchmarks.md). */
  if (store_exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                    "PRAGMA foreign_keys=ON;") ||
      store_get_int(s, "PRAGMA user_version", &version)) {
    snprintf(err, errlen, "database %s: %s", path, store_errmsg(s));
    goto out;
  }
  if (version > STORE_SCHEMA_VERSION) {
    snprintf(err, errlen,
             "database %s has schema version %lld; this build knows up to %d",
             path, (long long)version, STORE_SCHEMA_VERSION);
    goto out;
  }
  /* A new database takes the same steps as an old one being upgraded, so
   * the migration path is the one every test exercises. */
  if ((version < 1 && migrate(s, SCHEMA_V1)) ||
      (version < 2 && migrate(s, MIGRATE_V2)) ||
      (version < 3 && migrate(s, MIGRATE_V3)) ||
      (version < 4 && migrate(s, MIGRATE_V4)) ||
      (version < 5 && migrate(s, MIGRATE_V5)) ||
      (version < 6 && migrate(s, MIGRATE_V6)) ||
      (version < 7 && migrate(s, MIGRATE_V7)) ||
      (version < 8 && migrate(s, MIGRATE_V8)) ||
      (version < 9 && migrate(s, MIGRATE_V9)) ||
      (version < 10 && migrate(s, STORE_MIGRATE_V10)) ||
      (version < 11 && migrate(s, STORE_MIGRATE_V11)) ||
      (version < 12 && migrate(s, STORE_MIGRATE_V12)) ||
      (version < 13 && migrate(s, MIGRATE_V13))) {
    snprintf(err, errlen,
             "database %s: cannot create or upgrade the schema: "
             "%s",
             path, store_errmsg(s));
    goto out;
  }
  if (version > 0 && version < STORE_SCHEMA_VERSION)
    log_info("database %s upgraded from schema %lld to %d", path,
             (long long)version, STORE_SCHEMA_VERSION);
  int64_t vacuum = 0;
  s->may_shrink =
      store_get_int(s, "PRAGMA auto_vacuum", &vacuum) != COHORT_OK || vacuum;
  /* A crash between a round's end and the unlink of its file left it. */
  store_updates_prune(s->updates, round_unfinished, s);
  rc = COHORT_OK;
out:
  if (rc) {
    store_close(s);
    return rc;
  }
  *out = s;
  return COHORT_OK;
}

void store_set_keep_models(store *s, int64_t keep) {
  s->keep_models = keep > 0 ? keep : 0;
}

void store_close(store *s) {
  if (!s)
    return;
  store_release_all(s);
  sqlite3_close(s->db);
  store_updates_close(s->updates);
  free(s);
}

/* ---- clients ---- */

int store_client_add(store *s, const char *token_sha256_hex,
                     const char *platform,
                     const uint8_t identity[SIGN_PUBLIC_LEN],
                     const uint8_t *cert, double now, int64_t *id) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
      "INSERT INTO clients (token_sha256, platform, registered_at,"
      " last_seen, identity_key, enrollment_cert)"
      " VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
      &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, token_sha256_hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, platform ? platform : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, now);
  sqlite3_bind_blob(st, 4, identity, SIGN_PUBLIC_LEN, SQLITE_TRANSIENT);
  if (cert)
    sqlite3_bind_blob(st, 5, cert, SIGN_CERT_LEN, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, 5);
  rc = store_run(s, st, "add client");
  if (!rc)
    *id = sqlite3_last_insert_rowid(s->db);
  return rc;
}

int store_client_by_token(store *s, const char *token_sha256_hex, int64_t *id) {
  sqlite3_stmt *st;
  int rc =
      store_prepare(s, "SELECT id FROM clients WHERE token_sha256 = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, token_sha256_hex, -1, SQLITE_TRANSIENT);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    *id = sqlite3_column_int64(st, 0);
    rc = COHORT_OK;
  } else {
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND : store_fail(s, "find client");
  }
  store_release(s, st);
  return rc;
}

int store_client_by_identity(store *s, const uint8_t identity[SIGN_PUBLIC_LEN],
                             int64_t *id) {
  sqlite3_stmt *st;
  int rc =
      store_prepare(s, "SELECT id FROM clients WHERE identity_key = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_blob(st, 1, identity, SIGN_PUBLIC_LEN, SQLITE_TRANSIENT);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    *id = sqlite3_column_int64(st, 0);
    rc = COHORT_OK;
  } else {
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND
                             : store_fail(s, "find client by identity");
  }
  store_release(s, st);
  return rc;
}

int store_client_identity(store *s, int64_t client,
                          uint8_t pub[SIGN_PUBLIC_LEN],
                          uint8_t cert[SIGN_CERT_LEN], int *has_cert) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "SELECT identity_key, enrollment_cert FROM clients"
                         " WHERE id = ?1 AND identity_key IS NOT NULL",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, client);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    /* The CHECK constraints hold the lengths; a NULL certificate has 0. */
    memcpy(pub, sqlite3_column_blob(st, 0), SIGN_PUBLIC_LEN);
    *has_cert = sqlite3_column_bytes(st, 1) == SIGN_CERT_LEN;
    if (*has_cert)
      memcpy(cert, sqlite3_column_blob(st, 1), SIGN_CERT_LEN);
    else
      memset(cert, 0, SIGN_CERT_LEN);
  } else {
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND
                             : store_fail(s, "read client identity");
  }
  store_release(s, st);
  return rc;
}

int store_client_touch(store *s, int64_t id, double now) {
  sqlite3_stmt *st;
  int rc =
      store_prepare(s, "UPDATE clients SET last_seen = ?2 WHERE id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_double(st, 2, now);
  return store_run(s, st, "touch client");
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
    store_release(s, st);
    return step == SQLITE_DONE ? COHORT_ENOTFOUND : store_fail(s, "read model");
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
  if (n == 0) { /* its parameters were pruned (store_set_keep_models) */
    char why[64];
    snprintf(why, sizeof why, "version %lld was pruned (--keep-models)",
             (long long)out->version);
    store_release(s, st);
    memset(out, 0, sizeof *out);
    return store_fail_with(s, COHORT_ENOTFOUND, "read model", why);
  }
  out->blob = malloc(n);
  if (!out->blob) {
    store_release(s, st);
    return COHORT_ENOMEM;
  }
  memcpy(out->blob, blob, n);
  out->blob_len = n;
  store_release(s, st);
  return COHORT_OK;
}

#define MODEL_COLUMNS "version, round, parent, spec, sha256, params"

int store_model_latest(store *s, store_model *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s, "SELECT " MODEL_COLUMNS " FROM models ORDER BY version DESC LIMIT 1",
      &st);
  return rc ? rc : read_model(s, st, out);
}

int store_model_get(store *s, int64_t version, store_model *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s, "SELECT " MODEL_COLUMNS " FROM models WHERE version = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, version);
  return read_model(s, st, out);
}

int store_insert_model(store *s, const store_model *m, double now) {
  sqlite3_stmt *st;
  int rc =
      store_prepare(s,
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
  /* A blob past SQLite's length limit would bind as NULL. */
  if (sqlite3_bind_blob64(st, 7, m->blob, m->blob_len, SQLITE_STATIC) !=
      SQLITE_OK) {
    store_release(s, st);
    return store_fail_with(s, COHORT_EINVAL, "insert model",
                           "its parameters are more bytes than SQLite takes");
  }
  sqlite3_bind_double(st, 8, now);
  return store_run(s, st, "insert model");
}

int store_model_put_initial(store *s, const store_model *m, double now) {
  return store_insert_model(s, m, now);
}

/* ---- federation settings ---- */

int store_setting_get(store *s, const char *key, char *value, size_t len) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, "SELECT value FROM settings WHERE key = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    snprintf(value, len, "%s", (const char *)sqlite3_column_text(st, 0));
    rc = COHORT_OK;
  } else {
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND : store_fail(s, "get setting");
  }
  store_release(s, st);
  return rc;
}

int store_setting_put(store *s, const char *key, const char *value) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s, "INSERT OR REPLACE INTO settings (key, value) VALUES (?1, ?2)", &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, value, -1, SQLITE_TRANSIENT);
  return store_run(s, st, "put setting");
}

/* ---- server optimizer state ---- */

/* One blob column of the strategy_state row of model `version`; a NULL
 * (no codec state) reads as not found. */
static int state_column_get(store *s, const char *sql, int64_t version,
                            uint8_t **blob, size_t *len) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, sql, &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, version);
  int step = sqlite3_step(st);
  if (step != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL) {
    store_release(s, st);
    return step == SQLITE_DONE || step == SQLITE_ROW
               ? COHORT_ENOTFOUND
               : store_fail(s, "get server state");
  }
  size_t n = (size_t)sqlite3_column_bytes(st, 0);
  *blob = malloc(n ? n : 1);
  if (!*blob) {
    store_release(s, st);
    return COHORT_ENOMEM;
  }
  if (n)
    memcpy(*blob, sqlite3_column_blob(st, 0), n);
  *len = n;
  store_release(s, st);
  return COHORT_OK;
}

int store_strategy_state_get(store *s, int64_t version, uint8_t **blob,
                             size_t *len) {
  return state_column_get(s,
                          "SELECT state FROM strategy_state WHERE version = ?1",
                          version, blob, len);
}

int store_codec_state_get(store *s, int64_t version, uint8_t **blob,
                          size_t *len) {
  return state_column_get(
      s, "SELECT codec_state FROM strategy_state WHERE version = ?1", version,
      blob, len);
}
