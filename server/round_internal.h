/* Internal to the round engine: its state, shared by round.c (lifecycle,
 * recovery, scheduling, commit) and round_client.c (what clients call).
 * Everything here is touched with e->mu held. */
#ifndef COHORT_ROUND_INTERNAL_H
#define COHORT_ROUND_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "aggregate.h"
#include "codec.h"
#include "crypto.h"
#include "dp_accountant.h"
#include "dp_ddp.h"
#include "dp_grid.h"
#include "nn_isa.h"
#include "prg.h"
#include "round.h"
#include "secagg.h"
#include "seen.h"
#include "strategy.h"

#define MAX_ENROLL_TOKENS 16

typedef enum round_kind { KIND_TRAIN = 0, KIND_EVALUATE = 1 } round_kind;

/* The wire form of a model version, shared by the engine and the replies
 * that send it (round_get_model_ref): freed by the last of them to let go,
 * so a download in flight outlives a commit that replaces the model. */
typedef struct model_blob {
  atomic_int refs;
  uint8_t bytes[];
} model_blob;

typedef struct participant {
  int64_t client;
  int uploaded; /* training: its update is in the aggregate */
  int reported; /* evaluation: its metrics are stored */
  int declined; /* evaluation: it declined the task (round_decline) */
  int told;     /* it was handed its task (checkin_result.fresh) */
  uint64_t bytes_down, bytes_up, examples;
  uint8_t digest[CRYPTO_SHA256_LEN]; /* of the update being or last received */
  /* An update in chunks: its bytes go to the round's file as they come, at
   * kept_at, a place for the largest update the round takes (placed), which
   * a restart writes over. */
  int assembling, placed;
  int busy; /* a call is writing to the place, or checking what it read */
  uint64_t total, received, kept_at;
  uint32_t train_ms; /* its training time, as it said with its update */
  uint64_t declared; /* examples it declared at check-in (0: none) */
  double norm;       /* its update's L2 norm, as decoded (round_bound.c) */
  /* The distinct metric names it reported this round (ROUND_MAX_METRICS
   * of them at most), allocated at its first report. */
  char (*metric_names)[ROUND_MAX_METRIC_NAME + 1];
  size_t n_metric_names;
} participant;

/* A secure-aggregation round's coordinator side (round_secagg.c). The
 * protocol state lives only in memory: a restart fails the round. */
typedef struct round_secagg {
  int active;         /* the current round is a secure-aggregation round */
  int64_t round;      /* the round the rest belongs to; 0 = none */
  secagg_server *srv; /* from selection's end to the round's end */
  secagg_params params;
  int64_t *ids; /* n client ids, ascending: index i is ids[i] */
  /* n: the digest of each message it sent, by phase (MASKED's slot holds
   * its complaints: the masked input comes by Upload). */
  uint8_t (*digest)[SECAGG_UNMASK + 1][CRYPTO_SHA256_LEN];
  uint8_t *unmasked;                  /* n flags: sent its UNMASK message */
  double deadline;                    /* the open phase's, monotonic seconds */
  uint32_t counts[SECAGG_UNMASK + 1]; /* senders of each closed phase */
  int closed;                         /* phases closed so far */
  double complaints_deadline;         /* MASKED's complaints close by then */
} round_secagg;

/* What is kept of the last secure-aggregation round after it ended (no
 * keys): enough to tell a client that polls for UNMASK's end, after the
 * next round may have opened, how it went. */
typedef struct round_secagg_ended {
  int64_t round; /* 0 = none */
  uint32_t n;
  int64_t *ids;      /* n, ascending */
  uint8_t *unmasked; /* n flags */
  int committed;
  char reason[256]; /* why it failed */
} round_secagg_ended;

/* Differential privacy (round_dp.c): the accountant of the committed
 * rounds, the current clip and what the round in progress will write into
 * the privacy ledger. */
typedef struct round_dp {
  int on;
  dp_accountant acc;   /* the committed rounds */
  double epsilon;      /* they spent, at cfg.dp_delta */
  double budget;       /* no round may take epsilon past it; INFINITY: none */
  double z;            /* the noise multiplier each round is charged */
  double z_update;     /* the update's share when adaptive clipping takes
                          part of the budget (else z) */
  double count_stddev; /* adaptive clipping's count noise */
  double clip;         /* C of the round in progress */
  double q;            /* its sampling rate (0 until known) */
  char sampling[96];   /* how it sampled, for the ledger and the rounds
                          row */
  int exhausted;       /* the budget admits no further round */
  uint64_t within;     /* central: updates within the clip this round */
  dp_grid grid;        /* central: this round's grid (its clip's) */
  int64_t *grid_sum;   /* central: the round's updates on it, dim */
  ddp_params ddp;      /* distributed: this round's encoding */
  ddp_privacy_claim claim; /* distributed: what it buys, published */
  store_privacy row;       /* what the commit writes */
  prg noise;               /* the coordinator's CSPRNG noise stream */
  int noise_live;
} round_dp;

struct round_engine {
  pthread_mutex_t mu;
  pthread_cond_t uploaded; /* signalled when an upload, a report or a
                              secure-aggregation message arrives */
  pthread_cond_t changed;  /* broadcast when `changes` moves */
  uint64_t changes;        /* counts changes of state that can turn a
                              held call's answer into another (round_changes) */
  round_config cfg;
  store *db;
  nn_model model;
  strategy *strategy;
  aggregate *agg;

  uint8_t enroll[MAX_ENROLL_TOKENS][CRYPTO_SHA256_LEN];
  size_t n_enroll;
  /* The enrollment authority whose certificate a Register needs, if any.
   * Each client's identity key is in the store (store_client_identity). */
  int has_authority;
  uint8_t authority[SIGN_PUBLIC_LEN];

  /* The global model: parameters, their wire form and its digest. */
  int64_t version;
  float *global;
  model_blob *blob;
  size_t blob_len;
  uint8_t sha[CRYPTO_SHA256_LEN];

  double started_at; /* monotonic: the engine's start */
  int64_t committed; /* training rounds */
  int64_t next_round;
  int eval_due; /* an evaluation round of the current model is owed */

  round_state state;
  round_kind kind;
  int64_t round;
  size_t target;              /* K: updates (or reports) wanted */
  size_t select_max;          /* K with over-selection */
  double opened_at, deadline; /* monotonic seconds */
  double training_s;          /* running mean of TRAINING phase lengths */
  round_outcome last;         /* how the last round to end ended */
  participant *parts;
  size_t n_parts, cap_parts, n_done; /* n_done: uploaded or reported */
  size_t n_declined; /* participants that declined an evaluation task */

  seen_set seen; /* every client seen since the start, by id */
  /* Selection by draw (round_select.c): the open round's candidates not
   * drawn yet, the clients that checked in since it opened, and when the
   * current selection window ends (monotonic). */
  int64_t *cands;
  size_t n_cands, cap_cands, n_checked_in;
  double draw_at;
  size_t workers; /* clients that completed work within the active window,
                     as of the last round's end: pace steering's population */
  int resumed;    /* the round in progress was resumed after a restart: its
                     clients are not charged for what the crash cost them */

  /* The update codec (round_codec.c). */
  codec *codec;
  codec_params cparams; /* dim, clip and the current round's seed */
  int agg_linear;       /* aggregate in the codec's linear domain */
  size_t agg_dim;       /* the aggregate's length */
  codec_state *cstate;  /* the coordinator's sketch state, or NULL */

  round_secagg sa;
  round_secagg_ended sa_ended;
  round_dp dp;
};

/* Every change of e->state goes through here: it counts as a change. */
void round_set_state(round_engine *e, round_state s);
/* Something a waiting check-in may get a different answer for changed. */
void round_changed(round_engine *e);
/* After an update, a report or a decline: wakes the scheduler when the
 * round has nothing left to wait for (its target met, or every participant
 * done or declined), and only then. */
void round_answer_arrived(round_engine *e);

round_verdict round_ok(void);
round_verdict round_fail_verdict(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The answer to a call the store failed: UNAVAILABLE with a generic
 * detail, never SQLite's text. */
round_verdict round_store_failed(round_engine *e);
/* FAILED(reason): stored, logged, the participants forgotten. */
int round_fail(round_engine *e, const char *reason);
participant *round_find_participant(round_engine *e, int64_t client);
/* Makes room for one more participant; NULL when out of memory. */
participant *round_add_participant(round_engine *e, int64_t client);
/* Clients seen at check-in within the active window. */
size_t round_active_clients(round_engine *e, double now);
int round_done_locked(round_engine *e);
/* An upload's bytes to what the aggregate takes: the decoded update (into
 * delta, e->agg_dim floats) and its weight, the example count or, under
 * central DP, 1 after clipping (*within: its norm was within the clip).
 * *norm is the decoded update's L2 norm (round_bound.c bounds it).
 * The live upload and the resumed one both come through here and
 * round_update_add, so a restart cannot weigh an update differently. */
int round_update_prepare(round_engine *e, const uint8_t *payload, size_t len,
                         uint64_t examples, float *delta, uint64_t *weight,
                         int *within, double *norm, char *why, size_t whylen);
/* Folds a prepared update into the round's aggregate. checked: delta
 * passed aggregate_check (or aggregate_check_values) for this aggregate,
 * so its values are not checked again. */
int round_update_add(round_engine *e, const float *delta, uint64_t weight,
                     int within, int checked, char *why, size_t whylen);

/* ---- round_bound.c: poisoning bounds (docs/security.md) ---- */
/* An upload's weight: examples capped at what its client declared at
 * check-in (when it declared) and at cfg.max_update_examples; note says
 * what capped it, for the client ("" when nothing did). */
uint64_t round_bound_weight(const round_engine *e, const participant *p,
                            uint64_t examples, char *note, size_t notelen);
/* The L2 norm of n floats, summed in double. */
double round_bound_norm(const float *d, size_t n);
/* A plain fp32 payload (n little-endian floats at src) decoded into dst,
 * checked against limit and its norm taken, in one pass: what the codec's
 * decoding, aggregate_check_values and round_bound_norm do in three, with
 * the same results (dst, and *norm bit for bit). Returns the index of the
 * first value that is NaN or beyond limit (*norm and the rest of dst then
 * unset), or n when there is none. */
size_t round_bound_take(float *dst, const uint8_t *src, size_t n, float limit,
                        double *norm);
/* The same on the instruction-set path isa (round_bound_take takes the
 * engine's, nn_isa_best), the index into *first: COHORT_OK, or
 * COHORT_EINVAL when this build or CPU lacks it. NN_ISA_SCALAR runs the
 * baseline's path. For the tests. */
int round_bound_take_on(nn_isa isa, float *dst, const uint8_t *src, size_t n,
                        float limit, double *norm, size_t *first);
/* Before a plain training round's mean is taken (AGGREGATING, lock held):
 * every update's weight capped at cfg.bound_multiplier times the round's
 * lower median weight, and its norm clipped to cfg.max_update_norm or that
 * multiple of the lower median norm; updates beyond either are read back
 * from the store and replaced in the aggregate. Nothing for secure
 * aggregation, central DP and the robust strategies. COHORT_OK, or an
 * error with the reason in why (the round must then fail). */
int round_bound_apply(round_engine *e, char *why, size_t whylen);
/* ---- selection, round_select.c (docs/rounds.md, "Selection") ---- */
/* Whether the round in progress draws its clients at random among each
 * window's candidates (a plain round with --selection-window > 0). */
int round_select_by_draw(const round_engine *e);
/* A round opened at now: no candidates, the first window starts. */
void round_select_open(round_engine *e, double now);
void round_select_free(round_engine *e);
/* Any check-in: counts the client among those that checked in since the
 * open (once per round). */
void round_select_seen(round_engine *e, seen_client *seen);
/* An eligible client checked in while the round selects: a candidate of
 * this round's draws, once, however often it polls. */
int round_select_candidate(round_engine *e, seen_client *seen);
/* Draws the open slots among the candidates once the window has ended, at
 * once when every active client has checked in since the open, or as they
 * come when every active client fits in the slots. caller: the client
 * whose check-in asks (0: the scheduler). The seen pointers callers hold
 * are invalid after it. */
int round_select_draw(round_engine *e, double now, int64_t caller);
/* Under the lock: COHORT_OK when client's session still admits it to a
 * round; COHORT_EAUTH when it is revoked, expired or gone (*why says so,
 * as round_authenticate would); a store error otherwise (*why is
 * round_store_failed's). A check-in held by a long poll, and a candidate
 * waiting for its draw, were authenticated when they came, perhaps before
 * the operator revoked the client (round_client.c). */
int round_session_live_locked(round_engine *e, int64_t client,
                              round_verdict *why);
/* round_session_live_locked for a candidate of a draw: the reason a
 * revoked or expired one is left out is logged; the same returns. */
int round_candidate_live_locked(round_engine *e, int64_t client);

/* ---- offenders, round_offenders.c (docs/rounds.md, "Offenders") ---- */
/* At a round's end, participants still present: those that completed work
 * are cleared of their past failures and count as workers for pace
 * steering; when `charge`, each other one is charged a failed round
 * (reason) and excluded once it has --offender-failures of them. */
int round_offenders_settle(round_engine *e, int charge, const char *reason);
/* Whether client (seen) is excluded from selection now; when it is, why
 * gets the reason and *left_s the seconds left. */
int round_offender_excluded(round_engine *e, seen_client *seen, char *why,
                            size_t whylen, double *left_s);

/* ---- round_codec.c ---- */
/* Parses --codec, sizes the aggregate's domain and the coordinator state. */
int round_codec_setup(round_engine *e, char *err, size_t errlen);
void round_codec_free(round_engine *e);
/* The codec state committed with the current model, if any. */
int round_codec_load_state(round_engine *e);
/* The codec state's size (0 when none), a copy of it into len bytes, and
 * its restoration from such a copy, so a failed round leaves no trace. */
size_t round_codec_state_len(const round_engine *e);
void round_codec_copy_state(const round_engine *e, uint8_t *out);
void round_codec_restore_state(round_engine *e, const uint8_t *blob);
/* A fresh round seed from the CSPRNG; *out is what the round row keeps. */
int round_codec_new_round(round_engine *e, store_codec *out);
/* Takes the seed of an interrupted round back; refuses a round whose
 * updates were encoded with another codec or clip. */
int round_codec_resume(round_engine *e, const store_codec *sc, char *why,
                       size_t whylen);
/* The upload's total size against the codec's wire size; the largest an
 * upload may be. */
round_verdict round_codec_check_size(const round_engine *e, uint64_t total);
size_t round_codec_max_size(const round_engine *e);
/* One upload into out (e->agg_dim floats): the linear domain for mean
 * strategies, the model domain for the robust ones, with the round's
 * parameters cp (&e->cparams, or a copy taken under the lock: this reads
 * nothing else of e that changes, so it may run without e->mu). */
int round_codec_decode(const round_engine *e, const codec_params *cp,
                       const uint8_t *payload, size_t len, float *out,
                       char *why, size_t whylen);
/* The combined updates (e->agg_dim doubles) to the model delta (dim). */
int round_codec_finish(round_engine *e, const double *combined, double *delta,
                       char *why, size_t whylen);

/* ---- round_secagg.c ---- */
/* Refuses a secure-aggregation configuration that cannot work: a codec
 * that is not summable, no common clip, a robust strategy, a ring wider
 * than 62 bits. Called once the codec and strategy are set up. */
int round_secagg_setup(round_engine *e, char *err, size_t errlen);
void round_secagg_free(round_engine *e);
/* Forgets the previous round's secagg state; marks a training round (and
 * its rounds row) as a secure-aggregation one when --secagg is on. */
int round_secagg_open(round_engine *e);
/* At the end of selection: indexes the selected clients, chooses k, t and
 * the ring, and starts the protocol (ADVERTISE). A cohort the protocol
 * cannot take FAILs the round (*failed set). */
int round_secagg_start(round_engine *e, double now, int *failed);
/* Closes the open phase when all are in or at its deadline; may fail the
 * round or, after UNMASK, take it to AGGREGATING (*unmask set). */
int round_secagg_tick(round_engine *e, double now, int *unmask);
/* The combined update (e->agg_dim doubles, the linear domain) from the
 * unmasked sum: ends UNMASK, which may abort (COHORT_EABORTED, reason in
 * why). Called with the lock dropped, the round AGGREGATING. */
int round_secagg_combine(round_engine *e, double *combined, char *why,
                         size_t whylen);
/* The round ended: drops the keys, keeps what late polls need. */
void round_secagg_end(round_engine *e, int committed, const char *reason);
/* Whether a selected client that checks in again may have its task once
 * more: not once the protocol has moved past it, since the keys it
 * advertised died with the task that failed (it would only be refused,
 * step after step, until the round ended). */
int round_secagg_rejoins(const round_engine *e, int64_t client);
/* Upload path: the size of a masked input, the largest one may be (once
 * the SHARE phase is done), and the whole one (bytes, len). */
round_verdict round_secagg_check_size(const round_engine *e, uint64_t total);
size_t round_secagg_max_size(const round_engine *e);
round_verdict round_secagg_masked(round_engine *e, participant *p,
                                  const uint8_t *bytes, size_t len,
                                  uint64_t examples);
/* " secagg A/S/M/C/U" for the round line: the senders of ADVERTISE, SHARE,
 * MASKED, CONSISTENCY and UNMASK (or "" when off). */
void round_secagg_line(const round_engine *e, char *out, size_t len);

/* ---- round_dp.c ---- */
/* Checks --dp against the codec, strategy and secure aggregation, plans
 * the noise multiplier. Called after round_codec_setup: central mode
 * aggregates in the model domain. */
int round_dp_setup(round_engine *e, char *err, size_t errlen);
/* Rebuilds the accountant and the clip from the privacy ledger. */
int round_dp_load(round_engine *e, char *err, size_t errlen);
void round_dp_free(round_engine *e);
/* A round starts: forgets the last round's rate, count and sum, and puts
 * the grid at the current clip. */
void round_dp_round_reset(round_engine *e);
/* 1 when one more round at rate q keeps epsilon within the budget: the
 * round's rate and epsilon are set. 0 when it does not: training is over
 * (said once in the log). */
int round_dp_admits(round_engine *e, double q);

/* ---- sampling, round_dp_sampling.c (docs/privacy.md, "Sampling") ---- */
/* Whether the current round samples its clients for DP (a training round
 * of a DP federation) instead of taking them first come, first served. */
int round_dp_sampling_round(const round_engine *e);
/* 1 while no DP training round should open yet: Poisson's q is taken from
 * the active clients and the coordinator has not watched check-ins for a
 * selection timeout since it started. */
int round_dp_census_pending(const round_engine *e, double now);
/* Before a training round opens: Poisson's rate (and the round's expected
 * size, *target, and the most clients it may draw, *select_max) and the
 * budget. 0 when the round may open (or DP is off); 1 when it would take
 * epsilon past the budget (said once in the log): no round opens. */
int round_dp_open(round_engine *e, double now, size_t *target,
                  size_t *select_max);
/* Writes the round's sampling (target, rate, how) to its rounds row, once
 * it is known: at the open for Poisson, at the draw for fixed-size. */
int round_dp_record_sampling(round_engine *e);
/* An eligible client checks in while the round selects: Poisson draws its
 * coin (once per round; a second check-in gets the same answer); a
 * fixed-size round takes it as a candidate. *take: select it now. Fails
 * the round when Poisson draws more than select_max. */
int round_dp_check_in(round_engine *e, seen_client *seen, int *take);
/* Whether selection is over under DP sampling (*ready), with m the fewest
 * clients a round needs: Poisson when the window has passed or every
 * active client has its coin, failing a round that drew fewer than m;
 * fixed-size then draws K of at least m candidates (checking the budget
 * at the rate that gives). May fail the round (e->state IDLE after). */
int round_dp_close_selection(round_engine *e, double now, size_t m, int *ready);
/* A round interrupted in TRAINING or AGGREGATING: its recorded rate and
 * how it sampled, checked against the budget again. 0 when it may go on,
 * 1 when it must fail (reason in why). */
int round_dp_resume(round_engine *e, const store_round_info *info, char *why,
                    size_t whylen);
/* Central mode: clips one decoded update (model domain) to C and makes its
 * weight 1 (DP-FedAvg's uniform mean). Returns 1 when its norm was within
 * the clip. Nothing for the other modes (returns 0). */
int round_dp_clip_update(round_engine *e, float *delta, uint64_t *weight);
/* Central mode: adds a clipped update to the round's sum on the grid
 * (nothing for the other modes). Cannot fail for a clipped update, whose
 * values are finite. */
int round_dp_add_update(round_engine *e, const float *delta);
/* Central mode's combine (round.c's combine_fn): the noised mean of the
 * round's clipped updates, released from the grid with discrete Gaussian
 * noise (e->agg_dim = dim doubles, model domain). Lock dropped. */
int round_dp_combine(round_engine *e, double *combined, char *why,
                     size_t whylen);
/* Distributed mode, at the start of secure aggregation with n clients of
 * whom t must survive: plans the encoding and sets the ring and dim. */
int round_dp_plan_secagg(round_engine *e, uint32_t n, uint32_t t,
                         unsigned *ring_bits, size_t *dim, char *why,
                         size_t whylen);
/* Distributed mode: the unmasked ring sum of `inputs` clients to their
 * noised mean update (model domain). */
int round_dp_decode_sum(round_engine *e, const uint64_t *sum, uint32_t inputs,
                        double *mean, char *why, size_t whylen);
/* After the combination: central mode's noised count, the adaptive clip's
 * next value and the ledger row. */
int round_dp_finish(round_engine *e, char *why, size_t whylen);
/* The ledger row for the commit, or NULL when DP is off. */
const store_privacy *round_dp_row(const round_engine *e);
/* After the commit: the accountant and the clip move on. */
void round_dp_committed(round_engine *e);
/* " dp epsilon E" for the round line (or ""). */
void round_dp_line(const round_engine *e, char *out, size_t len);

#endif
