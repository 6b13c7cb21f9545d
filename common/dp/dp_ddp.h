/* Distributed differential privacy with the distributed discrete Gaussian
 * (Kairouz, Liu, Steinke, ICML 2021), the encoding TensorFlow Federated's
 * DistributedDpSumFactory uses: each client clips its update to L2 norm C,
 * rotates it with the round seed (randomized Hadamard, zero-padded to a
 * power of two p), scales by 1/gamma, rounds to integers with conditional
 * stochastic rounding (redrawn until the rounded vector's norm is within
 * the bound the privacy analysis uses), adds discrete Gaussian noise of
 * variance sigma_client^2 per coordinate and reduces modulo 2^bits. Secure
 * aggregation sums the clients' vectors in Z_{2^bits}; only the noised sum
 * ever exists in the clear. The coordinator lifts the sum to signed
 * integers, multiplies by gamma and rotates back.
 *
 * With adaptive clipping one more ring element carries the client's
 * clipped-count bit b (1 when its norm was at most C), centred as in Andrew
 * et al. (dp_clip.h): (b - 1/2) times count_scale, with its own discrete
 * Gaussian noise, so the count is summed securely too and its sensitivity
 * is half a count, which dp_adaptive_update_noise's split assumes.
 *
 * Pure: no I/O. The coordinator chooses the parameters (ddp_plan); clients
 * follow the ones in the task after ddp_params_check. */
#ifndef COHORT_DP_DDP_H
#define COHORT_DP_DDP_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

#define DDP_MIN_BITS 4
#define DDP_MAX_BITS 32
/* The largest model ddp_params_check accepts (p <= 2^31). */
#define DDP_MAX_DIM ((size_t)1 << 31)
/* Conditional rounding draws at most this many roundings, then rounds
 * towards zero (ddp_round_conditional). */
#define DDP_ROUND_TRIES 1000
/* The least per-client noise stddev, in integer units, a plan may have
 * (the update's and the count's): below it the sum of the clients'
 * discrete Gaussians is too far from the Gaussian the accountant charges
 * (ddp_tau), and below 1 its variance is only part of sigma^2. */
#define DDP_MIN_NOISE_STDDEV 2.0
/* The delta at which a client weighs its app's demand on epsilon, unless
 * the plan claims a smaller one (ddp_check_privacy). */
#define DDP_APP_DELTA 1e-5

typedef struct ddp_params {
  size_t dim;                 /* d: the model's element count */
  uint8_t seed[PRG_SEED_LEN]; /* the round seed (rotation signs) */
  unsigned bits;              /* the ring Z_{2^bits} */
  double clip;                /* C: L2 bound of one client's update */
  double gamma;               /* granularity: one integer unit = gamma */
  double beta;                /* conditional rounding: exp(-0.5) */
  double noise_stddev;        /* sigma_client, integer units, per coordinate */
  int count_slot;             /* 1: adaptive clipping's count rides along */
  double count_scale;         /* integer units of one count: a power of two
                                 >= 2, so a client's (b - 1/2) count_scale
                                 is an integer */
  double count_noise_stddev;  /* its per-client noise, integer units */
  double count_expected;      /* E: the public expected number of clients;
                                 decoding adds E / 2 back to the centred
                                 count. Only the coordinator needs it (0 on
                                 a client is fine) */
} ddp_params;

/* What the coordinator asks for. */
typedef struct ddp_goal {
  size_t dim;
  unsigned bits;
  double clip;
  double noise_multiplier; /* z: the noised sum's stddev is z times the
                              sensitivity (model units) */
  uint32_t min_clients;    /* n_min: the fewest inputs a committed round
                              sums (the secagg threshold, or a curious
                              coordinator's --min-clients); each client adds
                              1/n_min of the variance, so any committed
                              round has at least the target noise */
  uint32_t max_clients;    /* n_max: the most inputs summed (wrap bound) */
  double wrap_probability; /* bound on P(any coordinate of the sum wraps),
                              e.g. 1e-6 */
  int adaptive;            /* add the count slot */
  double count_stddev;     /* sigma_b, in counts (adaptive only): the
                              stddev of the noise on the centred count
                              of any committed round */
  double expected_clients; /* E (adaptive only): the public number the
                              count is centred on, the denominator of the
                              noised fraction; 0 = (n_min + n_max) / 2 */
} ddp_goal;

/* What a coordinator publishes with a plan about the privacy it buys
 * (DpPlan's claim fields): after `rounds` rounds like this one, each
 * sampling clients with probability sampling_rate, the noised sums are
 * (epsilon, delta)-DP, with noise multiplier noise_multiplier (z of the
 * update and, with adaptive clipping, of the count together). */
typedef struct ddp_privacy_claim {
  double epsilon;
  double delta;
  uint64_t rounds;
  double sampling_rate;
  double noise_multiplier;
} ddp_privacy_claim;

/* Picks gamma (the finest granularity whose sum stays inside the ring with
 * the wrap bound, docs/privacy.md gives the tail bound) and the noise
 * stddevs. With adaptive clipping, noise_multiplier is the update's share
 * z_delta (dp_adaptive_update_noise), the count gets count_stddev. gamma
 * is at most clip (a client's clip is at least one integer unit) and the
 * per-client stddevs at most 2^20 (the sampler's range). COHORT_EINVAL with
 * the reason in err when no gamma works (too few bits for the cohort and
 * noise; the message names bits, clients and noise and the bits needed) or
 * the goal is malformed. The seed is zeroed: the caller fills it. */
int ddp_plan(const ddp_goal *goal, ddp_params *out, char *err, size_t errlen);

/* p: dim rounded up to a power of two (0 for dim 0 or above DDP_MAX_DIM). */
size_t ddp_padded_dim(size_t dim);

/* The conditional rounding's L2 bound in integer units (Kairouz et al.,
 * section 4.1), c = clip / gamma, d = p:
 *   sqrt(min(c^2 + d/4 + sqrt(2 ln(1/beta)) (c + sqrt(d)/2), (c + sqrt d)^2))
 * (the second term alone when beta is 0). */
double ddp_rounding_bound(const ddp_params *p);

/* Kairouz et al.'s tau for n clients each adding N_Z(0, sigma^2):
 * 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k / (k + 1)), what the sum of
 * discrete Gaussians (not itself a discrete Gaussian) costs beyond the
 * continuous Gaussian. With l2 = D2 / (sqrt(n) sigma), l1 = D1 / (sqrt(n)
 * sigma) (D1 <= min(sqrt(d) D2, D2^2) for integer vectors) the noised sum
 * has RDP at order alpha (their proposition 14)
 *   min(alpha l2^2 / 2 + tau d, alpha (l2^2 + 2 l1 tau + tau^2 d) / 2,
 *       alpha (l2 + sqrt(d) tau)^2 / 2).
 * tau is 7e-17 at sigma = 2 (negligible), 2.3e-9 at 1.5, 5e-4 at 1 (not:
 * it is multiplied by d or D1), so keep sigma >= 2 (docs/privacy.md). */
double ddp_tau(double sigma, uint32_t n);

/* The L2 sensitivity of one client's contribution in model units (gamma
 * times the conditional rounding's norm bound), >= clip: the coordinator's
 * accountant uses noise_multiplier = sqrt(n_min) * noise_stddev * gamma /
 * sensitivity, which ddp_plan makes equal to the goal's z. */
double ddp_sensitivity(const ddp_params *p);

/* Checks params received in a task: dim in 1..DDP_MAX_DIM, bits in
 * DDP_MIN_BITS..DDP_MAX_BITS, finite positive clip and gamma with clip /
 * gamma <= 2^52, beta in [0, 1), noise in [0, 2^20]; with the count slot
 * (count_slot 0 or 1) a power-of-two count_scale in [2, 2^(bits-2)], its
 * noise in [0, 2^20] and a finite count_expected >= 0. COHORT_EINVAL with
 * the reason. */
int ddp_params_check(const ddp_params *p, char *err, size_t errlen);

/* The noise multiplier p's noise gives when n_min clients add it: the
 * update's sqrt(n_min) noise_stddev gamma / ddp_sensitivity, composed with
 * the count's 2 sqrt(n_min) count_noise_stddev / count_scale when the
 * count slot is on (z^-2 = z_update^-2 + z_count^-2, Andrew et al.,
 * theorem 1). 0 when either has no noise. p must pass ddp_params_check. */
double ddp_noise_multiplier(const ddp_params *p, uint32_t n_min);

/* A client's check of a plan it was sent (p, which passed
 * ddp_params_check) against what the coordinator claims for it (c), with
 * n_min the fewest clients whose noise any committed sum holds (the
 * secure-aggregation threshold t, the one number the protocol enforces
 * against any coordinator) and app_max_epsilon the most the app accepts
 * (0: no demand). Recomputes with the accountant (dp_accountant.h) the
 * noise multiplier z_needed that the claimed epsilon needs over the
 * claimed rounds at the claimed rate and delta, and refuses, with
 * COHORT_EINVAL and a one-line reason naming the numbers: a claim that is
 * not a privacy target (epsilon not finite and > 0, delta outside (0, 1),
 * 0 rounds, q outside (0, 1], z not finite and > 0); a plan with no noise,
 * or with a per-client noise stddev (the update's or the count's) below
 * DDP_MIN_NOISE_STDDEV units, whatever multiplier it computes to;
 * noise whose multiplier over n_min clients (ddp_noise_multiplier) is
 * below z_needed (taken exactly: below it only within the planner's
 * 1e-4 when the accountant's epsilon for it still meets the claim) or
 * below the claimed z; and, when app_max_epsilon > 0, an epsilon above it
 * at delta DDP_APP_DELTA (the claim's own epsilon when its delta is no
 * larger; else the accountant's for the plan's noise at DDP_APP_DELTA).
 * Pure. */
int ddp_check_privacy(const ddp_params *p, const ddp_privacy_claim *c,
                      uint32_t n_min, double app_max_epsilon, char *err,
                      size_t errlen);

/* Ring elements per client: p (+1 with the count slot). */
size_t ddp_ring_dim(const ddp_params *p);

/* Conditional stochastic rounding of y = x[i] * scale (n values): each
 * rounds up with probability its fractional part (to 2^-32), and the whole
 * vector is redrawn while its L2 norm exceeds bound; after max_tries
 * draws it rounds towards zero instead (shrunk first if float error put
 * |y| itself above bound), so out always has norm <= bound. Returns the
 * draw that was kept (1..max_tries), or 0 for the fallback. Thread-safe
 * for distinct rng. */
unsigned ddp_round_conditional(const float *x, size_t n, double scale,
                               double bound, unsigned max_tries, prg *rng,
                               int64_t *out);

/* Encodes one client's update: delta (dim floats, finite, any norm: it is
 * clipped here; *norm gets the norm before clipping, may be NULL) into
 * ddp_ring_dim elements of [0, 2^bits). rng draws the rounding and the
 * noise (the CSPRNG on a client). COHORT_EINVAL (with err) for bad params
 * or a non-finite delta, COHORT_ENOMEM, COHORT_EIO when OpenSSL fails.
 * Thread-safe for distinct rng and ring. */
int ddp_encode(const ddp_params *p, const float *delta, prg *rng,
               uint64_t *ring, double *norm, char *err, size_t errlen);

/* Decodes the ring sum of n clients' encodings (ddp_ring_dim elements, each
 * < 2^bits): sum_out (dim doubles) gets the noised sum of their clipped
 * updates in model units; *count (may be NULL; NAN without the count
 * slot) the noised number of clients whose norm was within the clip:
 * the centred sum plus E / 2 (count_expected), so it is off by (E - n) / 2
 * when n clients were summed, as in Andrew et al.'s estimator; divide by E
 * for dp_adaptive_clip_next. COHORT_EINVAL for bad params, an element out
 * of the ring, or a count asked with count_expected 0; COHORT_ENOMEM,
 * COHORT_EIO. */
int ddp_decode_sum(const ddp_params *p, const uint64_t *sum, double *sum_out,
                   double *count, char *err, size_t errlen);

#endif
