/* nn_sgemm's backend dispatch. */
#include "nn_gemm.h"

#include "nn_gemm_small.h"
#include "nn_isa.h"

#ifdef COHORT_HAVE_CBLAS
#include <cblas.h>
#endif

#ifdef COHORT_HAVE_CBLAS
/* OpenBLAS runs single-threaded (nn_threads_set tells it so) and the engine's
 * one pool splits a large product into blocks of C, each a cblas_sgemm call
 * on its own thread. OpenBLAS's own threads would spin after each call
 * while the pool's workers run the layers' im2col and pooling, so two pools
 * on the same cores fight; and its per-call thread start-up dominates the
 * small products of logistic regression and small batches. */

/* Work per thread below which a second thread costs more than it saves
 * (flops; measured with bench/gemm: waking a worker is some microseconds). */
#define BLAS_MIN_FLOPS_PER_THREAD (1u << 22)
/* Block edge of the split: a multiple of OpenBLAS's SkylakeX tiles. */
#define BLAS_PANEL 32

typedef struct blas_job {
  bool trans_a, trans_b, split_n;
  int m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int lda, ldb, ldc;
} blas_job;

static void blas_range(void *ctx, size_t begin, size_t end) {
  const blas_job *g = ctx;
  int first = (int)begin * BLAS_PANEL, last = (int)end * BLAS_PANEL;
  const float *a = g->a, *b = g->b;
  float *c = g->c;
  int m = g->m, n = g->n;
  if (g->split_n) {
    last = last < n ? last : n;
    n = last - first;
    b += g->trans_b ? (size_t)first * g->ldb : (size_t)first;
    c += first;
  } else {
    last = last < m ? last : m;
    m = last - first;
    a += g->trans_a ? (size_t)first : (size_t)first * g->lda;
    c += (size_t)first * g->ldc;
  }
  cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
              g->trans_b ? CblasTrans : CblasNoTrans, m, n, g->k, g->alpha, a,
              g->lda, b, g->ldb, g->beta, c, g->ldc);
}
#endif

void nn_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc) {
  /* A short side (a linear layer at small batch): both backends would pack
   * the long operand, which costs as much as the product (bench/gemm: the
   * fc1 and mlp shapes at batch 10). */
  if (alpha != 0.0f && nn_sgemm_small(trans_a, trans_b, m, n, k, alpha, a, lda,
                                      b, ldb, beta, c, ldc))
    return;
#ifdef COHORT_HAVE_CBLAS
  /* OpenBLAS 0.3.21 multiplies A B by alpha == 0, so NaN or Inf in A or B
   * would reach C; the reference BLAS reads neither. The built-in kernel
   * has the reference behaviour for these cases (and for the sizes CBLAS
   * would reject with a message on stderr). The scalar path (nn_isa.h) is
   * the built-in kernel's, not OpenBLAS's. */
  if (m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f ||
      nn_isa_best() == NN_ISA_SCALAR) {
    nn_sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
    return;
  }
  /* The convolutions' forward products (one image's rows, few output
   * channels, B transposed) run faster in the built-in kernel, which reads
   * the im2col matrix in place instead of packing it (bench/gemm:
   * conv1_fwd, conv2_fwd). */
  if (!trans_a && trans_b && n <= 64 && m >= 128) {
    nn_sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
    return;
  }
  blas_job g = {trans_a, trans_b, n > m, m, n,   k,   alpha,
                beta,    a,       b,     c, lda, ldb, ldc};
  int split = g.split_n ? n : m, other = g.split_n ? m : n;
  size_t panels = (size_t)(split + BLAS_PANEL - 1) / BLAS_PANEL;
  double panel_flops = 2.0 * BLAS_PANEL * other * k;
  size_t min_panels = (size_t)(BLAS_MIN_FLOPS_PER_THREAD / panel_flops) + 1;
  nn_parallel_for(panels, min_panels, blas_range, &g);
#else
  nn_sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                   ldc);
#endif
}

const char *nn_blas_backend(void) {
#ifdef COHORT_HAVE_CBLAS
  return nn_isa_best() == NN_ISA_SCALAR ? "builtin" : "openblas";
#else
  return "builtin";
#endif
}
