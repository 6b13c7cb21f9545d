/* The coordinator's durable state in SQLite (WAL mode): clients, rounds,
 * participations, models, metrics and events. Every function is one
 * statement or one transaction, so a crash leaves either all or nothing of
 * it. Not thread-safe: the caller serialises access (the round engine's
 * lock). */
#ifndef COHORT_STORE_H
#define COHORT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sign.h"

#define STORE_SCHEMA_VERSION 13

typedef struct store store;

/* Opens or creates the database, sets WAL and synchronous=NORMAL (a round's
 * end is fsynced: store_begin_durable), creates or checks the schema (PRAGMA
 * user_version). A database with a newer schema than this build knows is
 * refused. The round's update bytes live next to it, in <path>.updates/.
 * err gets a one-line reason. */
int store_open(const char *path, store **out, char *err, size_t errlen);
/* How store_open_with opens the database; zero fields take the defaults. */
typedef struct store_options {
  /* The SQLite VFS, by name (NULL: SQLite's default). The fault tests pass
   * one that fails writes as a full or failing disk would
   * (tests/support/faulty_vfs.h). */
  const char *vfs;
  /* How long a statement waits for another connection's lock before it
   * fails with "database is locked" (0: 5000 ms). */
  int busy_timeout_ms;
} store_options;
/* store_open with options (NULL: as store_open). */
int store_open_with(const char *path, const store_options *opt, store **out,
                    char *err, size_t errlen);
/* For readers such as --export: never creates, migrates or writes; a
 * database of another schema version is refused. */
int store_open_readonly(const char *path, store **out, char *err,
                        size_t errlen);
void store_close(store *s); /* accepts NULL */

/* Last SQLite error message of this connection, for logs. */
const char *store_errmsg(store *s);

/* NULL while the store can write; once a write failed in a way that
 * retrying cannot mend (SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR,
 * SQLITE_CANTOPEN, SQLITE_CORRUPT, or an update file that cannot be
 * written: no space, read-only), the reason, for the coordinator to stop
 * on. Safe to call from any thread. */
const char *store_fatal(store *s);

/* NULL while the database file is the one the store opened; otherwise
 * what happened to it: "was deleted, renamed or replaced" (an operator's
 * rm or mv; what is committed then goes to a file no path names, lost at
 * close) or "shrank" (truncated, or overwritten in place by a smaller
 * file: SQLite reads zeros where pages were and corrupts it). Also NULL
 * for an in-memory database. A stat(2) or two; call from one thread. */
const char *store_file_lost(store *s);

/* Keep the parameters of only the `keep` newest model versions (0: all),
 * pruned by every store_round_commit after it inserts the new model. The
 * latest and the base of any unfinished round are never pruned; a pruned
 * version keeps its row (round, parent, SHA-256, size) with empty
 * parameters, and store_model_get says COHORT_ENOTFOUND for it. */
void store_set_keep_models(store *s, int64_t keep);

/* A consistent copy of the database at src_path, made with SQLite's online
 * backup API while a coordinator may be writing it (in WAL mode readers do
 * not stop the writer), written to dst_path: a temporary file created 0600
 * beside it, fsynced and renamed. The copy is one file (rollback journal
 * mode; the coordinator turns WAL back on when it opens it) and passes
 * PRAGMA quick_check. The update files of an unfinished round are not
 * copied: a coordinator started on the copy resumes from the last
 * committed round. An existing dst_path is refused. err gets a reason. */
int store_backup(const char *src_path, const char *dst_path, char *err,
                 size_t errlen);

/* What the copy at path holds, read as it is, of whatever schema version:
 * its version and its committed training rounds. A backup of a database
 * that another build made (or that this build has not upgraded yet) is a
 * good copy; store_open_readonly would refuse it. */
int store_backup_describe(const char *path, int64_t *version, int64_t *rounds,
                          char *err, size_t errlen);

/* ---- clients ---- */
/* A new client: the hash of its session token, its platform (NULL: ""),
 * its identity key and the enrollment authority's certificate of it (NULL:
 * none), with a session that never expires; Register goes through
 * store_client_enroll (store_tokens.h) instead. A token hash or key that is
 * already a client's is refused (COHORT_EDB): check with
 * store_client_by_identity first for a reason. */
int store_client_add(store *s, const char *token_sha256_hex,
                     const char *platform,
                     const uint8_t identity[SIGN_PUBLIC_LEN],
                     const uint8_t *cert, double now, int64_t *id);
/* COHORT_ENOTFOUND when no client has that token hash. */
int store_client_by_token(store *s, const char *token_sha256_hex, int64_t *id);
/* The client bound to an identity key; COHORT_ENOTFOUND when none. */
int store_client_by_identity(store *s, const uint8_t identity[SIGN_PUBLIC_LEN],
                             int64_t *id);
/* The identity key client registered with and its enrollment certificate
 * (*has_cert 0 and cert zeroed when it has none), e.g. for the peer keys
 * of a secure-aggregation round. COHORT_ENOTFOUND for an unknown client,
 * and for one registered before schema 6, which has no key. */
int store_client_identity(store *s, int64_t client,
                          uint8_t pub[SIGN_PUBLIC_LEN],
                          uint8_t cert[SIGN_CERT_LEN], int *has_cert);
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

/* ---- federation settings ---- */

/* What a database was created for (model spec, input shape, classes,
 * strategy), so a restart with other flags is refused and an export knows
 * the model. COHORT_ENOTFOUND when the key was never set. */
int store_setting_get(store *s, const char *key, char *value, size_t len);
int store_setting_put(store *s, const char *key, const char *value);

/* ---- server optimizer state ---- */

/* The strategy's state after producing model `version` (written by
 * store_round_commit). *blob is malloc'd. COHORT_ENOTFOUND when none. */
int store_strategy_state_get(store *s, int64_t version, uint8_t **blob,
                             size_t *len);
/* The update codec's coordinator state after model `version` (sketch error
 * accumulation and momentum). COHORT_ENOTFOUND when none. */
int store_codec_state_get(store *s, int64_t version, uint8_t **blob,
                          size_t *len);

/* ---- rounds ---- */
typedef struct store_round_result {
  int64_t round;
  int64_t clients_selected;
  int64_t clients_aggregated;
  double accuracy, loss; /* the coordinator's evaluation; NaN when none */
  double bytes_up_mean, bytes_down_mean;
  double finished_at;
} store_round_result;

/* Highest round id (0 when none). */
int store_round_max(store *s, int64_t *id);
/* Committed training rounds (evaluation rounds do not count). */
int store_round_count_committed(store *s, int64_t *n);
/* How a training round's updates are encoded: what a restarted
 * coordinator needs to decode the updates it kept. */
typedef struct store_codec {
  char spec[128];
  char seed_hex[65]; /* the round seed, 32 bytes */
  double clip;       /* qB's common clip; 0 = per-payload scale */
} store_codec;

/* kind is "TRAIN" or "EVALUATE"; target is the number of updates (or
 * reports) the round wants; codec is NULL for evaluation rounds. */
int store_round_open(store *s, int64_t id, int64_t base_version,
                     const char *kind, int64_t target, const store_codec *codec,
                     double now);
/* Moves a round to TRAINING (with its upload deadline, wall-clock seconds),
 * AGGREGATING or FAILED(reason). */
int store_round_set_state(store *s, int64_t id, const char *state,
                          const char *reason, double now);
int store_round_set_training(store *s, int64_t id, double deadline_at,
                             double now);
/* The coordinator's state that goes with a committed model; either blob
 * may be NULL (none). */
/* One row of the privacy ledger (schema v5, sampling v6): what a DP
 * training round spent. */
typedef struct store_privacy {
  int64_t round;
  char mode[16];             /* "central" or "distributed" */
  double noise_multiplier;   /* z the accountant charged */
  double clip;               /* C this round's updates were clipped to */
  double next_clip;          /* C of the next round (adaptive clipping) */
  double sampling_rate;      /* q, the rate the round is charged */
  char sampling[96];         /* how it sampled, e.g. "poisson q=0.05 (K=20
                                of 400 active)", "fixed 20 of 37
                                candidates"; "" before v6 */
  int64_t cohort_size;       /* updates summed */
  double delta;              /* the delta epsilon is reported at */
  double epsilon;            /* cumulative, after this round */
  double unclipped_fraction; /* noised share within the clip; NAN: fixed */
} store_privacy;

typedef struct store_server_state {
  const uint8_t *strategy;
  size_t strategy_len;
  const uint8_t *codec;
  size_t codec_len;
  const store_privacy *privacy; /* the round's ledger row, or NULL */
} store_server_state;

/* Calls fn for each ledger row in round order; stops at fn's first
 * non-zero return, which it returns. */
int store_privacy_each(store *s, int (*fn)(void *ctx, const store_privacy *p),
                       void *ctx);

/* In one transaction: inserts model m (m->version, round, parent) and the
 * server state after it (NULL: none), marks the round COMMITTED with the
 * result's figures and the federated evaluation of its participants'
 * reports, and drops the round's stored updates. */
int store_round_commit(store *s, const store_round_result *r,
                       const store_model *m, const store_server_state *state);
/* Ends an evaluation round: COMMITTED with the coordinator's figures and
 * the weighted mean of the clients' reports; no model is created. */
int store_round_finish_eval(store *s, const store_round_result *r);
/* FAILED(reason), its stored updates dropped, and an event, in one
 * transaction. */
int store_round_fail(store *s, int64_t id, const char *reason, double now);
/* Marks every round that is not COMMITTED or FAILED as FAILED(reason);
 * *count (may be NULL) gets how many. */
int store_round_fail_unfinished(store *s, const char *reason, double now,
                                int *count);

/* Marks a training round as a secure-aggregation one: secagg says how
 * ("full", "plus", then e.g. "plus n=10 k=6 t=4 ring=12" once its
 * cohort is known). */
int store_round_set_secagg(store *s, int64_t id, const char *secagg);
/* How a DP training round sampled its clients: the results it now wants
 * (target), the sampling rate it is charged and how that came about. */
int store_round_set_sampling(store *s, int64_t id, int64_t target, double rate,
                             const char *sampling);
/* Per-phase survivor counts of a secure-aggregation round: counts[i] of
 * ADVERTISE, SHARE, MASKED, CONSISTENCY and UNMASK (secagg_phase order) for
 * the first `closed` phases (the others stay NULL). */
int store_round_secagg_counts(store *s, int64_t id, const uint32_t counts[5],
                              int closed);

/* The round a crash interrupted: the one not COMMITTED or FAILED, if any
 * (COHORT_ENOTFOUND otherwise). */
typedef struct store_round_info {
  int64_t id, base_version, target;
  char state[16];          /* OPEN, TRAINING or AGGREGATING */
  char kind[16];           /* TRAIN or EVALUATE */
  double deadline_at;      /* wall clock; 0 before TRAINING */
  store_codec codec;       /* TRAIN rounds */
  char secagg[64];         /* "" unless a secure-aggregation round */
  double dp_sampling_rate; /* the DP rate it is charged; 0 until known */
  char dp_sampling[96];    /* and how it sampled ("" until known) */
} store_round_info;
int store_round_unfinished(store *s, store_round_info *out);
/* Whether an evaluation round (in any state) was ever opened on model
 * base_version. */
int store_round_eval_exists(store *s, int64_t base_version, int *exists);

/* One participant of a round as stored, with its update when it uploaded
 * one (delta is borrowed for the duration of the callback). */
typedef struct store_participant {
  int64_t client;
  int uploaded, reported;
  uint64_t examples, bytes_down, bytes_up;
  char sha256_hex[65];
  const uint8_t *delta;
  size_t delta_len;
} store_participant;
typedef int (*store_participant_cb)(void *ctx, const store_participant *p);
/* Calls cb for every participant of round, in client order; stops at the
 * first non-zero return and returns it. */
int store_round_participants(store *s, int64_t round, store_participant_cb cb,
                             void *ctx);

/* ---- transactions ---- */
/* Begins a transaction (BEGIN IMMEDIATE), or a savepoint inside one
 * already open: several of the writes below in one commit (a batch of
 * check-ins, round_checkin_batch), where each write that makes a
 * transaction of its own stays all-or-nothing as a savepoint. At most 32
 * deep. */
int store_begin(store *s);
/* store_begin, but only if the write lock is free now: COHORT_EUNAVAIL
 * at once, with nothing begun or logged, when another connection holds
 * it (an operator's shell, `cohort ... --db`). For a batch whose writes
 * can as well go one at a time, which must not hold its caller's lock
 * through the busy timeout. */
int store_begin_now(store *s);
/* Ends what the last store_begin began: COMMIT (RELEASE) when rc is
 * COHORT_OK, else ROLLBACK (to the savepoint); returns rc, or the
 * COMMIT's failure. */
int store_finish(store *s, int rc);

/* ---- participations ---- */
int store_participation_select(store *s, int64_t round, int64_t client,
                               double now);
typedef struct store_upload {
  int64_t round, client;
  uint64_t bytes_down, bytes_up, examples;
  char sha256_hex[65]; /* the digest the client named its update by */
  uint64_t checksum;   /* checksum_xxh64 of the update's bytes */
  double uploaded_at;
} store_upload;
/* In one transaction: the participation becomes UPLOADED and its update
 * (len bytes as uploaded) is kept until the round ends, so a restarted
 * coordinator can resume the round; u->checksum, which the caller took or
 * checked, is what reading them back checks them against. */
int store_participation_uploaded(store *s, const store_upload *u,
                                 const uint8_t *delta, size_t len);
/* An update that comes in chunks goes to its round's file as they arrive,
 * so that the coordinator holds none of it between two chunks: a place of
 * len bytes at the file's end (*offset), each chunk written at its place,
 * the whole read back once it is in (*out malloc'd, the caller frees it),
 * and then store_participation_uploaded_at for the rows. Not fsynced, as
 * above. A write that fails stops the store as a failed keep does; a
 * write for a round whose file is gone (the round ended) is
 * COHORT_ENOTFOUND. Thread-safe. */
int store_update_reserve(store *s, int64_t round, size_t len, uint64_t *offset);
int store_update_write(store *s, int64_t round, uint64_t offset,
                       const uint8_t *data, size_t len);
int store_update_read(store *s, int64_t round, uint64_t offset, size_t len,
                      uint8_t **out);
/* store_participation_uploaded for an update whose len bytes are already
 * at offset of its round's file. */
int store_participation_uploaded_at(store *s, const store_upload *u,
                                    uint64_t offset, size_t len);
/* Forgets a participant's kept update (it could not be used after a
 * restart): the participation is SELECTED again, in one transaction, so the
 * client can upload anew. */
int store_participation_unupload(store *s, int64_t round, int64_t client);
/* Records that a participant of round sent its update too late (the first
 * time only; *recorded, which may be NULL, says whether this call did). An
 * evaluation round takes no updates, so nothing is late there. */
int store_participation_late(store *s, int64_t round, int64_t client,
                             double now, int *recorded);

/* A client's report of n metrics (federated evaluation), in one
 * transaction: all are stored (replacing earlier values of the same names)
 * or none. */
int store_metrics_put(store *s, int64_t round, int64_t client, size_t n,
                      const char *const *names, const double *values);
/* Like store_metrics_put, and marks the participation reported, in the same
 * transaction (an evaluation round's answer). */
int store_metrics_put_reported(store *s, int64_t round, int64_t client,
                               size_t n, const char *const *names,
                               const double *values, double now);

/* An operational event (round failures, restarts) for operators. */
int store_event(store *s, double now, int64_t round, const char *kind,
                const char *detail);

#endif
