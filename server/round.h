/* The coordinator's round engine: the persisted state machine
 * OPEN -> TRAINING -> AGGREGATING -> COMMITTED, or FAILED(reason), for
 * training rounds and federated-evaluation rounds; the current global model
 * and the server strategy; sampling with over-selection, eligibility and
 * pace steering; chunked upload assembly; order-independent aggregation;
 * and recovery of an interrupted round after a crash (docs/rounds.md).
 * Handlers call it with plain values (no protobuf, no sockets); the
 * scheduler thread calls round_tick. All entry points are thread-safe. */
#ifndef COHORT_ROUND_H
#define COHORT_ROUND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dp_ddp.h"
#include "eligibility.h"
#include "nn_dataset.h"
#include "nn_zoo.h"
#include "secagg.h"
#include "sign.h"
#include "store.h"
#include "strategy.h"

typedef enum round_state {
  ROUND_IDLE = 0, /* no round in progress (before the first, or done) */
  ROUND_OPEN,
  ROUND_TRAINING,
  ROUND_AGGREGATING,
} round_state;

const char *round_state_name(round_state s);

typedef enum round_secagg_mode {
  ROUND_SECAGG_OFF = 0,
  ROUND_SECAGG_FULL, /* complete graph (SecAgg) */
  ROUND_SECAGG_PLUS, /* k-regular graph from the parameter finder (SecAgg+) */
} round_secagg_mode;

/* "off", "full" or "plus"; COHORT_EINVAL for anything else. */
int round_secagg_parse(const char *s, round_secagg_mode *out);
const char *round_secagg_name(round_secagg_mode m);

typedef enum round_dp_mode {
  ROUND_DP_OFF = 0,
  ROUND_DP_CENTRAL,     /* the coordinator clips and noises the sum */
  ROUND_DP_DISTRIBUTED, /* clients clip and noise; needs secure aggregation */
} round_dp_mode;

/* "off", "central" or "distributed"; COHORT_EINVAL for anything else. */
int round_dp_parse(const char *s, round_dp_mode *out);
const char *round_dp_name(round_dp_mode m);

/* How a DP training round samples its clients (docs/privacy.md,
 * "Sampling"). */
typedef enum round_dp_sampling {
  ROUND_DP_POISSON = 0, /* each eligible client that checks in while the
                           round selects joins with probability q */
  ROUND_DP_FIXED,       /* K drawn uniformly from the clients that checked
                           in during the selection window */
} round_dp_sampling;

/* "poisson" or "fixed"; COHORT_EINVAL for anything else. */
int round_dp_sampling_parse(const char *s, round_dp_sampling *out);
const char *round_dp_sampling_name(round_dp_sampling m);

typedef struct round_config {
  long rounds;            /* training rounds to commit in all */
  long clients_per_round; /* K: updates a round wants (when fraction is 0) */
  double fraction;        /* > 0: K = max(M, ceil(fraction * active)) */
  long min_clients;       /* M: fewest updates that can commit */
  double over_select;     /* select ceil(K * (1 + over_select)) clients and
                             close the round at K updates */
  double round_timeout_s; /* upload deadline after selection closes */
  double selection_timeout_s; /* close selection with >= M after this */
  double retry_ms;            /* shortest RetryLater */
  double retry_max_ms;        /* longest RetryLater */
  double active_window_s;     /* clients seen this recently are active */
  const elig_rule *eligible;  /* conditions on check-in attributes */
  size_t n_eligible;
  /* Sybil resistance (docs/rounds.md, "Selection" and "Offenders"). */
  double selection_window_s;   /* > 0: a round's slots are drawn at random
                                  among the eligible clients that checked in
                                  during each window this long; 0: first
                                  come, first served */
  long offender_failures;      /* N: a client that failed N of the last M
                                  rounds it was selected for is excluded; 0:
                                  never */
  long offender_rounds;        /* M */
  double offender_exclusion_s; /* for this long */
  long eval_every; /* an evaluation round after every N training rounds */
  int epochs;      /* the training plan sent to clients */
  int batch_size;
  double learning_rate;
  strategy_config strategy;
  const char *codec_spec; /* update codec (common/codec/codec.h); NULL = fp32 */
  double codec_clip;      /* qB's common clip; 0 = per-payload scale */
  /* Secure aggregation of training rounds (docs/rounds.md). */
  round_secagg_mode secagg;
  long secagg_threshold;     /* t; 0 = chosen from the cohort size */
  long secagg_degree;        /* k; 0 = chosen (n - 1 for full) */
  double secagg_dropout;     /* plus: the finder's expected dropout rate */
  double secagg_corrupt;     /* the share of corrupt clients t withstands */
  uint32_t secagg_colluders; /* and colluders placed around one client */
  secagg_adversary secagg_adversary; /* what t must withstand */
  double secagg_timeout_s;      /* ADVERTISE, SHARE, CONSISTENCY and UNMASK,
                                   each */
  uint64_t secagg_max_examples; /* W: example weights are capped here */
  /* Poisoning bounds of plain training rounds (round_bound.c,
   * docs/security.md "Poisoning"). */
  double max_update_norm;       /* > 0: every update's L2 norm is clipped
                                   to it; 0: to bound_multiplier times the
                                   round's lower median; < 0: not bounded */
  double bound_multiplier;      /* M of the automatic bounds (>= 1) */
  uint64_t max_update_examples; /* an update's weight and a report's
                                   example count, at most */
  /* Differential privacy of training rounds (docs/privacy.md). */
  round_dp_mode dp;
  double dp_noise_multiplier;    /* z; 0: planned from dp_epsilon */
  double dp_epsilon;             /* the epsilon the planner aims at after
                                    `rounds` rounds */
  double dp_delta;               /* epsilon is reported at this delta */
  double dp_budget;              /* no round may take epsilon past this; 0:
                                    dp_epsilon, or no budget */
  double dp_clip;                /* C (the first round's when adaptive) */
  double dp_target_quantile;     /* > 0: adaptive clipping towards it */
  double dp_clip_lr;             /* adaptive clipping's learning rate */
  double dp_count_stddev;        /* its count noise; 0: K / 20 */
  round_dp_sampling dp_sampling; /* Poisson (default) or fixed-size */
  double dp_sampling_rate;       /* Poisson's q; 0: --fraction, K / N, or K
                                    over the clients active at the open */
  long dp_population;            /* N: Poisson's q = K / N; 0: the clients
                                    active within active_window_s */
  unsigned dp_bits;              /* distributed: the ring's bits */
  double session_ttl_s;          /* a session token expires this long after
                                    its registration */
  uint64_t seed;                 /* initial model */
  const char *model_spec;
  nn_shape input;         /* one example (28 x 28 x 1) */
  int classes;            /* labels (10) */
  const nn_dataset *eval; /* borrowed; NULL: no server-side evaluation */
  FILE *round_lines;      /* where "round R: ..." lines go (stdout) */
} round_config;

/* Defaults for everything but the model, the data and the output. */
void round_config_init(round_config *cfg);

typedef struct round_engine round_engine;

/* Loads the latest model from db (or creates the initial one from the
 * seed), marks rounds interrupted by a crash FAILED, and counts the rounds
 * already committed, so a restarted coordinator carries on. db is borrowed.
 * err gets a one-line reason. */
int round_engine_new(const round_config *cfg, store *db, round_engine **out,
                     char *err, size_t errlen);
void round_engine_free(round_engine *e); /* accepts NULL */

/* Result of an entry point: a gRPC status code (0 = OK) and, when not OK, a
 * one-line reason. Nothing is stored when the code is not OK. */
typedef struct round_verdict {
  int code;
  char detail[200];
} round_verdict;

/* ---- enrollment and authentication ---- */

/* Adds the SHA-256 of an enrollment token the coordinator accepts (a
 * --enroll-token: kept in memory, no use limit, no expiry). Tokens made
 * with `cohort tokens create` live in the store instead and are looked up
 * there at each Register. */
int round_add_enrollment_token(round_engine *e, const char *token);
/* From now on, a Register must carry this enrollment authority's
 * certificate of its identity key (docs/security.md). COHORT_EFORMAT when
 * pub is not a usable Ed25519 public key. */
int round_set_enroll_authority(round_engine *e,
                               const uint8_t pub[SIGN_PUBLIC_LEN]);

/* How far a proof of possession's signed time may be from the
 * coordinator's clock, either way: room for devices' clocks, and how long
 * a proof captured before it reached the coordinator stays usable. */
#define ROUND_POSSESSION_SKEW_S 600

/* A Register request as received (lengths unchecked: the engine checks
 * them). */
typedef struct round_registration {
  const char *enrollment_token;
  const char *platform; /* may be NULL */
  const uint8_t *identity_key;
  size_t identity_key_len; /* SIGN_PUBLIC_LEN */
  const uint8_t *enrollment_cert;
  size_t enrollment_cert_len; /* 0 (none) or SIGN_CERT_LEN */
  const uint8_t *possession;  /* sign_possession's proof */
  size_t possession_len;      /* 0 (none) or SIGN_LEN */
  int64_t possession_time_ms; /* when the client signed it, by its clock */
} round_registration;
/* Register: checks the enrollment token (one given by flag, or a stored
 * one that is not revoked, expired or used up), the identity key (a valid
 * point, bound to no other client) and, with an enrollment authority, the
 * key's certificate; creates a client bound to the key, taking one use of
 * a stored token in the same transaction, and a session token that expires
 * after cfg.session_ttl_s (written to token_out; only its hash is stored).
 * A key bound to a client gets that client a new session (without taking a
 * use), expired or not, when the request proves it holds the key
 * (possession, checked whenever present, signed within
 * ROUND_POSSESSION_SKEW_S of the coordinator's clock and later than the
 * last proof accepted for the client: the newest proof wins), unless that
 * client was bound without a proof: a new client then replaces it, which
 * is retired (revoked, its key released); a revoked client's key is
 * refused. */
round_verdict round_register(round_engine *e, const round_registration *r,
                             int64_t *client_id, char token_out[65]);
/* Maps a bearer token to its client id; UNAUTHENTICATED when missing,
 * unknown, expired or revoked (the detail then begins with
 * PB_DETAIL_SESSION_EXPIRED or PB_DETAIL_SESSION_REVOKED). */
round_verdict round_authenticate(round_engine *e, const char *bearer,
                                 int64_t *client_id);
/* Whether client's session still holds, as round_authenticate would say
 * of its token: for a call held since it was authenticated (long_poll.h),
 * whose client the operator may have revoked meanwhile. */
round_verdict round_session_live(round_engine *e, int64_t client);

/* ---- check-in ---- */
typedef enum checkin_kind {
  CHECKIN_TASK,
  CHECKIN_RETRY,
  CHECKIN_DONE
} checkin_kind;
typedef struct round_task {
  int64_t round;
  int64_t model_version;
  uint8_t model_sha256[32];
  uint64_t model_size;
  char model_spec[64];
  nn_shape input;
  int classes;
  int evaluate; /* an evaluation task: Report, do not train */
  int epochs, batch_size;
  double learning_rate;
  float fedprox_mu;
  char codec[128];        /* the canonical codec spec */
  uint8_t codec_seed[32]; /* the round seed */
  float codec_clip;       /* qB's common clip; 0 = per payload */
  int secagg;             /* SecAgg (SETUP first), upload a masked input */
  round_dp_mode dp;       /* differential privacy of the round */
  uint32_t deadline_ms;
} round_task;
typedef struct checkin_result {
  checkin_kind kind;
  round_task task;          /* CHECKIN_TASK */
  uint32_t retry_after_ms;  /* CHECKIN_RETRY */
  char reason[160];         /* CHECKIN_RETRY: why not selected, or "" */
  int64_t rounds_committed; /* CHECKIN_DONE */
  uint64_t changes;         /* round_changes() when this was answered */
  /* CHECKIN_TASK: this very check-in selected the client (not a task it
   * already had), which happens once a round: the check-in rate limit
   * does not charge it (docs/tokens.md). */
  int fresh;
  /* CHECKIN_RETRY, for the caller that decides whether to hold the call
   * (pace.h, pace_hold_cap and pace_crowded): */
  size_t wanted;             /* S, the next selection's size */
  size_t active;             /* clients active now */
  int took_part;             /* it took part in the round in progress */
  int candidate;             /* a candidate of the open round's draw */
  uint32_t crowded_after_ms; /* its wait when the fleet is crowded */
} checkin_result;
/* n_attributes reported conditions (names of [a-z0-9_.]); the example
 * count is passed as "examples" too. */
round_verdict round_checkin(round_engine *e, int64_t client,
                            uint64_t num_examples, size_t n_attributes,
                            const char *const *names, const double *values,
                            checkin_result *out);
/* Check-ins asked together, as a pass over held calls asks them: under one
 * hold of the engine's lock and, for more than one, in one store
 * transaction, so that a round's selections commit once a batch instead of
 * once a client. Each ask's answer is in its v and out, as round_checkin
 * would give it; answer them only once this returns (committed). */
typedef struct round_checkin_ask {
  int64_t client;
  uint64_t num_examples;
  size_t n_attributes;
  const char *const *names; /* borrowed */
  const double *values;     /* borrowed */
  round_verdict v;          /* out */
  checkin_result out;       /* out */
} round_checkin_ask;
void round_checkin_batch(round_engine *e, round_checkin_ask *asks, size_t n);

/* ---- model download ---- */
/* Copies up to max_bytes of model `version` from offset into buf (which
 * holds at least max_bytes). wire_bytes is the size of the reply on the
 * wire, counted as download bytes of the client's participation. */
round_verdict round_get_model(round_engine *e, int64_t client, int64_t version,
                              uint64_t offset, uint8_t *buf, size_t max_bytes,
                              size_t *len, uint64_t *total, uint8_t sha256[32]);
/* The same without a copy: *data points at up to max_bytes of the model's
 * wire form from offset (*len of them), valid until
 * round_model_release(*owner), whatever the engine does meanwhile. On a
 * refusal *owner is NULL. */
round_verdict round_get_model_ref(round_engine *e, int64_t version,
                                  uint64_t offset, size_t max_bytes,
                                  const uint8_t **data, size_t *len,
                                  void **owner, uint64_t *total,
                                  uint8_t sha256[32]);
void round_model_release(void *owner); /* accepts NULL */
void round_count_download(round_engine *e, int64_t client, size_t wire_bytes);

/* ---- upload ---- */
typedef struct upload_chunk {
  int64_t round;
  uint64_t total_size;
  uint64_t offset;
  const uint8_t *data;
  size_t len;
  const uint8_t *sha256; /* digest of the whole update: its name */
  size_t sha256_len;
  uint64_t xxh64; /* XXH64 of the whole update; 0: check sha256 instead */
  uint64_t num_examples;
  size_t wire_bytes; /* request size on the wire */
  uint32_t train_ms; /* the client's training time, as it says */
} upload_chunk;
/* One chunk of a client's update (c->data borrowed for the call). When
 * the update is complete, its digest, decoding and value checks run
 * without the engine's lock, so that uploads on several threads overlap
 * there; it is then checked against the round again (the round may have
 * closed, or another call of the client's may have delivered it) before
 * it is kept. *next_offset: where the client goes on; *complete: the
 * update is in (or was already). Thread-safe. */
round_verdict round_upload(round_engine *e, int64_t client,
                           const upload_chunk *c, uint64_t *next_offset,
                           int *complete);

/* Whether client may open a call that carries work (Upload, Report,
 * SecAgg): it was selected for the current round or the one before (whose
 * late updates are still recorded). Checked at a call's headers, before
 * its message is read, so that a registered client that was not selected
 * cannot hold the coordinator's receive slots with half-sent messages.
 * Thread-safe. */
round_verdict round_admit_work(round_engine *e, int64_t client);

/* ---- secure aggregation (the SecAgg call) ---- */

/* The steps of SecAggRequest, numbered as on the wire. */
typedef enum round_secagg_step {
  ROUND_SECAGG_SETUP = 0,
  ROUND_SECAGG_ADVERTISE = 1,
  ROUND_SECAGG_SHARE = 2,
  ROUND_SECAGG_MASKED = 3,
  ROUND_SECAGG_UNMASK = 4,
  ROUND_SECAGG_CONSISTENCY = 5, /* between MASKED and UNMASK */
} round_secagg_step;

/* Largest message a client sends in one SecAgg call. */
#define ROUND_SECAGG_MAX_MESSAGE (4 * 1024 * 1024 - 1024)

typedef enum round_secagg_outcome {
  ROUND_SECAGG_WAIT,     /* poll again after after_ms */
  ROUND_SECAGG_PLAN,     /* plan (reply to SETUP) */
  ROUND_SECAGG_MESSAGE,  /* message: the next step's (SecAggPeers, ...) */
  ROUND_SECAGG_FINISHED, /* reply to UNMASK once the round is summed */
} round_secagg_outcome;

typedef struct round_secagg_plan {
  uint32_t clients, index, threshold, degree, ring_bits;
  uint8_t round_seed[32];
  uint64_t max_examples;
  int dp;                  /* distributed DP: ddp says how to encode */
  ddp_params ddp;          /* (its dim and seed are the client's to fill) */
  ddp_privacy_claim claim; /* and what that noise buys */
} round_secagg_plan;

typedef struct round_secagg_reply {
  round_secagg_outcome outcome;
  uint32_t after_ms;      /* WAIT */
  round_secagg_plan plan; /* PLAN */
  uint8_t *message;       /* MESSAGE: malloc'd, the caller frees it */
  size_t message_len;
  uint32_t deadline_ms; /* time left to send the next step's message */
} round_secagg_reply;

/* One SecAgg call of client for round: its message of `step` (msg, len;
 * the same bytes again or none when it polls after a Wait). A refused
 * message changes nothing. wire_bytes: the request's size, counted as
 * upload bytes of the participation. */
round_verdict round_secagg_call(round_engine *e, int64_t client, int64_t round,
                                int step, const uint8_t *msg, size_t len,
                                size_t wire_bytes, round_secagg_reply *out);

/* ---- federated evaluation ---- */
/* Metrics per report, and distinct metric names per client and round. */
#define ROUND_MAX_METRICS 16
#define ROUND_MAX_METRIC_NAME 64
#define ROUND_MAX_ATTRIBUTES 16
/* Stores a participant's metrics of the current round (at most
 * ROUND_MAX_METRICS, and as many distinct names per client in a round;
 * names of [a-z0-9_.], finite values; one ending in "accuracy" in [0, 1],
 * one ending in "loss" non-negative; num_examples at most what the client
 * declared at check-in, or cfg.max_update_examples when it declared
 * none). A report out of range is refused whole, nothing stored. In an
 * evaluation round this is the participant's answer. */
round_verdict round_report(round_engine *e, int64_t client, int64_t round,
                           uint64_t num_examples, size_t n_metrics,
                           const char *const *names, const double *values);

/* A participant declines the current evaluation round's task (it has no
 * evaluation callback nor data): it has answered, so the round need not
 * wait for it, but it is neither counted as a report nor charged as a
 * failure (round_offenders_settle). In a training round, or repeated, it
 * changes nothing. reason (may be NULL) goes to the log. */
round_verdict round_decline(round_engine *e, int64_t client, int64_t round,
                            const char *reason);

/* ---- scheduling ---- */
/* Advances the state machine: opens rounds, closes selection, aggregates,
 * evaluates, commits or fails rounds. Call it often (it returns fast when
 * there is nothing to do). Returns COHORT_OK, or an error when the store
 * fails (the coordinator should then stop). */
int round_tick(round_engine *e);
/* Blocks up to ms milliseconds or until an upload, a report or a
 * secure-aggregation message arrives. */
void round_wait(round_engine *e, int ms);
/* A counter that moves whenever a check-in answered RetryLater, or a
 * SecAgg poll answered Wait, might now get another answer (a round opened,
 * selection closed, a secure-aggregation phase closed, the federation
 * ended): long polls are re-evaluated when it moves. */
uint64_t round_changes(round_engine *e);
/* Blocks until the counter differs from seen, or ms milliseconds; returns
 * it. */
uint64_t round_wait_changes(round_engine *e, uint64_t seen, int ms);
/* True once the configured number of rounds is committed. */
int round_federation_done(round_engine *e);
/* An operator's abort: the running round (OPEN or TRAINING) ends FAILED
 * with reason, and the next opens as after any failure. *round gets its
 * id. COHORT_OK; COHORT_EINVAL when no round runs or it is already
 * aggregating (too late to abort); the store's status when the failure
 * could not be recorded (the round has ended all the same). Thread-safe. */
int round_abort(round_engine *e, const char *reason, int64_t *round);
/* True when done and every client seen since start has been told so. */
int round_all_clients_told(round_engine *e);
int64_t round_committed(round_engine *e);

/* ---- for a driver in the same process (cohort-sim) ---- */
/* The state of the round in progress; *round (may be NULL) gets its id,
 * or the last one's when IDLE (0 before the first). Thread-safe. */
round_state round_current(round_engine *e, int64_t *round);
/* How a round ended: its figures as stored and printed. */
typedef struct round_outcome {
  int64_t round;             /* 0: no round has ended yet */
  int committed;             /* 1: committed (or evaluated); 0: FAILED */
  int evaluation;            /* an evaluation round */
  store_round_result result; /* clients, the coordinator's accuracy and
                                loss (NaN without --eval data), bytes */
  double epsilon;            /* DP epsilon spent after it; NaN without DP */
} round_outcome;
/* The last round to end. Thread-safe. */
void round_last_outcome(round_engine *e, round_outcome *out);

#endif
