/* Renyi differential privacy accountant for the Poisson-subsampled Gaussian
 * mechanism (Mironov, Talwar, Zhang 2019, "Renyi Differential Privacy of the
 * Sampled Gaussian Mechanism"): each round samples every client with
 * probability q and adds Gaussian noise of standard deviation z * C to the
 * sum of updates clipped to L2 norm C. Pure: no I/O, no globals but the
 * constant order list.
 *
 * The RDP of one round at order alpha is computed exactly for integer
 * orders (the binomial expansion) and by the convergent two-sided series for
 * fractional orders; rounds compose by adding RDP order by order; epsilon at
 * delta is the best order's conversion (docs/privacy.md names the
 * conversion and its source). */
#ifndef COHORT_DP_ACCOUNTANT_H
#define COHORT_DP_ACCOUNTANT_H

#include <stddef.h>
#include <stdint.h>

/* The order list: that of dp_accounting's RDP accountant (the one behind
 * TensorFlow Privacy), 1.1 .. 10.9 by 0.1, 11 .. 63, 128, 256, 512, 1024;
 * 156 orders (docs/privacy.md). Constant; safe to read from any thread. */
#define DP_ORDERS_MAX 160
extern const double dp_orders[];
extern const size_t dp_orders_count;

/* RDP at order alpha (> 1) of one round with sampling rate q (0 < q <= 1)
 * and noise multiplier z (> 0, finite). +INFINITY where it is unbounded or
 * cannot be computed (orders above 1e6, overflow): always a valid bound.
 * NAN for arguments outside those ranges. Relative precision about 1e-12,
 * or about 1e-16 / (alpha - 1) absolute where the RDP is tiny (A_alpha is
 * then 1 + O(q^2) and a double resolves it no finer). Pure; thread-safe. */
double dp_rdp_sampled_gaussian(double q, double z, double alpha);

/* Accumulated RDP over rounds, rdp[i] at order dp_orders[i] (entries from
 * dp_orders_count on stay 0). Caller-allocated; not locked. */
typedef struct dp_accountant {
  double rdp[DP_ORDERS_MAX];
} dp_accountant;

void dp_accountant_init(dp_accountant *a);
/* Adds `rounds` rounds of (q, z). COHORT_EINVAL for q outside (0, 1] or z
 * not finite and > 0. */
int dp_accountant_add(dp_accountant *a, double q, double z, uint64_t rounds);
/* Epsilon at delta (0 < delta < 1) of what was added, the smallest over
 * the orders of the conversion of Canonne, Kamath, Steinke 2020 (see
 * docs/privacy.md); *order (may be NULL) gets the order that gave it. 0
 * when nothing was added, +INFINITY when no order gives a finite value,
 * NAN for delta outside (0, 1). */
double dp_accountant_epsilon(const dp_accountant *a, double delta,
                             double *order);

/* Epsilon of `rounds` rounds of (q, z) at delta: dp_accountant_add then
 * dp_accountant_epsilon on a fresh accountant. NAN for bad arguments. */
double dp_epsilon(double q, double z, uint64_t rounds, double delta);

/* The smallest noise multiplier (to a relative 1e-4) whose epsilon after
 * `rounds` rounds at sampling rate q is at most epsilon at delta.
 * Searches z in [0.01, 1e4] by bisection in log z: when even z = 0.01
 * meets epsilon, *z is 0.01. COHORT_OK and *z (never below the true
 * smallest: its epsilon is at most the target), or COHORT_EINVAL with the
 * reason in err and *z untouched (epsilon not > 0, q outside (0, 1], rounds
 * 0, delta outside (0, 1), or no z up to 1e4 reaches it). */
int dp_noise_for_epsilon(double epsilon, double q, uint64_t rounds,
                         double delta, double *z, char *err, size_t errlen);

#endif
