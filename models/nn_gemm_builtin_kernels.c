/* The micro-kernels of nn_gemm_builtin.c (see there) for one ISA: CMake
 * compiles this file once per ISA with its -m flags, NN_VL (its vector
 * width in floats) and NN_KERNEL_ISA (the name in the exported
 * nn_gemm_arch_NAME). Each of the MR x NR / NN_VL accumulators is one
 * register of the target, so none is spilled in the loop over k (objdump of
 * the AVX2 kernel: docs/benchmarks.md). */
#include "nn_gemm_kernel.h"
#include "nn_isa.h"

#ifndef NN_KERNEL_ISA
#error "nn_gemm_builtin_kernels.c is compiled with -DNN_KERNEL_ISA=name"
#endif

#define VL NN_VL
typedef nn_vec vec;

/* MR rows of A by NV vectors of B: the tile's accumulators, the NV vectors
 * of B's row and the broadcast element of A within the register file. */
#if NN_VL == 16
/* AVX-512: 16 of the 32 zmm registers, enough independent FMAs to cover
 * their latency on two ports; 8 rows divide the models' batch sizes. */
enum { MR = 8, NV = 2, KC = 256, MC = 128 };
#elif NN_VL == 8
/* AVX2: 12 of the 16 ymm registers. */
enum { MR = 6, NV = 2, KC = 256, MC = 144 };
#elif NN_VL == 4 && defined(__aarch64__)
/* NEON: 24 of the 32 q registers. */
enum { MR = 6, NV = 4, KC = 256, MC = 120 };
#elif NN_VL == 4
/* SSE2: 12 of the 16 xmm registers; without FMA the product needs one
 * more for its temporary. */
enum { MR = 6, NV = 2, KC = 256, MC = 96 };
#elif NN_VL == 1 && defined(__aarch64__)
/* Scalar on aarch64's 32 FP registers: 24 accumulators. */
enum { MR = 6, NV = 4, KC = 256, MC = 96 };
#elif NN_VL == 1
/* Scalar (portable C) on x86-64's 16 xmm registers: 9 accumulators, B's
 * 3 and A's element and the product's temporary, none spilled in the loop
 * over k (3 x 4 spilled 2 accumulators; every shape from 2 x 4 to 4 x 3
 * ran at the same 11-12 GFLOP/s in isolation, the scalar ceiling). */
enum { MR = 3, NV = 3, KC = 256, MC = 96 };
#else
#error "NN_VL is 16, 8, 4 or 1"
#endif
enum { NR = NV * VL, NC = 1024 };
_Static_assert((int)MR <= (int)GEMM_MAX_MR && (int)NR <= (int)GEMM_MAX_NR,
               "tile too large");

/* gemm_kernel_fn's contract (nn_gemm_kernel.h). Element (i, j) is summed
 * over p in order, then scaled: the same arithmetic as the scalar path's
 * kernel but for FMA contraction. */
static NN_INLINE void tile(int kc, const float *restrict a, size_t rs,
                           size_t cs, const float *restrict b,
                           float *restrict c, size_t ldc, float alpha,
                           float beta) {
  vec acc[MR][NV];
  for (int i = 0; i < MR; i++)
    for (int v = 0; v < NV; v++)
      acc[i][v] = (vec){0};
  for (int p = 0; p < kc; p++) {
    vec bv[NV];
    for (int v = 0; v < NV; v++)
      NN_VLOAD(bv[v], b + (size_t)p * NR + v * VL);
    for (int i = 0; i < MR; i++) {
      float ai = a[i * rs + p * cs];
      for (int v = 0; v < NV; v++)
        acc[i][v] += ai * bv[v];
    }
  }
  for (int i = 0; i < MR; i++)
    for (int v = 0; v < NV; v++) {
      float *cv = c + i * ldc + v * VL;
      vec out = alpha * acc[i][v];
      if (beta != 0.0f) {
        vec old;
        NN_VLOAD(old, cv);
        out += beta * old;
      }
      NN_VSTORE(cv, out);
    }
}

/* The three A layouts, each with its stride a constant. */
static void packed(int kc, const float *a, size_t rs, size_t cs, const float *b,
                   float *c, size_t ldc, float alpha, float beta) {
  (void)rs;
  (void)cs;
  tile(kc, a, 1, MR, b, c, ldc, alpha, beta);
}
static void rows(int kc, const float *a, size_t rs, size_t cs, const float *b,
                 float *c, size_t ldc, float alpha, float beta) {
  (void)cs;
  tile(kc, a, rs, 1, b, c, ldc, alpha, beta);
}
static void cols(int kc, const float *a, size_t rs, size_t cs, const float *b,
                 float *c, size_t ldc, float alpha, float beta) {
  (void)rs;
  tile(kc, a, 1, cs, b, c, ldc, alpha, beta);
}

const gemm_arch NN_ISA_SYM(nn_gemm_arch) = {MR, NR,     KC,   MC,
                                            NC, packed, rows, cols};
