/* Enrollment tokens and client sessions in the store; see store_tokens.h.
 * Only hashes of tokens are ever written: a stolen database file admits no
 * registration and impersonates no client. */
#include "store_tokens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "sanitize.h"
#include "store_sql.h"

/* Version 10: enrollment tokens made and revoked by the operator, each
 * client's token (enrollment_tokens.id, or NULL for a --enroll-token; no
 * REFERENCES, so that the upgrade tests can still drop the column),
 * session expiry and revocation. Sessions issued before
 * had no expiry: they get a day from the upgrade, then their clients
 * register again. */
const char *const STORE_MIGRATE_V10 =
    "CREATE TABLE enrollment_tokens ("
    "  id INTEGER PRIMARY KEY,"
    "  token_sha256 TEXT NOT NULL UNIQUE CHECK (length(token_sha256) = 64),"
    "  label TEXT NOT NULL,"
    "  max_uses INTEGER CHECK (max_uses IS NULL OR max_uses > 0),"
    "  uses INTEGER NOT NULL DEFAULT 0,"
    "  expires_at REAL,"
    "  revoked_at REAL,"
    "  created_at REAL NOT NULL);"
    "ALTER TABLE clients ADD COLUMN enrollment_token INTEGER;"
    "ALTER TABLE clients ADD COLUMN session_expires_at REAL;"
    "ALTER TABLE clients ADD COLUMN revoked_at REAL;"
    "UPDATE clients SET session_expires_at ="
    "  CAST(strftime('%s', 'now') AS REAL) + 86400;"
    "PRAGMA user_version = 10;";

/* Version 12: the signed time of the newest proof of possession accepted
 * for each client (ms since the epoch; 0: none yet), so that a proof seen
 * once cannot renew the client again. */
const char *const STORE_MIGRATE_V12 =
    "ALTER TABLE clients ADD COLUMN possession_ms INTEGER NOT NULL DEFAULT 0;"
    "PRAGMA user_version = 12;";

int store_open_admin(const char *path, store **out, char *err, size_t errlen) {
  return store_open_existing(path, SQLITE_OPEN_READWRITE, out, err, errlen);
}

static double real_or_zero(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL
             ? 0
             : sqlite3_column_double(st, i);
}

static void bind_real_or_null(sqlite3_stmt *st, int i, double v) {
  if (v > 0)
    sqlite3_bind_double(st, i, v);
  else
    sqlite3_bind_null(st, i);
}

/* ---- enrollment tokens ---- */

int store_label_check(const char *label, size_t len, char *err, size_t errlen) {
  size_t at = 0;
  const char *why = label ? sanitize_refusal(label, len, &at) : NULL;
  if (!label || len == 0 || len > STORE_LABEL_MAX)
    snprintf(err, errlen, "label is required, 1 to %d bytes", STORE_LABEL_MAX);
  else if (why)
    snprintf(err, errlen,
             "label: %s at byte %zu (a label is printable text, valid "
             "UTF-8)",
             why, at);
  else
    return COHORT_OK;
  return COHORT_EINVAL;
}

int store_token_add(store *s, const char *token_sha256_hex, const char *label,
                    int64_t max_uses, double expires_at, double now,
                    int64_t *id) {
  /* The operator's mistake, not the database's: told, not logged. */
  if (store_label_check(label, label ? strlen(label) : 0, s->last_error,
                        sizeof s->last_error) != COHORT_OK)
    return COHORT_EINVAL;
  if (max_uses < 0) {
    snprintf(s->last_error, sizeof s->last_error, "uses must not be negative");
    return COHORT_EINVAL;
  }
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "INSERT INTO enrollment_tokens (token_sha256, label,"
                         " max_uses, expires_at, created_at)"
                         " VALUES (?1, ?2, ?3, ?4, ?5)",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, token_sha256_hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, label, -1, SQLITE_TRANSIENT);
  if (max_uses > 0)
    sqlite3_bind_int64(st, 3, max_uses);
  else
    sqlite3_bind_null(st, 3);
  bind_real_or_null(st, 4, expires_at);
  sqlite3_bind_double(st, 5, now);
  rc = store_run(s, st, "add enrollment token");
  if (!rc)
    *id = sqlite3_last_insert_rowid(s->db);
  return rc;
}

#define TOKEN_COLUMNS                                                          \
  "id, label, max_uses, uses, expires_at, revoked_at, created_at"

static void read_token(sqlite3_stmt *st, store_enroll_token *t) {
  memset(t, 0, sizeof *t);
  t->id = sqlite3_column_int64(st, 0);
  snprintf(t->label, sizeof t->label, "%s",
           (const char *)sqlite3_column_text(st, 1));
  t->max_uses = sqlite3_column_int64(st, 2); /* NULL reads as 0 */
  t->uses = sqlite3_column_int64(st, 3);
  t->expires_at = real_or_zero(st, 4);
  t->revoked_at = real_or_zero(st, 5);
  t->created_at = sqlite3_column_double(st, 6);
}

int store_token_find(store *s, const char *token_sha256_hex,
                     store_enroll_token *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "SELECT " TOKEN_COLUMNS " FROM enrollment_tokens"
                         " WHERE token_sha256 = ?1",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, token_sha256_hex, -1, SQLITE_TRANSIENT);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW)
    read_token(st, out);
  else
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND
                             : store_fail(s, "find enrollment token");
  store_release(s, st);
  return rc;
}

const char *store_token_refusal(const store_enroll_token *t, double now) {
  if (t->revoked_at > 0)
    return "revoked";
  if (t->expires_at > 0 && now >= t->expires_at)
    return "expired";
  if (t->max_uses > 0 && t->uses >= t->max_uses)
    return "used up";
  return NULL;
}

/* Rows of a SELECT into a growing malloc'd array of `size`-byte items. */
static int read_rows(store *s, sqlite3_stmt *st, size_t size,
                     void (*read)(sqlite3_stmt *, void *), void **out,
                     size_t *n) {
  size_t cap = 0, count = 0;
  char *items = NULL;
  int rc = COHORT_OK, step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      char *grown = realloc(items, cap * size);
      if (!grown) {
        rc = COHORT_ENOMEM;
        break;
      }
      items = grown;
    }
    read(st, items + count++ * size);
  }
  if (!rc && step != SQLITE_DONE)
    rc = store_fail(s, "list");
  store_release(s, st);
  if (rc) {
    free(items);
    return rc;
  }
  *out = items;
  *n = count;
  return COHORT_OK;
}

static void read_token_row(sqlite3_stmt *st, void *item) {
  read_token(st, item);
}

int store_token_list(store *s, store_enroll_token **out, size_t *n) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s, "SELECT " TOKEN_COLUMNS " FROM enrollment_tokens ORDER BY id", &st);
  return rc ? rc
            : read_rows(s, st, sizeof **out, read_token_row, (void **)out, n);
}

/* Runs the UPDATE sql with id as ?1 and now as ?2: COHORT_EAUTH unless it
 * changed exactly one row. */
static int update_one(store *s, const char *sql, int64_t id, double now,
                      const char *what) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, sql, &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_double(st, 2, now);
  rc = store_run(s, st, what);
  return rc ? rc : sqlite3_changes(s->db) == 1 ? COHORT_OK : COHORT_EAUTH;
}

/* UPDATE sql (?1 = id, ?2 = now) that marks a row revoked if it is not;
 * tells an unknown id from one revoked before. */
static int revoke(store *s, const char *update, const char *exists, int64_t id,
                  double now) {
  int rc = update_one(s, update, id, now, "revoke");
  if (rc != COHORT_EAUTH)
    return rc;
  sqlite3_stmt *st;
  if ((rc = store_prepare(s, exists, &st)))
    return rc;
  sqlite3_bind_int64(st, 1, id);
  rc = sqlite3_step(st) == SQLITE_ROW ? COHORT_ESTATE : COHORT_ENOTFOUND;
  store_release(s, st);
  return rc;
}

int store_token_revoke(store *s, int64_t id, double now) {
  return revoke(s,
                "UPDATE enrollment_tokens SET revoked_at = ?2"
                " WHERE id = ?1 AND revoked_at IS NULL",
                "SELECT 1 FROM enrollment_tokens WHERE id = ?1", id, now);
}

/* ---- clients and sessions ---- */

/* One use of token id at now, if it still admits one. */
static int take_use(store *s, int64_t token, double now) {
  return update_one(
      s,
      "UPDATE enrollment_tokens SET uses = uses + 1 WHERE id = ?1"
      " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?2)"
      " AND (max_uses IS NULL OR uses < max_uses)",
      token, now, "use enrollment token");
}

static int add_client(store *s, const store_enrollment *e, int64_t *id) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
      "INSERT INTO clients (token_sha256, platform, registered_at, last_seen,"
      " identity_key, enrollment_cert, enrollment_token, session_expires_at,"
      " possession_ms)"
      " VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?8)",
      &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, e->session_sha256_hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, e->platform ? e->platform : "", -1,
                    SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, e->now);
  sqlite3_bind_blob(st, 4, e->identity, SIGN_PUBLIC_LEN, SQLITE_TRANSIENT);
  if (e->cert)
    sqlite3_bind_blob(st, 5, e->cert, SIGN_CERT_LEN, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, 5);
  if (e->token_id)
    sqlite3_bind_int64(st, 6, e->token_id);
  else
    sqlite3_bind_null(st, 6);
  bind_real_or_null(st, 7, e->session_expires_at);
  sqlite3_bind_int64(st, 8, e->possession_ms);
  rc = store_run(s, st, "add client");
  if (!rc)
    *id = sqlite3_last_insert_rowid(s->db);
  return rc;
}

/* Revokes client id, bound to its key by a Register without a proof, and
 * releases the key, if it is still so. Its session token is forgotten
 * rather than revoked: whoever holds it then hears "unknown session", and
 * the key's holder (a device that lost the reply that made its new
 * client) registers again instead of stopping as a revoked client. */
static int retire_unproven(store *s, int64_t id, double now) {
  return update_one(s,
                    "UPDATE clients SET identity_key = NULL,"
                    " token_sha256 = 'retired ' || id,"
                    " revoked_at = ?2, session_expires_at = ?2"
                    " WHERE id = ?1 AND revoked_at IS NULL"
                    " AND possession_ms = 0",
                    id, now, "retire unproven client");
}

int store_client_enroll(store *s, const store_enrollment *e, int64_t *id) {
  /* IMMEDIATE: the write lock from the start, so that the token's use count
   * read by the UPDATE cannot change under it from another process. */
  int rc = store_begin(s);
  if (rc)
    return rc;
  if (e->token_id && !e->use_of_retired)
    rc = take_use(s, e->token_id, e->now);
  if (!rc && e->retire)
    rc = retire_unproven(s, e->retire, e->now);
  if (!rc)
    rc = add_client(s, e, id);
  return store_finish(s, rc);
}

static void read_session(sqlite3_stmt *st, store_session *out) {
  out->client = sqlite3_column_int64(st, 0);
  out->expires_at = real_or_zero(st, 1);
  out->revoked_at = real_or_zero(st, 2);
  out->token_id = sqlite3_column_int64(st, 3);
  out->possession_ms = sqlite3_column_int64(st, 4);
  out->retired = sqlite3_column_int(st, 5);
}

static int find_session(store *s, const char *sql, const char *hash, int64_t id,
                        store_session *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, sql, &st);
  if (rc)
    return rc;
  if (hash)
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_int64(st, 1, id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW)
    read_session(st, out);
  else
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND : store_fail(s, "find session");
  store_release(s, st);
  return rc;
}

int store_session_find(store *s, const char *session_sha256_hex,
                       store_session *out) {
  return find_session(
      s,
      "SELECT id, session_expires_at, revoked_at, enrollment_token,"
      " possession_ms, token_sha256 LIKE 'retired %' FROM clients"
      " WHERE token_sha256 = ?1",
      session_sha256_hex, 0, out);
}

int store_session_of(store *s, int64_t id, store_session *out) {
  return find_session(
      s,
      "SELECT id, session_expires_at, revoked_at, enrollment_token,"
      " possession_ms, token_sha256 LIKE 'retired %' FROM clients"
      " WHERE id = ?1",
      NULL, id, out);
}

int store_session_renew(store *s, int64_t id, const store_enrollment *e) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "UPDATE clients SET token_sha256 = ?2,"
                         " session_expires_at = ?3, last_seen = ?4,"
                         " possession_ms = ?5, enrollment_cert = ?6,"
                         " platform = ?7"
                         " WHERE id = ?1 AND revoked_at IS NULL",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_text(st, 2, e->session_sha256_hex, -1, SQLITE_TRANSIENT);
  bind_real_or_null(st, 3, e->session_expires_at);
  sqlite3_bind_double(st, 4, e->now);
  sqlite3_bind_int64(st, 5, e->possession_ms);
  if (e->cert)
    sqlite3_bind_blob(st, 6, e->cert, SIGN_CERT_LEN, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(st, 6);
  sqlite3_bind_text(st, 7, e->platform ? e->platform : "", -1,
                    SQLITE_TRANSIENT);
  rc = store_run(s, st, "renew session");
  /* Revoked between the caller's check and now, by the admin CLI. */
  return rc ? rc : sqlite3_changes(s->db) == 1 ? COHORT_OK : COHORT_EAUTH;
}

static void read_client_row(sqlite3_stmt *st, void *item) {
  store_client_info *c = item;
  memset(c, 0, sizeof *c);
  c->id = sqlite3_column_int64(st, 0);
  snprintf(c->platform, sizeof c->platform, "%s",
           (const char *)sqlite3_column_text(st, 1));
  c->registered_at = sqlite3_column_double(st, 2);
  c->last_seen = sqlite3_column_double(st, 3);
  c->session_expires_at = real_or_zero(st, 4);
  c->revoked_at = real_or_zero(st, 5);
  c->token_id = sqlite3_column_int64(st, 6);
  c->has_identity = sqlite3_column_type(st, 7) != SQLITE_NULL;
  c->has_cert = sqlite3_column_type(st, 8) != SQLITE_NULL;
  c->rounds_failed = sqlite3_column_int64(st, 9);
  c->excluded_until = real_or_zero(st, 10);
  snprintf(c->state, sizeof c->state, "%s",
           (const char *)sqlite3_column_text(st, 11));
}

int store_client_list(store *s, store_client_info **out, size_t *n) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "SELECT id, platform, registered_at, last_seen,"
                         " session_expires_at, revoked_at, enrollment_token,"
                         " identity_key, enrollment_cert, rounds_failed,"
                         " excluded_until, " STORE_CLIENT_STATE_SQL
                         " FROM clients ORDER BY id",
                         &st);
  return rc ? rc
            : read_rows(s, st, sizeof **out, read_client_row, (void **)out, n);
}

int store_client_revoke(store *s, int64_t id, double now) {
  return revoke(s,
                "UPDATE clients SET revoked_at = ?2"
                " WHERE id = ?1 AND revoked_at IS NULL",
                "SELECT 1 FROM clients WHERE id = ?1", id, now);
}
