/* Order-independent aggregation; see aggregate.h.
 *
 * Why the weighted mean is exact and associative: w < 2^29 and a float has a
 * 24-bit significand, so t = (double)w * (double)d has at most 53 significant
 * bits and is exact; t * 2^58 is exact (a power of two, far from overflow);
 * round() makes it an integer independent of the rounding mode, and the
 * integers add exactly in __int128, so the sum cannot depend on the order.
 * Bound: |round(t * 2^58)| <= w|d| 2^58 + 1/2, so with sum(w) <= 2^48 and
 * |d| <= 2^20, |S| <= 2^(48+20+58) + m/2 = 2^126 + m/2 < 2^127 - 1.
 * The robust kinds sort each coordinate's values by a total order on their
 * bits, so the sorted sequence, and every sum taken over it in that order,
 * is a function of the multiset of updates alone. */
#include "aggregate.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate_sum.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "wire.h"

/* round(x * 2^58) for a finite x with |x| < 2^68, bit for bit, read off
 * x's significand and exponent: the same integer as round() (halves away
 * from zero) gives, at a fraction of the cost of its double-to-__int128
 * conversion, which is done in software and was a fifth of a 50-client
 * round's coordinator time. */
agg_i128 aggregate_fixed(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  int biased = (int)((bits >> 52) & 0x7ff);
  if (biased == 0)
    return 0; /* zero or subnormal: below 2^-1022, times 2^58 rounds to 0 */
  uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
  /* x = m * 2^(biased - 1075), so x * 2^58 = m * 2^k. */
  int k = biased - 1017;
  agg_i128 t;
  if (k >= 0)
    t = (agg_i128)m << k;
  else if (k >= -53)
    t = (agg_i128)((m + (1ULL << (-k - 1))) >> -k);
  else
    t = 0; /* m < 2^53 <= 2^(-k-1): below one half */
  return bits >> 63 ? -t : t;
}

/* Coordinates transposed together in aggregate_result: m x BLOCK scratch. */
#define BLOCK 256

struct aggregate {
  agg_kind kind;
  size_t n;
  size_t capacity; /* 0: unlimited (AGG_MEAN only) */
  double trim;
  size_t count;
  uint64_t weight;
  agg_i128 *sum;  /* AGG_MEAN: n exact fixed-point sums */
  float **rows;   /* robust kinds: capacity slots, the first count in use */
  size_t n_alloc; /* rows[0 .. n_alloc) are allocated */
};

const char *aggregate_kind_name(agg_kind kind) {
  switch (kind) {
  case AGG_MEAN:
    return "mean";
  case AGG_MEDIAN:
    return "median";
  case AGG_TRIMMED_MEAN:
    return "trimmed_mean";
  }
  return "?";
}

int aggregate_new(agg_kind kind, size_t n, size_t capacity, double trim,
                  aggregate **out) {
  *out = NULL;
  if (n == 0)
    return COHORT_EINVAL;
  if (kind != AGG_MEAN && kind != AGG_MEDIAN && kind != AGG_TRIMMED_MEAN)
    return COHORT_EINVAL;
  if (kind != AGG_MEAN && capacity == 0)
    return COHORT_EINVAL;
  if (kind == AGG_TRIMMED_MEAN && !(trim >= 0 && trim < 0.5))
    return COHORT_EINVAL;
  if (kind == AGG_MEAN && n > SIZE_MAX / sizeof(agg_i128))
    return COHORT_EINVAL;
  if (kind != AGG_MEAN &&
      (n > SIZE_MAX / sizeof(float) || capacity > SIZE_MAX / sizeof(float *) ||
       capacity > SIZE_MAX / BLOCK / sizeof(uint32_t)))
    return COHORT_EINVAL;
  aggregate *a = calloc(1, sizeof *a);
  if (!a)
    return COHORT_ENOMEM;
  a->kind = kind;
  a->n = n;
  a->capacity = capacity;
  a->trim = kind == AGG_TRIMMED_MEAN ? trim : 0;
  if (kind == AGG_MEAN)
    a->sum = calloc(n, sizeof *a->sum);
  else
    a->rows = calloc(capacity, sizeof *a->rows);
  if (!a->sum && !a->rows) {
    free(a);
    return COHORT_ENOMEM;
  }
  *out = a;
  return COHORT_OK;
}

void aggregate_free(aggregate *a) {
  if (!a)
    return;
  for (size_t k = 0; k < a->n_alloc; k++)
    free(a->rows[k]);
  free(a->rows);
  free(a->sum);
  free(a);
}

void aggregate_reset(aggregate *a) {
  if (a->sum)
    memset(a->sum, 0, a->n * sizeof *a->sum);
  a->count = 0;
  a->weight = 0;
}

size_t aggregate_count(const aggregate *a) { return a->count; }
uint64_t aggregate_weight(const aggregate *a) { return a->weight; }
size_t aggregate_dim(const aggregate *a) { return a->n; }
agg_kind aggregate_kind(const aggregate *a) { return a->kind; }

float aggregate_value_limit(agg_kind kind) {
  return kind == AGG_MEAN ? (float)AGG_MEAN_MAX_ABS : FLT_MAX;
}

int aggregate_check_values(agg_kind kind, const float *delta, size_t n,
                           char *err, size_t errlen) {
  const float limit = aggregate_value_limit(kind);
  for (size_t i = wire_first_beyond(delta, n, limit); i < n; i++) {
    float d = delta[i];
    if (isnan(d)) {
      errbuf_printf(err, errlen, "delta[%zu] is NaN", i);
      return COHORT_EINVAL;
    }
    if (isinf(d)) {
      errbuf_printf(err, errlen, "delta[%zu] is %s", i,
                    d > 0 ? "+inf" : "-inf");
      return COHORT_EINVAL;
    }
    if (kind == AGG_MEAN && fabs((double)d) > AGG_MEAN_MAX_ABS) {
      errbuf_printf(err, errlen,
                    "delta[%zu] = %g is beyond the weighted mean's limit of "
                    "+-1048576 (2^20)",
                    i, (double)d);
      return COHORT_EINVAL;
    }
  }
  return COHORT_OK;
}

int aggregate_check_weight(const aggregate *a, uint64_t weight, char *err,
                           size_t errlen) {
  if (weight == 0) {
    errbuf_printf(err, errlen,
                  "weight 0: an update must carry at least one example");
    return COHORT_EINVAL;
  }
  if (weight > AGG_MAX_WEIGHT) {
    errbuf_printf(
        err, errlen,
        "weight %llu exceeds the limit %llu (2^29 - 1) on one update's "
        "example count",
        (unsigned long long)weight, (unsigned long long)AGG_MAX_WEIGHT);
    return COHORT_EINVAL;
  }
  if (weight > AGG_MAX_TOTAL_WEIGHT - a->weight) {
    errbuf_printf(
        err, errlen,
        "weight %llu would bring the round's total weight beyond 2^48",
        (unsigned long long)weight);
    return COHORT_EINVAL;
  }
  if (a->capacity && a->count >= a->capacity) {
    errbuf_printf(err, errlen,
                  "the %s aggregate already holds %zu updates, its "
                  "capacity",
                  aggregate_kind_name(a->kind), a->capacity);
    return COHORT_EINVAL;
  }
  return COHORT_OK;
}

/* Checks the whole update before anything is changed. */
int aggregate_check(const aggregate *a, const float *delta, uint64_t weight,
                    char *err, size_t errlen) {
  int rc = aggregate_check_weight(a, weight, err, errlen);
  return rc ? rc : aggregate_check_values(a->kind, delta, a->n, err, errlen);
}

int aggregate_add_checked(aggregate *a, const float *delta, uint64_t weight,
                          char *err, size_t errlen) {
  int rc = aggregate_check_weight(a, weight, err, errlen);
  if (rc)
    return rc;
  if (a->kind == AGG_MEAN) {
    aggregate_sum_add(a->sum, delta, a->n, weight);
  } else {
    if (a->count == a->n_alloc) {
      float *row = malloc(a->n * sizeof *row);
      if (!row) {
        errbuf_printf(err, errlen,
                      "out of memory storing update %zu (%zu floats)",
                      a->count + 1, a->n);
        return COHORT_ENOMEM;
      }
      a->rows[a->n_alloc++] = row;
    }
    memcpy(a->rows[a->count], delta, a->n * sizeof *delta);
  }
  a->count++;
  a->weight += weight;
  return COHORT_OK;
}

int aggregate_add(aggregate *a, const float *delta, uint64_t weight, char *err,
                  size_t errlen) {
  int rc = aggregate_check(a, delta, weight, err, errlen);
  return rc ? rc : aggregate_add_checked(a, delta, weight, err, errlen);
}

int aggregate_replace(aggregate *a, const float *delta, uint64_t weight,
                      double scale, uint64_t new_weight) {
  if (a->kind != AGG_MEAN || !(scale > 0 && scale <= 1) || new_weight < 1 ||
      new_weight > weight || weight > a->weight || weight > AGG_MAX_WEIGHT)
    return COHORT_EINVAL;
  /* Both terms are exact (aggregate.c's header), so the sum is as if the
   * replacement had been added instead, and stays within its bound. */
  aggregate_sum_replace(a->sum, delta, a->n, weight, scale, new_weight);
  a->weight -= weight - new_weight;
  return COHORT_OK;
}

/* A float's bits mapped so that unsigned order is the IEEE total order
 * (-0 before +0); bijective, so equal keys are bit-identical floats. */
static uint32_t float_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static float key_float(uint32_t k) {
  uint32_t u = (k & 0x80000000u) ? k & 0x7fffffffu : ~k;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void insertion_sort(uint32_t *v, size_t m) {
  for (size_t i = 1; i < m; i++) {
    uint32_t x = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1] > x; j--)
      v[j] = v[j - 1];
    v[j] = x;
  }
}

static void sift_down(uint32_t *v, size_t root, size_t m) {
  for (;;) {
    size_t c = 2 * root + 1;
    if (c >= m)
      return;
    if (c + 1 < m && v[c + 1] > v[c])
      c++;
    if (v[root] >= v[c])
      return;
    uint32_t t = v[root];
    v[root] = v[c];
    v[c] = t;
    root = c;
  }
}

static void heap_sort(uint32_t *v, size_t m) {
  for (size_t i = m / 2; i-- > 0;)
    sift_down(v, i, m);
  for (size_t end = m - 1; end > 0; end--) {
    uint32_t t = v[0];
    v[0] = v[end];
    v[end] = t;
    sift_down(v, 0, end);
  }
}

static void swap_keys(uint32_t *v, size_t i, size_t j) {
  uint32_t t = v[i];
  v[i] = v[j];
  v[j] = t;
}

/* Rearranges v[0 .. m) so that v[lo .. hi) holds the values of ranks lo ..
 * hi - 1 in ascending order. A quicksort (median-of-three pivot, three-way
 * partition so ties cost one pass) that descends only into parts overlapping
 * [lo, hi), falling back to heap sort past depth levels: O(m log m) even
 * for values chosen by an adversary. Equal keys are identical floats, so
 * the outcome is a function of the multiset alone. */
static void sort_ranks(uint32_t *v, size_t m, size_t lo, size_t hi, int depth) {
  while (m > 16) {
    if (depth-- == 0) {
      heap_sort(v, m);
      return;
    }
    uint32_t a = v[0], b = v[m / 2], c = v[m - 1];
    uint32_t p = a < b ? (b < c   ? b
                          : a < c ? c
                                  : a)
                       : (a < c   ? a
                          : b < c ? c
                                  : b);
    size_t lt = 0, i = 0, gt = m; /* [0,lt) < p, [lt,gt) == p, [gt,m) > p */
    while (i < gt) {
      if (v[i] < p)
        swap_keys(v, lt++, i++);
      else if (v[i] > p)
        swap_keys(v, i, --gt);
      else
        i++;
    }
    if (lo < lt)
      sort_ranks(v, lt, lo, hi < lt ? hi : lt, depth);
    if (hi <= gt)
      return;
    v += gt;
    m -= gt;
    lo = lo > gt ? lo - gt : 0;
    hi -= gt;
  }
  insertion_sort(v, m);
}

static double robust_one(const aggregate *a, uint32_t *v, size_t m, int depth) {
  if (a->kind == AGG_MEDIAN) {
    size_t lo = m % 2 ? m / 2 : m / 2 - 1;
    sort_ranks(v, m, lo, m / 2 + 1, depth);
    return ((double)key_float(v[lo]) + (double)key_float(v[m / 2])) / 2;
  }
  size_t k = (size_t)floor(a->trim * (double)m);
  sort_ranks(v, m, k, m - k, depth);
  double s = 0;
  for (size_t j = k; j < m - k; j++)
    s += (double)key_float(v[j]);
  return s / (double)(m - k - k);
}

int aggregate_result(const aggregate *a, double *out) {
  if (a->count == 0)
    return COHORT_ESTATE;
  if (a->kind == AGG_MEAN) {
    const double w = (double)a->weight; /* exact: below 2^53 */
    for (size_t i = 0; i < a->n; i++)
      out[i] = ((double)a->sum[i] * 0x1p-58) / w;
    return COHORT_OK;
  }
  const size_t m = a->count;
  uint32_t *scratch = malloc(m * BLOCK * sizeof *scratch);
  if (!scratch)
    return COHORT_ENOMEM;
  int depth = 2;
  for (size_t t = m; t > 1; t /= 2)
    depth += 2;
  /* Transposed a block at a time: m sequential row streams per block. */
  for (size_t i0 = 0; i0 < a->n; i0 += BLOCK) {
    size_t b = a->n - i0 < BLOCK ? a->n - i0 : BLOCK;
    for (size_t k = 0; k < m; k++) {
      const float *row = a->rows[k] + i0;
      for (size_t j = 0; j < b; j++)
        scratch[j * m + k] = float_key(row[j]);
    }
    for (size_t j = 0; j < b; j++)
      out[i0 + j] = robust_one(a, scratch + j * m, m, depth);
  }
  free(scratch);
  return COHORT_OK;
}
