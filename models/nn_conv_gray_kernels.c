/* The kernels of nn_conv_gray.c (see there) for one ISA: CMake compiles
 * this file once per ISA with its -m flags, NN_VL and NN_KERNEL_ISA (the
 * name in the exported nn_gray_arch_NAME). Every accumulator is one
 * register of the target: the forward's block of pixels and the weight
 * gradient's taps are sized to the register file. */
#include "nn_conv_gray_kernels.h"

#include <stddef.h>

#include "nn_isa.h"

#ifndef NN_KERNEL_ISA
#error "nn_conv_gray_kernels.c is compiled with -DNN_KERNEL_ISA=name"
#endif

#define VL NN_VL
typedef nn_vec vec;
enum { K = GRAY_K, TAPS = GRAY_TAPS };

/* NV vectors of channels per group, PB pixels per forward block (PB x NV
 * accumulators, the NV weight vectors and the broadcast pixel), and
 * TAP_ROWS rows of taps per pass of the weight gradient (TAP_ROWS x 5
 * accumulators, the bias's, dout's vector and the broadcast). */
#if NN_VL == 16
/* AVX-512, 32 zmm: 16 forward accumulators, all 25 taps in one pass. */
enum { NV = 2, PB = 8, TAP_ROWS = 5 };
#elif NN_VL == 8
/* AVX2, 16 ymm: 8 forward accumulators (GCC also keeps the block's
 * pixels in registers: 6 pixels spilled); the taps in passes of 10, 10
 * and 5 (25 accumulators would spill). */
enum { NV = 2, PB = 4, TAP_ROWS = 2 };
#elif NN_VL == 4 && defined(__aarch64__)
/* NEON, 32 q registers. */
enum { NV = 2, PB = 8, TAP_ROWS = 5 };
#elif NN_VL == 4
/* SSE2, 16 xmm, no FMA: one more register for each product; with the
 * pixels GCC keeps, some still go to the stack (fewest at this size). */
enum { NV = 2, PB = 4, TAP_ROWS = 2 };
#elif NN_VL == 1
/* Scalar: 4 channels by 3 pixels, 12 accumulators; taps in passes of 2
 * rows (10 accumulators). */
enum { NV = 4, PB = 3, TAP_ROWS = 2 };
#else
#error "NN_VL is 16, 8, 4 or 1"
#endif
enum { GROUP = NV * VL };

/* Output pixels x0 .. x0 + pb - 1 of row y. */
static NN_INLINE void fwd_pixels(int pb, const float *restrict pad, int pw,
                                 int y, int x0, const float *restrict wt,
                                 const float *restrict bias,
                                 float *restrict out, int co, bool relu) {
  vec bv[NV], acc[PB][NV];
  for (int v = 0; v < NV; v++)
    NN_VLOAD(bv[v], bias + v * VL);
  for (int p = 0; p < pb; p++)
    for (int v = 0; v < NV; v++)
      acc[p][v] = bv[v];
  for (int ky = 0; ky < K; ky++) {
    const float *row = pad + (size_t)(y + ky) * pw + x0;
    for (int kx = 0; kx < K; kx++) {
      vec wv[NV];
      for (int v = 0; v < NV; v++)
        NN_VLOAD(wv[v], wt + (ky * K + kx) * GROUP + v * VL);
      for (int p = 0; p < pb; p++) {
        float x = row[p + kx];
        for (int v = 0; v < NV; v++)
          acc[p][v] += x * wv[v];
      }
    }
  }
  for (int p = 0; p < pb; p++)
    for (int v = 0; v < NV; v++) {
      if (relu) /* keep the lanes above 0, as x > 0 ? x : 0 does */
        acc[p][v] = NN_VRELU(acc[p][v]);
      NN_VSTORE(out + (size_t)p * co + v * VL, acc[p][v]);
    }
}

/* A row of output pixels: blocks of PB, then 4 (where PB is larger), 2 and
 * 1 for the rest. */
static void fwd_row(const float *pad, int pw, int y, int w, const float *wt,
                    const float *bias, float *out, int co, bool relu) {
  int x = 0;
  for (; x + PB <= w; x += PB)
    fwd_pixels(PB, pad, pw, y, x, wt, bias, out + (size_t)x * co, co, relu);
  for (; PB > 4 && x + 4 <= w; x += 4)
    fwd_pixels(4, pad, pw, y, x, wt, bias, out + (size_t)x * co, co, relu);
  for (; x + 2 <= w; x += 2)
    fwd_pixels(2, pad, pw, y, x, wt, bias, out + (size_t)x * co, co, relu);
  for (; x < w; x++)
    fwd_pixels(1, pad, pw, y, x, wt, bias, out + (size_t)x * co, co, relu);
}

/* Taps of rows [ky0, ky0 + rows) over the whole image, and the bias (a
 * tap whose input is 1) when with_bias: summing it here saves a pass over
 * dout (3.2 MB at batch 32 for the CNN's conv1). Each tap's sum runs over
 * the pixels in order, whatever the passes. */
static NN_INLINE void wgrad_pass(int ky0, int rows, bool with_bias,
                                 const float *restrict pad, int pw, int h,
                                 int w, const float *restrict dout, int co,
                                 float *restrict dwt, float *restrict db) {
  vec acc[TAP_ROWS * K], bias = {0};
  for (int t = 0; t < rows * K; t++)
    NN_VLOAD(acc[t], dwt + (size_t)(ky0 * K + t) * co);
  if (with_bias)
    NN_VLOAD(bias, db);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      vec d;
      NN_VLOAD(d, dout + ((size_t)y * w + x) * co);
      const float *at = pad + (size_t)(y + ky0) * pw + x;
      for (int r = 0; r < rows; r++)
        for (int kx = 0; kx < K; kx++)
          acc[r * K + kx] += at[(size_t)r * pw + kx] * d;
      if (with_bias)
        bias += d;
    }
  for (int t = 0; t < rows * K; t++)
    NN_VSTORE(dwt + (size_t)(ky0 * K + t) * co, acc[t]);
  if (with_bias)
    NN_VSTORE(db, bias);
}

/* The passes with their rows as constants (TAP_ROWS is 2 or 5): 0-1, 2-3
 * and 4, or 0-4; the first also sums the bias. */
static void wgrad(const float *pad, int pw, int h, int w, const float *dout,
                  int co, float *dwt, float *db) {
  wgrad_pass(0, TAP_ROWS, true, pad, pw, h, w, dout, co, dwt, db);
  if (2 * TAP_ROWS <= K)
    wgrad_pass(TAP_ROWS, TAP_ROWS, false, pad, pw, h, w, dout, co, dwt, db);
  if (K % TAP_ROWS)
    wgrad_pass(K - K % TAP_ROWS, K % TAP_ROWS, false, pad, pw, h, w, dout, co,
               dwt, db);
}

const gray_arch NN_ISA_SYM(nn_gray_arch) = {GROUP, VL, fwd_row, wgrad};
