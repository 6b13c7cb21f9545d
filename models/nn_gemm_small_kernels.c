/* The kernels of nn_gemm_small.c (see there) for one ISA: CMake compiles
 * this file once per ISA with its -m flags, NN_VL (its vector width in
 * floats) and NN_KERNEL_ISA (the name in the exported nn_small_arch_NAME).
 * A vector of NN_VL floats is one register of the target, so GCC does not
 * split the accumulators (objdump of the AVX2 axpy, no stack access in its
 * loop over k: docs/benchmarks.md). */
#include "nn_gemm_small_kernels.h"

#include <string.h>

#include "nn_isa.h"

#ifndef NN_KERNEL_ISA
#error "nn_gemm_small_kernels.c is compiled with -DNN_KERNEL_ISA=name"
#endif

/* The kernels work on nn_vec (nn_isa.h), NN_VL floats wide, as this
 * object's ISA holds in one register: with a short k, spills and peeled
 * epilogues would cost more than the sums. */
#define VL NN_VL
typedef nn_vec vec;
#define VLOAD NN_VLOAD
#define VSTORE NN_VSTORE

/* The lanes of *v added in a fixed tree. */
static NN_INLINE float vsum(const vec *v) {
  float t[VL];
  memcpy(t, v, sizeof t);
  for (int w = VL / 2; w > 0; w /= 2)
    for (int l = 0; l < w; l++)
      t[l] += t[l + w];
  return t[0];
}

/* dot: c[i][j] (i < mr, j < nb) from rows i of a and j of b over k. Each
 * accumulator holds VL partial sums (element p goes to lane p % VL), added
 * by vsum; a tail of k % VL follows in order. */
static NN_INLINE void dot_body(int mr, int nb, int k, const float *restrict a,
                               size_t lda, const float *restrict b, size_t ldb,
                               float *restrict c, size_t ldc, float alpha,
                               float beta) {
  /* Only the mr x nb accumulators in use are zeroed: an initialiser of the
   * whole array made GCC clear all of it in memory on every call (a rep
   * stos of 640 bytes on AVX2), a cost the short k of these products does
   * not hide. */
  vec acc[MAX_MR][MAX_NB];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nb; j++)
      acc[i][j] = (vec){0};
  int kv = k / VL * VL;
  for (int p = 0; p < kv; p += VL) {
    vec bv[MAX_NB];
    for (int j = 0; j < nb; j++)
      VLOAD(bv[j], b + j * ldb + p);
    for (int i = 0; i < mr; i++) {
      vec av;
      VLOAD(av, a + i * lda + p);
      for (int j = 0; j < nb; j++)
        acc[i][j] += av * bv[j];
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nb; j++) {
      float s = vsum(&acc[i][j]);
      for (int p = kv; p < k; p++)
        s += a[i * lda + p] * b[j * ldb + p];
      float *cij = c + i * ldc + j;
      *cij = beta == 0.0f ? alpha * s : alpha * s + beta * *cij;
    }
}

/* axpy: c[i][0..nv * VL) (i < mr) = alpha * sum_p a(i, p) b[p][...] + beta
 * * c, where a(i, p) is a[i * rs + p * cs] (rs lda, cs 1 for A; rs 1, cs
 * lda for A^T). beta == 0 does not read c. */
static NN_INLINE void axpy_body(int mr, int nv, int k, const float *restrict a,
                                size_t rs, size_t cs, const float *restrict b,
                                size_t ldb, float *restrict c, size_t ldc,
                                float alpha, float beta) {
  vec acc[MAX_MR][MAX_NV]; /* as in dot_body, only those in use zeroed */
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++)
      acc[i][v] = (vec){0};
  for (int p = 0; p < k; p++) {
    vec bv[MAX_NV];
    for (int v = 0; v < nv; v++)
      VLOAD(bv[v], b + p * ldb + v * VL);
    for (int i = 0; i < mr; i++) {
      float ai = a[i * rs + p * cs];
      for (int v = 0; v < nv; v++)
        acc[i][v] += ai * bv[v];
    }
  }
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) {
      float *cv = c + i * ldc + v * VL;
      vec out = alpha * acc[i][v];
      if (beta != 0.0f) {
        vec old;
        VLOAD(old, cv);
        out += beta * old;
      }
      VSTORE(cv, out);
    }
}

#define DOT_KERNEL(name, MR, NB)                                               \
  static void name(int k, const float *a, size_t lda, const float *b,          \
                   size_t ldb, float *c, size_t ldc, float alpha,              \
                   float beta) {                                               \
    dot_body(MR, NB, k, a, lda, b, ldb, c, ldc, alpha, beta);                  \
  }
#define AXPY_KERNEL(name, MR, NV)                                              \
  static void name(int k, const float *a, size_t rs, size_t cs,                \
                   const float *b, size_t ldb, float *c, size_t ldc,           \
                   float alpha, float beta) {                                  \
    axpy_body(MR, NV, k, a, rs, cs, b, ldb, c, ldc, alpha, beta);              \
  }
/* The kernels of one ISA for every row count up to MAX_MR (an ISA whose mr
 * is smaller never calls the larger ones). */
#define SMALL_KERNELS_ROWS(p, R, NB, NV)                                       \
  DOT_KERNEL(p##_dot##R, R, NB)                                                \
  DOT_KERNEL(p##_dot##R##e, R, 1)                                              \
  AXPY_KERNEL(p##_axpy##R, R, NV)                                              \
  AXPY_KERNEL(p##_axpy##R##e, R, 1)
#define SMALL_KERNELS(p, NB, NV)                                               \
  SMALL_KERNELS_ROWS(p, 1, NB, NV)                                             \
  SMALL_KERNELS_ROWS(p, 2, NB, NV)                                             \
  SMALL_KERNELS_ROWS(p, 3, NB, NV)                                             \
  SMALL_KERNELS_ROWS(p, 4, NB, NV)                                             \
  SMALL_KERNELS_ROWS(p, 5, NB, NV)
#define SMALL_ARCH(p, MR, NB, NV)                                              \
  {                                                                            \
    MR, NB, NV, VL,                                                            \
        {{p##_dot1, p##_dot1e},                                                \
         {p##_dot2, p##_dot2e},                                                \
         {p##_dot3, p##_dot3e},                                                \
         {p##_dot4, p##_dot4e},                                                \
         {p##_dot5, p##_dot5e}},                                               \
    {                                                                          \
      {p##_axpy1, p##_axpy1e}, {p##_axpy2, p##_axpy2e},                        \
          {p##_axpy3, p##_axpy3e}, {p##_axpy4, p##_axpy4e}, {                  \
        p##_axpy5, p##_axpy5e                                                  \
      }                                                                        \
    }                                                                          \
  }

#if NN_VL == 16
/* AVX-512: 20 of the 32 zmm registers as accumulators in both kernels: 5 x
 * 4 dot products; 5 rows of 4 vectors (5 x 4 beat 4 x 4 by a fifth on fc1
 * at batch 10, whose 10 rows it covers in two groups, not three). */
SMALL_KERNELS(k, 4, 4)
const small_arch NN_ISA_SYM(nn_small_arch) = SMALL_ARCH(k, 5, 4, 4);
#elif NN_VL == 1 && !defined(__aarch64__)
/* Scalar on 16 registers: 3 x 3 in both kernels, none spilled in the loop
 * over k (3 x 4 spilled 4 accesses a step to the stack). */
SMALL_KERNELS(k, 3, 3)
const small_arch NN_ISA_SYM(nn_small_arch) = SMALL_ARCH(k, 3, 3, 3);
#elif NN_VL == 8 || NN_VL == 4 || NN_VL == 1
/* AVX2 (8 floats), SSE2 or NEON (4), scalar on aarch64 (1): 12 of the 16
 * ymm or xmm registers (NEON has 32) as accumulators, 3 x 4 in both
 * kernels. */
SMALL_KERNELS(k, 4, 4)
const small_arch NN_ISA_SYM(nn_small_arch) = SMALL_ARCH(k, 3, 4, 4);
#else
#error "NN_VL is 16, 8, 4 or 1"
#endif
