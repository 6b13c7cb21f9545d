/* The weighted mean's exact fixed-point arithmetic (aggregate.h, AGG_MEAN):
 * each value's term round(w * d * 2^AGG_MEAN_FRAC_BITS), and the add of a
 * whole update's terms into the 128-bit sums, once per instruction set.
 * The add is the largest part of the coordinator's work per upload that
 * runs under the round's lock; the AVX2 and AVX-512 paths give bit for bit
 * the sums of the scalar one (test_aggregate_sum), 1.6x and 3.2x faster
 * (bench_aggregate). Pure: no I/O, no state but the path chosen. */
#ifndef COHORT_AGGREGATE_SUM_H
#define COHORT_AGGREGATE_SUM_H

#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "nn_isa.h"

/* sum[i] += aggregate_fixed_term(d[i], w) for i < n, on the engine's path
 * (nn_isa_best: COHORT_ISA's, else the best this CPU runs). The caller
 * vouches for d and w as aggregate_fixed_term requires: every d[i] finite
 * with |d[i]| <= AGG_MEAN_MAX_ABS, 1 <= w <= AGG_MAX_WEIGHT. */
void aggregate_sum_add(agg_i128 *sum, const float *d, size_t n, uint64_t w);

/* The same on the path isa: COHORT_OK, or COHORT_EINVAL (sum untouched)
 * when this build or CPU lacks it. NN_ISA_BASE is the scalar add here (no
 * SSE2 path: it would not beat the scalar one). For the tests and
 * bench_aggregate. */
int aggregate_sum_add_on(nn_isa isa, agg_i128 *sum, const float *d, size_t n,
                         uint64_t w);

/* sum[i] += term(d[i] * scale rounded to float, new_w) - term(d[i], w):
 * aggregate_replace's arithmetic, scalar (it runs once per clipped update,
 * not per upload). */
void aggregate_sum_replace(agg_i128 *sum, const float *d, size_t n, uint64_t w,
                           double scale, uint64_t new_w);

#endif
