/* The privacy ledger (schema v5, with the sampling from v6): one row per
 * committed training round of a differentially private federation; see
 * store.h. */
#include <math.h>
#include <stdio.h>

#include "cohort_status.h"
#include "store.h"
#include "store_sql.h"

int store_privacy_put(store *s, const store_privacy *p) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
      "INSERT INTO privacy_ledger (round, mode, noise_multiplier, clip,"
      " next_clip, sampling_rate, cohort_size, delta, epsilon,"
      " unclipped_fraction, sampling)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
      &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, p->round);
  sqlite3_bind_text(st, 2, p->mode, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, p->noise_multiplier);
  sqlite3_bind_double(st, 4, p->clip);
  sqlite3_bind_double(st, 5, p->next_clip);
  sqlite3_bind_double(st, 6, p->sampling_rate);
  sqlite3_bind_int64(st, 7, p->cohort_size);
  sqlite3_bind_double(st, 8, p->delta);
  sqlite3_bind_double(st, 9, p->epsilon);
  store_bind_real_or_null(st, 10, p->unclipped_fraction);
  sqlite3_bind_text(st, 11, p->sampling, -1, SQLITE_STATIC);
  return store_run(s, st, "put privacy ledger row");
}

int store_privacy_each(store *s, int (*fn)(void *ctx, const store_privacy *p),
                       void *ctx) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
      "SELECT round, mode, noise_multiplier, clip, next_clip, sampling_rate,"
      " cohort_size, delta, epsilon, unclipped_fraction,"
      " COALESCE(sampling, '') FROM privacy_ledger"
      " ORDER BY round",
      &st);
  if (rc)
    return rc;
  int step = SQLITE_DONE;
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    store_privacy p = {.round = sqlite3_column_int64(st, 0)};
    const unsigned char *mode = sqlite3_column_text(st, 1);
    snprintf(p.mode, sizeof p.mode, "%s", mode ? (const char *)mode : "");
    p.noise_multiplier = sqlite3_column_double(st, 2);
    p.clip = sqlite3_column_double(st, 3);
    p.next_clip = sqlite3_column_double(st, 4);
    p.sampling_rate = sqlite3_column_double(st, 5);
    p.cohort_size = sqlite3_column_int64(st, 6);
    p.delta = sqlite3_column_double(st, 7);
    p.epsilon = sqlite3_column_double(st, 8);
    p.unclipped_fraction = sqlite3_column_type(st, 9) == SQLITE_NULL
                               ? NAN
                               : sqlite3_column_double(st, 9);
    const unsigned char *how = sqlite3_column_text(st, 10);
    snprintf(p.sampling, sizeof p.sampling, "%s", how ? (const char *)how : "");
    rc = fn(ctx, &p);
  }
  if (!rc && step != SQLITE_DONE)
    rc = store_fail(s, "read privacy ledger");
  store_release(s, st);
  return rc;
}
