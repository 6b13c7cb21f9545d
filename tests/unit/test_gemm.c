/* Tests of the GEMM backends: both nn_sgemm_builtin and nn_sgemm against a
 * double-precision reference over every transpose, many shapes (primes,
 * tile edges, the CNN's im2col products), padded leading dimensions, alpha
 * and beta, and the BLAS corner cases; the short-side kernels; bit-identical
 * results per thread count. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "nn_gemm.h"
#include "nn_gemm_small.h"
#include "nn_isa.h"

typedef void (*sgemm_fn)(bool, bool, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);

/* What the C padding holds; a kernel writing past n columns changes it. */
#define SENTINEL 12345.0f

/* Reproducible values in [-1, 1) without rand(). */
static uint64_t rng_state;
static float uniform(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

static float *random_matrix(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  CU_ASSERT_FATAL(x != NULL);
  for (size_t i = 0; i < n; i++)
    x[i] = uniform();
  return x;
}

/* Stores the logical rows x cols matrix l with row stride ld, transposed
 * when trans; the padding is NaN so that a kernel reading it is caught. */
static float *store(const float *l, int rows, int cols, bool trans, int ld) {
  int srows = trans ? cols : rows;
  size_t size = (size_t)srows * ld;
  float *s = malloc((size ? size : 1) * sizeof *s);
  CU_ASSERT_FATAL(s != NULL);
  for (size_t i = 0; i < size; i++)
    s[i] = NAN;
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++)
      s[trans ? (size_t)j * ld + i : (size_t)i * ld + j] =
          l[(size_t)i * cols + j];
  return s;
}

/* The exact product in double of logical A (m x k) and B (k x n), and the
 * sum of |a||b| that scales the tolerance, for the rows checked. */
typedef struct reference {
  int m, n, k, row_step;
  const float *a, *b;
  double *prod, *abs;
} reference;

static bool row_checked(const reference *r, int i) {
  return i % r->row_step == 0 || i == r->m - 1;
}

static void reference_init(reference *r, const float *a, const float *b, int m,
                           int n, int k, int row_step) {
  *r = (reference){m, n, k, row_step, a, b, NULL, NULL};
  size_t mn = (size_t)m * n;
  r->prod = calloc(mn ? mn : 1, sizeof *r->prod);
  r->abs = calloc(mn ? mn : 1, sizeof *r->abs);
  CU_ASSERT_FATAL(r->prod && r->abs);
  for (int i = 0; i < m; i++) {
    if (!row_checked(r, i))
      continue;
    for (int j = 0; j < n; j++) {
      double s = 0.0, sa = 0.0;
      for (int p = 0; p < k; p++) {
        double x = (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
        s += x;
        sa += fabs(x);
      }
      r->prod[(size_t)i * n + j] = s;
      r->abs[(size_t)i * n + j] = sa;
    }
  }
}

static void reference_close(reference *r) {
  free(r->prod);
  free(r->abs);
}

/* Runs f on r's matrices stored per ta/tb with pad extra elements per row,
 * C prefilled with c0 (pad with SENTINEL), and counts the elements that miss
 * alpha * A B + beta * C0 by more than the float rounding can explain. */
static int check_case(sgemm_fn f, const reference *r, bool ta, bool tb, int pad,
                      float alpha, float beta, float c0) {
  int m = r->m, n = r->n, k = r->k;
  int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  float *a = store(r->a, m, k, ta, lda), *b = store(r->b, k, n, tb, ldb);
  size_t csize = (size_t)m * ldc;
  float *c = malloc((csize ? csize : 1) * sizeof *c);
  CU_ASSERT_FATAL(c != NULL);
  for (size_t i = 0; i < csize; i++)
    c[i] = i % (size_t)ldc < (size_t)n ? c0 : SENTINEL;
  f(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  int bad = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < ldc; j++) {
      float got = c[(size_t)i * ldc + j];
      if (j >= n) {
        bad += got != SENTINEL;
        continue;
      }
      if (!row_checked(r, i))
        continue;
      double old = beta == 0.0f ? 0.0 : (double)beta * c0;
      size_t ij = (size_t)i * n + j;
      double want = alpha * r->prod[ij] + old;
      double tol = 1e-5 * (fabs(alpha) * r->abs[ij] + fabs(old)) + 1e-30;
      if (!(fabs(got - want) <= tol)) {
        if (bad++ == 0)
          fprintf(stderr,
                  "\n  %dx%dx%d ta=%d tb=%d pad=%d alpha=%g beta=%g: "
                  "C[%d][%d] = %.9g, want %.9g\n",
                  m, n, k, ta, tb, pad, alpha, beta, i, j, got, want);
      }
    }
  free(a);
  free(b);
  free(c);
  return bad;
}

/* Every (alpha, beta, C0) combination on one shape, for every transpose
 * (only_t < 0) or for transposes only_t (bit 0: A, bit 1: B). */
static void check_shape(sgemm_fn f, int m, int n, int k, int row_step,
                        int only_t) {
  static const struct {
    float alpha, beta, c0;
    int pad;
  } combos[] = {
      {1.0f, 0.0f, NAN, 0},    /* beta 0 ignores NaN in C */
      {1.0f, 1.0f, 0.25f, 3},  /* accumulate, padded leading dimensions */
      {-1.5f, 0.5f, -2.0f, 1}, /* scaled product and C */
      {0.75f, 0.0f, 7.0f, 16}, /* beta 0 overwrites */
  };
  float *a = random_matrix((size_t)m * k), *b = random_matrix((size_t)k * n);
  reference r;
  reference_init(&r, a, b, m, n, k, row_step);
  for (int t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
      if (only_t >= 0 && t != only_t)
        continue;
      int bad = check_case(f, &r, t & 1, t >> 1, combos[i].pad, combos[i].alpha,
                           combos[i].beta, combos[i].c0);
      CU_ASSERT_EQUAL(bad, 0);
    }
  reference_close(&r);
  free(a);
  free(b);
}

/* m x n x k: single elements, primes, tile edges of every kernel (6, 8,
 * 16, 32), k past the 256-deep blocking, and the CNN's products at batch
 * 2 (conv2 forward, weight and input gradients) and the dense layers at
 * batch 32. */
static const int shapes[][3] = {
    {1, 1, 1},      {1, 7, 3},      {7, 13, 17},     {37, 65, 129},
    {6, 16, 5},     {8, 32, 256},   {9, 33, 257},    {13, 1, 300},
    {1, 100, 5},    {100, 1, 5},    {47, 70, 600},   {392, 64, 800},
    {64, 800, 392}, {392, 800, 64}, {32, 512, 3136}, {32, 10, 784},
    {32, 200, 784}, {10, 200, 784},
};

static void check_all_shapes(sgemm_fn f) {
  rng_state = 1;
  nn_threads_set(2);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    check_shape(f, shapes[i][0], shapes[i][1], shapes[i][2], 1, -1);
  nn_threads_set(0);
}

static void test_builtin_matches_reference(void) {
  check_all_shapes(nn_sgemm_builtin);
}

static void test_backend_matches_reference(void) { check_all_shapes(nn_sgemm); }

/* The CNN's products at batch 32 in the layouts it uses, every 13th row
 * checked. */
static void check_full_cnn(sgemm_fn f) {
  rng_state = 2;
  check_shape(f, 6272, 64, 800, 13, 2);
  check_shape(f, 64, 800, 6272, 13, 1);
  check_shape(f, 6272, 800, 64, 13, 0);
}

static void test_builtin_full_size_cnn(void) {
  check_full_cnn(nn_sgemm_builtin);
}

static void test_backend_full_size_cnn(void) { check_full_cnn(nn_sgemm); }

/* BLAS semantics at the corners: nothing is written for m or n == 0; k ==
 * 0 or alpha == 0 gives beta * C without reading A or B. */
static void check_degenerate(sgemm_fn f) {
  float nan_ab[4] = {NAN, NAN, NAN, NAN};
  float c[6], want[6];
  for (int i = 0; i < 6; i++)
    c[i] = (float)i - 2.5f;

  f(false, false, 0, 3, 2, 1.0f, nan_ab, 2, nan_ab, 3, 0.0f, c, 3);
  f(true, true, 2, 0, 2, 1.0f, nan_ab, 2, nan_ab, 2, 0.0f, c, 3);
  for (int i = 0; i < 6; i++)
    CU_ASSERT_EQUAL(c[i], (float)i - 2.5f);

  f(false, false, 2, 3, 0, 1.0f, nan_ab, 1, nan_ab, 3, 1.0f, c, 3);
  for (int i = 0; i < 6; i++)
    CU_ASSERT_EQUAL(c[i], (float)i - 2.5f);

  f(false, true, 2, 3, 0, 1.0f, nan_ab, 1, nan_ab, 1, 0.5f, c, 3);
  for (int i = 0; i < 6; i++)
    want[i] = ((float)i - 2.5f) * 0.5f;
  CU_ASSERT_EQUAL(memcmp(c, want, sizeof c), 0);

  f(false, false, 2, 3, 2, 0.0f, nan_ab, 2, nan_ab, 3, 2.0f, c, 3);
  for (int i = 0; i < 6; i++)
    want[i] = ((float)i - 2.5f);
  CU_ASSERT_EQUAL(memcmp(c, want, sizeof c), 0);

  for (int i = 0; i < 6; i++)
    c[i] = NAN;
  f(true, false, 2, 3, 0, 1.0f, nan_ab, 2, nan_ab, 3, 0.0f, c, 3);
  for (int i = 0; i < 6; i++)
    CU_ASSERT_EQUAL(c[i], 0.0f);
}

static void test_builtin_degenerate_sizes(void) {
  check_degenerate(nn_sgemm_builtin);
}

static void test_backend_degenerate_sizes(void) { check_degenerate(nn_sgemm); }

/* Runs f twice at each of 1, 2 and 3 threads on a product large enough
 * to be split; each pair must match bit for bit. Returns the runs. */
static void deterministic_runs(sgemm_fn f, bool ta, bool tb, float *out[6],
                               int m, int n, int k) {
  float *a = random_matrix((size_t)m * k), *b = random_matrix((size_t)k * n);
  for (int run = 0; run < 6; run++) {
    nn_threads_set(1 + run / 2);
    out[run] = malloc((size_t)m * n * sizeof(float));
    CU_ASSERT_FATAL(out[run] != NULL);
    f(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, out[run], n);
  }
  nn_threads_set(0);
  free(a);
  free(b);
}

static void check_determinism(sgemm_fn f, bool across_counts) {
  /* One tall and one wide product, so both split directions run. */
  static const int dims[][3] = {{301, 77, 700}, {40, 500, 900}};
  rng_state = 3;
  for (int d = 0; d < 2; d++) {
    int m = dims[d][0], n = dims[d][1], k = dims[d][2];
    size_t bytes = (size_t)m * n * sizeof(float);
    float *out[6];
    deterministic_runs(f, d == 1, d == 0, out, m, n, k);
    for (int t = 0; t < 3; t++)
      CU_ASSERT_EQUAL(memcmp(out[2 * t], out[2 * t + 1], bytes), 0);
    if (across_counts) {
      CU_ASSERT_EQUAL(memcmp(out[0], out[2], bytes), 0);
      CU_ASSERT_EQUAL(memcmp(out[0], out[4], bytes), 0);
    }
    for (int run = 0; run < 6; run++)
      free(out[run]);
  }
}

/* The built-in kernel sums each element in an order that does not depend on
 * the split, so it is also identical across thread counts. */
static void test_builtin_deterministic(void) {
  check_determinism(nn_sgemm_builtin, true);
}

static void test_backend_deterministic_per_thread_count(void) {
  check_determinism(nn_sgemm, false);
}

/* --- the short-side kernels (nn_gemm_small.c) --- */

/* nn_sgemm_small as an sgemm_fn; counts the products it declined. */
static int small_declined;
static void small_only(bool ta, bool tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb,
                       float beta, float *c, int ldc) {
  if (!nn_sgemm_small(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    small_declined++;
}

/* Each kernel and its edges: fc1 of the CNN at batch 10 in its three
 * layouts, and odd sizes that leave partial row groups (of 5 and 3), a
 * partial block of B's rows, column edges of a vector and of single
 * columns, and a k tail past the last whole vector. */
static void test_small_matches_reference(void) {
  static const struct {
    int m, n, k, t; /* t: bit 0 A transposed, bit 1 B transposed */
  } taken[] = {
      {10, 512, 3136, 2}, {7, 259, 600, 2},   /* dot: A B^T */
      {32, 300, 700, 2},                      /* dot, 6 full row groups */
      {10, 3136, 512, 0}, {13, 1000, 150, 0}, /* few rows of A */
      {13, 1000, 150, 1},                     /* few rows of A^T */
      {512, 3136, 10, 1}, {203, 777, 7, 1},   /* short k of A^T */
  };
  rng_state = 5;
  for (int threads = 1; threads <= 2; threads++) {
    nn_threads_set(threads);
    small_declined = 0;
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
      check_shape(small_only, taken[i].m, taken[i].n, taken[i].k, 1,
                  taken[i].t);
    CU_ASSERT_EQUAL(small_declined, 0);
  }
  /* Long sides stay with the blocked backends; so do tiny products and
   * dot products of a short k, except on the scalar path, whose short-side
   * kernels take them (no lane reduction, no OpenBLAS to beat). */
  float x[1] = {0};
  CU_ASSERT_FALSE(nn_sgemm_small(false, false, 33, 512, 3136, 1.0f, x, 3136, x,
                                 512, 0.0f, x, 512));
  CU_ASSERT_FALSE(nn_sgemm_small(true, true, 10, 512, 3136, 1.0f, x, 10, x,
                                 3136, 0.0f, x, 512));
  if (nn_isa_best() != NN_ISA_SCALAR) {
    CU_ASSERT_FALSE(nn_sgemm_small(false, true, 10, 10, 784, 1.0f, x, 784, x,
                                   784, 0.0f, x, 10));
  } else {
    small_declined = 0;
    check_shape(small_only, 10, 10, 784, 1, 2);  /* tiny: logreg's forward */
    check_shape(small_only, 10, 200, 7, 1, 2);   /* dot with a short k */
    check_shape(small_only, 32, 200, 200, 1, 0); /* mlp's second layer */
    CU_ASSERT_EQUAL(small_declined, 0);
  }
  nn_threads_set(0);
}

/* Threads take whole blocks, so every element is formed by the same
 * kernel in the same order: identical across thread counts. */
static void test_small_identical_across_threads(void) {
  static const int dims[][4] = {
      {10, 515, 3136, 2}, {10, 3139, 512, 0}, {517, 3136, 10, 1}};
  rng_state = 6;
  for (int d = 0; d < 3; d++) {
    int m = dims[d][0], n = dims[d][1], k = dims[d][2];
    size_t bytes = (size_t)m * n * sizeof(float);
    float *out[6];
    deterministic_runs(small_only, dims[d][3] & 1, dims[d][3] >> 1, out, m, n,
                       k);
    for (int run = 1; run < 6; run++)
      CU_ASSERT_EQUAL(memcmp(out[0], out[run], bytes), 0);
    for (int run = 0; run < 6; run++)
      free(out[run]);
  }
}

int cohort_register_suites(void) {
  static const test_case gemm[] = {
      {"builtin matches reference on all shapes and transposes",
       test_builtin_matches_reference},
      {"builtin matches reference at full CNN size",
       test_builtin_full_size_cnn},
      {"builtin degenerate sizes follow BLAS", test_builtin_degenerate_sizes},
      {"builtin is bit-identical per and across thread counts",
       test_builtin_deterministic},
      {"backend matches reference on all shapes and transposes",
       test_backend_matches_reference},
      {"backend matches reference at full CNN size",
       test_backend_full_size_cnn},
      {"backend degenerate sizes follow BLAS", test_backend_degenerate_sizes},
      {"backend is bit-identical per thread count",
       test_backend_deterministic_per_thread_count},
  };
  static const test_case small[] = {
      {"short-side kernels match reference, edges included",
       test_small_matches_reference},
      {"short-side kernels are bit-identical across thread counts",
       test_small_identical_across_threads},
  };
  int rc =
      test_add_suite("nn_gemm", NULL, NULL, gemm, sizeof gemm / sizeof gemm[0]);
  return rc ? rc
            : test_add_suite("nn_sgemm_small", NULL, NULL, small,
                             sizeof small / sizeof small[0]);
}
