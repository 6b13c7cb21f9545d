/* Matrix multiply and the engine's thread setting.
 *
 * Every dense product of the training engine (linear layers, convolutions as
 * im2col products) goes through nn_sgemm. At build time CMake picks the
 * backend: CBLAS from OpenBLAS when COHORT_BLAS is AUTO (and OpenBLAS is
 * found) or OPENBLAS, else the portable blocked C kernel in nn_gemm_builtin.c.
 * The built-in kernel is always compiled (nn_sgemm_builtin), so it is tested
 * on every build.
 *
 * Determinism: for a given thread count, results are bit-identical from run
 * to run (work is split over output blocks, never over the summed dimension,
 * so each output's sum runs in a fixed order). */
#ifndef COHORT_NN_GEMM_H
#define COHORT_NN_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "nn_pool.h" /* nn_sgemm splits its products over the pool */

/* Row-major C[m x n] = alpha * op(A) * op(B) + beta * C, where op(A) is
 * m x k (A is k x m when trans_a) and op(B) is k x n (B is n x k when
 * trans_b); lda, ldb and ldc are row strides in elements. beta == 0 means C's
 * old contents are ignored (they may be NaN). m, n or k == 0 is allowed. */
void nn_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc);

/* The portable kernel, whatever backend nn_sgemm uses. */
void nn_sgemm_builtin(bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc);

/* "openblas" or "builtin" (always on the scalar path, nn_isa.h). */
const char *nn_blas_backend(void);

#endif
