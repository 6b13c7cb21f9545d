/* Winograd F(2x2, 5x5) conv2d; see nn_winograd.h.
 *
 * With d the 6x6 input window of an output tile (pad 2), g a 5x5 kernel
 * slice and the interpolation points {0, 1, -1, 2, -2, inf}:
 *   Y = A^T [ sum_ci (G g G^T) . (B^T d B) ] A
 *   A^T = | 1 1  1 1  1 0 |   B^T = | 4  0 -5  0 1 0 |
 *         | 0 1 -1 2 -2 1 |         | 0 -4 -4  1 1 0 |
 *                                   | 0  4 -4 -1 1 0 |
 *   G = |  1/4     0    0     0    0  |   | 0 -2 -1  2 1 0 |
 *       | -1/6  -1/6 -1/6  -1/6 -1/6  |   | 0  2 -1 -2 1 0 |
 *       | -1/6   1/6 -1/6   1/6 -1/6  |   | 0  4  0 -5 0 1 |
 *       | 1/24  1/12  1/6   1/3  2/3  |
 *       | 1/24 -1/12  1/6  -1/3  2/3  |
 *       |   0     0    0     0    1   |
 * These points keep A^T and B^T small integers (the data transforms are
 * exact but for their sums) and put the fractions into G, which runs once
 * per call on the weights; {0, 1, -1, 1/2, -1/2, inf} measured the same
 * float error (max 2.5e-6 of the largest output on random data).
 *
 * (Derived by solving sum_j A^T[i][j] G[j][k] B^T[j][t] = [t == i + k]
 * for B^T, given A^T and G from the points.)
 *
 * Per position xi of the 6x6 transformed tile, the sum over input channels
 * is a GEMM over a block of tiles: M[xi] = V[xi] (tiles x in_c) U[xi]
 * (in_c x out_c). The backward runs the forward's steps transposed:
 * dM = A dY A^T, dV[xi] = dM[xi] U[xi]^T, dX = B dV B^T scattered over
 * the overlapping windows, dU[xi]^T = V[xi]^T dM[xi] summed over tiles,
 * and dW = G^T dU G.
 *
 * Layouts, chosen by measuring nn_sgemm (OpenBLAS) on the CNN's conv2 and
 * the cost of the transforms: V and the forward's M are tile-major (a
 * tile's 36 rows together, so a transform touches one contiguous run),
 * the GEMMs reading them with a row stride; the backward's dM is xi-major,
 * which made the dU product 1.4x faster; U and dU are xi-major. */
#include "nn_winograd.h"

#include <string.h>

#include "nn_isa.h"
#include "nn_layers.h"
#include "nn_winograd_kernels.h"

/* Tiles per block: V and M (or dM) of one block, 36 x tiles x (in_c +
 * out_c) floats, should stay in L2 next to U. */
#define BLOCK_BYTES (512u * 1024u)
#define BLOCK_MIN_TILES 8
#define BLOCK_MAX_TILES 128

/* Below this many input channels the transforms, which run on groups of
 * channels (16 when this was measured, on AVX-512), cost more than the products
 * save: at batch 10 on one thread, 28x28 images to 32 channels, Winograd lost
 * to im2col at 8 and 12 input channels (forward 1.9 against 1.25 ms at 8) and
 * won from 16 on, at any output channel count tried (8 to 64). conv1 of the CNN
 * has 1. */
#define MIN_IN_CHANNELS 16

static geom geom_of(const nn_layer *l) {
  geom g = {.h = l->in.h, .w = l->in.w, .ci = l->in.c, .co = l->out.c};
  /* A tile's 36 rows of V (or M) are contiguous, for the transforms; one
   * cache line more keeps strides that are multiples of 512 bytes (36 x
   * 32 x 4) from mapping the products' rows to a few cache sets. */
  g.ldv = XI * g.ci + WG_PAD_FLOATS;
  g.ldm = XI * g.co + WG_PAD_FLOATS;
  /* The same for U and dU, read and written 36 matrices at a time: an
   * 8 KiB stride (32 x 64 x 4) would put all 36 in one L1 set. */
  g.xu = (size_t)g.co * g.ci + WG_PAD_FLOATS;
  g.tw = (g.w + 1) / 2;
  g.tiles = g.tw * ((g.h + 1) / 2);
  size_t per_tile = (size_t)XI * (size_t)(g.ci + g.co) * sizeof(float);
  g.cap = BLOCK_BYTES / per_tile;
  if (g.cap < BLOCK_MIN_TILES)
    g.cap = BLOCK_MIN_TILES;
  if (g.cap > BLOCK_MAX_TILES)
    g.cap = BLOCK_MAX_TILES;
  return g;
}

static size_t round16(size_t x) { return (x + 15) & ~(size_t)15; }

/* Scratch: U, then one region per chunk holding its block's V and M (M
 * doubles as dM) and, for the backward, its partial dU and partial bias
 * gradient. Regions start on cache lines so that threads never share
 * one. */
static size_t u_floats(const geom *g) { return round16(XI * g->xu); }

static size_t chunk_floats(const geom *g, size_t cap, bool backward) {
  size_t block = cap * (size_t)(g->ldv + g->ldm);
  return round16(block + (backward ? XI * g->xu + (size_t)g->co : 0));
}

/* A chunk's block never holds more tiles than the chunk has. */
static size_t chunk_cap(const geom *g, size_t n, size_t chunks) {
  size_t most = (n + chunks - 1) / chunks * (size_t)g->tiles;
  return most < g->cap ? most : g->cap;
}

bool nn_winograd_applies(const nn_layer *l) {
  /* Same padding only: the tiles cover the output as they cover the input. */
  return l->kind == NN_CONV2D && l->ksize == 5 && l->pad == 2 &&
         l->in.c >= MIN_IN_CHANNELS;
}

size_t nn_winograd_scratch_floats(const nn_layer *l, int max_batch,
                                  bool backward) {
  geom g = geom_of(l);
  size_t n = max_batch > 0 ? (size_t)max_batch : 1, most = 0;
  /* nn_conv2d_chunks for a thread count unknown here. */
  for (size_t chunks = 1; chunks <= nn_conv2d_max_chunks(n); chunks++) {
    size_t need = chunks * chunk_floats(&g, chunk_cap(&g, n, chunks), backward);
    if (need > most)
      most = need;
  }
  return u_floats(&g) + most;
}

static void job_init(wg_job *j, const nn_layer *l, const float *params,
                     float *scratch, int n, bool backward) {
  j->g = geom_of(l);
  j->w = params + l->w;
  j->b = params + l->b;
  j->n = (size_t)n;
  j->chunks = nn_conv2d_chunks(j->n);
  j->cap = chunk_cap(&j->g, j->n, j->chunks ? j->chunks : 1);
  j->region = chunk_floats(&j->g, j->cap, backward);
  j->u = scratch;
  j->regions = scratch + u_floats(&j->g);
}

#ifdef NN_ISA_X86
static const wg_isa *isa_get(void) {
  static const wg_isa *const by_isa[] = {&nn_wg_isa_scalar, &nn_wg_isa_sse2,
                                         &nn_wg_isa_avx2, &nn_wg_isa_avx512};
  return by_isa[nn_isa_best()];
}
#else
static const wg_isa *isa_get(void) {
  return nn_isa_best() == NN_ISA_SCALAR ? &nn_wg_isa_scalar
                                        : &nn_wg_isa_generic;
}
#endif

/* dU^T[xi] += the other chunks' partials, in chunk order, for xi in
 * [first, end). */
static void reduce_range(void *ctx, size_t first, size_t end) {
  const wg_job *j = ctx;
  size_t xu = j->g.xu, count = (size_t)j->g.co * j->g.ci;
  float *du = du_of(j);
  for (size_t xi = first; xi < end; xi++)
    for (size_t c = 1; c < j->chunks; c++) {
      float *restrict sum = du + xi * xu;
      const float *restrict p = sum + c * j->region;
      for (size_t i = 0; i < count; i++)
        sum[i] += p[i];
    }
}

/* The weight transforms are split over output channels, or groups of an
 * ISA's lanes of them; a few microseconds of work per thread at the
 * least. */
#define WEIGHTS_MIN_PER_THREAD 8
#define GROUP_CHANNELS_MIN_PER_THREAD 32

static size_t out_groups(const wg_job *j, const wg_isa *isa) {
  return ((size_t)j->g.co + (size_t)isa->lanes - 1) / (size_t)isa->lanes;
}

static size_t groups_min(const wg_isa *isa) {
  return GROUP_CHANNELS_MIN_PER_THREAD / (size_t)isa->lanes;
}

void nn_winograd_forward(const nn_layer *l, const float *params,
                         const float *in, float *out, int n, bool relu,
                         float *scratch) {
  const wg_isa *isa = isa_get();
  wg_job j;
  job_init(&j, l, params, scratch, n, false);
  j.in = in;
  j.out = out;
  j.relu = relu;
  nn_parallel_for(out_groups(&j, isa), groups_min(isa), isa->weights_t, &j);
  nn_parallel_for(j.chunks, 1, isa->forward, &j);
}

void nn_winograd_backward(const nn_layer *l, const float *params,
                          const float *in, const float *dout, float *din,
                          float *grad, int n, float *scratch) {
  if (n < 1) { /* no chunk to sum: the gradient of nothing */
    memset(grad + l->w, 0, l->n_w * sizeof *grad);
    memset(grad + l->b, 0, l->n_b * sizeof *grad);
    return;
  }
  const wg_isa *isa = isa_get();
  wg_job j;
  job_init(&j, l, params, scratch, n, true);
  j.in = in;
  j.dout = dout;
  j.din = din;
  j.dw = grad + l->w;
  if (din) /* U serves only the input gradient */
    nn_parallel_for((size_t)j.g.co, WEIGHTS_MIN_PER_THREAD, isa->weights, &j);
  nn_parallel_for(j.chunks, 1, isa->backward, &j);
  if (j.chunks > 1)
    nn_parallel_for(XI, 1, reduce_range, &j);
  nn_parallel_for(out_groups(&j, isa), groups_min(isa), isa->dweights, &j);
  /* db = the chunks' partials, in chunk order. */
  const float *db = du_of(&j) + XI * j.g.xu;
  float *out = grad + l->b;
  for (int c = 0; c < j.g.co; c++) {
    float sum = db[c];
    for (size_t k = 1; k < j.chunks; k++)
      sum += db[k * j.region + (size_t)c];
    out[c] = sum;
  }
}
