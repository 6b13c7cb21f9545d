/* What clients call on the round engine: registration and
 * authentication, check-in (eligibility, selection with over-selection,
 * pace-steered RetryLater), model download, chunked upload and reports.
 * See round.h. */
#include <grpc/status.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "log.h"
#include "pace.h"
#include "pb.h"
#include "round_internal.h"
#include "sanitize.h"
#include "sign.h"
#include "store_tokens.h"

#define MAX_PLATFORM 64
/* Example counts above this are not believable and could skew the average. */
#define MAX_EXAMPLES 1000000000ULL
/* Largest magnitude of a reported metric. The rounds' federated figures
 * are SUM(value * examples) over the reports: with at most MAX_EXAMPLES
 * examples each, a bounded value keeps such a sum below 1e21 per report,
 * where 1.7e308 (finite) times a few examples was +Inf, stored as the
 * round's fed_loss. No real loss or score comes near the bound. */
#define MAX_METRIC_MAGNITUDE 1e12

/* clients.last_seen is for operators, not for correctness: write it at most
 * this often per client, so a fleet polling every second does not cost a
 * synchronous database write per check-in. */
#define LAST_SEEN_INTERVAL_S 60.0

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

int round_set_enroll_authority(round_engine *e,
                               const uint8_t pub[SIGN_PUBLIC_LEN]) {
  int rc = sign_public_check(pub, NULL);
  if (rc)
    return rc;
  pthread_mutex_lock(&e->mu);
  memcpy(e->authority, pub, SIGN_PUBLIC_LEN);
  e->has_authority = 1;
  pthread_mutex_unlock(&e->mu);
  return COHORT_OK;
}

/* What a Register says about itself, checked outside the lock: sizes and
 * the identity key's encoding. */
static round_verdict check_registration(const round_registration *r) {
  if (r->platform && strlen(r->platform) > MAX_PLATFORM)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "platform name longer than %d bytes",
                              MAX_PLATFORM);
  if (r->identity_key_len != SIGN_PUBLIC_LEN)
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT,
        "identity key of %zu bytes; an Ed25519 public key has %d (update "
        "the client library)",
        r->identity_key_len, SIGN_PUBLIC_LEN);
  const char *why = NULL;
  int rc = sign_public_check(r->identity_key, &why);
  if (rc == COHORT_EFORMAT)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "identity key refused: %s", why);
  if (rc)
    return round_fail_verdict(GRPC_STATUS_INTERNAL,
                              "cannot check the identity key");
  if (r->enrollment_cert_len != 0 && r->enrollment_cert_len != SIGN_CERT_LEN)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "enrollment certificate of %zu bytes; one has %d",
                              r->enrollment_cert_len, SIGN_CERT_LEN);
  if (r->possession_len != 0 && r->possession_len != SIGN_LEN)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "proof of possession of %zu bytes; an Ed25519 "
                              "signature has %d",
                              r->possession_len, SIGN_LEN);
  if (!r->possession_len)
    return round_ok();
  if (sign_check_possession(r->identity_key, r->enrollment_token,
                            r->possession_time_ms, r->possession) != COHORT_OK)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "proof of possession refused: it is not the "
                              "identity key's signature of this registration");
  return round_ok();
}

/* The signed time of r's proof (check_registration verified it) when it is
 * within ROUND_POSSESSION_SKEW_S of now; 0 when r has no proof or one made
 * at another time, which proves nothing: a proof made long ago may have
 * been held back, and a device whose clock is wrong still registers for
 * the first time (without an enrollment authority), unproven. */
static int64_t fresh_proof_ms(const round_registration *r, double now) {
  double apart = (double)r->possession_time_ms / 1000.0 - now;
  if (!r->possession_len || apart > ROUND_POSSESSION_SKEW_S ||
      apart < -ROUND_POSSESSION_SKEW_S)
    return 0;
  return r->possession_time_ms;
}

/* Where a proof was needed and r's was signed at another time. */
static round_verdict stale_proof_verdict(const round_registration *r,
                                         double now) {
  double apart = (double)r->possession_time_ms / 1000.0 - now;
  return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                            "proof of possession signed %.0f s %s the "
                            "coordinator's clock (at most %d s apart); set "
                            "the device's clock",
                            fabs(apart), apart < 0 ? "behind" : "ahead of",
                            ROUND_POSSESSION_SKEW_S);
}

/* What a Register does with the client already bound to its key. */
typedef struct bound_client {
  int64_t renew;  /* give this client a new session; 0: none */
  int64_t retire; /* a new client replaces this unproven one; 0: none */
  int64_t token;  /* the stored token that admitted either (0: a flag's) */
} bound_client;

/* Under the lock: the key's certificate from the enrollment authority,
 * when there is one, and no other client bound to the key, unless the
 * request proves it holds the key now (proven_ms, fresh_proof_ms) with a
 * proof newer than the last one accepted for that client: that client then
 * gets a new session (b->renew), or, bound by a Register that proved
 * nothing, is replaced by a new client (b->retire). Without the proof,
 * whoever copied the public key and its certificate (every peer in secure
 * aggregation sees both) would take the client over. */
static round_verdict check_identity_locked(round_engine *e,
                                           const round_registration *r,
                                           int64_t proven_ms, double now,
                                           bound_client *b) {
  memset(b, 0, sizeof *b);
  if (e->has_authority && !r->enrollment_cert_len)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "this coordinator registers only identity keys "
                              "certified by its enrollment authority; the "
                              "request has no enrollment certificate");
  if (e->has_authority && sign_check_cert(e->authority, r->identity_key,
                                          r->enrollment_cert) != COHORT_OK)
    return round_fail_verdict(
        GRPC_STATUS_UNAUTHENTICATED,
        "enrollment certificate refused: it is not the enrollment "
        "authority's certificate of this identity key");
  /* Certificates are public: without the proof, whoever copied one would
   * bind the owner's key to itself before the owner registers. */
  if (e->has_authority && !r->possession_len)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "this coordinator registers certified identity "
                              "keys only with the key's proof of possession, "
                              "which this request lacks (update the client "
                              "library)");
  if (e->has_authority && !proven_ms)
    return stale_proof_verdict(r, now);
  int64_t other = 0;
  store_session ses;
  int rc = store_client_by_identity(e->db, r->identity_key, &other);
  if (rc == COHORT_ENOTFOUND)
    return round_ok();
  if (rc || store_session_of(e->db, other, &ses))
    return round_store_failed(e);
  if (ses.revoked_at > 0)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "client %lld, bound to this identity key, was "
                              "revoked by the operator; it cannot register "
                              "again",
                              (long long)other);
  /* The newest proof wins, live session or not: only the key's holder
   * makes one, so a session that a proof the coordinator never saw (held
   * back, or refused before it was read) bought ends at the holder's next
   * Register, and a client bound by a Register that proved nothing (an
   * older library, or whoever copied the public key before its holder
   * first registered) is taken from whoever bound it. */
  int expired = ses.expires_at > 0 && now >= ses.expires_at;
  if (!expired && !r->possession_len)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "identity key is already bound to another "
                              "client; each client needs its own key");
  if (!r->possession_len)
    return round_fail_verdict(
        GRPC_STATUS_UNAUTHENTICATED,
        "the session of client %lld, bound to this identity key, expired; "
        "renewing it needs the key's proof of possession, which this "
        "request lacks (update the client library)",
        (long long)other);
  if (!proven_ms)
    return stale_proof_verdict(r, now);
  /* Whoever saw an earlier Register of the key holds a valid proof; only a
   * newer one comes from the holder now. */
  if (proven_ms <= ses.possession_ms)
    return round_fail_verdict(
        GRPC_STATUS_UNAUTHENTICATED,
        PB_DETAIL_PROOF_NOT_NEWER
        " than the last one accepted for client "
        "%lld: a Register replayed, or the device's clock went back",
        (long long)other);
  if (ses.possession_ms == 0) {
    /* Whoever bound it may not hold the key: its token, failed rounds and
     * exclusions stay on its client, which is retired, and the holder
     * starts a client of its own, with a use of its own token (the retired
     * client's, when that was the same token). */
    b->retire = other;
    b->token = ses.token_id;
    return round_ok();
  }
  if (!expired)
    log_info("client %lld: a newer proof of its identity key replaces its "
             "session (a restart with the same key, another process "
             "holding it, or a Register whose reply was lost)",
             (long long)other);
  b->renew = other;
  b->token = ses.token_id;
  return round_ok();
}

/* Under the lock: whether the enrollment token admits a registration now;
 * *token_id is its row in the store, or 0 for one given by flag. A token
 * that is only used up passes with *used_up set: it still renews the
 * session of a client whose own registration used it up. */
static round_verdict check_enrollment_locked(round_engine *e,
                                             const uint8_t *digest, double now,
                                             int64_t *token_id, int *used_up) {
  *token_id = 0;
  *used_up = 0;
  int known = 0;
  for (size_t i = 0; i < e->n_enroll; i++)
    known |= crypto_equal(digest, e->enroll[i], CRYPTO_SHA256_LEN);
  if (known)
    return round_ok();
  char hex[CRYPTO_SHA256_HEX_LEN];
  crypto_hex(digest, CRYPTO_SHA256_LEN, hex);
  store_enroll_token t;
  int rc = store_token_find(e->db, hex, &t);
  if (rc == COHORT_ENOTFOUND)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "unknown enrollment token");
  if (rc)
    return round_store_failed(e);
  const char *why = store_token_refusal(&t, now);
  *used_up = why && strcmp(why, "used up") == 0;
  if (why && !*used_up) {
    log_info("registration refused: enrollment token %lld is %s",
             (long long)t.id, why);
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "enrollment token %lld is %s; ask the operator "
                              "for a new one",
                              (long long)t.id, why);
  }
  *token_id = t.id;
  return round_ok();
}

/* Under the lock, once every check passed: the new client (retiring
 * b->retire, and taking over its use of token_id when own_use), or the new
 * session of b->renew; either keeps proven_ms as the time of its latest
 * proof. */
static round_verdict enroll_locked(round_engine *e, const round_registration *r,
                                   int64_t token_id, const bound_client *b,
                                   int own_use, int64_t proven_ms, double now,
                                   int64_t *client_id, char token_out[65]) {
  char hash_hex[CRYPTO_SHA256_HEX_LEN];
  if (crypto_new_token(token_out) || crypto_sha256_hex(token_out, hash_hex))
    return round_fail_verdict(GRPC_STATUS_INTERNAL,
                              "cannot make a session token");
  double expires = now + e->cfg.session_ttl_s;
  store_enrollment en = {.session_sha256_hex = hash_hex,
                         .platform = r->platform,
                         .identity = r->identity_key,
                         .cert =
                             r->enrollment_cert_len ? r->enrollment_cert : NULL,
                         .token_id = token_id,
                         .session_expires_at = expires,
                         .possession_ms = proven_ms,
                         .retire = b->retire,
                         .use_of_retired = own_use && b->retire,
                         .now = now};
  int64_t renew = b->renew;
  int rc;
  if (renew) {
    *client_id = renew;
    rc = store_session_renew(e->db, renew, &en);
  } else {
    rc = store_client_enroll(e->db, &en, client_id);
  }
  if (rc == COHORT_EAUTH && renew)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "client %lld was revoked by the operator "
                              "meanwhile",
                              (long long)renew);
  if (rc == COHORT_EAUTH)
    return round_fail_verdict(
        GRPC_STATUS_UNAUTHENTICATED,
        "enrollment token %lld was revoked, expired or used up meanwhile%s",
        (long long)token_id,
        b->retire ? ", or the client bound to this key was revoked" : "");
  if (rc)
    return round_store_failed(e);
  char platform[SANITIZE_NAME_LEN];
  sanitize_text(r->platform && *r->platform ? r->platform : "unknown platform",
                platform, sizeof platform);
  log_info("client %lld %s (%s%s)", (long long)*client_id,
           renew ? "has a new session" : "registered", platform,
           r->enrollment_cert_len ? ", with an enrollment certificate" : "");
  if (b->retire)
    log_info("client %lld, bound to the same identity key by a Register "
             "without a proof of possession, is revoked: the key's holder "
             "proved it and is client %lld",
             (long long)b->retire, (long long)*client_id);
  return round_ok();
}

round_verdict round_register(round_engine *e, const round_registration *r,
                             int64_t *client_id, char token_out[65]) {
  if (!r->enrollment_token || !*r->enrollment_token)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              "missing enrollment token");
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256(r->enrollment_token, strlen(r->enrollment_token), digest))
    return round_fail_verdict(GRPC_STATUS_INTERNAL, "cannot hash the token");
  int64_t token_id = 0;
  bound_client b = {0};
  int used_up = 0;
  /* The token first: an unknown, revoked or expired one is refused for a
   * microsecond's lookup, not after the key's curve check and the proof's
   * signature (about 140 us of CPU that anyone could make the coordinator
   * spend), and its caller hears nothing else. */
  pthread_mutex_lock(&e->mu);
  round_verdict v =
      check_enrollment_locked(e, digest, clock_wall_s(), &token_id, &used_up);
  pthread_mutex_unlock(&e->mu);
  if (v.code)
    return v;
  /* Without the lock; the token is looked at again under it below, as it
   * may have been revoked meanwhile. */
  round_verdict request = check_registration(r);
  pthread_mutex_lock(&e->mu);
  double now = clock_wall_s();
  v = check_enrollment_locked(e, digest, now, &token_id, &used_up);
  int64_t proven_ms = fresh_proof_ms(r, now);
  if (!v.code)
    v = request.code ? request
                     : check_identity_locked(e, r, proven_ms, now, &b);
  /* A used-up token still renews the client its own use admitted, or
   * passes that use on from the unproven client it admitted. */
  int own_use = (b.renew || b.retire) && token_id && b.token == token_id;
  if (!v.code && used_up && !own_use) {
    log_info("registration refused: enrollment token %lld is used up",
             (long long)token_id);
    v = round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                           "enrollment token %lld is used up; ask the "
                           "operator for a new one",
                           (long long)token_id);
  }
  if (!v.code)
    v = enroll_locked(e, r, token_id, &b, own_use, proven_ms, now, client_id,
                      token_out);
  pthread_mutex_unlock(&e->mu);
  return v;
}

/* The refusal of session ses at wall-clock time now, or OK. */
static round_verdict session_verdict(const store_session *ses, double now) {
  if (ses->revoked_at > 0)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              PB_DETAIL_SESSION_REVOKED
                              ": client %lld was revoked by the operator",
                              (long long)ses->client);
  if (ses->expires_at > 0 && now >= ses->expires_at)
    return round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              PB_DETAIL_SESSION_EXPIRED
                              ": the session of client %lld expired; "
                              "register again",
                              (long long)ses->client);
  return round_ok();
}

round_verdict round_authenticate(round_engine *e, const char *bearer,
                                 int64_t *client_id) {
  if (!bearer)
    return round_fail_verdict(
        GRPC_STATUS_UNAUTHENTICATED,
        "missing 'authorization: Bearer <session token>' metadata");
  char hash_hex[CRYPTO_SHA256_HEX_LEN];
  if (crypto_sha256_hex(bearer, hash_hex))
    return round_fail_verdict(GRPC_STATUS_INTERNAL, "cannot hash the token");
  pthread_mutex_lock(&e->mu);
  store_session ses;
  int rc = store_session_find(e->db, hash_hex, &ses);
  round_verdict v = round_ok();
  if (rc == COHORT_ENOTFOUND)
    v = round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                           PB_DETAIL_SESSION_UNKNOWN "; register again");
  else if (rc)
    v = round_store_failed(e);
  else
    v = session_verdict(&ses, clock_wall_s());
  if (!v.code)
    *client_id = ses.client;
  pthread_mutex_unlock(&e->mu);
  return v;
}

int round_session_live_locked(round_engine *e, int64_t client,
                              round_verdict *why) {
  store_session ses;
  int rc = store_session_of(e->db, client, &ses);
  /* A retired client's session reads as unknown, as its token does
   * (retire_unproven): its holder registers again rather than stop. */
  if (rc == COHORT_OK && ses.retired)
    rc = COHORT_ENOTFOUND;
  if (rc == COHORT_ENOTFOUND) {
    *why = round_fail_verdict(GRPC_STATUS_UNAUTHENTICATED,
                              PB_DETAIL_SESSION_UNKNOWN "; register again");
    return COHORT_EAUTH;
  }
  if (rc) {
    *why = round_store_failed(e);
    return rc;
  }
  *why = session_verdict(&ses, clock_wall_s());
  return why->code ? COHORT_EAUTH : COHORT_OK;
}

int round_candidate_live_locked(round_engine *e, int64_t client) {
  round_verdict why;
  int rc = round_session_live_locked(e, client, &why);
  if (rc == COHORT_EAUTH)
    log_info("round %lld: candidate %lld left out: %s", (long long)e->round,
             (long long)client, why.detail);
  return rc;
}

round_verdict round_session_live(round_engine *e, int64_t client) {
  round_verdict v;
  pthread_mutex_lock(&e->mu);
  round_session_live_locked(e, client, &v);
  pthread_mutex_unlock(&e->mu);
  return v;
}

/* ---- helpers under the lock ---- */

static int round_accepts_work(round_engine *e) {
  return e->state == ROUND_OPEN || e->state == ROUND_TRAINING;
}

/* Seconds a client not needed now should wait for the next selection: half
 * of what is expected to remain of the training phase (it then asks again
 * with a better estimate), 0 while a selection is open. */
static double until_next_open(round_engine *e, double now) {
  if (e->state != ROUND_TRAINING)
    return 0.0;
  double started = e->deadline - e->cfg.round_timeout_s;
  double expected = started + e->training_s;
  if (expected > e->deadline)
    expected = e->deadline;
  return expected > now ? (expected - now) / 2 : 0.0;
}

/* A uniform draw in [0, 1) from the CSPRNG, so that clients can neither
 * predict nor synchronise on the jitter of their waits. The draws come
 * from a buffer of the thread's, refilled 64 at a time: each call of
 * OpenSSL's RAND_bytes makes a getpid() system call (its check for a
 * fork), and a check-in answered with a wait draws two or three. */
static double jitter(void) {
  static _Thread_local uint32_t draws[64];
  static _Thread_local size_t left;
  if (!left) {
    if (crypto_random(draws, sizeof draws))
      memset(draws, 0, sizeof draws);
    left = sizeof draws / sizeof draws[0];
  }
  return (double)draws[--left] / 4294967296.0;
}

/* RetryLater from pace steering (pace.h) for a client the coordinator has
 * no task for; not before not_before_s from now. The check-ins to spread
 * are those of the next selection, all of its clients: not the slots the
 * open one has left, which would stretch the waits as a round fills. */
static uint32_t retry_ms(round_engine *e, double now, double not_before_s) {
  size_t wanted = e->select_max ? e->select_max : 1;
  /* The clients that did work lately, and of the other active ones (all
   * of them before any work is known) at most one selection's worth:
   * identities that only poll cannot stretch anyone's wait by more than
   * W / PACE_MARGIN (docs/rounds.md, "Pace steering"). */
  size_t active = round_active_clients(e, now);
  size_t idle = active > e->workers ? active - e->workers : 0;
  pace_inputs in = {.population =
                        (double)(e->workers + (idle < wanted ? idle : wanted)),
                    .wanted = (double)wanted,
                    .window_s = e->cfg.selection_timeout_s / 10,
                    .until_open_s = fmax(until_next_open(e, now), not_before_s),
                    .min_ms = e->cfg.retry_ms,
                    .max_ms = e->cfg.retry_max_ms};
  return pace_retry_ms(&in, jitter());
}

/* RetryLater for a client wanted back until_s from now
 * (pace_wanted_at_ms, with the coordinator's --retry-ms bounds). */
static uint32_t wanted_in_ms(round_engine *e, double until_s) {
  return pace_wanted_at_ms(until_s, jitter(), e->cfg.retry_ms,
                           e->cfg.retry_max_ms);
}

/* RetryLater for a client that already took part in the round in
 * progress: it is wanted again as soon as the next round opens, which is
 * when this one is expected to end (wanted_in_ms); no population term,
 * since it is not one of many to spread out. */
static uint32_t after_round_ms(round_engine *e, double now) {
  double started =
      e->state == ROUND_TRAINING ? e->deadline - e->cfg.round_timeout_s : now;
  double end = started + e->training_s;
  if (e->state == ROUND_TRAINING && end > e->deadline)
    end = e->deadline;
  return wanted_in_ms(e, end - now);
}

/* Seconds until the last training round is expected to end: the round in
 * progress ends after its mean training phase, each one left after it
 * takes a selection window and a training phase. -1 while no training
 * phase has been timed. */
static double until_federation_end(round_engine *e, double now) {
  if (e->training_s <= 0)
    return -1;
  int64_t left = e->cfg.rounds - e->committed;
  if (left < 1)
    return 0;
  double started =
      e->state == ROUND_TRAINING ? e->deadline - e->cfg.round_timeout_s : now;
  double end = started + e->training_s - now;
  end = end > 0 ? end : 0;
  return end + (double)(left - 1) * (e->cfg.selection_window_s + e->training_s);
}

/* The wait of a client turned away while the fleet is crowded (pace.h,
 * pace_crowded): pace steering over every active client, since there are
 * more of them than the coordinator holds. Never shorter than the wait
 * its own case gave (an excluded client's), except for a participant of
 * the round in progress, whose short wait assumed it was wanted next. A
 * candidate keeps its wait: it is wanted back when the draw is made. */
static uint32_t crowded_ms(round_engine *e, double now,
                           const checkin_result *r) {
  if (r->candidate)
    return r->retry_after_ms;
  pace_inputs in = {.population = (double)r->active,
                    .wanted = (double)r->wanted,
                    .window_s = e->cfg.selection_timeout_s / 10,
                    .until_open_s = until_next_open(e, now),
                    .min_ms = e->cfg.retry_ms,
                    .max_ms = e->cfg.retry_max_ms};
  uint32_t ms = pace_retry_ms(&in, jitter());
  if (!r->took_part && r->retry_after_ms > ms)
    ms = r->retry_after_ms;
  /* Spread over many rounds, the waits of the last ones would outlast the
   * federation, and their clients would learn of its end only then: none
   * returns later than just after the expected end (wanted_in_ms), where
   * it is told. */
  double end = until_federation_end(e, now);
  if (end >= 0) {
    uint32_t by_end = wanted_in_ms(e, end);
    if (by_end < ms)
      ms = by_end;
  }
  return ms;
}

static void fill_task(round_engine *e, round_task *t) {
  t->round = e->round;
  t->model_version = e->version;
  memcpy(t->model_sha256, e->sha, sizeof e->sha);
  t->model_size = e->blob_len;
  snprintf(t->model_spec, sizeof t->model_spec, "%s", e->model.spec);
  t->input = e->cfg.input;
  t->classes = e->cfg.classes;
  t->evaluate = e->kind == KIND_EVALUATE;
  t->epochs = e->cfg.epochs;
  t->batch_size = e->cfg.batch_size;
  t->learning_rate = e->cfg.learning_rate;
  t->fedprox_mu = strategy_client_mu(e->strategy);
  snprintf(t->codec, sizeof t->codec, "%s", codec_spec(e->codec));
  memcpy(t->codec_seed, e->cparams.seed, sizeof t->codec_seed);
  t->codec_clip = e->cparams.clip;
  t->secagg = e->sa.active && e->kind == KIND_TRAIN;
  t->dp = e->kind == KIND_TRAIN ? e->cfg.dp : ROUND_DP_OFF;
  double left = e->state == ROUND_TRAINING
                    ? e->deadline - clock_mono_s()
                    : e->cfg.round_timeout_s + e->cfg.selection_timeout_s;
  t->deadline_ms = left > 0 ? (uint32_t)(left * 1000) : 0;
}

/* ---- check-in ---- */

static int valid_name(const char *s, size_t max) {
  return elig_valid_name(s, strlen(s), max);
}

/* round_checkin's answer, under e->mu. */
static round_verdict checkin_locked(round_engine *e, int64_t client,
                                    uint64_t num_examples, size_t n_attributes,
                                    const char *const *names,
                                    const double *values, checkin_result *out) {
  memset(out, 0, sizeof *out);
  if (n_attributes > ROUND_MAX_ATTRIBUTES)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "%zu attributes; at most %d", n_attributes,
                              ROUND_MAX_ATTRIBUTES);
  const char *all_names[ROUND_MAX_ATTRIBUTES + 1];
  double all_values[ROUND_MAX_ATTRIBUTES + 1];
  for (size_t i = 0; i < n_attributes; i++) {
    if (!valid_name(names[i], ELIG_MAX_NAME) || !isfinite(values[i]))
      return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                                "attribute '%.40s' needs a name of 1-%d "
                                "characters of [a-z0-9_.] and a finite value",
                                names[i], ELIG_MAX_NAME);
    all_names[i] = names[i];
    all_values[i] = values[i];
  }
  all_names[n_attributes] = "examples";
  all_values[n_attributes] = (double)num_examples;
  round_verdict v = round_ok();
  seen_client *seen = seen_set_get(&e->seen, client);
  if (!seen) {
    v = round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED,
                           "coordinator out of memory");
    goto out;
  }
  double now = clock_mono_s();
  seen_set_checked_in(&e->seen, seen, now);
  round_select_seen(e, seen);
  if (seen->touched_at == 0 || now - seen->touched_at >= LAST_SEEN_INTERVAL_S) {
    store_client_touch(e->db, client, clock_wall_s());
    seen->touched_at = now;
  }
  if (round_done_locked(e)) {
    out->kind = CHECKIN_DONE;
    out->rounds_committed = e->committed;
    seen->told_done = 1;
    goto out;
  }
  out->kind = CHECKIN_RETRY;
  if (!round_accepts_work(e)) {
    snprintf(out->reason, sizeof out->reason, "no round is taking clients now");
    goto out;
  }
  participant *p = round_find_participant(e, client);
  if (p) {
    /* One that declined has answered, as one that reported: no task
     * again, or it would decline it again and again until the round
     * ends. */
    if (!p->uploaded && !p->reported && !p->declined &&
        round_secagg_rejoins(e, client)) {
      out->kind = CHECKIN_TASK; /* a repeated check-in gets the same task */
      out->fresh = !p->told;    /* drawn while away: this is its first */
      p->told = 1;
      fill_task(e, &out->task);
    } else {
      out->retry_after_ms = after_round_ms(e, now);
      out->took_part = 1;
      snprintf(out->reason, sizeof out->reason,
               "already selected for round %lld", (long long)e->round);
    }
    goto out;
  }
  int sampled = round_dp_sampling_round(e);
  if (e->state != ROUND_OPEN || (!sampled && e->n_parts >= e->select_max)) {
    snprintf(out->reason, sizeof out->reason,
             "round %lld has selected its clients", (long long)e->round);
    goto out;
  }
  double excluded_s = 0;
  if (round_offender_excluded(e, seen, out->reason, sizeof out->reason,
                              &excluded_s)) {
    out->retry_after_ms = retry_ms(e, now, excluded_s);
    goto out;
  }
  if (!elig_check(e->cfg.eligible, e->cfg.n_eligible, n_attributes + 1,
                  all_names, all_values, out->reason, sizeof out->reason))
    goto out;
  if (!sampled && round_select_by_draw(e)) {
    /* A candidate of the window's draw; `seen` is stale after the draw. */
    if (round_select_candidate(e, seen) || round_select_draw(e, now, client)) {
      v = round_store_failed(e);
      goto out;
    }
    participant *drawn = round_find_participant(e, client);
    if (drawn) {
      out->kind = CHECKIN_TASK;
      out->fresh = 1; /* drawn now: a repeat was answered above */
      drawn->told = 1;
      fill_task(e, &out->task);
    } else if (e->n_parts < e->select_max) {
      /* Wanted at the draw: spread over the fleet like a client with no
       * place in the round, a drawn candidate that polls would come back
       * long after it, and the round wait for it (with --max-held 0 the
       * spread grew with every round's new participants). */
      out->retry_after_ms = wanted_in_ms(e, e->draw_at - now);
      out->candidate = 1;
      snprintf(out->reason, sizeof out->reason,
               "a candidate in round %lld's draw", (long long)e->round);
    } else {
      snprintf(out->reason, sizeof out->reason, "not drawn for round %lld",
               (long long)e->round);
    }
    goto out;
  }
  if (sampled) {
    int take = 0;
    if (round_dp_check_in(e, seen, &take)) {
      v = round_store_failed(e);
      goto out;
    }
    if (!take) {
      /* Not in this round (its coin), or not yet (a candidate for the
       * draw): back once the selection window has closed. */
      double left = e->opened_at + e->cfg.selection_timeout_s - now;
      out->retry_after_ms = retry_ms(e, now, left);
      snprintf(out->reason, sizeof out->reason, "not sampled for round %lld",
               (long long)e->round);
      goto out;
    }
  }
  /* A check-in held by a long poll was authenticated when it came: the
   * operator may have revoked its client since, or its session expired. */
  if (round_session_live_locked(e, client, &v) != COHORT_OK)
    goto out;
  if (store_participation_select(e->db, e->round, client, clock_wall_s())) {
    v = round_store_failed(e);
    goto out;
  }
  p = round_add_participant(e, client);
  if (!p) {
    v = round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED,
                           "coordinator out of memory");
    goto out;
  }
  p->declared = num_examples;
  p->told = 1;
  out->kind = CHECKIN_TASK;
  out->fresh = 1;
  fill_task(e, &out->task);
  log_info("round %lld: selected client %lld (%zu/%zu)", (long long)e->round,
           (long long)client, e->n_parts, e->select_max);
out:
  /* Pace steering's wait for a RetryLater that has no wait of its own:
   * drawn only when it is the answer, not for every task handed out. */
  if (!v.code && out->kind == CHECKIN_RETRY) {
    double t = clock_mono_s();
    if (!out->retry_after_ms)
      out->retry_after_ms = retry_ms(e, t, 0);
    out->wanted = e->select_max ? e->select_max : 1;
    out->active = round_active_clients(e, t);
    out->crowded_after_ms = crowded_ms(e, t, out);
  }
  out->changes = e->changes;
  return v;
}

round_verdict round_checkin(round_engine *e, int64_t client,
                            uint64_t num_examples, size_t n_attributes,
                            const char *const *names, const double *values,
                            checkin_result *out) {
  pthread_mutex_lock(&e->mu);
  round_verdict v =
      checkin_locked(e, client, num_examples, n_attributes, names, values, out);
  pthread_mutex_unlock(&e->mu);
  return v;
}

void round_checkin_batch(round_engine *e, round_checkin_ask *asks, size_t n) {
  pthread_mutex_lock(&e->mu);
  /* With the write lock taken elsewhere, one at a time as before: a batch
   * of RetryLater answers needs no lock, and the engine's must not wait
   * out the busy timeout for it. */
  int txn = n > 1 && store_begin_now(e->db) == COHORT_OK;
  for (size_t i = 0; i < n; i++) {
    round_checkin_ask *a = &asks[i];
    a->v = checkin_locked(e, a->client, a->num_examples, a->n_attributes,
                          a->names, a->values, &a->out);
  }
  if (txn && store_finish(e->db, COHORT_OK) != COHORT_OK) {
    /* The selections of the batch are not stored: the tasks they made are
     * not handed out (a store that cannot commit stops the coordinator,
     * store_fatal, before they would matter in memory). */
    for (size_t i = 0; i < n; i++)
      if (!asks[i].v.code && asks[i].out.kind == CHECKIN_TASK &&
          asks[i].out.fresh)
        asks[i].v = round_store_failed(e);
  }
  pthread_mutex_unlock(&e->mu);
}

/* ---- model download ---- */

round_verdict round_get_model_ref(round_engine *e, int64_t version,
                                  uint64_t offset, size_t max_bytes,
                                  const uint8_t **data, size_t *len,
                                  void **owner, uint64_t *total,
                                  uint8_t sha256[32]) {
  round_verdict v = round_ok();
  *owner = NULL;
  pthread_mutex_lock(&e->mu);
  if (version != e->version) {
    v = round_fail_verdict(
        GRPC_STATUS_NOT_FOUND,
        "model version %lld is not served; the current version is "
        "%lld",
        (long long)version, (long long)e->version);
  } else if (offset > e->blob_len) {
    v = round_fail_verdict(GRPC_STATUS_OUT_OF_RANGE,
                           "offset %llu is past the end of the %zu-byte model",
                           (unsigned long long)offset, e->blob_len);
  } else {
    size_t n = e->blob_len - (size_t)offset;
    if (n > max_bytes)
      n = max_bytes;
    atomic_fetch_add(&e->blob->refs, 1);
    *owner = e->blob;
    *data = e->blob->bytes + offset;
    *len = n;
    *total = e->blob_len;
    memcpy(sha256, e->sha, sizeof e->sha);
  }
  pthread_mutex_unlock(&e->mu);
  return v;
}

round_verdict round_get_model(round_engine *e, int64_t client, int64_t version,
                              uint64_t offset, uint8_t *buf, size_t max_bytes,
                              size_t *len, uint64_t *total,
                              uint8_t sha256[32]) {
  (void)client;
  const uint8_t *data;
  void *owner;
  round_verdict v = round_get_model_ref(e, version, offset, max_bytes, &data,
                                        len, &owner, total, sha256);
  if (!v.code)
    memcpy(buf, data, *len);
  round_model_release(owner);
  return v;
}

void round_count_download(round_engine *e, int64_t client, size_t wire_bytes) {
  pthread_mutex_lock(&e->mu);
  participant *p =
      round_accepts_work(e) ? round_find_participant(e, client) : NULL;
  if (p)
    p->bytes_down += wire_bytes;
  pthread_mutex_unlock(&e->mu);
}

/* ---- upload ---- */

round_verdict round_admit_work(round_engine *e, int64_t client) {
  pthread_mutex_lock(&e->mu);
  const seen_client *c = seen_set_find(&e->seen, client);
  int64_t selected = c ? c->part_round : -1, round = e->round;
  pthread_mutex_unlock(&e->mu);
  if (selected >= 1 && selected >= round - 1)
    return round_ok();
  return round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                            "client %lld was not selected for round %lld or "
                            "the one before: it has no update, report or "
                            "secure-aggregation message to send",
                            (long long)client, (long long)round);
}

/* The answer to an upload or report for a round that is not running. Late
 * answers get FAILED_PRECONDITION, never a status clients retry (such as
 * DEADLINE_EXCEEDED): sending them again cannot help. */
static round_verdict stale_round(round_engine *e, int64_t round,
                                 const char *what) {
  if (round == e->round)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld is over; this %s is late and not "
                              "used",
                              (long long)round, what);
  return round_fail_verdict(
      GRPC_STATUS_FAILED_PRECONDITION,
      "round %lld is not the current round (current: %lld, %s)",
      (long long)round, (long long)e->round, round_state_name(e->state));
}

/* A selected client's update that arrives after its round stopped taking
 * them is refused and recorded (participations.late_at, rounds.late_uploads),
 * once per client and round. */
static void record_late(round_engine *e, int64_t round, int64_t client) {
  int recorded = 0;
  if (round < 1 || round > e->round ||
      store_participation_late(e->db, round, client, clock_wall_s(), &recorded))
    return;
  if (recorded)
    log_info("round %lld: late update from client %lld refused",
             (long long)round, (long long)client);
}

/* An update whose bytes are all in, between the engine's two looks at it.
 * The digest, the decoding and the value checks (most of an upload's CPU)
 * run without e->mu, so that uploads on different gRPC workers overlap
 * there; what they need of the round is copied under the lock first, and
 * everything the round may have changed meanwhile is checked again once
 * the lock is back (finish_upload). */
typedef struct upload_work {
  int64_t round, client;
  uint8_t digest[CRYPTO_SHA256_LEN]; /* what the client said it is */
  uint64_t xxh64;       /* its checksum (0: check digest), then the bytes' */
  const uint8_t *bytes; /* borrowed from the call, or owned */
  size_t len;
  uint8_t *owned; /* the bytes read back from the round's file */
  int in_file;    /* sent in chunks: the bytes are at kept_at of it */
  uint64_t kept_at;
  uint64_t examples;
  uint32_t train_ms;
  int masked;      /* a masked input of secure aggregation: checksum only */
  int checked;     /* values checked and norm taken (no central DP) */
  agg_kind kind;   /* of the aggregate, for the value checks */
  codec_params cp; /* the round's codec parameters (its seed) */
  float *delta;    /* decoded, e->agg_dim floats; NULL for masked */
  double norm;
} upload_work;

/* Under the lock: what upload_work_run needs of the round. */
static void upload_work_take(round_engine *e, participant *p,
                             const upload_chunk *c, upload_work *w) {
  w->round = e->round;
  w->client = p->client;
  memcpy(w->digest, c->sha256, sizeof w->digest);
  w->xxh64 = c->xxh64;
  w->examples = c->num_examples;
  w->train_ms = c->train_ms;
  w->masked = e->sa.active;
  /* Central DP clips before the checks and the norm: those stay locked. */
  w->checked = !w->masked && e->cfg.dp != ROUND_DP_CENTRAL;
  w->kind = aggregate_kind(e->agg);
  w->cp = e->cparams;
}

/* Whether the update's bytes are the ones the client sent: checked by the
 * XXH64 it sent, else (a client that predates it) by its SHA-256, after
 * which the XXH64 the store keeps the bytes with is taken here. Either way
 * the transport's own integrity (TCP's checksum, TLS's MAC) is not all:
 * this catches an update assembled from chunks of two attempts, and a
 * client that encoded one buffer and sent another. */
static round_verdict upload_check_bytes(upload_work *w) {
  if (w->xxh64) {
    if (checksum_xxh64(w->bytes, w->len) == w->xxh64)
      return round_ok();
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "update checksum (update_xxh64) does not match "
                              "its bytes; upload it again");
  }
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256(w->bytes, w->len, digest) ||
      !crypto_equal(digest, w->digest, sizeof digest))
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT,
        "update digest does not match its bytes; upload it again");
  w->xxh64 = checksum_xxh64(w->bytes, w->len);
  return round_ok();
}

/* Without the lock: the bytes checked, then (unless masked)
 * the decoding with its length, index and NaN checks, and where nothing
 * clips later the value checks and the norm. Reads only what never
 * changes after setup (codec, agg_linear, agg_dim). */
static round_verdict upload_work_run(const round_engine *e, upload_work *w) {
  round_verdict v = upload_check_bytes(w);
  if (v.code)
    return v;
  if (w->masked)
    return round_ok();
  w->delta = malloc(e->agg_dim * sizeof *w->delta);
  if (!w->delta)
    return round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED,
                              "coordinator out of memory");
  /* The default codec's payload is the delta itself: decoded, checked and
   * its norm taken in one pass. What that pass refuses goes the general
   * way below, which names the problem. */
  const size_t n = e->agg_dim;
  if (w->checked && codec_plain_fp32(e->codec) && w->len == n * sizeof(float) &&
      round_bound_take(w->delta, w->bytes, n, aggregate_value_limit(w->kind),
                       &w->norm) == n)
    return round_ok();
  /* Decoding checks the payload's length, indices and values: NaN and
   * infinity are refused there. */
  char why[200];
  if (round_codec_decode(e, &w->cp, w->bytes, w->len, w->delta, why,
                         sizeof why) ||
      (w->checked &&
       aggregate_check_values(w->kind, w->delta, n, why, sizeof why)))
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "update refused: %s", why);
  if (w->checked)
    w->norm = round_bound_norm(w->delta, n);
  return round_ok();
}

/* Back under the lock, with w's bytes digested and decoded: the round may
 * have moved on, or the client's update may have come in by another call,
 * while the lock was free, so the upload is checked against the round
 * again before it is folded in. On failure nothing is stored. */
static round_verdict finish_upload(round_engine *e, upload_work *w,
                                   int *complete) {
  if (w->round != e->round || e->state == ROUND_IDLE) {
    record_late(e, w->round, w->client);
    return stale_round(e, w->round, "update");
  }
  participant *p = round_find_participant(e, w->client);
  if (!p)
    return round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                              "client %lld was not selected for round %lld",
                              (long long)w->client, (long long)e->round);
  round_verdict v = round_ok();
  if (p->uploaded) {
    if (!crypto_equal(p->digest, w->digest, CRYPTO_SHA256_LEN))
      return round_fail_verdict(GRPC_STATUS_ALREADY_EXISTS,
                                "client %lld already uploaded a different "
                                "update for round %lld",
                                (long long)w->client, (long long)e->round);
    *complete = 1;
    snprintf(v.detail, sizeof v.detail,
             "duplicate upload of the same update ignored");
    return v;
  }
  if (!round_accepts_work(e) || e->n_done >= e->target) {
    record_late(e, e->round, w->client);
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld closed for uploads (%s, %zu of %zu "
                              "updates in); this update is late and not used",
                              (long long)e->round, round_state_name(e->state),
                              e->n_done, e->target);
  }
  memcpy(p->digest, w->digest, sizeof p->digest);
  if (w->masked) {
    /* A masked input: it goes into the secure sum, not the aggregate. */
    v = round_secagg_masked(e, p, w->bytes, w->len, w->examples);
    if (v.code == 0) {
      *complete = 1;
      p->train_ms = w->train_ms;
    }
    return v;
  }
  /* Capped, not refused: the update stays of use; the client hears why in
   * the OK answer's detail. Central DP clips each update here and weighs
   * all alike. */
  char note[sizeof v.detail];
  uint64_t examples = round_bound_weight(e, p, w->examples, note, sizeof note);
  uint64_t weight = examples;
  int within = round_dp_clip_update(e, w->delta, &weight);
  if (!w->checked)
    w->norm = round_bound_norm(w->delta, e->agg_dim);
  /* The aggregate's own checks (magnitude, weight) before anything is
   * stored; the add itself comes after the store, which may still fail. */
  char why[200];
  if (w->checked ? aggregate_check_weight(e->agg, weight, why, sizeof why)
                 : aggregate_check(e->agg, w->delta, weight, why, sizeof why))
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "update refused: %s", why);
  store_upload u = {.round = e->round,
                    .client = p->client,
                    .bytes_down = p->bytes_down,
                    .bytes_up = p->bytes_up,
                    .examples = examples,
                    .checksum = w->xxh64,
                    .uploaded_at = clock_wall_s()};
  crypto_hex(p->digest, sizeof p->digest, u.sha256_hex);
  /* The rows first (with the update itself, so a restarted coordinator can
   * resume the round): if the store fails, the aggregate is untouched. */
  if (w->in_file
          ? store_participation_uploaded_at(e->db, &u, w->kept_at, w->len)
          : store_participation_uploaded(e->db, &u, w->bytes, w->len))
    return round_store_failed(e);
  if (round_update_add(e, w->delta, weight, within, 1, why, sizeof why))
    /* Checked above; only memory can fail here. */
    return round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", why);
  p->uploaded = 1;
  p->examples = examples;
  p->norm = w->norm;
  p->train_ms = w->train_ms;
  snprintf(v.detail, sizeof v.detail, "%s", note);
  e->n_done++;
  *complete = 1;
  round_answer_arrived(e);
  log_info("round %lld: update from client %lld (%llu examples, %llu bytes "
           "up), %zu/%zu in",
           (long long)e->round, (long long)p->client,
           (unsigned long long)examples, (unsigned long long)p->bytes_up,
           e->n_done, e->n_parts);
  return v;
}

/* Under the lock: p's update in chunks begins. Its place in the round's
 * file is taken at the client's first such update of the round, with room
 * for the largest update the round takes, and a restart writes over it:
 * however often a client starts over, it makes the coordinator write no
 * more than that before anything is checked. */
static round_verdict begin_assembly(round_engine *e, participant *p,
                                    const upload_chunk *c) {
  if (!p->placed) {
    size_t room =
        e->sa.active ? round_secagg_max_size(e) : round_codec_max_size(e);
    if (store_update_reserve(e->db, e->round, room, &p->kept_at))
      return round_store_failed(e);
    p->placed = 1;
  }
  p->assembling = 1;
  p->total = c->total_size;
  p->received = 0;
  memcpy(p->digest, c->sha256, CRYPTO_SHA256_LEN);
  return round_ok();
}

/* c, the chunk *pp's update expects next, written to its place in the
 * round's file without the engine's lock, then counted in once the lock is
 * back: p->busy turns the client's other calls away meanwhile, so the
 * update is still the one it belongs to unless the round moved on. *pp:
 * the participant again, found anew (the array may have moved). */
static round_verdict write_chunk(round_engine *e, int64_t client,
                                 participant **pp, const upload_chunk *c) {
  participant *p = *pp;
  const int64_t round = e->round;
  const uint64_t at = p->kept_at + c->offset;
  p->busy = 1;
  pthread_mutex_unlock(&e->mu);
  int rc = c->len ? store_update_write(e->db, round, at, c->data, c->len)
                  : COHORT_OK;
  pthread_mutex_lock(&e->mu);
  if (round != e->round || e->state == ROUND_IDLE)
    return stale_round(e, round, "update");
  /* Same round: participants leave only with it (reset_participants). */
  if (!(p = *pp = round_find_participant(e, client)))
    return round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                              "client %lld was not selected for round %lld",
                              (long long)client, (long long)round);
  p->busy = 0;
  if (rc)
    return round_store_failed(e);
  p->received += c->len;
  p->bytes_up += c->wire_bytes;
  return round_ok();
}

/* The bytes of w's update in chunks, read back whole from the round's
 * file. */
static round_verdict read_back(round_engine *e, upload_work *w) {
  int rc = store_update_read(e->db, w->round, w->kept_at, w->len, &w->owned);
  if (rc == COHORT_ENOMEM)
    return round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED,
                              "coordinator out of memory");
  if (rc) {
    log_warn("round %lld: the update of client %lld could not be read back "
             "from the round's file (%s)",
             (long long)w->round, (long long)w->client, cohort_strerror(rc));
    return round_fail_verdict(GRPC_STATUS_UNAVAILABLE,
                              "the coordinator cannot read this update back "
                              "now; upload it again");
  }
  w->bytes = w->owned;
  return round_ok();
}

round_verdict round_upload(round_engine *e, int64_t client,
                           const upload_chunk *c, uint64_t *next_offset,
                           int *complete) {
  *next_offset = 0;
  *complete = 0;
  if (c->len > PB_MAX_CHUNK_BYTES)
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT,
        "chunk of %zu bytes exceeds the %d-byte chunk limit", c->len,
        PB_MAX_CHUNK_BYTES);
  if (c->sha256_len != CRYPTO_SHA256_LEN)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "update_sha256 has %zu bytes; SHA-256 has 32",
                              c->sha256_len);
  if (c->num_examples == 0 || c->num_examples > MAX_EXAMPLES)
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT, "num_examples %llu is outside [1, %llu]",
        (unsigned long long)c->num_examples, MAX_EXAMPLES);
  if (c->offset > c->total_size || c->len > c->total_size - c->offset)
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT,
        "chunk [%llu, +%zu) runs past the update's %llu bytes",
        (unsigned long long)c->offset, c->len,
        (unsigned long long)c->total_size);

  round_verdict v = round_ok();
  upload_work w = {0};
  pthread_mutex_lock(&e->mu);
  if (c->round != e->round || e->state == ROUND_IDLE) {
    record_late(e, c->round, client);
    v = stale_round(e, c->round, "update");
    goto out;
  }
  v = e->sa.active ? round_secagg_check_size(e, c->total_size)
                   : round_codec_check_size(e, c->total_size);
  if (v.code)
    goto out;
  if (e->kind == KIND_EVALUATE) {
    v = round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                           "round %lld is an evaluation round: Report "
                           "metrics, do not upload",
                           (long long)e->round);
    goto out;
  }
  participant *p = round_find_participant(e, client);
  if (!p) {
    v = round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
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
      v = round_fail_verdict(
          GRPC_STATUS_ALREADY_EXISTS,
          "client %lld already uploaded a different update for "
          "round %lld",
          (long long)client, (long long)e->round);
    }
    goto out;
  }
  if (!round_accepts_work(e) || e->n_done >= e->target) {
    record_late(e, e->round, client);
    v = round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                           "round %lld closed for uploads (%s, %zu of %zu "
                           "updates in); this update is late and not used",
                           (long long)e->round, round_state_name(e->state),
                           e->n_done, e->target);
    goto out;
  }
  int same = crypto_equal(p->digest, c->sha256, CRYPTO_SHA256_LEN);
  if (p->busy) {
    /* Another call of the client's is writing to its place in the round's
     * file, or checking what it read back from there: resume later. */
    *next_offset = p->assembling && same ? p->received : 0;
    goto out;
  }
  if (p->assembling && !same)
    p->assembling = 0; /* the client restarted with a different update */
  if (!p->assembling && c->offset == 0 && c->len == c->total_size) {
    /* The whole update in one chunk, as most are: used in place, no copy. */
    memcpy(p->digest, c->sha256, CRYPTO_SHA256_LEN);
    p->bytes_up += c->wire_bytes;
    upload_work_take(e, p, c, &w);
    w.bytes = c->data;
    w.len = c->len;
    goto finish;
  }
  if (!p->assembling) {
    if (c->offset != 0) {
      *next_offset = 0; /* start over from the beginning */
      goto out;
    }
    v = begin_assembly(e, p, c);
    if (v.code)
      goto out;
  }
  if (c->offset != p->received) {
    *next_offset = p->received; /* resume where we are */
    goto out;
  }
  v = write_chunk(e, client, &p, c);
  if (v.code)
    goto out;
  *next_offset = p->received;
  if (p->received < p->total)
    goto out;
  /* The last chunk: the update leaves the participant, and its bytes are
   * read back from the round's file and checked without the lock; the
   * place stays busy until they are kept or refused, so that no restart
   * writes over them meanwhile. */
  upload_work_take(e, p, c, &w);
  w.in_file = 1;
  w.kept_at = p->kept_at;
  w.len = p->total;
  p->assembling = 0;
  p->total = p->received = 0;
  p->busy = 1;
finish:
  pthread_mutex_unlock(&e->mu);
  v = w.in_file ? read_back(e, &w) : round_ok();
  if (v.code == 0)
    v = upload_work_run(e, &w);
  pthread_mutex_lock(&e->mu);
  if (v.code == 0)
    v = finish_upload(e, &w, complete);
  if (w.in_file && w.round == e->round &&
      (p = round_find_participant(e, client)))
    p->busy = 0;
  *next_offset = *complete ? c->total_size : 0;
out:
  pthread_mutex_unlock(&e->mu);
  free(w.owned);
  free(w.delta);
  return v;
}

/* ---- federated evaluation ---- */

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

/* One reported metric: a valid name and a value in its range. Accuracies
 * and losses feed the rounds' federated evaluation, which an out-of-range
 * value would own, or overflow to infinity. */
static round_verdict check_metric(const char *name, double value) {
  if (!valid_name(name, ROUND_MAX_METRIC_NAME))
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT,
        "metric name '%.64s' must be 1-%d characters of [a-z0-9_.]", name,
        ROUND_MAX_METRIC_NAME);
  if (!isfinite(value))
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "metric %s is not a finite number", name);
  if (fabs(value) > MAX_METRIC_MAGNITUDE)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "metric %s = %g is out of range: at most %g in "
                              "magnitude",
                              name, value, MAX_METRIC_MAGNITUDE);
  if (strcmp(name, "eval_examples") == 0)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "metric name eval_examples is the "
                              "coordinator's: send the count as "
                              "num_examples");
  if (ends_with(name, "accuracy") && !(value >= 0 && value <= 1))
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "metric %s = %g is out of range: an accuracy "
                              "is in [0, 1]",
                              name, value);
  if (ends_with(name, "loss") && value < 0)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "metric %s = %g is out of range: a loss is "
                              "not negative",
                              name, value);
  return round_ok();
}

static int has_metric_name(const participant *p, const char *const *names,
                           size_t before, const char *name) {
  for (size_t i = 0; i < p->n_metric_names; i++)
    if (strcmp(p->metric_names[i], name) == 0)
      return 1;
  for (size_t i = 0; i < before; i++)
    if (strcmp(names[i], name) == 0)
      return 1;
  return 0;
}

/* Under the lock: the report's example count against what the client
 * declared, and its names against the distinct names it may still add
 * this round (remember_metric_names records them once stored). */
static round_verdict check_report_locked(round_engine *e, participant *p,
                                         uint64_t num_examples,
                                         size_t n_metrics,
                                         const char *const *names) {
  uint64_t limit = p->declared ? p->declared : e->cfg.max_update_examples;
  if (num_examples > limit)
    return round_fail_verdict(
        GRPC_STATUS_INVALID_ARGUMENT,
        "num_examples %llu is out of range: at most %llu (%s)",
        (unsigned long long)num_examples, (unsigned long long)limit,
        p->declared ? "what the client declared at check-in"
                    : "--max-update-examples");
  size_t fresh = 0;
  for (size_t i = 0; i < n_metrics; i++)
    fresh += !has_metric_name(p, names, i, names[i]);
  if (p->n_metric_names + fresh > ROUND_MAX_METRICS)
    return round_fail_verdict(
        GRPC_STATUS_RESOURCE_EXHAUSTED,
        "client %lld reported %zu distinct metric names in round %lld "
        "already; %zu more would pass the limit of %d",
        (long long)p->client, p->n_metric_names, (long long)e->round, fresh,
        ROUND_MAX_METRICS);
  if (fresh && !p->metric_names) {
    p->metric_names = calloc(ROUND_MAX_METRICS, sizeof *p->metric_names);
    if (!p->metric_names)
      return round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED,
                                "coordinator out of memory");
  }
  return round_ok();
}

static void remember_metric_names(participant *p, size_t n_metrics,
                                  const char *const *names) {
  for (size_t i = 0; i < n_metrics; i++)
    if (!has_metric_name(p, names, 0, names[i]))
      snprintf(p->metric_names[p->n_metric_names++], sizeof p->metric_names[0],
               "%s", names[i]);
}

round_verdict round_decline(round_engine *e, int64_t client, int64_t round,
                            const char *reason) {
  round_verdict v = round_ok();
  pthread_mutex_lock(&e->mu);
  participant *p = round_find_participant(e, client);
  if (round != e->round || e->state == ROUND_IDLE) {
    v = stale_round(e, round, "report");
  } else if (!p) {
    v = round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                           "client %lld was not selected for round %lld",
                           (long long)client, (long long)round);
  } else if (e->kind == KIND_EVALUATE && !p->reported && !p->declined) {
    p->declined = 1;
    e->n_declined++;
    /* The round may have nobody left to wait for. */
    round_answer_arrived(e);
    /* %.200s: the client's words, bounded; the log escapes control bytes. */
    log_info("round %lld: client %lld declined the evaluation: %.200s",
             (long long)round, (long long)client,
             reason && reason[0] ? reason : "no reason given");
  }
  pthread_mutex_unlock(&e->mu);
  return v;
}

round_verdict round_report(round_engine *e, int64_t client, int64_t round,
                           uint64_t num_examples, size_t n_metrics,
                           const char *const *names, const double *values) {
  if (n_metrics > ROUND_MAX_METRICS)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "%zu metrics; at most %d per report", n_metrics,
                              ROUND_MAX_METRICS);
  for (size_t i = 0; i < n_metrics; i++) {
    round_verdict m = check_metric(names[i], values[i]);
    if (m.code)
      return m;
  }
  round_verdict v = round_ok();
  pthread_mutex_lock(&e->mu);
  if (round != e->round || e->state == ROUND_IDLE) {
    v = stale_round(e, round, "report");
    goto out;
  }
  participant *p = round_find_participant(e, client);
  if (!p) {
    v = round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                           "client %lld was not selected for round %lld",
                           (long long)client, (long long)round);
    goto out;
  }
  int answer = e->kind == KIND_EVALUATE;
  if (answer && (!round_accepts_work(e) || p->reported || p->declined)) {
    v = round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                           "evaluation round %lld %s", (long long)round,
                           p->reported   ? "already has this client's report"
                           : p->declined ? "was declined by this client"
                                         : "is closed; this report is late");
    goto out;
  }
  v = check_report_locked(e, p, num_examples, n_metrics, names);
  if (v.code)
    goto out;
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
  if (answer) {
    if (store_metrics_put_reported(e->db, round, client, n, all_names,
                                   all_values, clock_wall_s())) {
      v = round_store_failed(e);
      goto out;
    }
    p->reported = 1;
    p->examples = num_examples;
    e->n_done++;
    round_answer_arrived(e);
  } else if (store_metrics_put(e->db, round, client, n, all_names,
                               all_values)) {
    v = round_store_failed(e);
    goto out;
  }
  remember_metric_names(p, n_metrics, names);
out:
  pthread_mutex_unlock(&e->mu);
  return v;
}
