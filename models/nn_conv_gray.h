/* A direct 5x5 convolution of one-channel images (the first layer of the
 * zoo's CNN on Fashion-MNIST), for output channels in multiples of 32:
 * internal to models/, called by nn_conv2d_forward_act and
 * nn_conv2d_backward in place of the im2col products (see nn_conv_gray.c).
 * Same padding, stride 1, layouts as nn_net.h. Results are bit-identical
 * from run to run for a given thread count (the forward also across
 * thread counts). */
#ifndef COHORT_NN_CONV_GRAY_H
#define COHORT_NN_CONV_GRAY_H

#include <stdbool.h>
#include <stddef.h>

#include "nn_net.h"

bool nn_conv_gray_applies(const nn_layer *l);

/* Floats of scratch the forward and the weight gradient need for n images
 * (the layer's im2col buffer is larger). */
size_t nn_conv_gray_scratch(const nn_layer *l, int n);

/* out = conv(in) + bias, then max(0, .) when relu. */
void nn_conv_gray_forward(const nn_layer *l, const float *params,
                          const float *in, float *scratch, float *out, int n,
                          bool relu);

/* grad[l->w ..] = dW and grad[l->b ..] = db (overwritten). partials holds
 * min(n, threads) * 26 * out.c floats. */
void nn_conv_gray_backward_weights(const nn_layer *l, const float *in,
                                   const float *dout, float *scratch,
                                   float *partials, float *grad, int n);

#endif
