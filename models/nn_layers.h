/* Forward and backward kernels of the layer kinds in nn_net.h, over a batch
 * of n examples in NHWC. Internal to models/: nn_net.c sequences them. Every
 * backward writes (never accumulates) its parameter gradients, and writes
 * din only when din is not NULL (the first layer needs no input gradient).
 * The _act forwards apply a ReLU in the same pass as the bias when relu is
 * set (the net fuses a ReLU that follows a linear or conv2d layer). Large
 * batches are split over nn_parallel_for; results are bit-identical from
 * run to run for a given thread count, and depend on it only through
 * nn_sgemm (the Winograd conv2d's products cover blocks of tiles that
 * follow the per-thread chunks of images) and the conv2d weight gradient
 * (summed per chunk of images, one chunk per thread, then over the chunks
 * in order). */
#ifndef COHORT_NN_LAYERS_H
#define COHORT_NN_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn_net.h"

void nn_linear_forward(const nn_layer *l, const float *params, const float *in,
                       float *out, int n);
void nn_linear_forward_act(const nn_layer *l, const float *params,
                           const float *in, float *out, int n, bool relu);
void nn_linear_backward(const nn_layer *l, const float *params, const float *in,
                        const float *dout, float *din, float *grad, int n);
/* db[j] (overwritten) = the sum over rows of dout[r][j] (rows x cols), in
 * row order: a layer's bias gradient. */
void nn_bias_grad(float *db, const float *dout, size_t rows, size_t cols);

/* A conv2d runs on Winograd F(2x2, 5x5) where nn_winograd_applies (5x5
 * kernels, same padding, over enough input channels; see nn_winograd.h),
 * as a direct convolution where nn_conv_gray_applies (5x5, same padding,
 * over one channel into multiples of 32: the CNN's first layer; its input
 * gradient, when wanted, takes im2col), else (valid padding among them)
 * as im2col products; the _direct functions always take the im2col path,
 * the reference the others are tested against. col is scratch of
 * nn_conv2d_col_floats(l, >= n) floats. */
void nn_conv2d_forward(const nn_layer *l, const float *params, const float *in,
                       float *col, float *out, int n);
void nn_conv2d_forward_act(const nn_layer *l, const float *params,
                           const float *in, float *col, float *out, int n,
                           bool relu);
void nn_conv2d_forward_direct(const nn_layer *l, const float *params,
                              const float *in, float *col, float *out, int n,
                              bool relu);
/* in is the layer's input (the patch matrices, or the transformed tiles,
 * are built again); col is as for the forward (its buffer will do);
 * scratch holds nn_conv2d_scratch_floats(l, >= n, din != NULL) floats. */
void nn_conv2d_backward(const nn_layer *l, const float *params, const float *in,
                        float *col, const float *dout, float *din,
                        float *scratch, float *grad, int n);
void nn_conv2d_backward_direct(const nn_layer *l, const float *params,
                               const float *in, float *col, const float *dout,
                               float *din, float *scratch, float *grad, int n);
/* A convolution splits the batch into chunks, one per thread, at most one
 * per image and one per core (more threads than cores would only take
 * turns), and sums the chunks' partial gradients in chunk order: the sums
 * then depend only on the batch size and min(threads, cores). Its scratch
 * holds a slot per chunk. nn_conv2d_chunks(n) is the chunk count for n
 * images, nn_conv2d_max_chunks(n) its bound at any thread count (what
 * scratch is sized for), and chunk c of chunks holds images
 * [*first, *end). */
size_t nn_conv2d_chunks(size_t n);
size_t nn_conv2d_max_chunks(size_t n);
void nn_conv2d_chunk_images(size_t n, size_t chunks, size_t c, size_t *first,
                            size_t *end);
/* dw[o][r] (co x row_len) = the sum over chunks of partial c's [r][o]
 * (row_len x co each, one after the other), in chunk order: the per-thread
 * weight gradients of a convolution, added so that the result depends on
 * the thread count only through the chunks. */
void nn_conv2d_sum_partials(const float *partial, size_t chunks, int row_len,
                            int co, float *dw);
/* Scratch sizes for batches of up to max_batch examples at any thread
 * count, enough for both paths. */
size_t nn_conv2d_col_floats(const nn_layer *l, int max_batch);
size_t nn_conv2d_scratch_floats(const nn_layer *l, int max_batch, bool din);
/* The same for the path nn_conv2d_forward_act and nn_conv2d_backward take
 * on this CPU only (din: the backward computes the input gradient): what
 * an nn_work holds. */
size_t nn_conv2d_run_col_floats(const nn_layer *l, int max_batch, bool din);
size_t nn_conv2d_run_scratch_floats(const nn_layer *l, int max_batch, bool din);

void nn_maxpool2_forward(const nn_layer *l, const float *in, float *out,
                         uint32_t *argmax, int n);
void nn_maxpool2_backward(const nn_layer *l, const float *dout,
                          const uint32_t *argmax, float *din, int n);
/* The same, with the gradient of a ReLU before the pool folded in: out is
 * the pool's output, and a window whose maximum is not above 0 passes no
 * gradient (out == NULL: plain nn_maxpool2_backward). */
void nn_maxpool2_backward_relu(const nn_layer *l, const float *out,
                               const float *dout, const uint32_t *argmax,
                               float *din, int n);

/* In place (in == out, din == dout) is allowed. */
void nn_relu_forward(const float *in, float *out, size_t count);
void nn_relu_backward(const float *out, const float *dout, float *din,
                      size_t count);

/* mask may be NULL outside training (identity). */
void nn_dropout_forward(const nn_layer *l, const float *in, float *out,
                        uint8_t *mask, size_t count, uint64_t seed);
void nn_dropout_backward(const nn_layer *l, const uint8_t *mask,
                         const float *dout, float *din, size_t count);

#endif
