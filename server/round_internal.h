/* Internal to the round engine: its state, shared by round.c (lifecycle,
 * recovery, scheduling, commit) and round_client.c (what clients call).
 * Everything here is touched with e->mu held. */
#ifndef COHORT_ROUND_INTERNAL_H
#define COHORT_ROUND_INTERNAL_H

#include <pthread.h>

#include "aggregate.h"
#include "codec.h"
#include "crypto.h"
#include "round.h"
#include "strategy.h"

#define MAX_ENROLL_TOKENS 16

typedef enum round_kind { KIND_TRAIN = 0, KIND_EVALUATE = 1 } round_kind;

typedef struct participant {
  int64_t client;
  int uploaded; /* training: its update is in the aggregate */
  int reported; /* evaluation: its metrics are stored */
  uint64_t bytes_down, bytes_up, examples;
  uint8_t digest[CRYPTO_SHA256_LEN]; /* of the update being or last received */
  uint8_t *buf;                      /* assembly buffer while uploading */
  uint64_t total, received;
} participant;

typedef struct seen_client {
  int64_t id;
  int told_done;
  double touched_at;    /* monotonic time clients.last_seen was written */
  double checked_in_at; /* monotonic time of its last check-in */
} seen_client;

struct round_engine {
  pthread_mutex_t mu;
  pthread_cond_t uploaded; /* signalled when an upload or report arrives */
  round_config cfg;
  store *db;
  nn_model model;
  strategy *strategy;
  aggregate *agg;

  uint8_t enroll[MAX_ENROLL_TOKENS][CRYPTO_SHA256_LEN];
  size_t n_enroll;

  /* The global model: parameters, their wire form and its digest. */
  int64_t version;
  float *global;
  uint8_t *blob;
  size_t blob_len;
  uint8_t sha[CRYPTO_SHA256_LEN];

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
  participant *parts;
  size_t n_parts, cap_parts, n_done; /* n_done: uploaded or reported */

  seen_client *seen;
  size_t n_seen, cap_seen;

  /* The update codec (round_codec.c). */
  codec *codec;
  codec_params cparams; /* dim, clip and the current round's seed */
  int agg_linear;       /* aggregate in the codec's linear domain */
  size_t agg_dim;       /* the aggregate's length */
  codec_state *cstate;  /* the coordinator's sketch state, or NULL */
};

round_verdict round_ok(void);
round_verdict round_fail_verdict(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
round_verdict round_store_failed(round_engine *e);
participant *round_find_participant(round_engine *e, int64_t client);
/* Makes room for one more participant; NULL when out of memory. */
participant *round_add_participant(round_engine *e, int64_t client);
/* Clients seen at check-in within the active window. */
size_t round_active_clients(round_engine *e, double now);
int round_done_locked(round_engine *e);

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
/* The upload's total size against the codec's wire size. */
round_verdict round_codec_check_size(const round_engine *e, uint64_t total);
/* One upload into out (e->agg_dim floats): the linear domain for mean
 * strategies, the model domain for the robust ones. */
int round_codec_decode(const round_engine *e, const uint8_t *payload,
                       size_t len, float *out, char *why, size_t whylen);
/* The combined updates (e->agg_dim doubles) to the model delta (dim). */
int round_codec_finish(round_engine *e, const double *combined, double *delta,
                       char *why, size_t whylen);

#endif
