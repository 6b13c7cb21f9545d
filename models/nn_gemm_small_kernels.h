/* The short-side kernels of nn_gemm_small.c, compiled once per ISA as
 * separate objects (models/CMakeLists.txt: nn_gemm_small_kernels.c with
 * that ISA's -m flags and vector width NN_VL), so that each works on
 * vectors its registers really hold. Internal to models/. */
#ifndef COHORT_NN_GEMM_SMALL_KERNELS_H
#define COHORT_NN_GEMM_SMALL_KERNELS_H

#include <stddef.h>

/* Largest tiles of any ISA; size the accumulators. */
enum { MAX_MR = 5, MAX_NB = 4, MAX_NV = 4 };

typedef void (*dot_fn)(int k, const float *a, size_t lda, const float *b,
                       size_t ldb, float *c, size_t ldc, float alpha,
                       float beta);
typedef void (*axpy_fn)(int k, const float *a, size_t rs, size_t cs,
                        const float *b, size_t ldb, float *c, size_t ldc,
                        float alpha, float beta);

/* One ISA's tiles and kernels: dot[r][e] has r + 1 rows of A against nb
 * rows of B (e == 0) or one (e == 1, the edge); axpy[r][e] forms r + 1 rows
 * of C, nv vectors of vl floats wide (e == 0) or one vector (e == 1). */
typedef struct small_arch {
  int mr, nb, nv, vl;
  dot_fn dot[MAX_MR][2];
  axpy_fn axpy[MAX_MR][2];
} small_arch;

/* One per build of nn_gemm_small_kernels.c (scalar: every build). */
extern const small_arch nn_small_arch_avx512, nn_small_arch_avx2,
    nn_small_arch_sse2, nn_small_arch_generic, nn_small_arch_scalar;

#endif
