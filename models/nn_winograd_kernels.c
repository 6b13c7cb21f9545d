/* The transforms and range bodies of nn_winograd.c (see there for the
 * algorithm and the layouts) for one ISA: CMake compiles this file once per
 * ISA with its -m flags, NN_VL and NN_KERNEL_ISA (the name in the exported
 * nn_wg_isa_NAME), so a vector of channels is one register of the target.
 *
 * The transforms work on vectors of NN_VL channels (the channels are
 * contiguous in NHWC) with GCC's vector extension, which Clang shares:
 * written as plain loops, the six-stream transforms defeat the
 * vectoriser's alias checks. A last group of fewer channels goes through
 * the same code, loaded with zeros past its width. */
#include "nn_winograd_kernels.h"

#include <string.h>

#include "nn_gemm.h"
#include "nn_isa.h"
#include "nn_layers.h"

#ifndef NN_KERNEL_ISA
#error "nn_winograd_kernels.c is compiled with -DNN_KERNEL_ISA=name"
#endif

enum { LANES = NN_VL };
typedef nn_vec vec;

static NN_INLINE vec vload(const float *p, int w) {
  vec v = {0};
  memcpy(&v, p, (size_t)w * sizeof(float));
  return v;
}

static NN_INLINE void vstore(float *p, vec v, int w) {
  memcpy(p, &v, (size_t)w * sizeof(float));
}

/* Lanes p[0], p[stride], ... (a column of a row-major matrix). */
static NN_INLINE vec vgather(const float *p, size_t stride, int w) {
  float f[LANES] = {0};
  for (int c = 0; c < w; c++)
    f[c] = p[c * stride];
  return vload(f, LANES);
}

static NN_INLINE void vscatter(float *p, size_t stride, vec v, int w) {
  float f[LANES];
  vstore(f, v, LANES);
  for (int c = 0; c < w; c++)
    p[c * stride] = f[c];
}

/* One-dimensional transforms: six (or five, or two) vectors spaced is
 * apart in, to vectors spaced os apart. */

/* v = B^T d */
static NN_INLINE void bt6(const vec *d, int is, vec *v, int os) {
  vec d0 = d[0], d1 = d[is], d2 = d[2 * is];
  vec d3 = d[3 * is], d4 = d[4 * is], d5 = d[5 * is];
  vec t = d4 - d2, u = d3 - d1;
  v[0] = 4.0f * d0 - 5.0f * d2 + d4;
  v[os] = (d3 + d4) - 4.0f * (d1 + d2);
  v[2 * os] = (d4 - d3) + 4.0f * (d1 - d2);
  v[3 * os] = t + 2.0f * u;
  v[4 * os] = t - 2.0f * u;
  v[5 * os] = 4.0f * d1 - 5.0f * d3 + d5;
}

/* d = B v, the adjoint of bt6. */
static NN_INLINE void b6(const vec *v, int is, vec *d, int os) {
  vec v0 = v[0], v1 = v[is], v2 = v[2 * is];
  vec v3 = v[3 * is], v4 = v[4 * is], v5 = v[5 * is];
  d[0] = 4.0f * v0;
  d[os] = 4.0f * (v2 - v1 + v5) + 2.0f * (v4 - v3);
  d[2 * os] = -5.0f * v0 - 4.0f * (v1 + v2) - (v3 + v4);
  d[3 * os] = (v1 - v2) + 2.0f * (v3 - v4) - 5.0f * v5;
  d[4 * os] = v0 + v1 + v2 + v3 + v4;
  d[5 * os] = v5;
}

/* y = A^T m (six to two) */
static NN_INLINE void at6(const vec *m, int is, vec *y, int os) {
  vec m0 = m[0], m1 = m[is], m2 = m[2 * is];
  vec m3 = m[3 * is], m4 = m[4 * is], m5 = m[5 * is];
  y[0] = m0 + m1 + m2 + m3 + m4;
  y[os] = (m1 - m2) + 2.0f * (m3 - m4) + m5;
}

/* m = A y (two to six), the adjoint of at6. */
static NN_INLINE void a6(const vec *y, int is, vec *m, int os) {
  vec y0 = y[0], y1 = y[is];
  m[0] = y0;
  m[os] = y0 + y1;
  m[2 * os] = y0 - y1;
  m[3 * os] = y0 + 2.0f * y1;
  m[4 * os] = y0 - 2.0f * y1;
  m[5 * os] = y1;
}

/* u = G g (five to six) */
static NN_INLINE void g6(const vec *g, int is, vec *u, int os) {
  const float sixth = 1.0f / 6.0f;
  vec g0 = g[0], g1 = g[is], g2 = g[2 * is], g3 = g[3 * is], g4 = g[4 * is];
  vec even = g0 + g2 + g4, odd = g1 + g3;
  vec even2 = 0.25f * g0 + g2 + 4.0f * g4, odd2 = 0.5f * g1 + 2.0f * g3;
  u[0] = 0.25f * g0;
  u[os] = -(even + odd) * sixth;
  u[2 * os] = -(even - odd) * sixth;
  u[3 * os] = (even2 + odd2) * sixth;
  u[4 * os] = (even2 - odd2) * sixth;
  u[5 * os] = g4;
}

/* g = G^T u (six to five), the adjoint of g6. */
static NN_INLINE void gt6(const vec *u, int is, vec *g, int os) {
  const float sixth = 1.0f / 6.0f;
  vec u0 = u[0], u1 = u[is], u2 = u[2 * is];
  vec u3 = u[3 * is], u4 = u[4 * is], u5 = u[5 * is];
  vec s12 = u1 + u2, d21 = u2 - u1, s34 = u3 + u4, d34 = u3 - u4;
  g[0] = 0.25f * u0 - s12 * sixth + s34 * (1.0f / 24.0f);
  g[os] = d21 * sixth + d34 * (1.0f / 12.0f);
  g[2 * os] = (s34 - s12) * sixth;
  g[3 * os] = d21 * sixth + d34 * (1.0f / 3.0f);
  g[4 * os] = -s12 * sixth + s34 * (2.0f / 3.0f) + u5;
}

/* The two-dimensional transform of one tile by the one-dimensional f,
 * which maps n_in vectors to n_out: first down the columns of in (n_in x
 * n_in, index y * n_in + x), then along the rows of the result, giving
 * out (n_out x n_out). f is a constant in every caller, so it inlines. */
typedef void (*tf1d)(const vec *in, int is, vec *out, int os);
static NN_INLINE void tf2d(tf1d f, int n_in, int n_out, const vec *in,
                           vec *out) {
  vec t[XI];
  for (int x = 0; x < n_in; x++)
    f(in + x, n_in, t + x, n_in);
  for (int i = 0; i < n_out; i++)
    f(t + n_in * i, 1, out + n_out * i, 1);
}

/* U = G g G^T: g[25] to u[36] */
static NN_INLINE void weight_tf(const vec *g, vec *u) { tf2d(g6, 5, 6, g, u); }

/* dg = G^T du G: du[36] to dg[25] */
static NN_INLINE void weight_adj(const vec *du, vec *dg) {
  tf2d(gt6, 6, 5, du, dg);
}

/* V = B^T d B: d[36] to v[36] */
static NN_INLINE void input_tf(const vec *d, vec *v) { tf2d(bt6, 6, 6, d, v); }

/* dd = B dv B^T: dv[36] to dd[36] */
static NN_INLINE void input_adj(const vec *dv, vec *dd) {
  tf2d(b6, 6, 6, dv, dd);
}

/* Y = A^T M A: m[36] to y[4] */
static NN_INLINE void output_tf(const vec *m, vec *y) { tf2d(at6, 6, 2, m, y); }

/* dM = A dY A^T: dy[4] to dm[36] */
static NN_INLINE void output_adj(const vec *dy, vec *dm) {
  tf2d(a6, 2, 6, dy, dm);
}

/* nn_sgemm is fastest on untransposed operands for these shapes, so the
 * forward wants U[xi] as in_c x out_c, the backward as out_c x in_c, and
 * the weight gradient comes out as dU^T (in_c x out_c). The weights are
 * out_c x (25 in_c): transforms to and from the in_c x out_c layouts run
 * over LANES output channels at a time, gathering or scattering the weights
 * (25 in_c out_c floats, little next to the products). */

/* U[xi][i][o] for output channels [o0, o0 + w), every input channel. */
static NN_INLINE void weights_t_group(const wg_job *j, int o0, int w) {
  int ci = j->g.ci, co = j->g.co;
  size_t stride = 25 * (size_t)ci;
  for (int i = 0; i < ci; i++) {
    vec g[25], u[XI];
    const float *src = j->w + (size_t)o0 * stride + i;
    for (int k = 0; k < 25; k++)
      g[k] = vgather(src + (size_t)k * ci, stride, w);
    weight_tf(g, u);
    for (int xi = 0; xi < XI; xi++)
      vstore(j->u + xi * j->g.xu + (size_t)i * co + o0, u[xi], w);
  }
}

/* U[xi][o][i] for output channel o and input channels [c0, c0 + w). */
static NN_INLINE void weights_group(const wg_job *j, size_t o, int c0, int w) {
  int ci = j->g.ci;
  vec g[25], u[XI];
  const float *src = j->w + o * 25 * ci + c0;
  for (int k = 0; k < 25; k++)
    g[k] = vload(src + (size_t)k * ci, w);
  weight_tf(g, u);
  for (int xi = 0; xi < XI; xi++)
    vstore(j->u + xi * j->g.xu + o * ci + c0, u[xi], w);
}

/* dW = G^T dU G for output channels [o0, o0 + w), every input channel. */
static NN_INLINE void dweights_group(const wg_job *j, int o0, int w) {
  int ci = j->g.ci, co = j->g.co;
  size_t stride = 25 * (size_t)ci;
  const float *du = du_of(j);
  for (int i = 0; i < ci; i++) {
    vec u[XI], g[25];
    for (int xi = 0; xi < XI; xi++)
      u[xi] = vload(du + xi * j->g.xu + (size_t)i * co + o0, w);
    weight_adj(u, g);
    float *dst = j->dw + (size_t)o0 * stride + i;
    for (int k = 0; k < 25; k++)
      vscatter(dst + (size_t)k * ci, stride, g[k], w);
  }
}

/* The range bodies: groups [first, end) of LANES output channels, or output
 * channels [first, end). Full groups get the width as a constant, so that
 * their loads and stores are single vector moves. */
static NN_INLINE void weights_t_body(const wg_job *j, size_t first,
                                     size_t end) {
  for (size_t grp = first; grp < end; grp++) {
    int o0 = (int)grp * LANES;
    if (j->g.co - o0 >= LANES)
      weights_t_group(j, o0, LANES);
    else
      weights_t_group(j, o0, j->g.co - o0);
  }
}

static NN_INLINE void weights_body(const wg_job *j, size_t first, size_t end) {
  int ci = j->g.ci;
  for (size_t o = first; o < end; o++) {
    int c0 = 0;
    for (; c0 + LANES <= ci; c0 += LANES)
      weights_group(j, o, c0, LANES);
    if (c0 < ci)
      weights_group(j, o, c0, ci - c0);
  }
}

static NN_INLINE void dweights_body(const wg_job *j, size_t first, size_t end) {
  for (size_t grp = first; grp < end; grp++) {
    int o0 = (int)grp * LANES;
    if (j->g.co - o0 >= LANES)
      dweights_group(j, o0, LANES);
    else
      dweights_group(j, o0, j->g.co - o0);
  }
}

/* Locates tile `tile` of a chunk starting at image `first`: its image and
 * the top-left corner of its input window. */
static NN_INLINE void tile_at(const geom *g, size_t first, size_t tile,
                              size_t *img, int *y0, int *x0) {
  size_t r = tile % (size_t)g->tiles;
  *img = first + tile / (size_t)g->tiles;
  *y0 = 2 * (int)(r / (size_t)g->tw) - 2;
  *x0 = 2 * (int)(r % (size_t)g->tw) - 2;
}

/* V[xi] of one tile for channels [c0, c0 + w): v points at the tile's row
 * of V[0], xs floats apart per xi; the window is zero outside the image. */
static NN_INLINE void input_tile(int w, const wg_job *j, float *img, int y0,
                                 int x0, int c0, float *v, size_t xs) {
  const geom *g = &j->g;
  vec d[XI], r[XI];
  bool inside = y0 >= 0 && x0 >= 0 && y0 + 6 <= g->h && x0 + 6 <= g->w;
  for (int y = 0; y < 6; y++)
    for (int x = 0; x < 6; x++) {
      int iy = y0 + y, ix = x0 + x;
      if (inside || (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w))
        d[y * 6 + x] =
            vload(img + ((size_t)iy * g->w + (size_t)ix) * g->ci + c0, w);
      else
        d[y * 6 + x] = (vec){0};
    }
  input_tf(d, r);
  for (int xi = 0; xi < XI; xi++)
    vstore(v + xi * xs, r[xi], w);
}

/* The outputs of one tile for channels [c0, c0 + w): A^T M A, plus the
 * bias, through the ReLU when relu; those past the image edge dropped. */
static NN_INLINE void output_tile(int w, const wg_job *j, float *img, int y0,
                                  int x0, int c0, float *m, size_t xs) {
  const geom *g = &j->g;
  vec mv[XI], y[4];
  for (int xi = 0; xi < XI; xi++)
    mv[xi] = vload(m + xi * xs, w);
  output_tf(mv, y);
  vec b = vload(j->b + c0, w);
  for (int r = 0; r < 2; r++)
    for (int x = 0; x < 2; x++) {
      int oy = y0 + 2 + r, ox = x0 + 2 + x;
      if (oy >= g->h || ox >= g->w)
        continue;
      vec o = y[r * 2 + x] + b;
      if (j->relu) /* NaN and -0 become +0, as in the direct path */
        o = NN_VRELU(o);
      vstore(img + ((size_t)oy * g->w + (size_t)ox) * g->co + c0, o, w);
    }
}

/* dM[xi] of one tile for channels [c0, c0 + w): A dY A^T, with dY zero
 * past the image edge. */
static NN_INLINE void dout_tile(int w, const wg_job *j, float *img, int y0,
                                int x0, int c0, float *m, size_t xs) {
  const geom *g = &j->g;
  vec dy[4], dm[XI];
  for (int r = 0; r < 2; r++)
    for (int x = 0; x < 2; x++) {
      int oy = y0 + 2 + r, ox = x0 + 2 + x;
      dy[r * 2 + x] =
          oy < g->h && ox < g->w
              ? vload(img + ((size_t)oy * g->w + (size_t)ox) * g->co + c0, w)
              : (vec){0};
    }
  output_adj(dy, dm);
  for (int xi = 0; xi < XI; xi++)
    vstore(m + xi * xs, dm[xi], w);
}

/* Adds B dV B^T of one tile, channels [c0, c0 + w), into its input window,
 * the part inside the image. */
static NN_INLINE void dinput_tile(int w, const wg_job *j, float *img, int y0,
                                  int x0, int c0, float *v, size_t xs) {
  const geom *g = &j->g;
  vec dv[XI], dd[XI];
  for (int xi = 0; xi < XI; xi++)
    dv[xi] = vload(v + xi * xs, w);
  input_adj(dv, dd);
  for (int y = 0; y < 6; y++)
    for (int x = 0; x < 6; x++) {
      int iy = y0 + y, ix = x0 + x;
      if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
        continue;
      float *dst = img + ((size_t)iy * g->w + (size_t)ix) * g->ci + c0;
      vstore(dst, vload(dst, w) + dd[y * 6 + x], w);
    }
}

/* Runs f on tiles [t0, t0 + count) of the chunk starting at image first,
 * channel group after channel group: whole groups of LANES, which get the
 * width as a constant (single vector moves once f is inlined), then the
 * rest. img is the tile's image in base, chans channels deep; buf its row
 * of the block, tile_stride floats per tile, xs floats per xi. Each f
 * writes only the side it produces (the image or the block), so base and
 * buf are taken without const. */
typedef void (*tile_fn)(int w, const wg_job *j, float *img, int y0, int x0,
                        int c0, float *buf, size_t xs);
static NN_INLINE void each_tile(const wg_job *j, size_t first, size_t t0,
                                size_t count, float *base, int chans,
                                float *buf, size_t tile_stride, size_t xs,
                                tile_fn f) {
  const geom *g = &j->g;
  size_t img_size = (size_t)g->h * g->w * chans;
  for (size_t t = 0; t < count; t++) {
    size_t e;
    int y0, x0;
    tile_at(g, first, t0 + t, &e, &y0, &x0);
    float *img = base + e * img_size, *bt = buf + t * tile_stride;
    int c0 = 0;
    for (; c0 + LANES <= chans; c0 += LANES)
      f(LANES, j, img, y0, x0, c0, bt + c0, xs);
    if (c0 < chans)
      f(chans - c0, j, img, y0, x0, c0, bt + c0, xs);
  }
}

/* V of the block's tiles (tile-major, ldv apart). */
static NN_INLINE void input_block(const wg_job *j, size_t first, size_t t0,
                                  size_t count, float *v) {
  each_tile(j, first, t0, count, (float *)j->in, j->g.ci, v, j->g.ldv, j->g.ci,
            input_tile);
}

/* The outputs of the block's tiles from M (tile-major, ldm apart). */
static NN_INLINE void output_block(const wg_job *j, size_t first, size_t t0,
                                   size_t count, float *m) {
  each_tile(j, first, t0, count, j->out, j->g.co, m, j->g.ldm, j->g.co,
            output_tile);
}

/* dM of the block's tiles (xi-major: cap tiles of co per xi). */
static NN_INLINE void dout_block(const wg_job *j, size_t first, size_t t0,
                                 size_t count, float *m) {
  each_tile(j, first, t0, count, (float *)j->dout, j->g.co, m, j->g.co,
            j->cap * j->g.co, dout_tile);
}

/* Scatters the block's dV into din, tile after tile in order. */
static NN_INLINE void dinput_block(const wg_job *j, size_t first, size_t t0,
                                   size_t count, float *v) {
  each_tile(j, first, t0, count, j->din, j->g.ci, v, j->g.ldv, j->g.ci,
            dinput_tile);
}

/* The forward of chunks [first_chunk, end_chunk), block after block. */
static NN_INLINE void forward_body(const wg_job *j, size_t first_chunk,
                                   size_t end_chunk) {
  const geom *g = &j->g;
  size_t xu = g->xu;
  int ldv = g->ldv, ldm = g->ldm;
  for (size_t c = first_chunk; c < end_chunk; c++) {
    size_t first, end;
    nn_conv2d_chunk_images(j->n, j->chunks, c, &first, &end);
    float *v = j->regions + c * j->region, *m = v + j->cap * ldv;
    size_t tiles = (end - first) * (size_t)g->tiles;
    for (size_t t0 = 0; t0 < tiles; t0 += j->cap) {
      size_t count = tiles - t0 < j->cap ? tiles - t0 : j->cap;
      input_block(j, first, t0, count, v);
      /* M[xi] (count x co) = V[xi] (count x ci) U[xi] (ci x co) */
      for (int xi = 0; xi < XI; xi++)
        nn_sgemm(false, false, (int)count, g->co, g->ci, 1.0f, v + xi * g->ci,
                 ldv, j->u + xi * xu, g->co, 0.0f, m + xi * g->co, ldm);
      output_block(j, first, t0, count, m);
    }
  }
}

/* The bias gradient is the sum of dY, and a6 makes dM[7] (row 1 of A is
 * (1, 1), at both ends) each tile's sum of dY: db += the column sums of the
 * block's dM[7] (count x co), which is still in cache, instead of a pass
 * over dout. */
static NN_INLINE void bias_block(const float *restrict m7, size_t count, int co,
                                 float *restrict db) {
  for (size_t t = 0; t < count; t++)
    for (int c = 0; c < co; c++)
      db[c] += m7[t * (size_t)co + c];
}

/* A chunk's partial dU^T and bias gradient (over its tiles, block after
 * block) and its images' input gradient. */
static NN_INLINE void backward_body(const wg_job *j, size_t first_chunk,
                                    size_t end_chunk) {
  const geom *g = &j->g;
  size_t xu = g->xu, xm = j->cap * g->co;
  int ldv = g->ldv, ldm = g->ldm;
  size_t img_size = (size_t)g->h * g->w * g->ci;
  for (size_t c = first_chunk; c < end_chunk; c++) {
    size_t first, end;
    nn_conv2d_chunk_images(j->n, j->chunks, c, &first, &end);
    float *v = j->regions + c * j->region, *m = v + j->cap * ldv;
    float *du = m + j->cap * ldm, *db = du + XI * xu;
    memset(db, 0, (size_t)g->co * sizeof *db);
    if (j->din)
      memset(j->din + first * img_size, 0,
             (end - first) * img_size * sizeof(float));
    size_t tiles = (end - first) * (size_t)g->tiles;
    for (size_t t0 = 0; t0 < tiles; t0 += j->cap) {
      size_t count = tiles - t0 < j->cap ? tiles - t0 : j->cap;
      float beta = t0 == 0 ? 0.0f : 1.0f;
      input_block(j, first, t0, count, v);
      dout_block(j, first, t0, count, m);
      bias_block(m + 7 * xm, count, g->co, db);
      /* dU[xi]^T (ci x co) += V[xi]^T dM[xi] */
      for (int xi = 0; xi < XI; xi++)
        nn_sgemm(true, false, g->ci, g->co, (int)count, 1.0f, v + xi * g->ci,
                 ldv, m + xi * xm, g->co, beta, du + xi * xu, g->co);
      if (!j->din)
        continue;
      /* dV[xi] (count x ci) = dM[xi] U[xi] (co x ci), over V, which is
       * done with */
      for (int xi = 0; xi < XI; xi++)
        nn_sgemm(false, false, (int)count, g->ci, g->co, 1.0f, m + xi * xm,
                 g->co, j->u + xi * xu, g->ci, 0.0f, v + xi * g->ci, ldv);
      dinput_block(j, first, t0, count, v);
    }
  }
}

static void forward(void *ctx, size_t b, size_t e) { forward_body(ctx, b, e); }
static void backward(void *ctx, size_t b, size_t e) {
  backward_body(ctx, b, e);
}
static void weights(void *ctx, size_t b, size_t e) { weights_body(ctx, b, e); }
static void weights_t(void *ctx, size_t b, size_t e) {
  weights_t_body(ctx, b, e);
}
static void dweights(void *ctx, size_t b, size_t e) {
  dweights_body(ctx, b, e);
}

const wg_isa NN_ISA_SYM(nn_wg_isa) = {LANES,   forward,   backward,
                                      weights, weights_t, dweights};
