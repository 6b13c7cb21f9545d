/* bench_aggregate: the coordinator's per-upload arithmetic, one JSON line
 * per measurement, medians of --repeats runs: the weighted mean's exact
 * fixed-point add (aggregate_add_checked), the replacement of a bounded
 * update (aggregate_replace), its L2 norm (round_bound_norm), and the pass
 * that decodes, checks and norms a plain fp32 upload (round_bound_take), on
 * updates of --n floats (default 101,770: the MLP of bench/load.sh), of
 * random values and of bench_load's periodic ones. The add and the take
 * run on the engine's instruction-set path ("isa" in each line; COHORT_ISA
 * forces one: avx512, avx2, sse2, scalar).
 *
 *   bench_aggregate [--repeats 9] [--n 101770] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "clock.h"
#include "cohort_status.h"
#include "median.h"
#include "nn_isa.h"
#include "round_internal.h"

#define MAX_REPEATS 31
#define UPDATES 16 /* per repeat, as many distinct deltas */

/* Deltas as a model's update looks: signs mixed at random, magnitudes
 * 2^-13 .. 2^-1, a few exact zeros. */
static void fill_random(float *d, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    float u = (float)(seed >> 40) / 16777216.0f - 0.5f;
    d[i] = (seed >> 8) % 64 == 0 ? 0.0f : ldexpf(u, -(int)((seed >> 20) % 13));
  }
}

/* bench_load's delta, 1e-4 (i % 17 - 8): its signs and zeros repeat every
 * 17 values, which a branch predictor learns, so a branchy loop looks
 * faster on it than on a real update. */
static void fill_periodic(float *d, size_t n, uint64_t seed) {
  (void)seed;
  for (size_t i = 0; i < n; i++)
    d[i] = 1e-4f * (float)((int)(i % 17) - 8);
}

/* Times the four over UPDATES deltas d (n floats each; a into which they
 * are added, out into which they are taken), prints. */
static int run(const char *data, const float *d, size_t n, aggregate *a,
               float *out, int repeats) {
  double t_add[MAX_REPEATS], t_rep[MAX_REPEATS], t_norm[MAX_REPEATS],
      t_take[MAX_REPEATS];
  volatile double sink = 0;
  for (int r = 0; r < repeats; r++) {
    aggregate_reset(a);
    double t0 = clock_mono_s();
    for (int k = 0; k < UPDATES; k++)
      if (aggregate_add_checked(a, d + (size_t)k * n, 600 + (uint64_t)k, NULL,
                                0))
        return 1;
    double t1 = clock_mono_s();
    for (int k = 0; k < UPDATES; k++)
      if (aggregate_replace(a, d + (size_t)k * n, 600 + (uint64_t)k, 0.75, 300))
        return 1;
    double t2 = clock_mono_s();
    for (int k = 0; k < UPDATES; k++)
      sink += round_bound_norm(d + (size_t)k * n, n);
    double t3 = clock_mono_s();
    for (int k = 0; k < UPDATES; k++) {
      double norm = 0;
      const uint8_t *wire = (const uint8_t *)(d + (size_t)k * n);
      if (round_bound_take(out, wire, n, (float)AGG_MEAN_MAX_ABS, &norm) != n)
        return 1;
      sink += norm;
    }
    double t4 = clock_mono_s();
    t_add[r] = (t1 - t0) / UPDATES;
    t_rep[r] = (t2 - t1) / UPDATES;
    t_norm[r] = (t3 - t2) / UPDATES;
    t_take[r] = (t4 - t3) / UPDATES;
  }
  const char *names[] = {"aggregate_add_checked", "aggregate_replace",
                         "round_bound_norm", "round_bound_take"};
  double *t[] = {t_add, t_rep, t_norm, t_take};
  for (int j = 0; j < 4; j++)
    printf("{\"bench\":\"%s\",\"isa\":\"%s\",\"data\":\"%s\",\"n\":%zu,"
           "\"ms\":%.4f}\n",
           names[j], nn_isa_name(nn_isa_best()), data, n,
           1e3 * bench_median(t[j], repeats));
  return sink < 0;
}

int main(int argc, char **argv) {
  int repeats = 9;
  size_t n = 101770;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--repeats"))
      repeats = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--n"))
      n = (size_t)strtoull(argv[i + 1], NULL, 10);
  }
  if (repeats < 1 || repeats > MAX_REPEATS || n == 0) {
    fprintf(stderr, "usage: bench_aggregate [--repeats 1..%d] [--n N>0]\n",
            MAX_REPEATS);
    return 2;
  }
  float *d = malloc(UPDATES * n * sizeof *d);
  float *out = malloc(n * sizeof *out);
  aggregate *a = NULL;
  if (!d || !out || aggregate_new(AGG_MEAN, n, 0, 0, &a)) {
    fprintf(stderr, "bench_aggregate: out of memory\n");
    return 1;
  }
  static const struct {
    const char *name;
    void (*fill)(float *, size_t, uint64_t);
  } data[] = {{"random", fill_random}, {"periodic", fill_periodic}};
  int rc = 0;
  for (size_t j = 0; !rc && j < sizeof data / sizeof data[0]; j++) {
    for (int k = 0; k < UPDATES; k++)
      data[j].fill(d + (size_t)k * n, n, 0x9e3779b97f4a7c15ULL + (uint64_t)k);
    rc = run(data[j].name, d, n, a, out, repeats);
  }
  aggregate_free(a);
  free(out);
  free(d);
  return rc;
}
