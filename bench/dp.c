/* bench_dp: the speed of differential privacy's client-side pieces, one
 * JSON line per measurement: the exact discrete Gaussian sampler at
 * several sigmas, and the distributed DP encoding (clip, rotate, round,
 * noise) and its decoding at two model sizes. Medians of --repeats runs.
 *
 *   bench_dp [--repeats 5] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "dp_ddp.h"
#include "dp_noise.h"
#include "median.h"
#include "prg.h"

#define MAX_REPEATS 31

static int sampler(int repeats) {
  static const double sigmas[] = {1, 10, 100, 1000, 100000};
  const size_t n = 1000000;
  int64_t *x = malloc(n * sizeof *x);
  if (!x)
    return 1;
  for (size_t s = 0; s < sizeof sigmas / sizeof sigmas[0]; s++) {
    double t[MAX_REPEATS];
    for (int r = 0; r < repeats; r++) {
      prg g;
      if (prg_init_u64(&g, 13 + (uint64_t)r))
        return 1;
      double t0 = clock_mono_s();
      int rc = dp_discrete_gaussian_fill(&g, sigmas[s], x, n);
      t[r] = clock_mono_s() - t0;
      prg_free(&g);
      if (rc)
        return 1;
    }
    printf("{\"bench\":\"discrete_gaussian\",\"sigma\":%g,"
           "\"samples_per_s\":%.0f}\n",
           sigmas[s], (double)n / bench_median(t, repeats));
  }
  free(x);
  return 0;
}

static int encoding(int repeats) {
  static const size_t dims[] = {100000, 1663370};
  for (size_t k = 0; k < 2; k++) {
    ddp_goal goal = {.dim = dims[k],
                     .bits = 16,
                     .clip = 1,
                     .noise_multiplier = 1,
                     .min_clients = 50,
                     .max_clients = 100,
                     .wrap_probability = 1e-6};
    ddp_params p;
    char err[512] = "";
    if (ddp_plan(&goal, &p, err, sizeof err)) {
      fprintf(stderr, "bench_dp: %s\n", err);
      return 1;
    }
    memset(p.seed, 7, sizeof p.seed);
    size_t m = ddp_ring_dim(&p);
    float *delta = malloc(dims[k] * sizeof *delta);
    uint64_t *ring = malloc(m * sizeof *ring);
    double *out = malloc(dims[k] * sizeof *out);
    prg g;
    if (!delta || !ring || !out || prg_init_u64(&g, 5))
      return 1;
    for (size_t i = 0; i < dims[k]; i++)
      delta[i] = (float)((2 * prg_uniform(&g) - 1) * 0.01);
    double te[MAX_REPEATS], td[MAX_REPEATS];
    for (int r = 0; r < repeats; r++) {
      double t0 = clock_mono_s();
      if (ddp_encode(&p, delta, &g, ring, NULL, err, sizeof err))
        return 1;
      te[r] = clock_mono_s() - t0;
      t0 = clock_mono_s();
      if (ddp_decode_sum(&p, ring, out, NULL, err, sizeof err))
        return 1;
      td[r] = clock_mono_s() - t0;
    }
    printf("{\"bench\":\"ddp\",\"dim\":%zu,\"padded\":%zu,\"bits\":16,"
           "\"sigma_units\":%.1f,\"encode_s\":%.4f,\"decode_s\":%.4f}\n",
           dims[k], ddp_padded_dim(dims[k]), p.noise_stddev,
           bench_median(te, repeats), bench_median(td, repeats));
    prg_free(&g);
    free(delta);
    free(ring);
    free(out);
  }
  return 0;
}

int main(int argc, char **argv) {
  int repeats = 5;
  if (argc == 3 && strcmp(argv[1], "--repeats") == 0)
    repeats = atoi(argv[2]);
  if (argc != 1 && argc != 3) {
    fprintf(stderr, "usage: bench_dp [--repeats N]\n");
    return 2;
  }
  if (repeats < 1 || repeats > MAX_REPEATS) {
    fprintf(stderr, "bench_dp: --repeats must be in 1..%d\n", MAX_REPEATS);
    return 2;
  }
  return sampler(repeats) || encoding(repeats);
}
