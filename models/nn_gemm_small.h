/* Products with a short side, read in place (see nn_gemm_small.c): internal
 * to models/, called by nn_sgemm before either backend. */
#ifndef COHORT_NN_GEMM_SMALL_H
#define COHORT_NN_GEMM_SMALL_H

#include <stdbool.h>

#include "nn_gemm.h"

/* nn_sgemm's contract (alpha != 0, m, n, k > 0). Computes C and returns
 * true when the shape is one these kernels serve: A B^T with op(A) of at
 * most 32 rows and k >= 64, or op(A) B with op(A) of at most 32 rows or 32
 * columns, in either case with a long operand (B, or C when op(A) has the
 * few columns) of at least 2^17 elements; otherwise returns false and
 * touches nothing. Threads split C into whole blocks, so the result does
 * not depend on the thread count. */
bool nn_sgemm_small(bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b,
                    int ldb, float beta, float *c, int ldc);

/* C = alpha * op(A) B + beta * C on the axpy kernel, on the calling
 * thread, whatever the sizes (m, n, k > 0; alpha and beta as in nn_sgemm):
 * for a caller that splits C's columns over threads itself. Columns are
 * formed in blocks of 64 from column 0, so a split at multiples of
 * NN_SMALL_BLOCK gives each column the arithmetic it would get unsplit. */
#define NN_SMALL_BLOCK 64
void nn_sgemm_small_axpy(bool trans_a, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb,
                         float beta, float *c, int ldc);

#endif
