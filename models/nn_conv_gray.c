/* See nn_conv_gray.h.
 *
 * Why: as an im2col product the layer has a depth of only 25, so its GEMM
 * spends most of its time loading and storing C, and building the 784 x 25
 * patch matrix of each image costs as much again (at batch 10 the layer
 * took 0.94 ms of the CNN's step, 12.5 MFLOP each way). Here each image is
 * padded once and every output pixel is 25 broadcast multiply-adds into
 * registers; the weight gradient keeps one accumulator per tap.
 *
 * The kernels use nn_vec and are compiled once per ISA (nn_isa.h). */
#include "nn_conv_gray.h"

#include <string.h>

/* Still on 16-float vectors in every ISA's copy (target attributes). */
#define NN_VL 16
#include "nn_isa.h"
#include "nn_layers.h"
#include "nn_pool.h"

typedef nn_vec vec;
typedef nn_ivec ivec;
#define VL NN_VL
#define VLOAD NN_VLOAD
#define VSTORE NN_VSTORE

enum { K = 5, PAD = 2, TAPS = K * K, GROUP = 2 * VL, MAX_PB = 8 };

/* Output pixels x0 .. x0 + pb - 1 of row y for the channel group at wt
 * (TAPS rows of ld floats, the group's 32 channels first): bias, the taps
 * in order, then the ReLU. pad is the image with PAD zeros on every side,
 * pw floats per row. */
static NN_INLINE void fwd_pixels(int pb, const float *restrict pad, int pw,
                                 int y, int x0, const float *restrict wt,
                                 int ld, const float *restrict bias,
                                 float *restrict out, int co, bool relu) {
  vec b0, b1, acc[MAX_PB][2];
  VLOAD(b0, bias);
  VLOAD(b1, bias + VL);
  for (int p = 0; p < pb; p++) {
    acc[p][0] = b0;
    acc[p][1] = b1;
  }
  for (int ky = 0; ky < K; ky++) {
    const float *row = pad + (size_t)(y + ky) * pw + x0;
    for (int kx = 0; kx < K; kx++) {
      vec w0, w1;
      VLOAD(w0, wt + (size_t)(ky * K + kx) * ld);
      VLOAD(w1, wt + (size_t)(ky * K + kx) * ld + VL);
      for (int p = 0; p < pb; p++) {
        float v = row[p + kx];
        acc[p][0] += v * w0;
        acc[p][1] += v * w1;
      }
    }
  }
  vec zero = {0};
  for (int p = 0; p < pb; p++) {
    if (relu) { /* keep the lanes above 0, as x > 0 ? x : 0 does */
      acc[p][0] = (vec)((ivec)acc[p][0] & (acc[p][0] > zero));
      acc[p][1] = (vec)((ivec)acc[p][1] & (acc[p][1] > zero));
    }
    VSTORE(out + (size_t)p * co, acc[p][0]);
    VSTORE(out + (size_t)p * co + VL, acc[p][1]);
  }
}

/* dWt[t][0..16) += sum over the image's pixels of pad[pixel + tap t] *
 * dout[pixel][0..16) for the channel vector at dout (row stride co), and
 * db[0..16) += sum of dout[pixel][0..16): the bias is one more tap, whose
 * input is 1. Summing it here saves a pass over dout (3.2 MB at batch 32
 * for the CNN's conv1). */
static NN_INLINE void wgrad_image(const float *restrict pad, int pw, int h,
                                  int w, const float *restrict dout, int co,
                                  float *restrict dwt, int ld,
                                  float *restrict db) {
  vec acc[TAPS], bias;
  for (int t = 0; t < TAPS; t++)
    VLOAD(acc[t], dwt + (size_t)t * ld);
  VLOAD(bias, db);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      vec d;
      VLOAD(d, dout + ((size_t)y * w + x) * co);
      const float *at = pad + (size_t)y * pw + x;
      for (int ky = 0; ky < K; ky++)
        for (int kx = 0; kx < K; kx++)
          acc[ky * K + kx] += at[(size_t)ky * pw + kx] * d;
      bias += d;
    }
  for (int t = 0; t < TAPS; t++)
    VSTORE(dwt + (size_t)t * ld, acc[t]);
  VSTORE(db, bias);
}

typedef void (*fwd_row_fn)(const float *pad, int pw, int y, int w,
                           const float *wt, int ld, const float *bias,
                           float *out, int co, bool relu);
typedef void (*wgrad_fn)(const float *pad, int pw, int h, int w,
                         const float *dout, int co, float *dwt, int ld,
                         float *db);

/* A row of output pixels: blocks of 8, then 4, 2 and 1 for the rest. */
#define GRAY_KERNELS(p, attr)                                                  \
  attr static void p##_fwd_row(const float *pad, int pw, int y, int w,         \
                               const float *wt, int ld, const float *bias,     \
                               float *out, int co, bool relu) {                \
    int x = 0;                                                                 \
    for (; x + 8 <= w; x += 8)                                                 \
      fwd_pixels(8, pad, pw, y, x, wt, ld, bias, out + (size_t)x * co, co,     \
                 relu);                                                        \
    for (; x + 4 <= w; x += 4)                                                 \
      fwd_pixels(4, pad, pw, y, x, wt, ld, bias, out + (size_t)x * co, co,     \
                 relu);                                                        \
    for (; x + 2 <= w; x += 2)                                                 \
      fwd_pixels(2, pad, pw, y, x, wt, ld, bias, out + (size_t)x * co, co,     \
                 relu);                                                        \
    for (; x < w; x++)                                                         \
      fwd_pixels(1, pad, pw, y, x, wt, ld, bias, out + (size_t)x * co, co,     \
                 relu);                                                        \
  }                                                                            \
  attr static void p##_wgrad(const float *pad, int pw, int h, int w,           \
                             const float *dout, int co, float *dwt, int ld,    \
                             float *db) {                                      \
    wgrad_image(pad, pw, h, w, dout, co, dwt, ld, db);                         \
  }

typedef struct gray_arch {
  fwd_row_fn fwd_row;
  wgrad_fn wgrad;
} gray_arch;

#ifdef NN_ISA_X86
GRAY_KERNELS(avx512, NN_TARGET_AVX512)
GRAY_KERNELS(avx2, NN_TARGET_AVX2)
GRAY_KERNELS(sse2, )
static const gray_arch *arch_get(void) {
  /* The engine's scalar path does not come here (nn_layers.c). */
  static const gray_arch by_isa[] = {{sse2_fwd_row, sse2_wgrad},
                                     {sse2_fwd_row, sse2_wgrad},
                                     {avx2_fwd_row, avx2_wgrad},
                                     {avx512_fwd_row, avx512_wgrad}};
  return &by_isa[nn_isa_best()];
}
#else
GRAY_KERNELS(generic, )
static const gray_arch *arch_get(void) {
  static const gray_arch generic = {generic_fwd_row, generic_wgrad};
  return &generic;
}
#endif

bool nn_conv_gray_applies(const nn_layer *l) {
  return l->kind == NN_CONV2D && l->ksize == K && l->in.c == 1 &&
         l->out.c % GROUP == 0;
}

static int padded_w(const nn_layer *l) { return l->in.w + 2 * PAD; }
static size_t padded_size(const nn_layer *l) {
  return (size_t)(l->in.h + 2 * PAD) * (size_t)padded_w(l);
}

size_t nn_conv_gray_scratch(const nn_layer *l, int n) {
  /* A padded image per image, and the weights as [tap][channel]. */
  return (size_t)n * padded_size(l) + (size_t)TAPS * l->out.c;
}

static void pad_image(const nn_layer *l, const float *img, float *pad) {
  int pw = padded_w(l), w = l->in.w;
  memset(pad, 0, padded_size(l) * sizeof *pad);
  for (int y = 0; y < l->in.h; y++)
    memcpy(pad + (size_t)(y + PAD) * pw + PAD, img + (size_t)y * w,
           (size_t)w * sizeof *img);
}

typedef struct gray_job {
  const nn_layer *l;
  const float *in, *wt, *bias, *dout;
  float *out, *pad, *partial;
  size_t n, chunks;
  bool relu;
} gray_job;

static void fwd_range(void *ctx, size_t first, size_t end) {
  const gray_job *j = ctx;
  const nn_layer *l = j->l;
  const gray_arch *ar = arch_get();
  int h = l->out.h, w = l->out.w, co = l->out.c, pw = padded_w(l);
  for (size_t e = first; e < end; e++) {
    float *pad = j->pad + e * padded_size(l);
    pad_image(l, j->in + e * nn_shape_size(l->in), pad);
    float *out = j->out + e * nn_shape_size(l->out);
    for (int g = 0; g < co; g += GROUP)
      for (int y = 0; y < h; y++)
        ar->fwd_row(pad, pw, y, w, j->wt + g, co, j->bias + g,
                    out + (size_t)y * w * co + g, co, j->relu);
  }
}

/* W [co][tap] as wt [tap][co], so a tap's channels are one vector load. */
static void transpose_weights(const nn_layer *l, const float *params,
                              float *wt) {
  int co = l->out.c;
  for (int o = 0; o < co; o++)
    for (int t = 0; t < TAPS; t++)
      wt[(size_t)t * co + o] = params[l->w + (size_t)o * TAPS + t];
}

void nn_conv_gray_forward(const nn_layer *l, const float *params,
                          const float *in, float *scratch, float *out, int n,
                          bool relu) {
  float *wt = scratch + (size_t)n * padded_size(l);
  transpose_weights(l, params, wt);
  gray_job j = {.l = l,
                .in = in,
                .wt = wt,
                .bias = params + l->b,
                .out = out,
                .pad = scratch,
                .relu = relu};
  nn_parallel_for((size_t)n, 1, fwd_range, &j);
}

/* Chunk c of the images: their weight gradient, [tap][co], into partial
 * c, and their bias gradient into bias partial c, summed image by image in
 * order. */
static void wgrad_range(void *ctx, size_t first, size_t end) {
  const gray_job *j = ctx;
  const nn_layer *l = j->l;
  const gray_arch *ar = arch_get();
  int h = l->out.h, w = l->out.w, co = l->out.c, pw = padded_w(l);
  for (size_t c = first; c < end; c++) {
    float *partial = j->partial + c * (size_t)TAPS * co;
    float *db = j->partial + j->chunks * (size_t)TAPS * co + c * (size_t)co;
    memset(partial, 0, (size_t)TAPS * co * sizeof *partial);
    memset(db, 0, (size_t)co * sizeof *db);
    size_t e0, e1;
    nn_conv2d_chunk_images(j->n, j->chunks, c, &e0, &e1);
    for (size_t e = e0; e < e1; e++) {
      float *pad = j->pad + e * padded_size(l);
      pad_image(l, j->in + e * nn_shape_size(l->in), pad);
      const float *dout = j->dout + e * nn_shape_size(l->out);
      for (int g = 0; g < co; g += VL)
        ar->wgrad(pad, pw, h, w, dout + g, co, partial + g, co, db + g);
    }
  }
}

void nn_conv_gray_backward_weights(const nn_layer *l, const float *in,
                                   const float *dout, float *scratch,
                                   float *partials, float *grad, int n) {
  size_t chunks = nn_conv2d_chunks((size_t)n);
  gray_job j = {.l = l,
                .in = in,
                .dout = dout,
                .pad = scratch,
                .partial = partials,
                .n = (size_t)n,
                .chunks = chunks};
  nn_parallel_for(chunks, 1, wgrad_range, &j);
  int co = l->out.c;
  nn_conv2d_sum_partials(partials, chunks, TAPS, co, grad + l->w);
  nn_conv2d_sum_partials(partials + chunks * TAPS * (size_t)co, chunks, 1, co,
                         grad + l->b);
}
