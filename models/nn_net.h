/* A feed-forward network as a list of layers over one flat parameter vector.
 *
 * The network itself holds only shapes and offsets: parameters, gradients
 * and optimizer state live in caller-owned flat float vectors of n_params
 * (see nn_train.h), and the named tensors below are views into them, so a
 * model update is one flat vector. Activations and scratch live in an
 * nn_work sized for a maximum batch.
 *
 * Layout: examples are stored height x width x channels (NHWC), so a conv2d
 * lowers to im2col matrix products, one image at a time. Weights:
 *   linear  W [out][in] (in = the input flattened in HWC order), b [out]
 *   conv2d  W [out_channels][k][k][in_channels], b [out_channels]
 * Thread-safety: a built net is read-only and may be shared; an nn_work is
 * used by one thread at a time. */
#ifndef COHORT_NN_NET_H
#define COHORT_NN_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn_optim.h"

#define NN_MAX_LAYERS 24
#define NN_MAX_TENSORS 16
#define NN_MAX_NAME 32

/* One example: height x width x channels. A flat vector is 1 x 1 x n. */
typedef struct nn_shape {
  int c, h, w;
} nn_shape;

static inline size_t nn_shape_size(nn_shape s) {
  return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

/* The text form of a shape, "HxWxC" (e.g. "28x28x1"), as flags, model
 * files and the coordinator's settings write it. */
#define NN_SHAPE_TEXT 36
void nn_shape_format(nn_shape s, char out[NN_SHAPE_TEXT]);
/* Parses "HxWxC", each part in [1, 65535]. Returns 0, or -1. */
int nn_shape_parse(const char *text, nn_shape *out);

typedef enum nn_layer_kind {
  NN_LINEAR,
  NN_CONV2D,   /* stride 1, odd square kernel, same or valid padding */
  NN_MAXPOOL2, /* 2x2 window, stride 2 (odd edges dropped) */
  NN_RELU,
  NN_FLATTEN, /* shape change only: the data is already contiguous */
  NN_DROPOUT  /* inverted dropout; identity outside training */
} nn_layer_kind;

typedef struct nn_layer {
  nn_layer_kind kind;
  nn_shape in, out;
  int ksize;       /* conv2d */
  int pad;         /* conv2d: zeros around the input on each side; ksize / 2
                      (same: out h x w = in h x w) or 0 (valid: in - ksize
                      + 1) */
  float drop;      /* dropout probability in [0, 1) */
  size_t w, b;     /* offsets of weight and bias in the parameter vector */
  size_t n_w, n_b; /* their lengths (0 for layers without parameters) */
} nn_layer;

/* A named view into the parameter vector, for safetensors and reports. */
typedef struct nn_tensor {
  char name[NN_MAX_NAME];
  int ndim;
  int shape[4];
  size_t offset, size;
} nn_tensor;

typedef struct nn_net {
  nn_shape input;
  int n_layers;
  nn_layer layers[NN_MAX_LAYERS];
  int n_tensors;
  nn_tensor tensors[NN_MAX_TENSORS];
  size_t n_params;
  int error; /* set by a builder call that failed; later calls are no-ops */
} nn_net;

/* Builder: nn_net_begin, then layers in order; each appends after the last
 * layer's output shape. Parameterised layers take a name prefix for their
 * tensors ("fc1" gives "fc1.weight" and "fc1.bias"). Returns COHORT_OK or
 * COHORT_EINVAL (impossible shape, too many layers); the first error sticks
 * in net->error so a chain of calls can be checked once at the end. */
void nn_net_begin(nn_net *net, nn_shape input);
int nn_net_linear(nn_net *net, int out, const char *name);
int nn_net_conv2d(nn_net *net, int out_channels, int ksize, const char *name);
/* A conv2d without padding (PyTorch's default, padding=0): each output
 * sees a whole k x k patch of the input, so the image shrinks by ksize - 1
 * (LeNet's convolutions). */
int nn_net_conv2d_valid(nn_net *net, int out_channels, int ksize,
                        const char *name);
int nn_net_maxpool2(nn_net *net);
int nn_net_relu(nn_net *net);
int nn_net_flatten(nn_net *net);
int nn_net_dropout(nn_net *net, float p);

/* The last layer's output width: the number of classes the logits cover. */
int nn_net_outputs(const nn_net *net);

/* Seeded initialisation as PyTorch's default: weights and biases uniform in
 * +-1/sqrt(fan_in). */
void nn_net_init(const nn_net *net, float *params, uint64_t seed);

/* Activations and scratch for batches of up to max_batch examples. */
typedef struct nn_work {
  int max_batch;
  float *act[NN_MAX_LAYERS + 1];   /* act[0] is the input, act[i+1] layer i */
  float *delta[NN_MAX_LAYERS + 1]; /* gradient of the loss w.r.t. act[i] */
  float *col[NN_MAX_LAYERS];       /* conv2d: im2col scratch */
  uint32_t *argmax[NN_MAX_LAYERS]; /* maxpool2: winning input per output */
  uint8_t *mask[NN_MAX_LAYERS];    /* dropout: kept (1) or dropped (0) */
  float *dcol;                     /* conv2d backward scratch */
  float *probs;                    /* softmax of the logits */
  void *block;                     /* the one allocation behind them all */
} nn_work;

/* training selects whether the backward buffers (and dropout masks) are
 * allocated. Returns COHORT_OK, COHORT_EINVAL or COHORT_ENOMEM. */
int nn_work_init(nn_work *work, const nn_net *net, int max_batch,
                 bool training);
void nn_work_close(nn_work *work);

/* Forward pass of batch examples x (batch * input size, HWC) and returns the
 * logits (batch x outputs, inside work). training turns dropout on, with
 * masks drawn from dropout_seed. */
const float *nn_net_forward(const nn_net *net, nn_work *work,
                            const float *params, const float *x, int batch,
                            bool training, uint64_t dropout_seed);

/* Mean softmax cross-entropy over the batch and its gradient: overwrites all
 * n_params of grad. Labels must be < nn_net_outputs(net). The work must have
 * been initialised for training. Returns the mean loss. */
double nn_net_loss_grad(const nn_net *net, nn_work *work, const float *params,
                        const float *x, const uint8_t *y, int batch,
                        float *grad, uint64_t dropout_seed);

/* One training step: nn_net_loss_grad, then nn_optim_step(opt) — the same
 * update up to rounding. With plain SGD (no momentum), a linear layer of
 * at least NN_FUSE_MIN_WEIGHTS weights at a batch of at most
 * NN_FUSE_MAX_BATCH (nn_linear_sgd.h: fc1 of the CNN at batch 10 or 32)
 * steps its weights inside the backward pass and never writes their
 * gradient (grad's entries there are left as they were). Returns the mean
 * loss. */
double nn_net_train_step(const nn_net *net, nn_work *work, nn_optim *opt,
                         float *params, const float *x, const uint8_t *y,
                         int batch, float *grad, uint64_t dropout_seed);

#endif
