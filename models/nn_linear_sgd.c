/* See nn_linear_sgd.h.
 *
 * Why: at batch 10 the CNN's fc1 weights (512 x 3136, 6.4 MB) fall out of
 * cache between the forward and the backward pass, and the unfused step
 * makes six passes over a matrix of that size (the forward's read, the
 * input gradient's read, writing dW, and the optimizer's reads of W and dW
 * and write of W). Here each block of rows of W is read for the input
 * gradient and then, still in L2, stepped in place: three passes in all. */
#include "nn_linear_sgd.h"

#include "nn_gemm.h"
#include "nn_gemm_small.h"
#include "nn_layers.h"

/* Rows of W per block: a multiple of every ISA's row group (3 and 5) that
 * keeps a block of rows in L2 (15 x 3136 floats for fc1: 188 KB). */
#define FUSED_ROWS 15

typedef struct fused_job {
  const nn_layer *l;
  float *w;
  const float *in, *dout;
  float *din;
  int n;
  float lr, decay;
} fused_job;

/* Columns [begin, end) * NN_SMALL_BLOCK of W and din, block of rows after
 * block of rows: din gathers each block's share (in row order, so the sums
 * do not depend on the split), then the block takes its step. */
static void fused_range(void *ctx, size_t begin, size_t end) {
  const fused_job *j = ctx;
  int fin = (int)nn_shape_size(j->l->in), fout = j->l->out.c;
  int c0 = (int)begin * NN_SMALL_BLOCK;
  int c1 = (int)end * NN_SMALL_BLOCK < fin ? (int)end * NN_SMALL_BLOCK : fin;
  for (int r = 0; r < fout; r += FUSED_ROWS) {
    int rows = fout - r < FUSED_ROWS ? fout - r : FUSED_ROWS;
    float *w = j->w + (size_t)r * fin + c0;
    /* din[n x cols] (+)= dout[n x rows] * W[rows x cols], before the step */
    if (j->din)
      nn_sgemm_small_axpy(false, j->n, c1 - c0, rows, 1.0f, j->dout + r, fout,
                          w, fin, r == 0 ? 0.0f : 1.0f, j->din + c0, fin);
    /* W = (1 - lr decay) W - lr dout^T in, dW never stored */
    nn_sgemm_small_axpy(true, rows, c1 - c0, j->n, -j->lr, j->dout + r, fout,
                        j->in + c0, fin, 1.0f - j->lr * j->decay, w, fin);
  }
}

void nn_linear_backward_sgd(const nn_layer *l, float *params, const float *in,
                            const float *dout, float *din, float *grad, int n,
                            float lr, float decay) {
  int fin = (int)nn_shape_size(l->in);
  nn_bias_grad(grad + l->b, dout, (size_t)n, (size_t)l->out.c);
  fused_job j = {l, params + l->w, in, dout, din, n, lr, decay};
  size_t blocks = (size_t)(fin + NN_SMALL_BLOCK - 1) / NN_SMALL_BLOCK;
  nn_parallel_for(blocks, 1, fused_range, &j);
}

bool nn_linear_fuses_sgd(const nn_layer *l, int batch) {
  return l->kind == NN_LINEAR && batch <= NN_FUSE_MAX_BATCH &&
         l->n_w >= NN_FUSE_MIN_WEIGHTS;
}
