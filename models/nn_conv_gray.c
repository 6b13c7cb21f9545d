/* See nn_conv_gray.h.
 *
 * Why: as an im2col product the layer has a depth of only 25, so its GEMM
 * spends most of its time loading and storing C, and building the 784 x 25
 * patch matrix of each image costs as much again (at batch 10 the layer
 * took 0.94 ms of the CNN's step, 12.5 MFLOP each way). Here each image is
 * padded once and every output pixel is 25 broadcast multiply-adds into
 * registers; the weight gradient keeps one accumulator per tap.
 *
 * The kernels are compiled once per ISA at its own vector width
 * (nn_conv_gray_kernels.c); the weights are laid out for the chosen one's
 * channel group. */
#include "nn_conv_gray.h"

#include <string.h>

#include "nn_conv_gray_kernels.h"
#include "nn_isa.h"
#include "nn_layers.h"
#include "nn_pool.h"

/* Output channels must be whole groups of every ISA's forward (8 to 32
 * channels), so which layers take this path does not depend on the CPU. */
enum { K = GRAY_K, PAD = GRAY_PAD, TAPS = GRAY_TAPS, CHANNEL_MULTIPLE = 32 };

#ifdef NN_ISA_X86
static const gray_arch *arch_get(void) {
  static const gray_arch *const by_isa[] = {
      &nn_gray_arch_scalar, &nn_gray_arch_sse2, &nn_gray_arch_avx2,
      &nn_gray_arch_avx512};
  return by_isa[nn_isa_best()];
}
#else
static const gray_arch *arch_get(void) {
  return nn_isa_best() == NN_ISA_SCALAR ? &nn_gray_arch_scalar
                                        : &nn_gray_arch_generic;
}
#endif

bool nn_conv_gray_applies(const nn_layer *l) {
  return l->kind == NN_CONV2D && l->ksize == K && l->pad == PAD &&
         l->in.c == 1 && l->out.c % CHANNEL_MULTIPLE == 0;
}

static int padded_w(const nn_layer *l) { return l->in.w + 2 * PAD; }
static size_t padded_size(const nn_layer *l) {
  return (size_t)(l->in.h + 2 * PAD) * (size_t)padded_w(l);
}

size_t nn_conv_gray_scratch(const nn_layer *l, int n) {
  /* A padded image per image, and the weights (transpose_weights). */
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
    for (int g = 0; g < co; g += ar->group)
      for (int y = 0; y < h; y++)
        ar->fwd_row(pad, pw, y, w, j->wt + (size_t)g * TAPS, j->bias + g,
                    out + (size_t)y * w * co + g, co, j->relu);
  }
}

/* W [co][tap] as wt [co / group][tap][group], group the ISA's forward
 * channels: a tap's channels are vector loads, and a group's weights one
 * contiguous block. */
static void transpose_weights(const nn_layer *l, const float *params, int group,
                              float *wt) {
  int co = l->out.c;
  for (int o = 0; o < co; o++) {
    float *block = wt + (size_t)(o / group) * group * TAPS + o % group;
    for (int t = 0; t < TAPS; t++)
      block[(size_t)t * group] = params[l->w + (size_t)o * TAPS + t];
  }
}

void nn_conv_gray_forward(const nn_layer *l, const float *params,
                          const float *in, float *scratch, float *out, int n,
                          bool relu) {
  float *wt = scratch + (size_t)n * padded_size(l);
  transpose_weights(l, params, arch_get()->group, wt);
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
      for (int g = 0; g < co; g += ar->lanes)
        ar->wgrad(pad, pw, h, w, dout + g, co, partial + g, db + g);
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
