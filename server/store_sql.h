/* Internal to the store: the connection and the small statement helpers
 * that store.c and store_rounds.c share. */
#ifndef COHORT_STORE_SQL_H
#define COHORT_STORE_SQL_H

#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>

#include "store.h"
#include "store_updates.h"

/* At most this many statements are kept prepared (store_prepare); more
 * than the store's distinct statements, so every one is kept. */
#define STORE_KEPT_MAX 128

typedef struct store_kept {
  sqlite3_stmt *st;
  char *sql; /* the text it was prepared from, the key */
  uint64_t hash;
  int busy; /* handed out by store_prepare, not yet released */
} store_kept;

struct store {
  sqlite3 *db;
  /* The last failure's message: a ROLLBACK after it would reset SQLite's
   * own to "not an error" before the caller could report it. */
  char last_error[256];
  /* The kept updates' bytes, in files next to the database. */
  store_updates *updates;
  /* Models kept with their parameters (store_set_keep_models); 0: all. */
  int64_t keep_models;
  /* Set once a write failed in a way retrying cannot mend (disk full, a
   * read-only or failing disk); fatal_why is written before it. */
  atomic_int fatal;
  char fatal_why[320];
  /* The largest size the database file had at a store_file_lost check:
   * it never shrinks while the coordinator runs (no VACUUM, and no
   * auto_vacuum unless may_shrink). Only the scheduler's thread reads and
   * writes it. */
  int64_t file_size_seen;
  /* The database vacuums itself (PRAGMA auto_vacuum, set when it was
   * made, or a SQLite built to default to it): its checkpoints shrink it
   * after --keep-models prunes, so a smaller file is not a truncated one. */
  int may_shrink;
  store_kept kept[STORE_KEPT_MAX];
  size_t n_kept;
  /* What each open store_begin began, innermost in bit 0: 1 a savepoint
   * inside a transaction already open, 0 the transaction. */
  uint32_t nested;
  int depth;
  int busy_ms; /* how long a write waits for the lock (busy timeout) */
};

/* Records that the store can no longer write, with the reason (the first
 * one is kept); store_fatal reports it. */
void store_set_fatal(store *s, const char *why);
/* Clears the parameters of the models that --keep-models no longer keeps;
 * part of store_round_commit's transaction. */
int store_models_prune(store *s);
/* Opens an existing database of this build's schema, never creating or
 * upgrading it; mode is SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE
 * (store_open_readonly, store_open_admin). */
int store_open_existing(const char *path, int mode, store **out, char *err,
                        size_t errlen);

/* Records that what failed is not SQLite's, with its reason; returns rc. */
int store_fail_with(store *s, int rc, const char *what, const char *why);

/* Logs what failed with SQLite's message and returns COHORT_EDB. */
int store_fail(store *s, const char *what);
int store_exec(store *s, const char *sql);
/* A statement for sql, ready to bind and step; store_release gives it
 * back. Statements are kept prepared and handed out again (store_stmt.c),
 * so a caller must release what it prepared, and never finalize it. */
int store_prepare(store *s, const char *sql, sqlite3_stmt **st);
/* Resets a statement from store_prepare for its next use (or finalizes
 * one that is not kept). */
void store_release(store *s, sqlite3_stmt *st);
/* Finalizes every kept statement: before the connection closes. */
void store_release_all(store *s);
/* Steps a statement that returns no rows and releases it. */
int store_run(store *s, sqlite3_stmt *st, const char *what);
int store_get_int(store *s, const char *sql, int64_t *out);
/* NaN binds as NULL: not measured. */
void store_bind_real_or_null(sqlite3_stmt *st, int i, double v);
/* The same for a transaction that must survive power loss, not only a
 * crash of the process: a round's end. The connection otherwise runs with
 * synchronous=NORMAL (see store_open), and this one fsyncs the WAL, and so
 * every transaction before it too. */
int store_begin_durable(store *s);
int store_finish_durable(store *s, int rc);

/* Inserts model m; part of a caller's transaction or on its own. */
int store_insert_model(store *s, const store_model *m, double now);

/* Inserts a privacy ledger row; part of the commit's transaction. */
int store_privacy_put(store *s, const store_privacy *p);

#endif
