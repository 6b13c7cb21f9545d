/* The register-blocked micro-kernels of nn_gemm_builtin.c and the
 * blocking that goes with them: one gemm_arch per ISA, from the per-ISA
 * objects of nn_gemm_builtin_kernels.c, the scalar path's among them.
 * Internal to models/. */
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

/* One per build of nn_gemm_builtin_kernels.c (scalar: every build). */
extern const gemm_arch nn_gemm_arch_scalar, nn_gemm_arch_avx512,
    nn_gemm_arch_avx2, nn_gemm_arch_sse2, nn_gemm_arch_generic;

#endif
