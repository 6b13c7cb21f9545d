/* GEMM throughput on the products the FedAvg CNN, the 2NN and logistic
 * regression run per minibatch (NHWC im2col form), for the built-in kernel
 * and for nn_sgemm as the engine calls it: the short-side kernels where
 * they apply, else the configured backend ("nn_sgemm+openblas"). One JSON
 * line per (backend, shape, threads): the median GFLOP/s over the
 * repeats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "nn_gemm.h"

typedef struct shape {
  const char *name;
  bool trans_a, trans_b;
  int m, n, k;
} shape;

/* conv2 of the CNN: 14x14 positions per image, 5x5x32 patches, 64 filters. */
static const shape shapes[] = {
    {"conv1_fwd_b32", false, true, 25088, 32, 25},
    {"conv1_wgrad_b32", true, false, 32, 25, 25088},
    {"conv2_fwd_b32", false, true, 6272, 64, 800},
    {"conv2_wgrad_b32", true, false, 64, 800, 6272},
    {"conv2_igrad_b32", false, false, 6272, 800, 64},
    {"fc1_fwd_b32", false, true, 32, 512, 3136},
    {"fc1_wgrad_b32", true, false, 512, 3136, 32},
    {"fc1_igrad_b32", false, false, 32, 3136, 512},
    {"logreg_b32", false, true, 32, 10, 784},
    {"mlp_fc1_b32", false, true, 32, 200, 784},
    {"conv2_fwd_b10", false, true, 1960, 64, 800},
    {"conv2_wgrad_b10", true, false, 64, 800, 1960},
    {"conv2_igrad_b10", false, false, 1960, 800, 64},
    {"fc1_fwd_b10", false, true, 10, 512, 3136},
    {"fc1_wgrad_b10", true, false, 512, 3136, 10},
    {"fc1_igrad_b10", false, false, 10, 3136, 512},
    {"logreg_b10", false, true, 10, 10, 784},
    {"mlp_fc1_b10", false, true, 10, 200, 784},
};

typedef void (*sgemm_fn)(bool, bool, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);

/* Stops repeating a case after this long, so the whole run stays short. */
#define CASE_BUDGET_S 0.5

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static void fill(float *x, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) * 0x1p-24f - 0.5f;
  }
}

/* Median seconds of one product over up to repeat runs, after a warm-up. */
static double median_s(sgemm_fn f, const shape *s, int repeat, const float *a,
                       const float *b, float *c) {
  int lda = s->trans_a ? s->m : s->k, ldb = s->trans_b ? s->k : s->n;
  double t[256];
  int runs = 0;
  f(s->trans_a, s->trans_b, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c,
    s->n);
  double start = clock_mono_s();
  while (runs < repeat && runs < 256) {
    double t0 = clock_mono_s();
    f(s->trans_a, s->trans_b, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c,
      s->n);
    t[runs++] = clock_mono_s() - t0;
    if (clock_mono_s() - start > CASE_BUDGET_S)
      break;
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp_double);
  return t[runs / 2];
}

static int usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--threads T[,T...]] [--repeat R]\n"
          "  --threads  thread counts to run (default 1 and all cores)\n"
          "  --repeat   timed runs per case, 1..256 (default 20)\n",
          prog);
  return 2;
}

int main(int argc, char **argv) {
  const char *threads = NULL;
  int repeat = 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = argv[++i];
    else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
      repeat = atoi(argv[++i]);
    else
      return usage(argv[0]);
  }
  if (repeat < 1 || repeat > 256)
    return usage(argv[0]);
  char deflt[32];
  if (!threads) {
    snprintf(deflt, sizeof deflt, "1,%d", nn_threads_set(0));
    threads = deflt;
  }

  size_t max_elems = 6272 * 800;
  float *a = malloc(max_elems * sizeof *a), *b = malloc(max_elems * sizeof *b),
        *c = malloc(max_elems * sizeof *c);
  if (!a || !b || !c) {
    fprintf(stderr, "bench_gemm: out of memory\n");
    return 1;
  }
  fill(a, max_elems, 1);
  fill(b, max_elems, 2);

  struct {
    const char *name;
    sgemm_fn fn;
  } backends[2] = {{"builtin", nn_sgemm_builtin}, {"nn_sgemm", nn_sgemm}};
  char dispatch[32];
  snprintf(dispatch, sizeof dispatch, "nn_sgemm+%s", nn_blas_backend());
  backends[1].name = dispatch;

  for (const char *t = threads; *t;) {
    char *end;
    long nt = strtol(t, &end, 10);
    if (end == t || nt < 1 || nt > 1024 || (*end && *end != ','))
      return usage(argv[0]);
    nn_threads_set((int)nt);
    for (int be = 0; be < 2; be++)
      for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        double sec = median_s(backends[be].fn, s, repeat, a, b, c);
        printf("{\"backend\":\"%s\",\"shape\":\"%s\",\"m\":%d,\"n\":%d,"
               "\"k\":%d,\"trans_a\":%s,\"trans_b\":%s,\"threads\":%ld,"
               "\"median_ms\":%.4f,\"gflops\":%.2f}\n",
               backends[be].name, s->name, s->m, s->n, s->k,
               s->trans_a ? "true" : "false", s->trans_b ? "true" : "false", nt,
               sec * 1e3, 2.0 * s->m * s->n * s->k / sec * 1e-9);
        fflush(stdout);
      }
    t = *end ? end + 1 : end;
  }
  free(a);
  free(b);
  free(c);
  return 0;
}
