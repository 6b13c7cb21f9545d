/* The coordinator's durable state in SQLite (WAL mode): clients, rounds,
 * participations, models, metrics and events. Every function is one
 * statement or one transaction, so a crash leaves either all or nothing of
 * it. Not thread-safe: the caller serialises access (the round engine's
 * lock). */
#ifndef COHORT_STORE_H
#define COHORT_STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 1

typedef struct store store;

/* Opens or creates the database, sets WAL and synchronous=FULL, creates or
 * checks the schema (PRAGMA user_version). A database with a newer schema
 * than this build knows is refused. err gets a one-line reason. */
int store_open(const char *path, store **out, char *err, size_t errlen);
void store_close(store *s); /* accepts NULL */

/* Last SQLite error message of this connection, for logs. */
const char *store_errmsg(store *s);

/* ---- clients ---- */
int store_client_add(store *s, const char *token_sha256_hex,
                     const char *platform, double now, int64_t *id);
/* COHORT_ENOTFOUND when no client has that token hash. */
int store_client_by_token(store *s, const char *token_sha256_hex, int64_t *id);
int store_client_touch(store *s, int64_t id, double now);

/* ---- models ---- */
typedef struct store_model {
  int64_t version;
  int64_t round;  /* round that produced it; 0 for the initial model */
  int64_t parent; /* version it was derived from; -1 for the initial one */
  char spec[64];
  char sha256_hex[65];
  uint8_t *blob; /* malloc'd parameters, little-endian float32 */
  size_t blob_len;
} store_model;

void store_model_clear(store_model *m); /* frees blob */
/* The highest version; COHORT_ENOTFOUND on an empty store. */
int store_model_latest(store *s, store_model *out);
int store_model_get(store *s, int64_t version, store_model *out);
/* Inserts the initial model (version 0, round 0) when none exists. */
int store_model_put_initial(store *s, const store_model *m, double now);

/* ---- rounds ---- */
typedef struct store_round_result {
  int64_t round;
  int64_t clients_selected;
  int64_t clients_aggregated;
  double accuracy, loss; /* NaN when not evaluated */
  double bytes_up_mean, bytes_down_mean;
  double finished_at;
} store_round_result;

/* Highest round id (0 when none). */
int store_round_max(store *s, int64_t *id);
int store_round_count_committed(store *s, int64_t *n);
int store_round_open(store *s, int64_t id, int64_t base_version, double now);
/* Moves a round to TRAINING, AGGREGATING or FAILED(reason). */
int store_round_set_state(store *s, int64_t id, const char *state,
                          const char *reason, double now);
/* In one transaction: inserts model m (m->version, round, parent) and marks
 * the round COMMITTED with the result's figures. */
int store_round_commit(store *s, const store_round_result *r,
                       const store_model *m);
/* Marks every round that is not COMMITTED or FAILED as FAILED(reason);
 * *count (may be NULL) gets how many. */
int store_round_fail_unfinished(store *s, const char *reason, double now,
                                int *count);

/* ---- participations ---- */
int store_participation_select(store *s, int64_t round, int64_t client,
                               double now);
typedef struct store_upload {
  int64_t round, client;
  uint64_t bytes_down, bytes_up, examples;
  char sha256_hex[65];
  double uploaded_at;
} store_upload;
int store_participation_uploaded(store *s, const store_upload *u);

/* A client's report of n metrics (federated evaluation), in one
 * transaction: all are stored (replacing earlier values of the same names)
 * or none. */
int store_metrics_put(store *s, int64_t round, int64_t client, size_t n,
                      const char *const *names, const double *values);

/* An operational event (round failures, restarts) for operators. */
int store_event(store *s, double now, int64_t round, const char *kind,
                const char *detail);

#endif
