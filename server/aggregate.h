/* Order-independent aggregation of client updates: the weighted mean
 * (FedAvg) in exact fixed point, and the robust coordinate-wise median and
 * trimmed mean over all kept updates. The result is bit-identical whatever
 * the order in which the updates were added. Pure: no I/O, no threads. */
#ifndef COHORT_AGGREGATE_H
#define COHORT_AGGREGATE_H

#include <stddef.h>
#include <stdint.h>

/* Values are stable (a strategy persists them indirectly); never renumber. */
typedef enum agg_kind {
  AGG_MEAN = 1,         /* example-weighted mean, streaming, 16 B/param */
  AGG_MEDIAN = 2,       /* coordinate-wise median, unweighted */
  AGG_TRIMMED_MEAN = 3, /* coordinate-wise trimmed mean, unweighted */
} agg_kind;

/* An update's weight (its example count) is 1 .. AGG_MAX_WEIGHT. */
#define AGG_MAX_WEIGHT ((UINT64_C(1) << 29) - 1)
/* The weights of one aggregate sum to at most this (2^48). */
#define AGG_MAX_TOTAL_WEIGHT (UINT64_C(1) << 48)
/* AGG_MEAN accepts |delta[i]| <= AGG_MEAN_MAX_ABS (2^20 = 1048576). The
 * robust kinds accept every finite float: refusing outliers is their job. */
#define AGG_MEAN_MAX_ABS 1048576.0
/* AGG_MEAN sums round(weight * delta[i] * 2^AGG_MEAN_FRAC_BITS) exactly in
 * a signed 128-bit integer; see aggregate.c for the bounds. */
#define AGG_MEAN_FRAC_BITS 58

typedef struct aggregate aggregate;

/* round(x * 2^AGG_MEAN_FRAC_BITS) exactly, for a finite x with |x| < 2^68
 * (weight times delta): what AGG_MEAN adds per value. Exposed for its
 * test against round(). */
__extension__ typedef __int128 agg_i128;
agg_i128 aggregate_fixed(double x);
/* aggregate_fixed(w * (double)d), the same integer, computed from d's bits
 * in 64-bit integers without a branch: what AGG_MEAN adds per value. Only
 * for a finite d with |d| <= AGG_MEAN_MAX_ABS and 1 <= w <= AGG_MAX_WEIGHT
 * (w = 0 gives 0); beyond those it is wrong. Exposed for its test against
 * aggregate_fixed. Pure. */
agg_i128 aggregate_fixed_term(float d, uint64_t w);

/* Creates an empty aggregate of n-parameter updates (n > 0).
 * capacity: the most updates it accepts; 0 means no limit, allowed for
 * AGG_MEAN only (it keeps one 128-bit sum per parameter, whatever the count).
 * The robust kinds keep every update (4n bytes each, allocated as they
 * arrive, not up front) and need capacity >= 1.
 * trim: for AGG_TRIMMED_MEAN the fraction beta in [0, 0.5): floor(beta * m)
 * of the m values are dropped at each end of every coordinate; ignored by
 * the other kinds.
 * Returns COHORT_OK and *out (free with aggregate_free), COHORT_EINVAL for a
 * bad argument, COHORT_ENOMEM. *out is NULL on failure. */
int aggregate_new(agg_kind kind, size_t n, size_t capacity, double trim,
                  aggregate **out);

/* Adds one update: delta (n floats, borrowed, read only during the call)
 * with its weight (example count, 1 .. AGG_MAX_WEIGHT; the robust kinds
 * ignore it in the result but count it in aggregate_weight).
 * Refused with COHORT_EINVAL, the aggregate unchanged and a one-line reason
 * in err (when err is not NULL and errlen > 0): a NaN or infinite value, a
 * value beyond AGG_MEAN_MAX_ABS (AGG_MEAN only), a weight out of range, a
 * total weight beyond AGG_MAX_TOTAL_WEIGHT, or the capacity reached.
 * COHORT_ENOMEM (unchanged too) when a robust kind cannot store the update.
 * Not thread-safe: serialise calls on one aggregate. */
int aggregate_add(aggregate *a, const float *delta, uint64_t weight, char *err,
                  size_t errlen);

/* The checks of aggregate_add alone: COHORT_OK when aggregate_add(a, delta,
 * weight, ...) would accept the update now (only COHORT_ENOMEM can still
 * fail it), else COHORT_EINVAL with the same reason in err. Changes
 * nothing; lets the caller refuse an upload before storing it. */
int aggregate_check(const aggregate *a, const float *delta, uint64_t weight,
                    char *err, size_t errlen);

/* The value checks of aggregate_check alone, for an aggregate of kind
 * (n floats): none NaN or infinite, none beyond AGG_MEAN_MAX_ABS for
 * AGG_MEAN. Pure and thread-safe: lets a caller check an update before it
 * takes the lock that serialises the aggregate. COHORT_OK or COHORT_EINVAL
 * with the reason in err. */
int aggregate_check_values(agg_kind kind, const float *delta, size_t n,
                           char *err, size_t errlen);
/* The largest |delta[i]| aggregate_check_values passes for kind
 * (AGG_MEAN_MAX_ABS or FLT_MAX); NaN passes no limit. */
float aggregate_value_limit(agg_kind kind);

/* The other half of aggregate_check: the weight against the limits and
 * the total so far, and the capacity. Changes nothing. */
int aggregate_check_weight(const aggregate *a, uint64_t weight, char *err,
                           size_t errlen);

/* aggregate_add for a delta that already passed aggregate_check_values
 * for this aggregate's kind and length: only the weight and capacity are
 * checked again (same refusals, same result otherwise). Adding a delta
 * that did not pass breaks the exact sum's bounds: the caller vouches. */
int aggregate_add_checked(aggregate *a, const float *delta, uint64_t weight,
                          char *err, size_t errlen);

/* Replaces an update added earlier, delta with weight, by delta * scale
 * (each value rounded to float) with weight new_weight: the result is
 * what adding that in the first place would have given, whatever the
 * order. 0 < scale <= 1 and 1 <= new_weight <= weight, delta and weight
 * as they were added (so weight <= AGG_MAX_WEIGHT). AGG_MEAN only
 * (COHORT_EINVAL otherwise or for bad arguments); cannot fail for an update
 * that was added. */
int aggregate_replace(aggregate *a, const float *delta, uint64_t weight,
                      double scale, uint64_t new_weight);

/* Writes the combination of the updates added so far into out (n doubles;
 * the combined delta). Leaves the aggregate unchanged, so it may be called
 * again. COHORT_ESTATE when nothing was added (out untouched); COHORT_ENOMEM
 * when the robust kinds cannot get their scratch (m * 256 * 4 bytes).
 * AGG_MEAN: out[i] = ((double)S_i * 2^-58) / (double)W, where S_i is the exact
 *   integer sum of round(w_k * delta_k[i] * 2^58) (round half away from
 *   zero) and W the total weight. Two IEEE roundings to nearest after the
 *   exact sum; |out[i] - exact mean| <= 2^-59 + 2 ulp(out[i]). Values
 *   below 2^-59 (subnormal floats included) contribute 0.
 * AGG_MEDIAN: the middle value of the m values at i, or for an even m the
 *   mean of the two middle ones, ((double)lo + (double)hi) / 2.
 * AGG_TRIMMED_MEAN: drop k = floor(trim * m) values at each end, sum the
 *   remaining m - 2k (>= 1) in double in ascending order and divide by
 *   m - 2k.
 * The robust kinds order values by their bits' total order, -0 before +0,
 * so ties are broken identically whatever the arrival order. */
int aggregate_result(const aggregate *a, double *out);

size_t aggregate_count(const aggregate *a);    /* updates added */
uint64_t aggregate_weight(const aggregate *a); /* sum of their weights */
size_t aggregate_dim(const aggregate *a);      /* n */
agg_kind aggregate_kind(const aggregate *a);

/* Forgets every update (the next round starts empty). The robust kinds keep
 * their update buffers for reuse; aggregate_free releases them. */
void aggregate_reset(aggregate *a);

/* Releases the aggregate; accepts NULL. */
void aggregate_free(aggregate *a);

/* "mean", "median", "trimmed_mean"; "?" for an unknown value. */
const char *aggregate_kind_name(agg_kind kind);

#endif
