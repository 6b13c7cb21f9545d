/* Products with a short side: a linear layer's forward, input gradient and
 * weight gradient at small batch (fc1 of the CNN at batch 10 multiplies by
 * a 512 x 3136 weight matrix with only 10 rows on the other side). Blocked
 * GEMM packs the long operand first, which here costs as much as the
 * product: these kernels read every operand where it lies and stream the
 * long one once.
 *
 * Two kernels, each compiled per ISA (nn_gemm_small_kernels.c):
 *   dot   C = alpha * A B^T + beta * C, A few rows: each element is a dot
 *         product of a row of A and a row of B, summed lane-wise over k and
 *         then across the lanes;
 *   axpy  C = alpha * op(A) B + beta * C, op(A) with few rows or few
 *         columns (k): each row of C is a combination of rows of B.
 * Every element of C is computed by the same kernel, in the same order,
 * whatever the thread split (threads take whole blocks of C), so results
 * are bit-identical from run to run and across thread counts. */
#include "nn_gemm_small.h"

#include <stddef.h>

#include "nn_gemm_small_kernels.h"
#include "nn_isa.h"

/* A product takes this path when op(A) has at most this many rows (dot,
 * axpy) or columns (axpy): a linear layer at batch 32 or less (fc1 of the
 * CNN at batch 32 gained 10 % over OpenBLAS with warm caches, more in a
 * training loop, where the weights come from memory). */
#define SMALL_SIDE 32
/* Below this k a dot product is mostly its lane reduction. */
#define DOT_MIN_K 64
/* Elements of the long operand (B, or C for a short k) below which packing
 * it is cheap and the blocked backends win (against OpenBLAS, one thread:
 * mlp:200,200's second layer and logistic regression at batch 10 ran
 * 1.3-3x slower here, its first layer and fc1 1.2-2.4x faster). */
#define SMALL_MIN_LONG (1u << 17)
/* Work per thread below which waking a worker costs more than it saves. */
#define SMALL_MIN_FLOPS_PER_THREAD (1u << 21)

/* The columns past the last whole vector, in the same order. */
static void axpy_edge(int rows, int cols, int k, const float *a, size_t rs,
                      size_t cs, const float *b, size_t ldb, float *c,
                      size_t ldc, float alpha, float beta) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      float s = 0.0f;
      for (int p = 0; p < k; p++)
        s += a[i * rs + p * cs] * b[p * ldb + j];
      float *cij = c + i * ldc + j;
      *cij = beta == 0.0f ? alpha * s : alpha * s + beta * *cij;
    }
}

#ifdef NN_ISA_X86
static const small_arch *arch_get(void) {
  static const small_arch *const by_isa[] = {
      &nn_small_arch_scalar, &nn_small_arch_sse2, &nn_small_arch_avx2,
      &nn_small_arch_avx512};
  return by_isa[nn_isa_best()];
}
#else
static const small_arch *arch_get(void) {
  return nn_isa_best() == NN_ISA_SCALAR ? &nn_small_arch_scalar
                                        : &nn_small_arch_generic;
}
#endif

typedef struct small_job {
  const small_arch *arch;
  bool trans_a;
  int m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  size_t lda, ldb, ldc;
} small_job;

static int imin(int x, int y) { return x < y ? x : y; }

/* Column j of C (nb columns when full, else one) against every group of
 * mr rows of A, while those rows of B are in L1. */
static void dot_columns(const small_job *g, int j, bool full) {
  const small_arch *ar = g->arch;
  for (int i = 0; i < g->m; i += ar->mr) {
    int rows = imin(ar->mr, g->m - i);
    ar->dot[rows - 1][full ? 0 : 1](
        g->k, g->a + (size_t)i * g->lda, g->lda, g->b + (size_t)j * g->ldb,
        g->ldb, g->c + (size_t)i * g->ldc + j, g->ldc, g->alpha, g->beta);
  }
}

/* Blocks [begin, end) of nb columns of C by the dot kernel; the last,
 * partial block one column at a time. */
static void dot_range(void *ctx, size_t begin, size_t end) {
  const small_job *g = ctx;
  int nb = g->arch->nb, j1 = imin(g->n, (int)end * nb);
  for (int j = (int)begin * nb; j < j1; j += nb) {
    if (j + nb <= j1)
      dot_columns(g, j, true);
    else
      for (int jj = j; jj < j1; jj++)
        dot_columns(g, jj, false);
  }
}

/* Rows [i, i + rows) and columns [j, j + cols) of C (cols at most a
 * block) by the axpy kernels: whole blocks, then single vectors, then the
 * columns past the last vector. */
static void axpy_tile(const small_job *g, int i, int rows, int j, int cols) {
  const small_arch *ar = g->arch;
  size_t rs = g->trans_a ? 1 : g->lda, cs = g->trans_a ? g->lda : 1;
  const float *a = g->a + (size_t)i * rs;
  float *c = g->c + (size_t)i * g->ldc;
  int vl = ar->vl, block = ar->nv * vl, whole = cols / vl * vl;
  if (cols == block) {
    ar->axpy[rows - 1][0](g->k, a, rs, cs, g->b + j, g->ldb, c + j, g->ldc,
                          g->alpha, g->beta);
    return;
  }
  for (int v = j; v < j + whole; v += vl)
    ar->axpy[rows - 1][1](g->k, a, rs, cs, g->b + v, g->ldb, c + v, g->ldc,
                          g->alpha, g->beta);
  axpy_edge(rows, cols - whole, g->k, a, rs, cs, g->b + j + whole, g->ldb,
            c + j + whole, g->ldc, g->alpha, g->beta);
}

/* Column blocks [begin, end) of C, for few rows: each block of nc columns
 * of B (k x nc) stays in cache while every group of mr rows of C is formed
 * from it, so the long B streams from memory once. */
static void axpy_columns(void *ctx, size_t begin, size_t end) {
  const small_job *g = ctx;
  int mr = g->arch->mr, nc = g->arch->nv * g->arch->vl,
      j1 = imin(g->n, (int)end * nc);
  for (int j = (int)begin * nc; j < j1; j += nc)
    for (int i = 0; i < g->m; i += mr)
      axpy_tile(g, i, imin(mr, g->m - i), j, imin(nc, j1 - j));
}

/* Row groups [begin, end) of C, for a short k (a weight gradient): B (k
 * rows) stays in cache and C is written row after row, in address order. */
static void axpy_rows(void *ctx, size_t begin, size_t end) {
  const small_job *g = ctx;
  int mr = g->arch->mr, nc = g->arch->nv * g->arch->vl,
      i1 = imin(g->m, (int)end * mr);
  for (int i = (int)begin * mr; i < i1; i += mr)
    for (int j = 0; j < g->n; j += nc)
      axpy_tile(g, i, imin(mr, i1 - i), j, imin(nc, g->n - j));
}

bool nn_sgemm_small(bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b,
                    int ldb, float beta, float *c, int ldc) {
  /* The scalar path has no lane reduction, and its blocked kernel no
   * OpenBLAS to beat: its short-side kernels take every short side. */
  bool scalar = nn_isa_best() == NN_ISA_SCALAR;
  bool dot =
      !trans_a && trans_b && m <= SMALL_SIDE && (k >= DOT_MIN_K || scalar);
  bool axpy = !trans_b && (m <= SMALL_SIDE || k <= SMALL_SIDE);
  double long_side = (double)n * (dot || m <= SMALL_SIDE ? k : m);
  if (m <= 0 || n <= 0 || k <= 0 || (!dot && !axpy) ||
      (long_side < SMALL_MIN_LONG && !scalar))
    return false;
  const small_arch *ar = arch_get();
  small_job g = {ar, trans_a, m, n,           k,           alpha,      beta,
                 a,  b,       c, (size_t)lda, (size_t)ldb, (size_t)ldc};
  nn_range_fn fn = dot ? dot_range : m <= SMALL_SIDE ? axpy_columns : axpy_rows;
  /* Blocks of the split dimension and the flops of one. */
  int width = dot ? ar->nb : fn == axpy_columns ? ar->nv * ar->vl : ar->mr;
  int split = fn == axpy_rows ? m : n, other = fn == axpy_rows ? n : m;
  size_t blocks = (size_t)(split + width - 1) / width;
  double block_flops = 2.0 * width * other * k;
  size_t min_blocks = (size_t)(SMALL_MIN_FLOPS_PER_THREAD / block_flops) + 1;
  nn_parallel_for(blocks, min_blocks, fn, &g);
  return true;
}

void nn_sgemm_small_axpy(bool trans_a, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb,
                         float beta, float *c, int ldc) {
  if (m <= 0 || n <= 0 || k <= 0)
    return;
  const small_arch *ar = arch_get();
  small_job g = {ar, trans_a, m, n,           k,           alpha,      beta,
                 a,  b,       c, (size_t)lda, (size_t)ldb, (size_t)ldc};
  axpy_columns(&g, 0, (size_t)(n + ar->nv * ar->vl - 1) / (ar->nv * ar->vl));
}
