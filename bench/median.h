/* The median the benchmarks report: of n > 0 timings, sorted in place (the
 * upper middle one for an even n). */
#ifndef COHORT_BENCH_MEDIAN_H
#define COHORT_BENCH_MEDIAN_H

#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

#endif
