/* The scalar path's kernels (NN_ISA_SCALAR, see nn_isa.h): the reference
 * the vector paths are checked against and the fallback for a CPU no other
 * path knows. Plain C loops; CMake compiles this file with the vectorisers
 * off, so on x86-64 it uses only scalar SSE instructions (objdump shows no
 * packed ones) and elsewhere only the FPU's scalar operations. */
#include "nn_gemm_kernel.h"
#include "nn_gemm_small.h"

/* 12 accumulators: with the two operands, within the 16 scalar registers
 * of x86-64 and well within aarch64's 32. */
GEMM_KERNELS(scalar, , 3, 4)
const gemm_arch nn_gemm_arch_scalar = {
    3, 4, 256, 96, 1024, scalar_packed, scalar_rows, scalar_cols};

/* nn_sgemm_small_axpy's contract, row by row of C: each element is
 * beta * c (or 0), then plus alpha * a_ip * b_pj in order of p, which
 * does not depend on how a caller splits the columns. */
void nn_scalar_small_axpy(bool trans_a, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc) {
  for (int i = 0; i < m; i++) {
    float *ci = c + (size_t)i * (size_t)ldc;
    for (int j = 0; j < n; j++)
      ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
    for (int p = 0; p < k; p++) {
      float aip = alpha * (trans_a ? a[(size_t)p * (size_t)lda + i]
                                   : a[(size_t)i * (size_t)lda + p]);
      const float *bp = b + (size_t)p * (size_t)ldb;
      for (int j = 0; j < n; j++)
        ci[j] += aip * bp[j];
    }
  }
}
