/* The store's rounds, participations, kept updates, metrics and events; see
 * store.h. Every multi-row change is one transaction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "cohort_status.h"
#include "crypto.h"
#include "log.h"
#include "store.h"
#include "store_sql.h"

int store_round_max(store *s, int64_t *id) {
  return store_get_int(s, "SELECT COALESCE(MAX(id), 0) FROM rounds", id);
}

int store_round_count_committed(store *s, int64_t *n) {
  return store_get_int(s,
                       "SELECT COUNT(*) FROM rounds WHERE state = 'COMMITTED'"
                       " AND kind = 'TRAIN'",
                       n);
}

int store_round_open(store *s, int64_t id, int64_t base_version,
                     const char *kind, int64_t target, const store_codec *codec,
                     double now) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "INSERT INTO rounds (id, state, kind, target,"
                         " base_version, started_at, updated_at, codec,"
                         " codec_seed, codec_clip)"
                         " VALUES (?1, 'OPEN', ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8)",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, target);
  sqlite3_bind_int64(st, 4, base_version);
  sqlite3_bind_double(st, 5, now);
  if (codec) {
    sqlite3_bind_text(st, 6, codec->spec, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, codec->seed_hex, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 8, codec->clip);
  }
  return store_run(s, st, "open round");
}

int store_round_set_state(store *s, int64_t id, const char *state,
                          const char *reason, double now) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
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
  return store_run(s, st, "set round state");
}

int store_round_set_training(store *s, int64_t id, double deadline_at,
                             double now) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "UPDATE rounds SET state = 'TRAINING',"
                         " deadline_at = ?2, updated_at = ?3 WHERE id = ?1",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_double(st, 2, deadline_at);
  sqlite3_bind_double(st, 3, now);
  return store_run(s, st, "start training");
}

/* The federated evaluation of a round: the participants' reports of the
 * global model, weighted by the examples each evaluated on. */
#define FED_EVAL(metric)                                                       \
  "(SELECT SUM(m.value * e.value) / SUM(e.value) FROM metrics m"               \
  " JOIN metrics e ON e.round = m.round AND e.client_id = m.client_id"         \
  " AND e.name = 'eval_examples' WHERE m.round = ?1 AND m.name = '" metric     \
  "')"
#define FED_EXAMPLES                                                           \
  "(SELECT SUM(value) FROM metrics WHERE round = ?1 AND name = "               \
  "'eval_examples')"

static int record_result(store *s, const store_round_result *r,
                         int64_t model_version) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
      "UPDATE rounds SET state = 'COMMITTED', reason = NULL,"
      " model_version = ?2, clients_selected = ?3,"
      " clients_aggregated = ?4, accuracy = ?5, loss = ?6,"
      " bytes_up_mean = ?7, bytes_down_mean = ?8, updated_at = ?9,"
      " finished_at = ?9, fed_accuracy = " FED_EVAL(
          "global_accuracy") ","
                             " fed_loss = " FED_EVAL(
                                 "global_loss") ", fed_examples = " FED_EXAMPLES
                                                " WHERE id = ?1",
      &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, r->round);
  sqlite3_bind_int64(st, 2, model_version);
  sqlite3_bind_int64(st, 3, r->clients_selected);
  sqlite3_bind_int64(st, 4, r->clients_aggregated);
  store_bind_real_or_null(st, 5, r->accuracy);
  store_bind_real_or_null(st, 6, r->loss);
  store_bind_real_or_null(st, 7, r->bytes_up_mean);
  store_bind_real_or_null(st, 8, r->bytes_down_mean);
  sqlite3_bind_double(st, 9, r->finished_at);
  rc = store_run(s, st, "commit round");
  if (!rc && sqlite3_changes(s->db) != 1)
    rc = COHORT_ENOTFOUND;
  return rc;
}

static int drop_updates(store *s, int64_t round) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, "DELETE FROM updates WHERE round = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, round);
  return store_run(s, st, "drop updates");
}

/* Keeps only the optimizer state of the newest model: older states are
 * never read again. */
/* Only the latest model's state is kept: it is all a restart needs. */
static int put_server_state(store *s, int64_t version,
                            const store_server_state *state) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, "DELETE FROM strategy_state", &st);
  if (!rc)
    rc = store_run(s, st, "drop server state");
  if (rc || !state || (!state->strategy && !state->codec))
    return rc;
  rc = store_prepare(s,
                     "INSERT INTO strategy_state (version, state, codec_state)"
                     " VALUES (?1, ?2, ?3)",
                     &st);
  if (rc)
    return rc;
  static const uint8_t none[1];
  sqlite3_bind_int64(st, 1, version);
  sqlite3_bind_blob64(st, 2, state->strategy ? state->strategy : none,
                      state->strategy ? state->strategy_len : 0, SQLITE_STATIC);
  if (state->codec)
    sqlite3_bind_blob64(st, 3, state->codec, state->codec_len, SQLITE_STATIC);
  return store_run(s, st, "put server state");
}

int store_round_commit(store *s, const store_round_result *r,
                       const store_model *m, const store_server_state *state) {
  int rc = store_begin_durable(s);
  if (rc)
    return rc;
  rc = store_insert_model(s, m, r->finished_at);
  if (!rc)
    rc = put_server_state(s, m->version, state);
  if (!rc && state && state->privacy)
    rc = store_privacy_put(s, state->privacy);
  if (!rc)
    rc = record_result(s, r, m->version);
  if (!rc)
    rc = drop_updates(s, r->round);
  if (!rc)
    rc = store_models_prune(s);
  rc = store_finish_durable(s, rc);
  /* Only once the rows are gone: a crash before leaves a file that the
   * next store_open removes. */
  if (!rc)
    store_updates_remove(s->updates, r->round);
  return rc;
}

int store_round_finish_eval(store *s, const store_round_result *r) {
  int64_t base = 0;
  sqlite3_stmt *st;
  int rc =
      store_prepare(s, "SELECT base_version FROM rounds WHERE id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, r->round);
  if (sqlite3_step(st) == SQLITE_ROW)
    base = sqlite3_column_int64(st, 0);
  else
    rc = COHORT_ENOTFOUND;
  store_release(s, st);
  if (rc || (rc = store_begin_durable(s)))
    return rc;
  return store_finish_durable(s, record_result(s, r, base));
}

int store_round_fail(store *s, int64_t id, const char *reason, double now) {
  int rc = store_begin_durable(s);
  if (rc)
    return rc;
  rc = store_round_set_state(s, id, "FAILED", reason, now);
  if (!rc)
    rc = drop_updates(s, id);
  if (!rc)
    rc = store_event(s, now, id, "round_failed", reason);
  rc = store_finish_durable(s, rc);
  if (!rc)
    store_updates_remove(s->updates, id);
  return rc;
}

int store_round_fail_unfinished(store *s, const char *reason, double now,
                                int *count) {
  int rc = store_begin(s);
  if (rc)
    return rc;
  sqlite3_stmt *st;
  rc = store_prepare(s,
                     "UPDATE rounds SET state = 'FAILED', reason = ?1,"
                     " updated_at = ?2, finished_at = ?2"
                     " WHERE state NOT IN ('COMMITTED', 'FAILED')",
                     &st);
  if (!rc) {
    sqlite3_bind_text(st, 1, reason, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 2, now);
    rc = store_run(s, st, "fail unfinished rounds");
  }
  if (!rc && count)
    *count = sqlite3_changes(s->db);
  if (!rc)
    rc = store_exec(s, "DELETE FROM updates"); /* no round is open now */
  rc = store_finish(s, rc);
  if (!rc)
    store_updates_prune(s->updates, NULL, NULL);
  return rc;
}

int store_round_set_secagg(store *s, int64_t id, const char *secagg) {
  sqlite3_stmt *st;
  int rc = store_prepare(s, "UPDATE rounds SET secagg = ?2 WHERE id = ?1", &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_text(st, 2, secagg, -1, SQLITE_TRANSIENT);
  return store_run(s, st, "mark secure aggregation");
}

int store_round_set_sampling(store *s, int64_t id, int64_t target, double rate,
                             const char *sampling) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "UPDATE rounds SET target = ?2, dp_sampling_rate = ?3,"
                         " dp_sampling = ?4 WHERE id = ?1",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, target);
  sqlite3_bind_double(st, 3, rate);
  sqlite3_bind_text(st, 4, sampling, -1, SQLITE_TRANSIENT);
  return store_run(s, st, "record the round's sampling");
}

int store_round_secagg_counts(store *s, int64_t id, const uint32_t counts[5],
                              int closed) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "UPDATE rounds SET secagg_advertised = ?2,"
                         " secagg_shared = ?3, secagg_masked = ?4,"
                         " secagg_attested = ?5, secagg_unmasked = ?6"
                         " WHERE id = ?1",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, id);
  for (int i = 0; i < 5; i++) {
    if (i < closed)
      sqlite3_bind_int64(st, 2 + i, counts[i]);
    else
      sqlite3_bind_null(st, 2 + i);
  }
  return store_run(s, st, "record secure aggregation counts");
}

int store_round_unfinished(store *s, store_round_info *out) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "SELECT id, base_version, target, state, kind,"
                         " COALESCE(deadline_at, 0), COALESCE(codec, ''),"
                         " COALESCE(codec_seed, ''), COALESCE(codec_clip, 0),"
                         " COALESCE(secagg, ''), COALESCE(dp_sampling_rate,"
                         " 0), COALESCE(dp_sampling, '') FROM rounds"
                         " WHERE state NOT IN ('COMMITTED', 'FAILED')"
                         " ORDER BY id DESC LIMIT 1",
                         &st);
  if (rc)
    return rc;
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    memset(out, 0, sizeof *out);
    out->id = sqlite3_column_int64(st, 0);
    out->base_version = sqlite3_column_int64(st, 1);
    out->target = sqlite3_column_int64(st, 2);
    snprintf(out->state, sizeof out->state, "%s",
             (const char *)sqlite3_column_text(st, 3));
    snprintf(out->kind, sizeof out->kind, "%s",
             (const char *)sqlite3_column_text(st, 4));
    out->deadline_at = sqlite3_column_double(st, 5);
    snprintf(out->codec.spec, sizeof out->codec.spec, "%s",
             (const char *)sqlite3_column_text(st, 6));
    snprintf(out->codec.seed_hex, sizeof out->codec.seed_hex, "%s",
             (const char *)sqlite3_column_text(st, 7));
    out->codec.clip = sqlite3_column_double(st, 8);
    snprintf(out->secagg, sizeof out->secagg, "%s",
             (const char *)sqlite3_column_text(st, 9));
    out->dp_sampling_rate = sqlite3_column_double(st, 10);
    snprintf(out->dp_sampling, sizeof out->dp_sampling, "%s",
             (const char *)sqlite3_column_text(st, 11));
  } else {
    rc = step == SQLITE_DONE ? COHORT_ENOTFOUND
                             : store_fail(s, "find unfinished round");
  }
  store_release(s, st);
  return rc;
}

int store_round_eval_exists(store *s, int64_t base_version, int *exists) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "SELECT COUNT(*) FROM rounds WHERE kind = 'EVALUATE'"
                         " AND base_version = ?1",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, base_version);
  if (sqlite3_step(st) == SQLITE_ROW)
    *exists = sqlite3_column_int64(st, 0) > 0;
  else
    rc = store_fail(s, "find evaluation round");
  store_release(s, st);
  return rc;
}

/* The checksum a kept update's row records of its bytes: "xxh64:" and the
 * XXH64 in hex (schema 13 on), or a SHA-256 in hex (rows from before). */
#define KEPT_XXH64_TAG "xxh64:"
#define KEPT_CHECKSUM_LEN (sizeof KEPT_XXH64_TAG + 16)
static void kept_checksum(uint64_t xxh64, char out[KEPT_CHECKSUM_LEN]) {
  snprintf(out, KEPT_CHECKSUM_LEN, KEPT_XXH64_TAG "%016llx",
           (unsigned long long)xxh64);
}

static int kept_bytes_match(const uint8_t *bytes, size_t len,
                            const char *recorded) {
  char hex[2 * CRYPTO_SHA256_LEN + 1]; /* the longer of the two */
  if (strncmp(recorded, KEPT_XXH64_TAG, strlen(KEPT_XXH64_TAG)) == 0) {
    kept_checksum(checksum_xxh64(bytes, len), hex);
    return strcmp(hex, recorded) == 0;
  }
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256(bytes, len, digest))
    return 0;
  crypto_hex(digest, sizeof digest, hex);
  return strcmp(hex, recorded) == 0;
}

/* The bytes of a row kept in the round's file, checked against the row's
 * checksum: *out is NULL when they are missing, cut short or not the ones
 * recorded. Only running out of memory is an error. */
static int read_kept(store *s, int64_t round, int64_t client, uint64_t offset,
                     uint64_t len, const char *checksum, uint8_t **out) {
  int rc = store_updates_read(s->updates, round, offset, len, out);
  if (rc == COHORT_ENOMEM)
    return rc;
  const char *why = "its bytes are missing from the round's file";
  if (!rc) {
    if (kept_bytes_match(*out, (size_t)len, checksum))
      return COHORT_OK;
    why = "its bytes in the round's file are not the ones recorded";
    free(*out);
    *out = NULL;
  }
  log_warn("store: round %lld, client %lld: kept update unreadable: %s",
           (long long)round, (long long)client, why);
  return COHORT_OK;
}

int store_round_participants(store *s, int64_t round, store_participant_cb cb,
                             void *ctx) {
  sqlite3_stmt *st;
  int rc = store_prepare(
      s,
      "SELECT p.client_id, p.state = 'UPLOADED', p.reported_at IS NOT NULL,"
      " p.examples, p.bytes_down, p.bytes_up, COALESCE(p.update_sha256, ''),"
      " u.delta, u.offset, u.length, u.checksum FROM participations p"
      " LEFT JOIN updates u ON u.round = p.round AND u.client_id = p.client_id"
      " WHERE p.round = ?1 ORDER BY p.client_id",
      &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, round);
  int step;
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    store_participant p = {.client = sqlite3_column_int64(st, 0),
                           .uploaded = sqlite3_column_int(st, 1),
                           .reported = sqlite3_column_int(st, 2),
                           .examples = (uint64_t)sqlite3_column_int64(st, 3),
                           .bytes_down = (uint64_t)sqlite3_column_int64(st, 4),
                           .bytes_up = (uint64_t)sqlite3_column_int64(st, 5)};
    snprintf(p.sha256_hex, sizeof p.sha256_hex, "%s",
             (const char *)sqlite3_column_text(st, 6));
    uint8_t *kept = NULL;
    if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
      /* A row from before schema 9 holds its bytes itself. */
      p.delta = sqlite3_column_blob(st, 7);
      p.delta_len = (size_t)sqlite3_column_bytes(st, 7);
    } else if (sqlite3_column_type(st, 8) != SQLITE_NULL) {
      uint64_t len = (uint64_t)sqlite3_column_int64(st, 9);
      rc = read_kept(s, round, p.client, (uint64_t)sqlite3_column_int64(st, 8),
                     len, (const char *)sqlite3_column_text(st, 10), &kept);
      if (rc) {
        store_fail_with(s, rc, "read kept update", "out of memory");
        break;
      }
      p.delta = kept;
      p.delta_len = kept ? (size_t)len : 0;
    }
    rc = cb(ctx, &p);
    free(kept);
  }
  if (!rc && step != SQLITE_DONE)
    rc = store_fail(s, "read participants");
  store_release(s, st);
  return rc;
}

/* ---- participations ---- */

int store_participation_select(store *s, int64_t round, int64_t client,
                               double now) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "INSERT INTO participations (round, client_id, state,"
                         " selected_at) VALUES (?1, ?2, 'SELECTED', ?3)",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, round);
  sqlite3_bind_int64(st, 2, client);
  sqlite3_bind_double(st, 3, now);
  return store_run(s, st, "select participant");
}

/* The row naming where the update's len bytes are in the round's file,
 * with the checksum a resumed round reads them back by. */
static int keep_update(store *s, const store_upload *u, uint64_t offset,
                       size_t len) {
  char checksum[KEPT_CHECKSUM_LEN];
  kept_checksum(u->checksum, checksum);
  sqlite3_stmt *st;
  int rc = store_prepare(s,
                         "INSERT INTO updates (round, client_id, examples,"
                         " checksum, offset, length)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                         &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, u->round);
  sqlite3_bind_int64(st, 2, u->client);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)u->examples);
  sqlite3_bind_text(st, 4, checksum, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)offset);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)len);
  return store_run(s, st, "keep update");
}

/* A write of an update's bytes that failed: no space, a read-only or
 * failing disk, so every upload would fail; the store stops. */
static int kept_bytes_failed(store *s, const char *why) {
  int failed = store_fail_with(s, COHORT_EIO, "keep update", why);
  store_set_fatal(s, s->last_error);
  return failed;
}

int store_update_reserve(store *s, int64_t round, size_t len,
                         uint64_t *offset) {
  char why[256];
  if (store_updates_reserve(s->updates, round, len, offset, why, sizeof why))
    return kept_bytes_failed(s, why);
  return COHORT_OK;
}

int store_update_write(store *s, int64_t round, uint64_t offset,
                       const uint8_t *data, size_t len) {
  char why[256];
  int rc = store_updates_write_at(s->updates, round, offset, data, len, why,
                                  sizeof why);
  return rc == COHORT_EIO ? kept_bytes_failed(s, why) : rc;
}

int store_update_read(store *s, int64_t round, uint64_t offset, size_t len,
                      uint8_t **out) {
  return store_updates_read(s->updates, round, offset, len, out);
}

/* The rows of an upload: the participation UPLOADED and, when its bytes
 * are kept (kept), where they are in the round's file. */
static int record_upload(store *s, const store_upload *u, int kept,
                         uint64_t offset, size_t len) {
  int rc = store_begin(s);
  if (rc)
    return rc;
  sqlite3_stmt *st;
  rc = store_prepare(s,
                     "UPDATE participations SET state = 'UPLOADED',"
                     " bytes_down = ?3, bytes_up = ?4, examples = ?5,"
                     " update_sha256 = ?6, uploaded_at = ?7"
                     " WHERE round = ?1 AND client_id = ?2",
                     &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, u->round);
    sqlite3_bind_int64(st, 2, u->client);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)u->bytes_down);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)u->bytes_up);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)u->examples);
    sqlite3_bind_text(st, 6, u->sha256_hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 7, u->uploaded_at);
    rc = store_run(s, st, "record upload");
  }
  if (!rc && sqlite3_changes(s->db) != 1)
    rc = COHORT_ENOTFOUND;
  if (!rc && kept)
    rc = keep_update(s, u, offset, len);
  return store_finish(s, rc);
}

int store_participation_uploaded(store *s, const store_upload *u,
                                 const uint8_t *delta, size_t len) {
  /* The bytes first, then the rows that name them: a crash in between
   * leaves bytes no row names, removed with the round's file. */
  uint64_t offset = 0;
  char why[256];
  if (delta && store_updates_append(s->updates, u->round, delta, len, &offset,
                                    why, sizeof why))
    return kept_bytes_failed(s, why);
  return record_upload(s, u, delta != NULL, offset, len);
}

int store_participation_uploaded_at(store *s, const store_upload *u,
                                    uint64_t offset, size_t len) {
  return record_upload(s, u, 1, offset, len);
}

int store_participation_unupload(store *s, int64_t round, int64_t client) {
  int rc = store_begin(s);
  if (rc)
    return rc;
  sqlite3_stmt *st;
  rc = store_prepare(
      s, "DELETE FROM updates WHERE round = ?1 AND client_id = ?2", &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, round);
    sqlite3_bind_int64(st, 2, client);
    rc = store_run(s, st, "drop kept update");
  }
  if (!rc)
    rc = store_prepare(s,
                       "UPDATE participations SET state = 'SELECTED',"
                       " update_sha256 = NULL, uploaded_at = NULL"
                       " WHERE round = ?1 AND client_id = ?2",
                       &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, round);
    sqlite3_bind_int64(st, 2, client);
    rc = store_run(s, st, "reselect participant");
  }
  return store_finish(s, rc);
}

int store_participation_late(store *s, int64_t round, int64_t client,
                             double now, int *recorded) {
  if (recorded)
    *recorded = 0;
  int rc = store_begin(s);
  if (rc)
    return rc;
  sqlite3_stmt *st;
  rc = store_prepare(s,
                     "UPDATE participations SET late_at = ?3 WHERE round = ?1"
                     " AND client_id = ?2 AND state = 'SELECTED'"
                     " AND late_at IS NULL AND EXISTS (SELECT 1 FROM rounds"
                     " WHERE id = ?1 AND kind = 'TRAIN')",
                     &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, round);
    sqlite3_bind_int64(st, 2, client);
    sqlite3_bind_double(st, 3, now);
    rc = store_run(s, st, "record late upload");
  }
  int changed = !rc && sqlite3_changes(s->db) == 1;
  if (changed) {
    rc = store_prepare(s,
                       "UPDATE rounds SET late_uploads = late_uploads + 1"
                       " WHERE id = ?1",
                       &st);
    if (!rc) {
      sqlite3_bind_int64(st, 1, round);
      rc = store_run(s, st, "count late upload");
    }
  }
  rc = store_finish(s, rc);
  if (!rc && recorded)
    *recorded = changed;
  return rc;
}

/* ---- metrics and events ---- */

static int put_metrics(store *s, int64_t round, int64_t client, size_t n,
                       const char *const *names, const double *values) {
  sqlite3_stmt *st = NULL;
  int rc = store_prepare(s,
                         "INSERT OR REPLACE INTO metrics (round, client_id,"
                         " name, value) VALUES (?1, ?2, ?3, ?4)",
                         &st);
  for (size_t i = 0; !rc && i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, round);
    sqlite3_bind_int64(st, 2, client);
    sqlite3_bind_text(st, 3, names[i], -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 4, values[i]);
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = store_fail(s, "put metric");
  }
  store_release(s, st);
  return rc;
}

int store_metrics_put(store *s, int64_t round, int64_t client, size_t n,
                      const char *const *names, const double *values) {
  int rc = store_begin(s);
  if (!rc)
    rc = store_finish(s, put_metrics(s, round, client, n, names, values));
  return rc;
}

int store_metrics_put_reported(store *s, int64_t round, int64_t client,
                               size_t n, const char *const *names,
                               const double *values, double now) {
  int rc = store_begin(s);
  if (rc)
    return rc;
  rc = put_metrics(s, round, client, n, names, values);
  sqlite3_stmt *st;
  if (!rc)
    rc = store_prepare(s,
                       "UPDATE participations SET reported_at = ?3"
                       " WHERE round = ?1 AND client_id = ?2",
                       &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, round);
    sqlite3_bind_int64(st, 2, client);
    sqlite3_bind_double(st, 3, now);
    rc = store_run(s, st, "mark reported");
  }
  return store_finish(s, rc);
}

int store_event(store *s, double now, int64_t round, const char *kind,
                const char *detail) {
  sqlite3_stmt *st;
  int rc = store_prepare(s,
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
  return store_run(s, st, "record event");
}
