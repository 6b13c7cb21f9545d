/* Layer kernels; see nn_layers.h. Dense work goes through nn_sgemm; the
 * data movement around it (im2col, col2im, pooling) is split over examples
 * with nn_parallel_for, which keeps results independent of timing. */
#include "nn_layers.h"

#include <string.h>

#include "nn_gemm.h"
#include "nn_rng.h"

/* Bias: out[r][j] += b[j] for every row r. */
static void add_bias(float *out, const float *b, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++) {
    float *o = out + r * cols;
    for (size_t j = 0; j < cols; j++)
      o[j] += b[j];
  }
}

/* db[j] = sum over rows of dout[r][j], summed in row order. */
static void bias_grad(float *db, const float *dout, size_t rows, size_t cols) {
  memset(db, 0, cols * sizeof *db);
  for (size_t r = 0; r < rows; r++) {
    const float *d = dout + r * cols;
    for (size_t j = 0; j < cols; j++)
      db[j] += d[j];
  }
}

void nn_linear_forward(const nn_layer *l, const float *params, const float *in,
                       float *out, int n) {
  int fin = (int)nn_shape_size(l->in), fout = l->out.c;
  /* out[n x fout] = in[n x fin] * W^T */
  nn_sgemm(false, true, n, fout, fin, 1.0f, in, fin, params + l->w, fin, 0.0f,
           out, fout);
  add_bias(out, params + l->b, (size_t)n, (size_t)fout);
}

void nn_linear_backward(const nn_layer *l, const float *params, const float *in,
                        const float *dout, float *din, float *grad, int n) {
  int fin = (int)nn_shape_size(l->in), fout = l->out.c;
  /* dW[fout x fin] = dout^T * in */
  nn_sgemm(true, false, fout, fin, n, 1.0f, dout, fout, in, fin, 0.0f,
           grad + l->w, fin);
  bias_grad(grad + l->b, dout, (size_t)n, (size_t)fout);
  if (din) /* din[n x fin] = dout * W */
    nn_sgemm(false, false, n, fin, fout, 1.0f, dout, fout, params + l->w, fin,
             0.0f, din, fin);
}

/* im2col: row (example, y, x) holds the k x k x c input patch around (y, x),
 * zero where it falls outside the image. */
typedef struct conv_job {
  const nn_layer *l;
  const float *in;
  float *col;
  float *din;
  const float *dcol;
} conv_job;

static void im2col_range(void *ctx, size_t first, size_t end) {
  const conv_job *j = ctx;
  const nn_layer *l = j->l;
  int h = l->in.h, w = l->in.w, c = l->in.c, k = l->ksize, pad = k / 2;
  size_t row_len = (size_t)k * k * c, patch = (size_t)c * sizeof(float);
  for (size_t e = first; e < end; e++) {
    const float *img = j->in + e * (size_t)h * w * c;
    float *row = j->col + e * (size_t)h * w * row_len;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++, row += row_len) {
        float *dst = row;
        for (int ky = 0; ky < k; ky++) {
          int iy = y + ky - pad;
          for (int kx = 0; kx < k; kx++, dst += c) {
            int ix = x + kx - pad;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
              memset(dst, 0, patch);
            else
              memcpy(dst, img + ((size_t)iy * w + ix) * c, patch);
          }
        }
      }
  }
}

/* col2im: the adjoint of im2col; each example's input gradient is the sum of
 * the patch gradients that cover it. Examples are independent. */
static void col2im_range(void *ctx, size_t first, size_t end) {
  const conv_job *j = ctx;
  const nn_layer *l = j->l;
  int h = l->in.h, w = l->in.w, c = l->in.c, k = l->ksize, pad = k / 2;
  size_t row_len = (size_t)k * k * c;
  for (size_t e = first; e < end; e++) {
    float *img = j->din + e * (size_t)h * w * c;
    const float *row = j->dcol + e * (size_t)h * w * row_len;
    memset(img, 0, (size_t)h * w * c * sizeof *img);
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++, row += row_len) {
        const float *src = row;
        for (int ky = 0; ky < k; ky++) {
          int iy = y + ky - pad;
          for (int kx = 0; kx < k; kx++, src += c) {
            int ix = x + kx - pad;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
              continue;
            float *dst = img + ((size_t)iy * w + ix) * c;
            for (int ch = 0; ch < c; ch++)
              dst[ch] += src[ch];
          }
        }
      }
  }
}

void nn_conv2d_forward(const nn_layer *l, const float *params, const float *in,
                       float *col, float *out, int n) {
  conv_job j = {.l = l, .in = in, .col = col};
  nn_parallel_for((size_t)n, 1, im2col_range, &j);
  int rows = n * l->in.h * l->in.w, co = l->out.c;
  int row_len = l->ksize * l->ksize * l->in.c;
  /* out[rows x co] = col[rows x row_len] * W^T */
  nn_sgemm(false, true, rows, co, row_len, 1.0f, col, row_len, params + l->w,
           row_len, 0.0f, out, co);
  add_bias(out, params + l->b, (size_t)rows, (size_t)co);
}

void nn_conv2d_backward(const nn_layer *l, const float *params,
                        const float *col, const float *dout, float *din,
                        float *dcol, float *grad, int n) {
  int rows = n * l->in.h * l->in.w, co = l->out.c;
  int row_len = l->ksize * l->ksize * l->in.c;
  /* dW[co x row_len] = dout^T * col */
  nn_sgemm(true, false, co, row_len, rows, 1.0f, dout, co, col, row_len, 0.0f,
           grad + l->w, row_len);
  bias_grad(grad + l->b, dout, (size_t)rows, (size_t)co);
  if (!din)
    return;
  /* dcol[rows x row_len] = dout * W */
  nn_sgemm(false, false, rows, row_len, co, 1.0f, dout, co, params + l->w,
           row_len, 0.0f, dcol, row_len);
  conv_job j = {.l = l, .din = din, .dcol = dcol};
  nn_parallel_for((size_t)n, 1, col2im_range, &j);
}

void nn_maxpool2_forward(const nn_layer *l, const float *in, float *out,
                         uint32_t *argmax, int n) {
  int w = l->in.w, c = l->in.c, oh = l->out.h, ow = l->out.w;
  size_t in_size = nn_shape_size(l->in);
  for (int e = 0; e < n; e++) {
    size_t base = (size_t)e * in_size;
    for (int y = 0; y < oh; y++)
      for (int x = 0; x < ow; x++)
        for (int ch = 0; ch < c; ch++) {
          size_t best = base + ((size_t)(2 * y) * w + 2 * x) * c + ch;
          const size_t cand[3] = {best + c, best + (size_t)w * c,
                                  best + (size_t)w * c + c};
          for (int i = 0; i < 3; i++)
            if (in[cand[i]] > in[best])
              best = cand[i];
          *out++ = in[best];
          *argmax++ = (uint32_t)best;
        }
  }
}

void nn_maxpool2_backward(const nn_layer *l, const float *dout,
                          const uint32_t *argmax, float *din, int n) {
  size_t count = (size_t)n * nn_shape_size(l->out);
  memset(din, 0, (size_t)n * nn_shape_size(l->in) * sizeof *din);
  /* Windows do not overlap, so each input receives at most one gradient. */
  for (size_t i = 0; i < count; i++)
    din[argmax[i]] = dout[i];
}

void nn_relu_forward(const float *in, float *out, size_t count) {
  for (size_t i = 0; i < count; i++)
    out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void nn_relu_backward(const float *out, const float *dout, float *din,
                      size_t count) {
  for (size_t i = 0; i < count; i++)
    din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
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
