/* Client sampling that matches the privacy accountant (dp_accountant.h):
 * a Poisson coin per client and round, and a uniform draw of k of m
 * candidates for fixed-size cohorts. Both draw from a prg, the CSPRNG on
 * the coordinator. docs/privacy.md, "Sampling". Pure: no I/O. */
#ifndef COHORT_DP_SAMPLE_H
#define COHORT_DP_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

/* One Poisson-sampling coin: 1 with probability floor(q 2^64) / 2^64,
 * which is never above q and below it by less than 2^-64 (a uniform 64-bit
 * word compared with an integer: no floating point decides it). q <= 0
 * gives 0 and q >= 1 gives 1 without drawing; q must not be NaN. */
int dp_sample_coin(prg *g, double q);

/* Permutes items (m of them) so that items[0 .. k) is a uniformly random
 * k-subset of them, each k-subset (and each order of it) equally likely:
 * the first k steps of a Fisher-Yates shuffle with prg_below. k <= m. */
void dp_sample_draw(prg *g, int64_t *items, size_t m, size_t k);

#endif
