/* Client-level clipping for differential privacy: an update's L2 norm is
 * bounded by C, fixed or adapted each round towards a target quantile of the
 * norms (Andrew, Thakkar, McMahan, Ramaswamy 2021, "Differentially Private
 * Learning with Adaptive Clipping"). Pure. */
#ifndef COHORT_DP_CLIP_H
#define COHORT_DP_CLIP_H

#include <stddef.h>

/* L2 norm of n floats, accumulated in double. */
double dp_l2_norm(const float *x, size_t n);

/* Scales x in place so that its L2 norm is at most clip (> 0). Returns the
 * norm before clipping. The factor is clip / norm shrunk by 2^-22, so the
 * stored values' exact norm is at most clip despite their rounding and the
 * rounding of the norm's sum (up to about 10^9 elements); a vector already
 * within clip is left unchanged. A vector with a non-finite element, or a
 * clip that is not > 0, is zeroed (its norm, possibly NaN or infinite, is
 * still returned): the bound holds whatever the input. */
double dp_clip_l2(float *x, size_t n, double clip);

/* Adaptive clipping (Andrew et al. 2021, algorithm 1): each client reports
 * b_i = 1 when its norm was at most the current clip. What is noised is the
 * centred sum sum_i (b_i - 1/2), whose add/remove sensitivity is 1/2 (not
 * the 1 of sum_i b_i; this halving is where theorem 1's 2 sigma_b comes
 * from): the coordinator adds N(0, count_stddev^2) to it, adds back E / 2
 * for the public expected number of clients E (never the actual count,
 * which would undo the centring), divides by E and moves the clip
 * geometrically towards the target quantile. In distributed mode the
 * centred bit rides in the secure sum (dp_ddp.h). */
typedef struct dp_adaptive_clip {
  double target_quantile; /* gamma in (0, 1), e.g. 0.5 */
  double learning_rate;   /* eta_C > 0, e.g. 0.2 */
  double count_stddev;    /* sigma_b: noise on the count, e.g. clients / 20 */
} dp_adaptive_clip;

/* The noised fraction of clients within the clip from the noised centred
 * sum (sum_i (b_i - 1/2) + noise): (centred + E / 2) / E, clamped to
 * [0, 1]. E = expected_clients > 0; 0 when it is not. */
double dp_adaptive_noised_fraction(double noised_centred_sum,
                                   double expected_clients);

/* The next clip: clip * exp(-eta * (noised_fraction - gamma)), the
 * fraction clamped to [0, 1] first (so a clip moves by at most a factor
 * exp(eta) a round). */
double dp_adaptive_clip_next(const dp_adaptive_clip *a, double clip,
                             double noised_fraction);

/* The update's noise multiplier once part of the budget goes to the count
 * (Andrew et al., theorem 1): z_delta = (z^-2 - (2 sigma_b)^-2)^-1/2, with
 * sigma_b = count_stddev the stddev of the noise on the centred count, in
 * counts. The count's noise multiplier is sigma_b over its sensitivity 1/2,
 * i.e. 2 sigma_b; expected_clients n cancels (the fraction's noise
 * sigma_b / n over its sensitivity 1 / 2n is the same 2 sigma_b), so it is
 * unused and kept for the callers. The vector sum noised with z_delta and
 * the count noised with sigma_b together are as private as one Gaussian
 * mechanism with multiplier z. 0 when the count's noise is too small to
 * leave any budget (2 sigma_b <= z) or z <= 0; z itself when sigma_b is
 * infinite. */
double dp_adaptive_update_noise(double z, double count_stddev,
                                double expected_clients);

#endif
