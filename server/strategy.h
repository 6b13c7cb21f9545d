/* Server-side optimisers: how the coordinator turns a round's combined
 * update (the pseudo-gradient delta from aggregate_result) into the next
 * global model, after Reddi et al., "Adaptive Federated Optimization"
 * (ICLR 2021), Algorithm 2. Pure and deterministic: no I/O, no threads,
 * loops in a fixed order. The optimiser state can be saved with each
 * committed model and loaded after a restart. */
#ifndef COHORT_STRATEGY_H
#define COHORT_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"

/* Values are written into saved state; never renumber. */
typedef enum strategy_kind {
  STRATEGY_FEDAVG = 1,       /* x += lr * d */
  STRATEGY_FEDAVGM = 2,      /* v = momentum v + d; x += lr * v */
  STRATEGY_FEDADAGRAD = 3,   /* m = b1 m + (1-b1) d; v += d^2 */
  STRATEGY_FEDADAM = 4,      /* ... v = b2 v + (1-b2) d^2 */
  STRATEGY_FEDYOGI = 5,      /* ... v -= (1-b2) d^2 sign(v - d^2) */
  STRATEGY_FEDPROX = 6,      /* as FEDAVG; clients add mu/2 |w - x|^2 */
  STRATEGY_MEDIAN = 7,       /* as FEDAVG over the coordinate-wise median */
  STRATEGY_TRIMMED_MEAN = 8, /* as FEDAVG over the trimmed mean */
} strategy_kind;

/* Every hyper-parameter; each kind reads only its own (listed below).
 * strategy_config_init fills a kind's defaults:
 *   fedavg, fedprox, median, trimmed_mean: server_lr 1
 *   fedavgm:  server_lr 1, momentum 0.9
 *   fedadagrad, fedadam, fedyogi: server_lr 0.01, beta1 0.9, beta2 0.99,
 *             tau 1e-3 (fedadagrad does not read beta2)
 *   fedprox:  mu 0.01;  trimmed_mean: trim 0.1 */
typedef struct strategy_config {
  strategy_kind kind;
  double server_lr; /* eta, > 0: every kind */
  double momentum;  /* [0, 1): fedavgm */
  double beta1;     /* [0, 1): adaptive kinds, first moment */
  double beta2;     /* [0, 1): fedadam, fedyogi, second moment */
  double tau;       /* > 0: adaptive kinds, adaptivity; v starts at tau^2 */
  double mu;        /* >= 0: fedprox, the clients' proximal term */
  double trim;      /* [0, 0.5): trimmed_mean, fraction cut at each end */
} strategy_config;

typedef struct strategy strategy;

/* Maps a --strategy name ("fedavg", "fedavgm", "fedadam", "fedyogi",
 * "fedadagrad", "fedprox", "median", "trimmed_mean"; exact, lower case) to
 * its kind. COHORT_OK, or COHORT_EINVAL with *out untouched. */
int strategy_parse(const char *name, strategy_kind *out);

/* The --strategy name of a kind; "?" for an unknown value. */
const char *strategy_name(strategy_kind kind);

/* Sets every field of *cfg: kind and its defaults (above), the fields the
 * kind does not read to 0. COHORT_EINVAL for an unknown kind. */
int strategy_config_init(strategy_kind kind, strategy_config *cfg);

/* Checks the fields the kind reads. COHORT_OK, or COHORT_EINVAL with a
 * one-line reason naming the parameter, its value and the allowed range in
 * err (when err is not NULL and errlen > 0). */
int strategy_config_check(const strategy_config *cfg, char *err, size_t errlen);

/* Creates the optimiser of an n-parameter model (n > 0): cfg is copied and
 * must pass strategy_config_check. State: fedavgm keeps v, the adaptive
 * kinds m (starting at 0) and v (starting at tau^2), n floats each; the
 * others none. COHORT_OK and *out (free with strategy_free), COHORT_EINVAL,
 * COHORT_ENOMEM; *out is NULL on failure. */
int strategy_new(const strategy_config *cfg, size_t n, strategy **out);

/* Releases s; accepts NULL. */
void strategy_free(strategy *s);

/* The configuration s was made with (borrowed, valid until strategy_free). */
const strategy_config *strategy_config_of(const strategy *s);

/* How the server combines updates for this strategy: AGG_MEDIAN for median,
 * AGG_TRIMMED_MEAN (with strategy_config_of(s)->trim) for trimmed_mean,
 * AGG_MEAN for every other. */
agg_kind strategy_aggregation(const strategy *s);

/* The FedProx mu that the coordinator puts into the clients' training plan;
 * 0 for every other kind. */
float strategy_client_mu(const strategy *s);

/* Steps taken since strategy_new, or restored by strategy_state_load. */
uint64_t strategy_steps(const strategy *s);

/* One server step: from the global model x (n floats) and the round's
 * combined delta (n doubles, the direction the clients moved) writes the
 * next global model into x_next (n floats) and advances the state.
 * x_next may be x (each x[i] is read before x_next[i] is written); delta
 * must not overlap either. With the stored state vectors m and v (floats),
 * all in double, then each new m, v rounded to float and that float used:
 *   fedavg, fedprox, median, trimmed_mean: x' = x + lr d
 *   fedavgm:     v = momentum v + d;              x' = x + lr v
 *   fedadagrad:  m = b1 m + (1-b1) d; v = v + d^2
 *   fedadam:     m = b1 m + (1-b1) d; v = b2 v + (1-b2) d^2
 *   fedyogi:     m = b1 m + (1-b1) d; v = v - (1-b2) d^2 sign(v - d^2)
 *                (sign(0) = 0)
 *   adaptive:    x' = x + lr m / (sqrt(v) + tau)
 * and x' rounded to float. Since the state is floats and is used as stored,
 * a step after strategy_state_load is bit-identical to one without the
 * save/load in between.
 * COHORT_EINVAL (nothing written, state unchanged) when delta holds a NaN
 * or an infinity. Overflow of x' beyond the float range gives +-inf in
 * x_next, which the caller's model checks must catch. */
int strategy_step(strategy *s, const float *x, const double *delta,
                  float *x_next);

/* Size in bytes of the saved state: a 40-byte header and trailer plus 4n
 * per state vector (0, 1 or 2 of them). */
size_t strategy_state_bytes(const strategy *s);

/* Writes strategy_state_bytes(s) bytes into buf, little-endian:
 *   0  "CSTS"         magic
 *   4  u32 version    1
 *   8  u32 kind       strategy_kind
 *   12 u32 vectors    0, 1 (v) or 2 (m, then v)
 *   16 u64 n          parameters
 *   24 u64 steps
 *   32 f32[n] per vector (IEEE-754 bits)
 *   .. u64 FNV-1a 64 of every byte before it */
void strategy_state_save(const strategy *s, uint8_t *buf);

/* Replaces s's state (its vectors and step count) by the saved one in buf
 * (len bytes, borrowed). Refused with COHORT_EFORMAT, s unchanged and a
 * reason in err, when the length, magic, version or checksum is wrong,
 * the kind or n differs from s's (e.g. "saved state is for fedadam, this
 * server runs fedyogi"), or it holds values no step makes (NaN, inf, a
 * negative second moment). Hyper-parameters are not saved: a restart may
 * change them. */
int strategy_state_load(strategy *s, const uint8_t *buf, size_t len, char *err,
                        size_t errlen);

#endif
