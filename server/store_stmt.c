/* Prepared statements kept for reuse; see store_sql.h.
 *
 * Why: compiling a statement costs more than running it. Prepared at each
 * use, SQLite's parser was 8% of the coordinator's CPU in a 50-client
 * round (a session lookup on every call, BEGIN, UPDATE, INSERT and COMMIT
 * on every upload).
 *
 * A kept PRAGMA is safe: SQLite carries many of them out while compiling
 * them (PRAGMA synchronous=FULL sets the level then), but marks every
 * PRAGMA statement to run once, so a second step compiles it again. */
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "store_sql.h"

/* FNV-1a: only to skip most string comparisons; the text is compared. */
static uint64_t sql_hash(const char *sql) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char *p = (const unsigned char *)sql; *p; p++)
    h = (h ^ *p) * 0x100000001b3ULL;
  return h;
}

int store_prepare(store *s, const char *sql, sqlite3_stmt **st) {
  const uint64_t h = sql_hash(sql);
  int in_use = 0;
  for (size_t i = 0; i < s->n_kept; i++) {
    store_kept *k = &s->kept[i];
    if (k->hash != h || strcmp(k->sql, sql) != 0)
      continue;
    if (k->busy) {
      in_use = 1;
      break;
    }
    k->busy = 1;
    *st = k->st;
    return COHORT_OK;
  }
  /* Compiled now; kept unless the cache is full or the kept copy is out
   * (a statement used inside its own loop): then it is finalized at
   * store_release. */
  const int keep_new = !in_use && s->n_kept < STORE_KEPT_MAX;
  if (sqlite3_prepare_v3(s->db, sql, -1,
                         keep_new ? SQLITE_PREPARE_PERSISTENT : 0, st,
                         NULL) != SQLITE_OK) {
    *st = NULL;
    return store_fail(s, "prepare");
  }
  char *copy = keep_new ? strdup(sql) : NULL;
  if (copy)
    s->kept[s->n_kept++] =
        (store_kept){.st = *st, .sql = copy, .hash = h, .busy = 1};
  return COHORT_OK;
}

void store_release(store *s, sqlite3_stmt *st) {
  for (size_t i = 0; i < s->n_kept; i++) {
    if (s->kept[i].st == st) {
      /* Ends the statement's read or write of the database, as finalizing
       * would, and forgets its parameters. */
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
      s->kept[i].busy = 0;
      return;
    }
  }
  sqlite3_finalize(st);
}

void store_release_all(store *s) {
  for (size_t i = 0; i < s->n_kept; i++) {
    sqlite3_finalize(s->kept[i].st);
    free(s->kept[i].sql);
  }
  s->n_kept = 0;
}
