/* Internal to secure aggregation: the union bounds secagg_find_params
 * (secagg.h) checks, exposed so that its tests can compare them with
 * binomial tails summed by hand. docs/secagg.md derives each one. All
 * are log2 of a probability bound (a union bound may exceed 1, so the
 * value may be positive), -INFINITY when the event is impossible; pure and
 * thread-safe. */
#ifndef COHORT_SECAGG_PARAMS_H
#define COHORT_SECAGG_PARAMS_H

#include <stdint.h>

#include "secagg.h"

/* ln P[X >= t] for X ~ Binomial(m, p), p in [0, 1]: 0 for t = 0,
 * -INFINITY when t > m or p = 0 < t. Summed in double from t outwards
 * (or, when the mode lies in the tail, as 1 minus the other tail), and
 * stopped only once a geometric bound on the rest is below 2^-60 of the
 * sum; the first term's log comes from lgamma, whose rounding of ln m!
 * leaves a relative error of at most about 1e-9 (m = 65536). */
double secagg_ln_binom_upper(uint32_t m, double p, uint32_t t);

/* (1) The round cannot complete: some client has fewer than t surviving
 * neighbours, so it gets too few shares to mask with, or too few
 * attestations to reveal on, or a secret it holds a share of (held by its
 * owner and the owner's k neighbours) cannot be rebuilt:
 * log2(n * P[Binomial(k, 1 - dropout) < t]). */
double secagg_bound_correctness(uint32_t n, uint32_t k, uint32_t t,
                                double dropout);

/* (2) Corrupt clients hold t shares of some client's secrets:
 * log2(n * P[Binomial(k + 1, corrupt) >= t]). */
double secagg_bound_reconstruct(uint32_t n, uint32_t k, uint32_t t,
                                double corrupt);

/* The corrupt holders of one client's shares that, with a coordinator of
 * the given kind, rebuild both its secrets at degree k and threshold t: t
 * (curious), 2 t - k - 1 (semi-malicious; 0 when the honest holders alone
 * can be split). */
uint32_t secagg_holders_needed(uint32_t k, uint32_t t,
                               secagg_adversary adversary);

/* (2) for a coordinator of the given kind: reconstruction needs t corrupt
 * holders from a curious one, 2 t - k - 1 from a semi-malicious one (each
 * honest holder reveals one kind of share, the corrupt ones both);
 * log2(n), n certainties, when that is none. */
double secagg_bound_exposed(uint32_t n, uint32_t k, uint32_t t, double corrupt,
                            secagg_adversary adversary);

/* (3) The honest survivors of the random Harary graph fall apart: two
 * disjoint runs of floor(k / 2) consecutive removed (dropped or corrupt)
 * nodes on its circle: log2(n^2 * (dropout + corrupt)^(2 floor(k / 2))).
 * -INFINITY for the complete graph (k = n - 1), whose honest survivors
 * are always connected. */
double secagg_bound_isolate(uint32_t n, uint32_t k, double dropout,
                            double corrupt);

#endif
