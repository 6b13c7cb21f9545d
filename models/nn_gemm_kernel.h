/* The register-blocked micro-kernels of nn_gemm_builtin.c and the
 * blocking that goes with them: one gemm_arch per ISA, from the per-ISA
 * objects of nn_gemm_builtin_kernels.c and from the scalar path
 * (nn_scalar.c). Internal to models/. */
#ifndef COHORT_NN_GEMM_KERNEL_H
#define COHORT_NN_GEMM_KERNEL_H

#include <stddef.h>

#include "nn_isa.h"

/* Largest tile of any kernel; sizes the edge-tile scratch. */
enum { GEMM_MAX_MR = 8, GEMM_MAX_NR = 32 };

/* c[mr x nr] (row stride ldc) = alpha * sum_p a_p b_p^T + beta * c over
 * kc steps, where b is a packed kc x nr panel of B and element (i, p) of the
 * A panel is a[i * rs + p * cs]: packed (rs 1, cs mr) or read in place from
 * row-major A (rs lda, cs 1) or from A^T (rs 1, cs lda). beta == 0 does not
 * read c. */
typedef void (*gemm_kernel_fn)(int kc, const float *a, size_t rs, size_t cs,
                               const float *b, float *c, size_t ldc,
                               float alpha, float beta);

/* Kernels of one ISA and the blocking that suits them: kc x nr of B stays
 * in L1 while mc x kc of A streams from L2; nc bounds the packed B block.
 * A is read in place (packing it would cost as much as the product when n
 * is small, as in the CNN's layers); only a last partial panel is packed.
 * Each element gets the same arithmetic from every variant. */
typedef struct gemm_arch {
  int mr, nr, kc, mc, nc;
  gemm_kernel_fn packed, rows, cols;
} gemm_arch;

/* The scalar path's kernel body (nn_scalar.c, compiled with the
 * vectorisers off); the wrappers fix mr, nr and one of the strides so the
 * loops unroll into mr * nr scalar accumulators. */
static NN_INLINE void kernel_body(int mr, int nr, int kc,
                                  const float *restrict a, size_t rs, size_t cs,
                                  const float *restrict b, float *restrict c,
                                  size_t ldc, float alpha, float beta) {
  float acc[GEMM_MAX_MR * GEMM_MAX_NR] = {0};
  for (int p = 0; p < kc; p++)
    for (int i = 0; i < mr; i++) {
      float ai = a[i * rs + p * cs];
      for (int j = 0; j < nr; j++)
        acc[i * nr + j] += ai * b[p * nr + j];
    }
  if (beta == 0.0f) {
    for (int i = 0; i < mr; i++)
      for (int j = 0; j < nr; j++)
        c[i * ldc + j] = alpha * acc[i * nr + j];
  } else {
    for (int i = 0; i < mr; i++)
      for (int j = 0; j < nr; j++)
        c[i * ldc + j] = alpha * acc[i * nr + j] + beta * c[i * ldc + j];
  }
}

#define GEMM_KERNEL(name, attr, MR, NR, RS, CS)                                \
  attr static void name(int kc, const float *a, size_t rs, size_t cs,          \
                        const float *b, float *c, size_t ldc, float alpha,     \
                        float beta) {                                          \
    kernel_body(MR, NR, kc, a, RS, CS, b, c, ldc, alpha, beta);                \
  }

/* The three A layouts of an MR x NR kernel. */
#define GEMM_KERNELS(prefix, attr, MR, NR)                                     \
  GEMM_KERNEL(prefix##_packed, attr, MR, NR, 1, MR)                            \
  GEMM_KERNEL(prefix##_rows, attr, MR, NR, rs, 1)                              \
  GEMM_KERNEL(prefix##_cols, attr, MR, NR, 1, cs)

/* The scalar path's kernels (nn_scalar.c) and one per build of
 * nn_gemm_builtin_kernels.c. */
extern const gemm_arch nn_gemm_arch_scalar, nn_gemm_arch_avx512,
    nn_gemm_arch_avx2, nn_gemm_arch_sse2, nn_gemm_arch_generic;

#endif
