/* The round engine; see round.h. One mutex guards the in-memory state and
 * the store connection. Aggregation and evaluation run outside it, while the
 * round is AGGREGATING and handlers leave the running sum alone. */
#include "round.h"

#include <grpc/status.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "fedavg.h"
#include "log.h"
#include "nn_train.h"
#include "pb.h"
#include "wire.h"

#define MAX_ENROLL_TOKENS 16
#define MAX_METRIC_NAME 64
#define MAX_PLATFORM 64
/* Example counts above this are not believable and could skew the average. */
#define MAX_EXAMPLES 1000000000ULL

typedef struct participant {
  int64_t client;
  int uploaded;
  uint64_t bytes_down, bytes_up, examples;
  uint8_t digest[CRYPTO_SHA256_LEN]; /* of the update being or last received */
  uint8_t *buf;                      /* assembly buffer while uploading */
  uint64_t total, received;
} participant;

typedef struct seen_client {
  int64_t id;
  int told_done;
  double touched_at; /* monotonic time clients.last_seen was last written */
} seen_client;

/* clients.last_seen is for operators, not for correctness: write it at most
 * this often per client, so a fleet polling every second does not cost a
 * synchronous database write per check-in. */
#define LAST_SEEN_INTERVAL_S 60.0

struct round_engine {
  pthread_mutex_t mu;
  pthread_cond_t uploaded; /* signalled when an upload completes */
  round_config cfg;
  store *db;
  nn_model model;

  uint8_t enroll[MAX_ENROLL_TOKENS][CRYPTO_SHA256_LEN];
  size_t n_enroll;

  /* The global model: parameters, their wire form and its digest. */
  int64_t version;
  float *global;
  uint8_t *blob;
  size_t blob_len;
  uint8_t sha[CRYPTO_SHA256_LEN];

  int64_t committed;
  int64_t next_round;

  round_state state;
  int64_t round;
  double opened_at, deadline; /* monotonic seconds */
  participant *parts;         /* cfg.clients_per_round slots */
  size_t n_parts, n_uploaded;
  fedavg acc;

  seen_client *seen;
  size_t n_seen, cap_seen;
};

const char *round_state_name(round_state s) {
  static const char *names[] = {"IDLE", "OPEN", "TRAINING", "AGGREGATING"};
  return (unsigned)s < 4 ? names[s] : "?";
}

static round_verdict ok_verdict(void) {
  round_verdict v = {0};
  return v;
}

static round_verdict verdict(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static round_verdict verdict(int code, const char *fmt, ...) {
  round_verdict v = {.code = code};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v.detail, sizeof v.detail, fmt, ap);
  va_end(ap);
  return v;
}

static round_verdict store_failed(round_engine *e) {
  return verdict(GRPC_STATUS_INTERNAL, "coordinator database error: %s",
                 store_errmsg(e->db));
}

/* Sets the global model from params (taken over) and computes its wire
 * form and digest. */
static int set_global(round_engine *e, float *params, int64_t version) {
  size_t len = e->model.n_params * sizeof(float);
  uint8_t *blob = malloc(len);
  if (!blob) {
    free(params);
    return COHORT_ENOMEM;
  }
  wire_put_f32le(blob, params, e->model.n_params);
  int rc = crypto_sha256(blob, len, e->sha);
  free(e->global);
  free(e->blob);
  e->global = params;
  e->blob = blob;
  e->blob_len = len;
  e->version = version;
  return rc;
}

static int load_or_create_model(round_engine *e, char *err, size_t errlen) {
  store_model m;
  int rc = store_model_latest(e->db, &m);
  size_t want = e->model.n_params * sizeof(float);
  if (rc == COHORT_OK) {
    if (strcmp(m.spec, e->model.spec) != 0 || m.blob_len != want) {
      snprintf(err, errlen,
               "the database holds a %s model of %zu bytes; --model %s needs "
               "%zu bytes (use another --db)",
               m.spec, m.blob_len, e->model.spec, want);
      store_model_clear(&m);
      return COHORT_EINVAL;
    }
    float *p = malloc(want);
    if (!p) {
      store_model_clear(&m);
      return COHORT_ENOMEM;
    }
    wire_get_f32le(p, m.blob, e->model.n_params);
    int64_t version = m.version;
    store_model_clear(&m);
    return set_global(e, p, version);
  }
  if (rc != COHORT_ENOTFOUND) {
    snprintf(err, errlen, "cannot read models: %s", store_errmsg(e->db));
    return rc;
  }
  float *p = malloc(want);
  if (!p)
    return COHORT_ENOMEM;
  nn_net_init(&e->model.net, p, e->cfg.seed);
  rc = set_global(e, p, 0);
  if (rc)
    return rc;
  store_model init = {.version = 0,
                      .round = 0,
                      .parent = -1,
                      .blob = e->blob,
                      .blob_len = e->blob_len};
  snprintf(init.spec, sizeof init.spec, "%s", e->model.spec);
  crypto_hex(e->sha, sizeof e->sha, init.sha256_hex);
  rc = store_model_put_initial(e->db, &init, clock_wall_s());
  if (rc)
    snprintf(err, errlen, "cannot store the initial model: %s",
             store_errmsg(e->db));
  return rc;
}

int round_engine_new(const round_config *cfg, store *db, round_engine **out,
                     char *err, size_t errlen) {
  if (cfg->clients_per_round < 1 || cfg->min_clients < 1 ||
      cfg->min_clients > cfg->clients_per_round || cfg->rounds < 0) {
    snprintf(err, errlen,
             "need 1 <= --min-clients <= --clients-per-round and --rounds "
             ">= 0");
    return COHORT_EINVAL;
  }
  round_engine *e = calloc(1, sizeof *e);
  if (!e)
    return COHORT_ENOMEM;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->uploaded, NULL);
  e->cfg = *cfg;
  e->db = db;
  int rc = nn_zoo_resolve(cfg->model_spec, cfg->input, cfg->classes, &e->model,
                          err, errlen);
  if (rc)
    goto out;
  rc = COHORT_ENOMEM;
  e->parts = calloc((size_t)cfg->clients_per_round, sizeof *e->parts);
  if (!e->parts || fedavg_init(&e->acc, e->model.n_params))
    goto out;
  int failed = 0;
  rc = store_round_fail_unfinished(db, "coordinator restarted", clock_wall_s(),
                                   &failed);
  if (rc) {
    snprintf(err, errlen, "cannot recover rounds: %s", store_errmsg(db));
    goto out;
  }
  if (failed)
    log_warn("marked %d interrupted round(s) FAILED after a restart", failed);
  rc = load_or_create_model(e, err, errlen);
  if (rc)
    goto out;
  int64_t max_round = 0;
  rc = store_round_count_committed(db, &e->committed);
  if (!rc)
    rc = store_round_max(db, &max_round);
  if (rc) {
    snprintf(err, errlen, "cannot read rounds: %s", store_errmsg(db));
    goto out;
  }
  e->next_round = max_round + 1;
  log_info("model %s (%zu parameters), version %lld; %lld of %ld rounds "
           "committed",
           e->model.spec, e->model.n_params, (long long)e->version,
           (long long)e->committed, cfg->rounds);
out:
  if (rc) {
    round_engine_free(e);
    return rc;
  }
  *out = e;
  return COHORT_OK;
}

static void reset_participants(round_engine *e) {
  for (size_t i = 0; i < e->n_parts; i++)
    free(e->parts[i].buf);
  memset(e->parts, 0, (size_t)e->cfg.clients_per_round * sizeof *e->parts);
  e->n_parts = 0;
  e->n_uploaded = 0;
}

void round_engine_free(round_engine *e) {
  if (!e)
    return;
  if (e->parts)
    reset_participants(e);
  free(e->parts);
  fedavg_close(&e->acc);
  free(e->global);
  free(e->blob);
  free(e->seen);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->uploaded);
  free(e);
}

/* ---- enrollment and authentication ---- */

int round_add_enrollment_token(round_engine *e, const char *token) {
  if (!token || !*token)
    return COHORT_EINVAL;
  pthread_mutex_lock(&e->mu);
  int rc = COHORT_EINVAL;
  if (e->n_enroll < MAX_ENROLL_TOKENS)
    rc = crypto_sha256(token, strlen(token), e->enroll[e->n_enroll++]);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

round_verdict round_register(round_engine *e, const char *enrollment_token,
                             const char *platform, int64_t *client_id,
                             char token_out[65]) {
  if (!enrollment_token || !*enrollment_token)
    return verdict(GRPC_STATUS_UNAUTHENTICATED, "missing enrollment token");
  if (platform && strlen(platform) > MAX_PLATFORM)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "platform name longer than %d bytes", MAX_PLATFORM);
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256(enrollment_token, strlen(enrollment_token), digest))
    return verdict(GRPC_STATUS_INTERNAL, "cannot hash the token");
  char hash_hex[CRYPTO_SHA256_HEX_LEN];
  round_verdict v = ok_verdict();
  pthread_mutex_lock(&e->mu);
  int known = 0;
  for (size_t i = 0; i < e->n_enroll; i++)
    known |= crypto_equal(digest, e->enroll[i], sizeof digest);
  if (!known) {
    v = verdict(GRPC_STATUS_UNAUTHENTICATED, "unknown enrollment token");
    goto out;
  }
  if (crypto_new_token(token_out) || crypto_sha256_hex(token_out, hash_hex)) {
    v = verdict(GRPC_STATUS_INTERNAL, "cannot make a session token");
    goto out;
  }
  if (store_client_add(e->db, hash_hex, platform, clock_wall_s(), client_id))
    v = store_failed(e);
  else
    log_info("client %lld registered (%s)", (long long)*client_id,
             platform && *platform ? platform : "unknown platform");
out:
  pthread_mutex_unlock(&e->mu);
  return v;
}

round_verdict round_authenticate(round_engine *e, const char *bearer,
                                 int64_t *client_id) {
  if (!bearer)
    return verdict(GRPC_STATUS_UNAUTHENTICATED,
                   "missing 'authorization: Bearer <session token>' metadata");
  char hash_hex[CRYPTO_SHA256_HEX_LEN];
  if (crypto_sha256_hex(bearer, hash_hex))
    return verdict(GRPC_STATUS_INTERNAL, "cannot hash the token");
  pthread_mutex_lock(&e->mu);
  int rc = store_client_by_token(e->db, hash_hex, client_id);
  round_verdict v = ok_verdict();
  if (rc == COHORT_ENOTFOUND)
    v = verdict(GRPC_STATUS_UNAUTHENTICATED,
                "unknown session token; register again");
  else if (rc)
    v = store_failed(e);
  pthread_mutex_unlock(&e->mu);
  return v;
}

/* ---- helpers under the lock ---- */

static participant *find_participant(round_engine *e, int64_t client) {
  for (size_t i = 0; i < e->n_parts; i++)
    if (e->parts[i].client == client)
      return &e->parts[i];
  return NULL;
}

static seen_client *see_client(round_engine *e, int64_t client) {
  for (size_t i = 0; i < e->n_seen; i++)
    if (e->seen[i].id == client)
      return &e->seen[i];
  if (e->n_seen == e->cap_seen) {
    size_t cap = e->cap_seen ? 2 * e->cap_seen : 16;
    seen_client *s = realloc(e->seen, cap * sizeof *s);
    if (!s)
      return NULL;
    e->seen = s;
    e->cap_seen = cap;
  }
  e->seen[e->n_seen] = (seen_client){.id = client};
  return &e->seen[e->n_seen++];
}

static int done_locked(round_engine *e) {
  return e->committed >= e->cfg.rounds && e->state == ROUND_IDLE;
}

static int round_accepts_work(round_engine *e) {
  return e->state == ROUND_OPEN || e->state == ROUND_TRAINING;
}

static uint32_t jittered_retry_ms(round_engine *e) {
  /* Uniform in [0.5, 1.5) x the mean, so a fleet that checked in together
   * spreads out instead of returning in lockstep. */
  uint32_t r = 0;
  crypto_random(&r, sizeof r);
  double u = (double)r / 4294967296.0;
  return (uint32_t)(e->cfg.retry_ms * (0.5 + u));
}

static void fill_task(round_engine *e, round_task *t) {
  t->round = e->round;
  t->model_version = e->version;
  memcpy(t->model_sha256, e->sha, sizeof e->sha);
  t->model_size = e->blob_len;
  snprintf(t->model_spec, sizeof t->model_spec, "%s", e->model.spec);
  t->input = e->cfg.input;
  t->classes = e->cfg.classes;
  t->epochs = e->cfg.epochs;
  t->batch_size = e->cfg.batch_size;
  t->learning_rate = e->cfg.learning_rate;
  double left = e->state == ROUND_TRAINING
                    ? e->deadline - clock_mono_s()
                    : e->cfg.round_timeout_s + e->cfg.selection_timeout_s;
  t->deadline_ms = left > 0 ? (uint32_t)(left * 1000) : 0;
}

/* ---- check-in ---- */

round_verdict round_checkin(round_engine *e, int64_t client,
                            checkin_result *out) {
  memset(out, 0, sizeof *out);
  round_verdict v = ok_verdict();
  pthread_mutex_lock(&e->mu);
  seen_client *seen = see_client(e, client);
  if (!seen) {
    v = verdict(GRPC_STATUS_RESOURCE_EXHAUSTED, "coordinator out of memory");
    goto out;
  }
  double now = clock_mono_s();
  if (seen->touched_at == 0 || now - seen->touched_at >= LAST_SEEN_INTERVAL_S) {
    store_client_touch(e->db, client, clock_wall_s());
    seen->touched_at = now;
  }
  if (done_locked(e)) {
    out->kind = CHECKIN_DONE;
    out->rounds_committed = e->committed;
    seen->told_done = 1;
    goto out;
  }
  out->kind = CHECKIN_RETRY;
  out->retry_after_ms = jittered_retry_ms(e);
  if (!round_accepts_work(e))
    goto out;
  participant *p = find_participant(e, client);
  if (p) {
    if (!p->uploaded) {
      out->kind = CHECKIN_TASK; /* a repeated check-in gets the same task */
      fill_task(e, &out->task);
    }
    goto out;
  }
  if (e->state != ROUND_OPEN || e->n_parts >= (size_t)e->cfg.clients_per_round)
    goto out;
  if (store_participation_select(e->db, e->round, client, clock_wall_s())) {
    v = store_failed(e);
    goto out;
  }
  p = &e->parts[e->n_parts++];
  memset(p, 0, sizeof *p);
  p->client = client;
  out->kind = CHECKIN_TASK;
  fill_task(e, &out->task);
  log_info("round %lld: selected client %lld (%zu/%ld)", (long long)e->round,
           (long long)client, e->n_parts, e->cfg.clients_per_round);
out:
  pthread_mutex_unlock(&e->mu);
  return v;
}

/* ---- model download ---- */

round_verdict round_get_model(round_engine *e, int64_t client, int64_t version,
                              uint64_t offset, uint8_t *buf, size_t max_bytes,
                              size_t *len, uint64_t *total,
                              uint8_t sha256[32]) {
  round_verdict v = ok_verdict();
  pthread_mutex_lock(&e->mu);
  if (version != e->version) {
    v = verdict(GRPC_STATUS_NOT_FOUND,
                "model version %lld is not served; the current version is "
                "%lld",
                (long long)version, (long long)e->version);
  } else if (offset > e->blob_len) {
    v = verdict(GRPC_STATUS_OUT_OF_RANGE,
                "offset %llu is past the end of the %zu-byte model",
                (unsigned long long)offset, e->blob_len);
  } else {
    size_t n = e->blob_len - (size_t)offset;
    if (n > max_bytes)
      n = max_bytes;
    memcpy(buf, e->blob + offset, n);
    *len = n;
    *total = e->blob_len;
    memcpy(sha256, e->sha, sizeof e->sha);
  }
  pthread_mutex_unlock(&e->mu);
  return v;
}

void round_count_download(round_engine *e, int64_t client, size_t wire_bytes) {
  pthread_mutex_lock(&e->mu);
  participant *p = round_accepts_work(e) ? find_participant(e, client) : NULL;
  if (p)
    p->bytes_down += wire_bytes;
  pthread_mutex_unlock(&e->mu);
}

/* ---- upload ---- */

static void drop_assembly(participant *p) {
  free(p->buf);
  p->buf = NULL;
  p->total = p->received = 0;
}

/* Validates the assembled update and folds it in. On failure the assembly
 * is dropped and nothing is stored. */
static round_verdict finish_upload(round_engine *e, participant *p,
                                   uint64_t examples) {
  uint8_t digest[CRYPTO_SHA256_LEN];
  size_t n = e->model.n_params;
  round_verdict v = ok_verdict();
  float *delta = NULL;
  if (crypto_sha256(p->buf, p->total, digest) ||
      !crypto_equal(digest, p->digest, sizeof digest)) {
    v = verdict(GRPC_STATUS_INVALID_ARGUMENT,
                "update digest does not match its bytes; upload it again");
    goto out;
  }
  delta = malloc(n * sizeof *delta);
  if (!delta) {
    v = verdict(GRPC_STATUS_RESOURCE_EXHAUSTED, "coordinator out of memory");
    goto out;
  }
  wire_get_f32le(delta, p->buf, n);
  size_t bad = wire_first_nonfinite(delta, n);
  if (bad < n) {
    v = verdict(GRPC_STATUS_INVALID_ARGUMENT,
                "update element %zu is %s; updates must be finite", bad,
                isnan(delta[bad]) ? "NaN" : "infinite");
    goto out;
  }
  store_upload u = {.round = e->round,
                    .client = p->client,
                    .bytes_down = p->bytes_down,
                    .bytes_up = p->bytes_up,
                    .examples = examples,
                    .uploaded_at = clock_wall_s()};
  crypto_hex(p->digest, sizeof p->digest, u.sha256_hex);
  /* The row first: if the store fails, the sum has not been touched. */
  if (store_participation_uploaded(e->db, &u)) {
    v = store_failed(e);
    goto out;
  }
  fedavg_add(&e->acc, delta, (double)examples);
  p->uploaded = 1;
  p->examples = examples;
  e->n_uploaded++;
  pthread_cond_broadcast(&e->uploaded);
  log_info("round %lld: update from client %lld (%llu examples, %llu bytes "
           "up), %zu/%zu in",
           (long long)e->round, (long long)p->client,
           (unsigned long long)examples, (unsigned long long)p->bytes_up,
           e->n_uploaded, e->n_parts);
out:
  free(delta);
  drop_assembly(p);
  return v;
}

round_verdict round_upload(round_engine *e, int64_t client,
                           const upload_chunk *c, uint64_t *next_offset,
                           int *complete) {
  *next_offset = 0;
  *complete = 0;
  size_t want = e->model.n_params * sizeof(float);
  if (c->len > PB_MAX_CHUNK_BYTES)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "chunk of %zu bytes exceeds the %d-byte chunk limit", c->len,
                   PB_MAX_CHUNK_BYTES);
  if (c->sha256_len != CRYPTO_SHA256_LEN)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "update_sha256 has %zu bytes; SHA-256 has 32",
                   c->sha256_len);
  if (c->total_size != want)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "update has %llu bytes (%llu float32 elements); the model "
                   "has %zu elements (%zu bytes)",
                   (unsigned long long)c->total_size,
                   (unsigned long long)(c->total_size / 4), want / 4, want);
  if (c->num_examples == 0 || c->num_examples > MAX_EXAMPLES)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "num_examples %llu is outside [1, %llu]",
                   (unsigned long long)c->num_examples, MAX_EXAMPLES);
  if (c->offset > c->total_size || c->len > c->total_size - c->offset)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "chunk [%llu, +%zu) runs past the update's %llu bytes",
                   (unsigned long long)c->offset, c->len,
                   (unsigned long long)c->total_size);

  round_verdict v = ok_verdict();
  pthread_mutex_lock(&e->mu);
  if (c->round != e->round || e->state == ROUND_IDLE) {
    v = verdict(GRPC_STATUS_FAILED_PRECONDITION,
                "round %lld is not the current round (current: %lld, %s)",
                (long long)c->round, (long long)e->round,
                round_state_name(e->state));
    goto out;
  }
  participant *p = find_participant(e, client);
  if (!p) {
    v = verdict(GRPC_STATUS_PERMISSION_DENIED,
                "client %lld was not selected for round %lld",
                (long long)client, (long long)e->round);
    goto out;
  }
  if (p->uploaded) {
    if (crypto_equal(p->digest, c->sha256, CRYPTO_SHA256_LEN)) {
      /* A retry of an update we already hold: idempotent, changes nothing. */
      *next_offset = c->total_size;
      *complete = 1;
      snprintf(v.detail, sizeof v.detail,
               "duplicate upload of the same update ignored");
    } else {
      v = verdict(GRPC_STATUS_ALREADY_EXISTS,
                  "client %lld already uploaded a different update for "
                  "round %lld",
                  (long long)client, (long long)e->round);
    }
    goto out;
  }
  if (!round_accepts_work(e)) {
    v = verdict(GRPC_STATUS_DEADLINE_EXCEEDED,
                "round %lld closed for uploads (%s); this update is late",
                (long long)e->round, round_state_name(e->state));
    goto out;
  }
  if (p->buf && !crypto_equal(p->digest, c->sha256, CRYPTO_SHA256_LEN))
    drop_assembly(p); /* the client restarted with a different update */
  if (!p->buf) {
    if (c->offset != 0) {
      *next_offset = 0; /* start over from the beginning */
      goto out;
    }
    p->buf = malloc(want);
    if (!p->buf) {
      v = verdict(GRPC_STATUS_RESOURCE_EXHAUSTED, "coordinator out of memory");
      goto out;
    }
    p->total = want;
    p->received = 0;
    memcpy(p->digest, c->sha256, CRYPTO_SHA256_LEN);
  }
  if (c->offset != p->received) {
    *next_offset = p->received; /* resume where we are */
    goto out;
  }
  if (c->len) /* empty bytes arrive as a NULL pointer: memcpy's UB */
    memcpy(p->buf + p->received, c->data, c->len);
  p->received += c->len;
  p->bytes_up += c->wire_bytes;
  *next_offset = p->received;
  if (p->received == p->total) {
    v = finish_upload(e, p, c->num_examples);
    if (v.code == 0)
      *complete = 1;
    else
      *next_offset = 0;
  }
out:
  pthread_mutex_unlock(&e->mu);
  return v;
}

/* ---- federated evaluation ---- */

static int valid_metric_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > MAX_METRIC_NAME)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
          ch == '.'))
      return 0;
  }
  return 1;
}

round_verdict round_report(round_engine *e, int64_t client, int64_t round,
                           uint64_t num_examples, size_t n_metrics,
                           const char *const *names, const double *values) {
  if (n_metrics > ROUND_MAX_METRICS)
    return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                   "%zu metrics; at most %d per report", n_metrics,
                   ROUND_MAX_METRICS);
  for (size_t i = 0; i < n_metrics; i++) {
    if (!valid_metric_name(names[i]))
      return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                     "metric name '%.64s' must be 1-%d characters of "
                     "[a-z0-9_.]",
                     names[i], MAX_METRIC_NAME);
    if (!isfinite(values[i]))
      return verdict(GRPC_STATUS_INVALID_ARGUMENT,
                     "metric %s is not a finite number", names[i]);
  }
  round_verdict v = ok_verdict();
  pthread_mutex_lock(&e->mu);
  if (round != e->round || e->state == ROUND_IDLE) {
    v = verdict(GRPC_STATUS_FAILED_PRECONDITION,
                "round %lld is not the current round (current: %lld)",
                (long long)round, (long long)e->round);
    goto out;
  }
  if (!find_participant(e, client)) {
    v = verdict(GRPC_STATUS_PERMISSION_DENIED,
                "client %lld was not selected for round %lld",
                (long long)client, (long long)round);
    goto out;
  }
  /* The report's metrics and its example count go in as one row set. */
  const char *all_names[ROUND_MAX_METRICS + 1];
  double all_values[ROUND_MAX_METRICS + 1];
  memcpy(all_names, names, n_metrics * sizeof *names);
  memcpy(all_values, values, n_metrics * sizeof *values);
  size_t n = n_metrics;
  if (num_examples) {
    all_names[n] = "eval_examples";
    all_values[n++] = (double)num_examples;
  }
  if (store_metrics_put(e->db, round, client, n, all_names, all_values))
    v = store_failed(e);
out:
  pthread_mutex_unlock(&e->mu);
  return v;
}

/* ---- scheduling ---- */

static int open_round(round_engine *e) {
  int64_t id = e->next_round;
  int rc = store_round_open(e->db, id, e->version, clock_wall_s());
  if (rc)
    return rc;
  e->next_round++;
  e->round = id;
  e->state = ROUND_OPEN;
  e->opened_at = clock_mono_s();
  reset_participants(e);
  fedavg_reset(&e->acc);
  log_info("round %lld: OPEN on model version %lld, selecting %ld client(s)",
           (long long)id, (long long)e->version, e->cfg.clients_per_round);
  return COHORT_OK;
}

static int fail_round(round_engine *e, const char *reason) {
  double now = clock_wall_s();
  int rc = store_round_set_state(e->db, e->round, "FAILED", reason, now);
  if (!rc)
    rc = store_event(e->db, now, e->round, "round_failed", reason);
  log_warn("round %lld: FAILED: %s", (long long)e->round, reason);
  reset_participants(e);
  e->state = ROUND_IDLE;
  return rc;
}

/* Aggregates, evaluates and commits; called with the lock held and the
 * round in AGGREGATING. Drops the lock while it computes. */
static int aggregate_and_commit(round_engine *e) {
  size_t n = e->model.n_params;
  store_round_result r = {.round = e->round,
                          .clients_selected = (int64_t)e->n_parts,
                          .clients_aggregated = (int64_t)e->n_uploaded,
                          .accuracy = NAN,
                          .loss = NAN};
  for (size_t i = 0; i < e->n_parts; i++) {
    if (!e->parts[i].uploaded)
      continue;
    r.bytes_up_mean += (double)e->parts[i].bytes_up;
    r.bytes_down_mean += (double)e->parts[i].bytes_down;
  }
  r.bytes_up_mean /= (double)e->n_uploaded;
  r.bytes_down_mean /= (double)e->n_uploaded;

  /* Handlers refuse uploads while AGGREGATING, so acc and global are
   * stable until we retake the lock. */
  pthread_mutex_unlock(&e->mu);
  float *next = malloc(n * sizeof *next);
  int rc = next ? fedavg_apply(&e->acc, e->global, next) : COHORT_ENOMEM;
  if (!rc && e->cfg.eval)
    nn_evaluate(&e->model.net, next, e->cfg.eval, &r.accuracy, &r.loss);
  pthread_mutex_lock(&e->mu);
  if (rc) {
    free(next);
    return fail_round(e, "aggregation failed: out of memory");
  }

  int64_t parent = e->version;
  rc = set_global(e, next, parent + 1);
  if (rc)
    return rc;
  store_model m = {.version = e->version,
                   .round = e->round,
                   .parent = parent,
                   .blob = e->blob,
                   .blob_len = e->blob_len};
  snprintf(m.spec, sizeof m.spec, "%s", e->model.spec);
  crypto_hex(e->sha, sizeof e->sha, m.sha256_hex);
  r.finished_at = clock_wall_s();
  rc = store_round_commit(e->db, &r, &m);
  if (rc) {
    log_error("round %lld: cannot commit: %s", (long long)e->round,
              store_errmsg(e->db));
    return rc;
  }
  e->committed++;
  double secs = clock_mono_s() - e->opened_at;
  FILE *f = e->cfg.round_lines;
  if (f) {
    fprintf(f,
            "round %lld: accuracy %.4f loss %.4f clients %zu/%zu up %.0f "
            "bytes/client down %.0f bytes/client time %.2f s\n",
            (long long)e->round, r.accuracy, r.loss, e->n_uploaded, e->n_parts,
            r.bytes_up_mean, r.bytes_down_mean, secs);
    fflush(f);
  }
  reset_participants(e);
  e->state = ROUND_IDLE;
  return COHORT_OK;
}

int round_tick(round_engine *e) {
  int rc = COHORT_OK;
  char reason[160];
  pthread_mutex_lock(&e->mu);
  double now = clock_mono_s();
  switch (e->state) {
  case ROUND_IDLE:
    if (e->committed < e->cfg.rounds)
      rc = open_round(e);
    break;
  case ROUND_OPEN: {
    size_t k = (size_t)e->cfg.clients_per_round;
    size_t m = (size_t)e->cfg.min_clients;
    if (e->n_parts >= k ||
        (e->n_parts >= m && now - e->opened_at >= e->cfg.selection_timeout_s)) {
      rc = store_round_set_state(e->db, e->round, "TRAINING", NULL,
                                 clock_wall_s());
      if (rc)
        break;
      e->state = ROUND_TRAINING;
      e->deadline = now + e->cfg.round_timeout_s;
      log_info("round %lld: TRAINING with %zu client(s), deadline in %.0f s",
               (long long)e->round, e->n_parts, e->cfg.round_timeout_s);
    }
    break;
  }
  case ROUND_TRAINING:
    if (e->n_uploaded < e->n_parts && now < e->deadline)
      break;
    if (e->n_uploaded < (size_t)e->cfg.min_clients) {
      snprintf(reason, sizeof reason,
               "deadline passed with %zu of the %ld required updates",
               e->n_uploaded, e->cfg.min_clients);
      rc = fail_round(e, reason);
      break;
    }
    rc = store_round_set_state(e->db, e->round, "AGGREGATING", NULL,
                               clock_wall_s());
    if (rc)
      break;
    e->state = ROUND_AGGREGATING;
    rc = aggregate_and_commit(e);
    break;
  case ROUND_AGGREGATING:
    break; /* only reached through a failed commit; the caller stops */
  }
  pthread_mutex_unlock(&e->mu);
  return rc;
}

void round_wait(round_engine *e, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&e->mu);
  pthread_cond_timedwait(&e->uploaded, &e->mu, &ts);
  pthread_mutex_unlock(&e->mu);
}

int round_federation_done(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int done = done_locked(e);
  pthread_mutex_unlock(&e->mu);
  return done;
}

int round_all_clients_told(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int all = done_locked(e);
  for (size_t i = 0; all && i < e->n_seen; i++)
    all = e->seen[i].told_done;
  pthread_mutex_unlock(&e->mu);
  return all;
}

int64_t round_committed(round_engine *e) {
  pthread_mutex_lock(&e->mu);
  int64_t n = e->committed;
  pthread_mutex_unlock(&e->mu);
  return n;
}
