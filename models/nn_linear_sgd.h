/* A linear layer's backward pass fused with a plain SGD step on its
 * weights, for large weight matrices at small batch (see nn_linear_sgd.c).
 * Internal to models/: nn_net_train_step uses it. */
#ifndef COHORT_NN_LINEAR_SGD_H
#define COHORT_NN_LINEAR_SGD_H

#include <stdbool.h>

#include "nn_net.h"

/* Fused when the weights are beyond L2 (1M floats, 4 MB) and the batch is
 * small enough that the passes over them weigh against the products (the
 * CNN at batch 32 trained 18 % faster on one thread with it). */
#define NN_FUSE_MIN_WEIGHTS ((size_t)1 << 20)
#define NN_FUSE_MAX_BATCH 32

bool nn_linear_fuses_sgd(const nn_layer *l, int batch);

/* As nn_linear_backward, except that the weights take the step
 * W = (1 - lr * decay) * W - lr * dW in place and dW is never written:
 * din (when not NULL) comes from the weights before the step, and grad
 * receives only the bias gradient. Bit-identical from run to run and
 * across thread counts. */
void nn_linear_backward_sgd(const nn_layer *l, float *params, const float *in,
                            const float *dout, float *din, float *grad, int n,
                            float lr, float decay);

#endif
