/* Winograd F(2x2, 5x5) convolution (Lavin & Gray 2015, "Fast Algorithms
 * for Convolutional Neural Networks") for the 5x5 conv2d layers of
 * nn_net.h: 36 multiplications per 2x2 output tile and channel pair where
 * the direct convolution needs 100, so 2.8x fewer flops in the products.
 * The backward is the exact adjoint of the forward. Internal to models/:
 * nn_layers.c dispatches its conv2d calls here when nn_winograd_applies.
 *
 * Every product is one of 36 batched GEMMs through nn_sgemm over a block
 * of tiles. Images are split into min(n, threads) chunks, one per thread;
 * the weight gradient is summed per chunk and then over the chunks in
 * order, so results are bit-identical from run to run for a given thread
 * count. */
#ifndef COHORT_NN_WINOGRAD_H
#define COHORT_NN_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>

#include "nn_net.h"

/* Whether the conv2d layer l runs on Winograd: a 5x5 kernel over enough
 * input channels that the products, not the transforms, dominate. */
bool nn_winograd_applies(const nn_layer *l);

/* Floats of scratch that a forward (backward false) or backward call with
 * up to max_batch examples needs, at any thread count. */
size_t nn_winograd_scratch_floats(const nn_layer *l, int max_batch,
                                  bool backward);

/* out (n x out shape, overwritten) = conv(in) + bias, with a ReLU when
 * relu. scratch: nn_winograd_scratch_floats(l, >= n, false) floats. */
void nn_winograd_forward(const nn_layer *l, const float *params,
                         const float *in, float *out, int n, bool relu,
                         float *scratch);

/* The gradients of the forward: grad[l->w ..] (n_w floats, [out_c][5][5]
 * [in_c]) and grad[l->b ..] are overwritten with the weight and bias
 * gradients, and din, when not NULL, with the input gradient. scratch:
 * nn_winograd_scratch_floats(l, >= n, true) floats. */
void nn_winograd_backward(const nn_layer *l, const float *params,
                          const float *in, const float *dout, float *din,
                          float *grad, int n, float *scratch);

#endif
