/* Layer kernels; see nn_layers.h. Dense work goes through nn_sgemm; the
 * data movement around it (im2col, col2im, pooling) is split over examples
 * with nn_parallel_for, which keeps results independent of timing. */
#include "nn_layers.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "nn_conv_gray.h"
#include "nn_gemm.h"
#include "nn_isa.h"
#include "nn_rng.h"
#include "nn_winograd.h"

/* Element-wise passes are split over rows (examples, or pixels of a batch
 * of images) once there is enough work for a second thread to pay off. */
#define ROWS_MIN_FLOATS 16384

typedef struct rows_job {
  float *out;
  const float *b, *dout;
  size_t cols;
  bool relu;
} rows_job;

static size_t min_rows(size_t cols) {
  return ROWS_MIN_FLOATS / (cols ? cols : 1) + 1;
}

/* out[r][j] = act(out[r][j] + b[j]), act = ReLU or identity: one pass over
 * the product's output, branch-free so that it vectorises. */
static void bias_act_range(void *ctx, size_t first, size_t end) {
  const rows_job *j = ctx;
  const float *restrict b = j->b;
  size_t cols = j->cols;
  for (size_t r = first; r < end; r++) {
    float *restrict o = j->out + r * cols;
    if (j->relu)
      for (size_t c = 0; c < cols; c++) {
        float v = o[c] + b[c];
        o[c] = v > 0.0f ? v : 0.0f;
      }
    else
      for (size_t c = 0; c < cols; c++)
        o[c] += b[c];
  }
}

static void bias_act(float *out, const float *b, size_t rows, size_t cols,
                     bool relu) {
  rows_job j = {.out = out, .b = b, .cols = cols, .relu = relu};
  nn_parallel_for(rows, min_rows(cols), bias_act_range, &j);
}

/* Threads take ranges of 16 columns, so the sums do not depend on the
 * thread count. */
typedef struct bias_grad_job {
  float *db;
  const float *dout;
  size_t rows, cols;
} bias_grad_job;

static void bias_grad_range(void *ctx, size_t first, size_t end) {
  const bias_grad_job *j = ctx;
  size_t c0 = first * 16, c1 = end * 16 < j->cols ? end * 16 : j->cols;
  float *restrict db = j->db;
  for (size_t c = c0; c < c1; c++)
    db[c] = 0.0f;
  for (size_t r = 0; r < j->rows; r++) {
    const float *restrict d = j->dout + r * j->cols;
    for (size_t c = c0; c < c1; c++)
      db[c] += d[c];
  }
}

void nn_bias_grad(float *db, const float *dout, size_t rows, size_t cols) {
  bias_grad_job j = {db, dout, rows, cols};
  size_t blocks = (cols + 15) / 16;
  nn_parallel_for(blocks, ROWS_MIN_FLOATS * 4 / (16 * rows + 1) + 1,
                  bias_grad_range, &j);
}

void nn_linear_forward_act(const nn_layer *l, const float *params,
                           const float *in, float *out, int n, bool relu) {
  int fin = (int)nn_shape_size(l->in), fout = l->out.c;
  /* out[n x fout] = in[n x fin] * W^T */
  nn_sgemm(false, true, n, fout, fin, 1.0f, in, fin, params + l->w, fin, 0.0f,
           out, fout);
  bias_act(out, params + l->b, (size_t)n, (size_t)fout, relu);
}

void nn_linear_forward(const nn_layer *l, const float *params, const float *in,
                       float *out, int n) {
  nn_linear_forward_act(l, params, in, out, n, false);
}

void nn_linear_backward(const nn_layer *l, const float *params, const float *in,
                        const float *dout, float *din, float *grad, int n) {
  int fin = (int)nn_shape_size(l->in), fout = l->out.c;
  /* dW[fout x fin] = dout^T * in */
  nn_sgemm(true, false, fout, fin, n, 1.0f, dout, fout, in, fin, 0.0f,
           grad + l->w, fin);
  nn_bias_grad(grad + l->b, dout, (size_t)n, (size_t)fout);
  if (din) /* din[n x fin] = dout * W */
    nn_sgemm(false, false, n, fin, fout, 1.0f, dout, fout, params + l->w, fin,
             0.0f, din, fin);
}

/* A convolution runs image by image: im2col of one image, then its
 * products (forward: the output and the bias pass; backward: the weight
 * gradient's share and the input gradient with its col2im) while that
 * image's patch matrix is still in L2. For conv2 of the CNN one image's
 * matrix is 196 x 800 floats (627 KB); a batch's is far larger than L2, and
 * writing it out in the forward pass to read it back in the backward pass
 * cost more than building it again. Each thread takes a fixed chunk of
 * images and reuses one image-sized slot of the buffers for all of them
 * (slot c for chunk c, so the buffers grow with the chunks, not the batch);
 * its products are small and serial, so nothing is handed between threads
 * inside a layer. */
typedef struct conv_job {
  const nn_layer *l;
  const float *params, *in, *dout;
  float *col, *out, *din, *dcol, *partial;
  size_t n, chunks;
  bool relu;
} conv_job;

/* The kernel columns [*kx0, *kx1) of the patch of output column x (input
 * columns x - pad ..) that fall inside an image of width w. */
static void inside(int x, int w, int k, int pad, int *kx0, int *kx1) {
  *kx0 = x - pad < 0 ? pad - x : 0;
  *kx1 = x - pad + k > w ? w - x + pad : k;
}

/* im2col of one image: row (y, x), one per output position, holds the
 * k x k x c input patch from (y - pad, x - pad), zero where it falls
 * outside the image. For one kernel row ky the patch columns inside the
 * image are one contiguous run of the image row (HWC), copied in one
 * piece. */
static void im2col_image(const nn_layer *l, const float *img, float *col) {
  int h = l->in.h, w = l->in.w, c = l->in.c, k = l->ksize, pad = l->pad;
  size_t row_len = (size_t)k * k * c, kc = (size_t)k * c;
  float *restrict row = col;
  for (int y = 0; y < l->out.h; y++)
    for (int x = 0; x < l->out.w; x++, row += row_len) {
      int kx0, kx1;
      inside(x, w, k, pad, &kx0, &kx1);
      size_t lead = (size_t)kx0 * c, run = (size_t)(kx1 - kx0) * c;
      for (int ky = 0; ky < k; ky++) {
        float *restrict dst = row + (size_t)ky * kc;
        int iy = y + ky - pad;
        if (iy < 0 || iy >= h) {
          memset(dst, 0, kc * sizeof *dst);
          continue;
        }
        const float *restrict src =
            img + ((size_t)iy * w + (size_t)(x - pad + kx0)) * c;
        for (size_t i = 0; i < lead; i++)
          dst[i] = 0.0f;
        for (size_t i = 0; i < run; i++)
          dst[lead + i] = src[i];
        for (size_t i = lead + run; i < kc; i++)
          dst[i] = 0.0f;
      }
    }
}

/* col2im of one image: the adjoint of im2col; each input's gradient is the
 * sum of the patch gradients that cover it, added run by run in a fixed
 * order. */
static void col2im_image(const nn_layer *l, const float *col, float *img) {
  int h = l->in.h, w = l->in.w, c = l->in.c, k = l->ksize, pad = l->pad;
  size_t row_len = (size_t)k * k * c, kc = (size_t)k * c;
  const float *row = col;
  memset(img, 0, (size_t)h * w * c * sizeof *img);
  for (int y = 0; y < l->out.h; y++)
    for (int x = 0; x < l->out.w; x++, row += row_len) {
      int kx0, kx1;
      inside(x, w, k, pad, &kx0, &kx1);
      size_t lead = (size_t)kx0 * c, run = (size_t)(kx1 - kx0) * c;
      for (int ky = 0; ky < k; ky++) {
        int iy = y + ky - pad;
        if (iy < 0 || iy >= h)
          continue;
        const float *restrict src = row + (size_t)ky * kc + lead;
        float *restrict dst =
            img + ((size_t)iy * w + (size_t)(x - pad + kx0)) * c;
        for (size_t i = 0; i < run; i++)
          dst[i] += src[i];
      }
    }
}

/* Rows of one image's patch matrix (its output positions), their length,
 * and its size. */
static int conv_rows(const nn_layer *l) { return l->out.h * l->out.w; }
static int conv_row_len(const nn_layer *l) {
  return l->ksize * l->ksize * l->in.c;
}
static size_t conv_col_size(const nn_layer *l) {
  return (size_t)conv_rows(l) * (size_t)conv_row_len(l);
}

static void conv_fwd_range(void *ctx, size_t c0, size_t c1) {
  const conv_job *j = ctx;
  const nn_layer *l = j->l;
  int rows = conv_rows(l), row_len = conv_row_len(l), co = l->out.c;
  size_t in_size = nn_shape_size(l->in);
  for (size_t c = c0; c < c1; c++) {
    float *col = j->col + c * conv_col_size(l);
    size_t first, end;
    nn_conv2d_chunk_images(j->n, j->chunks, c, &first, &end);
    for (size_t e = first; e < end; e++) {
      float *out = j->out + e * rows * (size_t)co;
      im2col_image(l, j->in + e * in_size, col);
      /* out[rows x co] = col[rows x row_len] * W^T */
      nn_sgemm(false, true, rows, co, row_len, 1.0f, col, row_len,
               j->params + l->w, row_len, 0.0f, out, co);
      bias_act(out, j->params + l->b, (size_t)rows, (size_t)co, j->relu);
    }
  }
}

void nn_conv2d_forward_direct(const nn_layer *l, const float *params,
                              const float *in, float *col, float *out, int n,
                              bool relu) {
  conv_job j = {.l = l,
                .params = params,
                .in = in,
                .col = col,
                .out = out,
                .relu = relu,
                .n = (size_t)n,
                .chunks = nn_conv2d_chunks((size_t)n)};
  nn_parallel_for(j.chunks, 1, conv_fwd_range, &j);
}

void nn_conv2d_forward_act(const nn_layer *l, const float *params,
                           const float *in, float *col, float *out, int n,
                           bool relu) {
  if (nn_winograd_applies(l))
    nn_winograd_forward(l, params, in, out, n, relu, col);
  else if (nn_conv_gray_applies(l))
    nn_conv_gray_forward(l, params, in, col, out, n, relu);
  else
    nn_conv2d_forward_direct(l, params, in, col, out, n, relu);
}

void nn_conv2d_forward(const nn_layer *l, const float *params, const float *in,
                       float *col, float *out, int n) {
  nn_conv2d_forward_act(l, params, in, col, out, n, false);
}

/* Backward over chunk c of the images: the chunk's share of dW^T
 * (row_len x co, into partial c: col^T * dout reads the patch matrix where
 * it lies, on the built-in kernel, without packing it) summed over its
 * images in order, and each image's input gradient. */
static void conv_bwd_chunk(const conv_job *j, size_t c) {
  const nn_layer *l = j->l;
  int rows = conv_rows(l), row_len = conv_row_len(l), co = l->out.c;
  size_t in_size = nn_shape_size(l->in), col_size = conv_col_size(l);
  size_t first, end;
  nn_conv2d_chunk_images(j->n, j->chunks, c, &first, &end);
  float *col = j->col + c * col_size;
  float *partial = j->partial + c * (size_t)row_len * co;
  for (size_t e = first; e < end; e++) {
    const float *dout = j->dout + e * rows * (size_t)co;
    im2col_image(l, j->in + e * in_size, col);
    nn_sgemm_builtin(true, false, row_len, co, rows, 1.0f, col, row_len, dout,
                     co, e == first ? 0.0f : 1.0f, partial, co);
    if (!j->din)
      continue;
    float *dcol = j->dcol + c * col_size;
    /* dcol[rows x row_len] = dout * W */
    nn_sgemm(false, false, rows, row_len, co, 1.0f, dout, co, j->params + l->w,
             row_len, 0.0f, dcol, row_len);
    col2im_image(l, dcol, j->din + e * in_size);
  }
}

static void conv_bwd_range(void *ctx, size_t first, size_t end) {
  for (size_t c = first; c < end; c++)
    conv_bwd_chunk(ctx, c);
}

size_t nn_conv2d_max_chunks(size_t n) {
  /* Cached: buffers sized by it must stay large enough for the process's
   * life. */
  static atomic_int cores;
  int have = atomic_load(&cores);
  if (!have) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    have = online < 1 ? 1 : online > 1024 ? 1024 : (int)online;
    atomic_store(&cores, have);
  }
  return n < (size_t)have ? n : (size_t)have;
}

size_t nn_conv2d_chunks(size_t n) {
  size_t threads = (size_t)nn_threads_get(), most = nn_conv2d_max_chunks(n);
  return most < threads ? most : threads;
}

void nn_conv2d_chunk_images(size_t n, size_t chunks, size_t c, size_t *first,
                            size_t *end) {
  *first = c * n / chunks;
  *end = (c + 1) * n / chunks;
}

void nn_conv2d_sum_partials(const float *partial, size_t chunks, int row_len,
                            int co, float *dw) {
  size_t stride = (size_t)row_len * co;
  for (int o = 0; o < co; o++)
    for (int r = 0; r < row_len; r++) {
      const float *p = partial + (size_t)r * co + o;
      float sum = p[0];
      for (size_t c = 1; c < chunks; c++)
        sum += p[c * stride];
      dw[(size_t)o * row_len + r] = sum;
    }
}

void nn_conv2d_backward_direct(const nn_layer *l, const float *params,
                               const float *in, float *col, const float *dout,
                               float *din, float *scratch, float *grad, int n) {
  size_t chunks = nn_conv2d_chunks((size_t)n);
  size_t dcol_size = din ? chunks * conv_col_size(l) : 0;
  conv_job j = {.l = l,
                .params = params,
                .in = in,
                .dout = dout,
                .col = col,
                .din = din,
                .dcol = scratch,
                .partial = scratch + dcol_size,
                .n = (size_t)n,
                .chunks = chunks};
  nn_parallel_for(chunks, 1, conv_bwd_range, &j);
  int row_len = conv_row_len(l), co = l->out.c;
  nn_conv2d_sum_partials(j.partial, chunks, row_len, co, grad + l->w);
  nn_bias_grad(grad + l->b, dout, (size_t)n * conv_rows(l), (size_t)co);
}

void nn_conv2d_backward(const nn_layer *l, const float *params, const float *in,
                        float *col, const float *dout, float *din,
                        float *scratch, float *grad, int n) {
  if (nn_winograd_applies(l))
    nn_winograd_backward(l, params, in, dout, din, grad, n, scratch);
  else if (nn_conv_gray_applies(l) && !din) /* its input gradient: im2col */
    nn_conv_gray_backward_weights(l, in, dout, col, scratch, grad, n);
  else
    nn_conv2d_backward_direct(l, params, in, col, dout, din, scratch, grad, n);
}

/* The im2col path's needs: an image's patch matrix per chunk (forward, and
 * backward to build it again) and, backward, an image's patch gradients
 * per chunk when din is wanted, and a partial weight gradient per chunk
 * (the one-channel path's partials are its 25 taps and the bias: one row
 * more). */
static size_t direct_col(const nn_layer *l, int max_batch) {
  return nn_conv2d_max_chunks((size_t)max_batch) * conv_col_size(l);
}

static size_t direct_scratch(const nn_layer *l, int max_batch, bool din) {
  size_t chunks = nn_conv2d_max_chunks((size_t)max_batch);
  return (din ? chunks * conv_col_size(l) : 0) +
         chunks * (size_t)l->out.c * (conv_row_len(l) + 1);
}

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

/* Both paths' needs, so that the direct one stays callable on any work
 * (the tests compare the two on the same buffers). */
size_t nn_conv2d_col_floats(const nn_layer *l, int max_batch) {
  size_t wino = nn_winograd_applies(l)
                    ? nn_winograd_scratch_floats(l, max_batch, false)
                    : 0;
  size_t gray =
      nn_conv_gray_applies(l) ? nn_conv_gray_scratch(l, max_batch) : 0;
  return max2(direct_col(l, max_batch), max2(wino, gray));
}

size_t nn_conv2d_scratch_floats(const nn_layer *l, int max_batch, bool din) {
  size_t wino = nn_winograd_applies(l)
                    ? nn_winograd_scratch_floats(l, max_batch, true)
                    : 0;
  return max2(direct_scratch(l, max_batch, din), wino);
}

/* Only what nn_conv2d_forward_act and nn_conv2d_backward will use on this
 * CPU: a network's work needs no room for the path it never takes (for the
 * CNN's second layer at batch 32, the im2col path's 20 MB). */
size_t nn_conv2d_run_col_floats(const nn_layer *l, int max_batch, bool din) {
  if (nn_winograd_applies(l))
    return nn_winograd_scratch_floats(l, max_batch, false);
  if (nn_conv_gray_applies(l))
    return din ? max2(direct_col(l, max_batch),
                      nn_conv_gray_scratch(l, max_batch))
               : nn_conv_gray_scratch(l, max_batch);
  return direct_col(l, max_batch);
}

size_t nn_conv2d_run_scratch_floats(const nn_layer *l, int max_batch,
                                    bool din) {
  if (nn_winograd_applies(l))
    return nn_winograd_scratch_floats(l, max_batch, true);
  return direct_scratch(l, max_batch, din);
}

/* Max-pooling, split over examples. Within a window the candidates are
 * taken in the order (0,0), (0,1), (1,0), (1,1) and a later one wins only
 * when strictly greater; the selects are branch-free over the channels. */
typedef struct pool_job {
  const nn_layer *l;
  const float *in, *out, *dout;
  float *dst;
  uint32_t *argmax;
  const uint32_t *arg;
  bool relu;
} pool_job;

static void maxpool_fwd_range(void *ctx, size_t first, size_t end) {
  const pool_job *j = ctx;
  const nn_layer *l = j->l;
  int w = l->in.w, c = l->in.c, oh = l->out.h, ow = l->out.w;
  size_t in_size = nn_shape_size(l->in), out_size = nn_shape_size(l->out);
  for (size_t e = first; e < end; e++) {
    size_t base = e * in_size;
    float *restrict out = j->dst + e * out_size;
    uint32_t *restrict arg = j->argmax + e * out_size;
    for (int y = 0; y < oh; y++)
      for (int x = 0; x < ow; x++, out += c, arg += c) {
        size_t o0 = base + ((size_t)(2 * y) * w + 2 * (size_t)x) * c;
        size_t o1 = o0 + (size_t)c, o2 = o0 + (size_t)w * c, o3 = o2 + c;
        const float *restrict p0 = j->in + o0, *restrict p1 = j->in + o1;
        const float *restrict p2 = j->in + o2, *restrict p3 = j->in + o3;
        for (int ch = 0; ch < c; ch++) {
          float best = p0[ch];
          uint32_t at = (uint32_t)(o0 + ch);
          at = p1[ch] > best ? (uint32_t)(o1 + ch) : at;
          best = p1[ch] > best ? p1[ch] : best;
          at = p2[ch] > best ? (uint32_t)(o2 + ch) : at;
          best = p2[ch] > best ? p2[ch] : best;
          at = p3[ch] > best ? (uint32_t)(o3 + ch) : at;
          best = p3[ch] > best ? p3[ch] : best;
          out[ch] = best;
          arg[ch] = at;
        }
      }
  }
}

void nn_maxpool2_forward(const nn_layer *l, const float *in, float *out,
                         uint32_t *argmax, int n) {
  pool_job j = {.l = l, .in = in, .dst = out, .argmax = argmax};
  nn_parallel_for((size_t)n, min_rows(nn_shape_size(l->in)), maxpool_fwd_range,
                  &j);
}

/* Writes every input of each example: the window winner gets the output's
 * gradient (masked by out > 0 when the pooled input came from a ReLU), the
 * rest and the dropped odd edge get 0. */
static void maxpool_bwd_range(void *ctx, size_t first, size_t end) {
  const pool_job *j = ctx;
  const nn_layer *l = j->l;
  size_t in_size = nn_shape_size(l->in), out_size = nn_shape_size(l->out);
  memset(j->dst + first * in_size, 0, (end - first) * in_size * sizeof(float));
  /* Windows do not overlap, so each input receives at most one gradient. */
  for (size_t i = first * out_size; i < end * out_size; i++) {
    float d = j->dout[i];
    if (j->relu)
      d = j->out[i] > 0.0f ? d : 0.0f;
    j->dst[j->arg[i]] = d;
  }
}

void nn_maxpool2_backward_relu(const nn_layer *l, const float *out,
                               const float *dout, const uint32_t *argmax,
                               float *din, int n) {
  pool_job j = {.l = l,
                .out = out,
                .dout = dout,
                .dst = din,
                .arg = argmax,
                .relu = out != NULL};
  nn_parallel_for((size_t)n, min_rows(nn_shape_size(l->in)), maxpool_bwd_range,
                  &j);
}

void nn_maxpool2_backward(const nn_layer *l, const float *dout,
                          const uint32_t *argmax, float *din, int n) {
  nn_maxpool2_backward_relu(l, NULL, dout, argmax, din, n);
}

typedef struct relu_job {
  const float *in, *out, *dout;
  float *dst;
} relu_job;

static void relu_fwd_range(void *ctx, size_t first, size_t end) {
  const relu_job *j = ctx;
  const float *in = j->in;
  float *out = j->dst;
  for (size_t i = first; i < end; i++)
    out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

/* in and out may be the same buffer (the net runs ReLU in place). */
void nn_relu_forward(const float *in, float *out, size_t count) {
  relu_job j = {.in = in, .dst = out};
  nn_parallel_for(count, ROWS_MIN_FLOATS, relu_fwd_range, &j);
}

static void relu_bwd_range(void *ctx, size_t first, size_t end) {
  const relu_job *j = ctx;
  const float *out = j->out, *dout = j->dout;
  float *din = j->dst;
  for (size_t i = first; i < end; i++)
    din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

/* din and dout may be the same buffer. */
void nn_relu_backward(const float *out, const float *dout, float *din,
                      size_t count) {
  relu_job j = {.out = out, .dout = dout, .dst = din};
  nn_parallel_for(count, ROWS_MIN_FLOATS, relu_bwd_range, &j);
}

void nn_dropout_forward(const nn_layer *l, const float *in, float *out,
                        uint8_t *mask, size_t count, uint64_t seed) {
  if (!mask || l->drop == 0.0f) {
    if (mask)
      memset(mask, 1, count);
    memcpy(out, in, count * sizeof *out);
    return;
  }
  nn_rng rng;
  nn_rng_seed(&rng, seed);
  float scale = 1.0f / (1.0f - l->drop);
  for (size_t i = 0; i < count; i++) {
    mask[i] = nn_rng_uniform(&rng) >= l->drop;
    out[i] = mask[i] ? in[i] * scale : 0.0f;
  }
}

void nn_dropout_backward(const nn_layer *l, const uint8_t *mask,
                         const float *dout, float *din, size_t count) {
  float scale = 1.0f / (1.0f - l->drop);
  for (size_t i = 0; i < count; i++)
    din[i] = mask[i] ? dout[i] * scale : 0.0f;
}
