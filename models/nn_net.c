/* Network builder, workspace and the forward/backward sequencing; the layer
 * arithmetic is in nn_layers.c. See nn_net.h. */
#include "nn_net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "nn_layers.h"
#include "nn_linear_sgd.h"
#include "nn_rng.h"
#include "train_limits.h"

/* Per-example sizes are capped so that batch * size stays far from size_t
 * and int overflow in GEMM dimensions. */
#define NN_MAX_FEATURES (1 << 24)

void nn_shape_format(nn_shape s, char out[NN_SHAPE_TEXT]) {
  snprintf(out, NN_SHAPE_TEXT, "%dx%dx%d", s.h, s.w, s.c);
}

int nn_shape_parse(const char *text, nn_shape *out) {
  int h, w, c, used = 0;
  if (sscanf(text, "%dx%dx%d%n", &h, &w, &c, &used) != 3 ||
      text[used] != '\0' || h < 1 || w < 1 || c < 1 || h > TRAIN_MAX_SIDE ||
      w > TRAIN_MAX_SIDE || c > TRAIN_MAX_SIDE)
    return -1;
  *out = (nn_shape){.c = c, .h = h, .w = w};
  return 0;
}

void nn_net_begin(nn_net *net, nn_shape input) {
  memset(net, 0, sizeof *net);
  net->input = input;
  if (input.c < 1 || input.h < 1 || input.w < 1 ||
      nn_shape_size(input) > NN_MAX_FEATURES)
    net->error = COHORT_EINVAL;
}

static nn_shape last_shape(const nn_net *net) {
  return net->n_layers ? net->layers[net->n_layers - 1].out : net->input;
}

/* A ReLU right after a linear or conv2d layer runs in place on that layer's
 * output, in the same pass as its bias (nn_*_forward_act): the
 * pre-activation is needed by nothing. */
static bool relu_in_place(const nn_net *net, int i) {
  if (i < 1 || net->layers[i].kind != NN_RELU)
    return false;
  nn_layer_kind prev = net->layers[i - 1].kind;
  return prev == NN_LINEAR || prev == NN_CONV2D;
}

/* The first layer with parameters: no gradient flows below it. */
static int first_trainable(const nn_net *net) {
  for (int i = 0; i < net->n_layers; i++)
    if (net->layers[i].n_w)
      return i;
  return net->n_layers;
}

/* Appends a layer reading the current output shape; NULL when the net is
 * already in error or full. */
static nn_layer *push(nn_net *net, nn_layer_kind kind) {
  if (net->error)
    return NULL;
  if (net->n_layers == NN_MAX_LAYERS) {
    net->error = COHORT_EINVAL;
    return NULL;
  }
  nn_shape in = last_shape(net);
  nn_layer *l = &net->layers[net->n_layers++];
  memset(l, 0, sizeof *l);
  l->kind = kind;
  l->in = l->out = in;
  return l;
}

static int fail(nn_net *net) {
  net->error = COHORT_EINVAL;
  return net->error;
}

static int add_tensor(nn_net *net, const char *prefix, const char *suffix,
                      int ndim, const int *shape, size_t *offset) {
  if (net->n_tensors == NN_MAX_TENSORS)
    return fail(net);
  nn_tensor *t = &net->tensors[net->n_tensors++];
  int len = snprintf(t->name, sizeof t->name, "%s.%s", prefix, suffix);
  if (len < 0 || (size_t)len >= sizeof t->name)
    return fail(net);
  t->ndim = ndim;
  t->size = 1;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->size *= (size_t)shape[i];
  }
  t->offset = net->n_params;
  *offset = t->offset;
  net->n_params += t->size;
  return COHORT_OK;
}

static int add_params(nn_net *net, nn_layer *l, const char *name, int ndim,
                      const int *wshape, int bias) {
  if (add_tensor(net, name, "weight", ndim, wshape, &l->w) ||
      add_tensor(net, name, "bias", 1, &bias, &l->b))
    return net->error;
  l->n_w = net->tensors[net->n_tensors - 2].size;
  l->n_b = (size_t)bias;
  return COHORT_OK;
}

int nn_net_linear(nn_net *net, int out, const char *name) {
  nn_layer *l = push(net, NN_LINEAR);
  if (!l)
    return net->error;
  size_t fin = nn_shape_size(l->in);
  if (out < 1 || out > NN_MAX_FEATURES || fin * (size_t)out > (1u << 30))
    return fail(net);
  l->out = (nn_shape){.c = out, .h = 1, .w = 1};
  int shape[2] = {out, (int)fin};
  return add_params(net, l, name, 2, shape, out);
}

static int conv2d(nn_net *net, int out_channels, int ksize, bool same,
                  const char *name) {
  nn_layer *l = push(net, NN_CONV2D);
  if (!l)
    return net->error;
  if (out_channels < 1 || out_channels > 4096 || ksize < 1 || ksize > 15 ||
      ksize % 2 == 0 || l->in.c > 4096 ||
      (!same && (l->in.h < ksize || l->in.w < ksize)))
    return fail(net);
  l->ksize = ksize;
  l->pad = same ? ksize / 2 : 0;
  l->out.c = out_channels;
  l->out.h = l->in.h + 2 * l->pad - ksize + 1;
  l->out.w = l->in.w + 2 * l->pad - ksize + 1;
  if (nn_shape_size(l->out) > NN_MAX_FEATURES)
    return fail(net);
  int shape[4] = {out_channels, ksize, ksize, l->in.c};
  return add_params(net, l, name, 4, shape, out_channels);
}

int nn_net_conv2d(nn_net *net, int out_channels, int ksize, const char *name) {
  return conv2d(net, out_channels, ksize, true, name);
}

int nn_net_conv2d_valid(nn_net *net, int out_channels, int ksize,
                        const char *name) {
  return conv2d(net, out_channels, ksize, false, name);
}

int nn_net_maxpool2(nn_net *net) {
  nn_layer *l = push(net, NN_MAXPOOL2);
  if (!l)
    return net->error;
  if (l->in.h < 2 || l->in.w < 2)
    return fail(net);
  l->out.h = l->in.h / 2;
  l->out.w = l->in.w / 2;
  return COHORT_OK;
}

int nn_net_relu(nn_net *net) { return push(net, NN_RELU) ? 0 : net->error; }

int nn_net_flatten(nn_net *net) {
  nn_layer *l = push(net, NN_FLATTEN);
  if (!l)
    return net->error;
  l->out = (nn_shape){.c = (int)nn_shape_size(l->in), .h = 1, .w = 1};
  return COHORT_OK;
}

int nn_net_dropout(nn_net *net, float p) {
  nn_layer *l = push(net, NN_DROPOUT);
  if (!l)
    return net->error;
  if (!(p >= 0.0f && p < 1.0f))
    return fail(net);
  l->drop = p;
  return COHORT_OK;
}

int nn_net_outputs(const nn_net *net) {
  return (int)nn_shape_size(last_shape(net));
}

void nn_net_init(const nn_net *net, float *params, uint64_t seed) {
  nn_rng rng;
  nn_rng_seed(&rng, seed);
  for (int i = 0; i < net->n_layers; i++) {
    const nn_layer *l = &net->layers[i];
    if (!l->n_w)
      continue;
    size_t fan_in = l->n_w / l->n_b;
    double bound = 1.0 / sqrt((double)fan_in);
    for (size_t j = 0; j < l->n_w; j++)
      params[l->w + j] = (float)((2.0 * nn_rng_uniform(&rng) - 1.0) * bound);
    for (size_t j = 0; j < l->n_b; j++)
      params[l->b + j] = (float)((2.0 * nn_rng_uniform(&rng) - 1.0) * bound);
  }
}

/* Buffers are carved from one block at 64-byte boundaries (cache lines, and
 * the widest vector loads). */
typedef struct carver {
  char *base;
  size_t used;
} carver;

static void *carve(carver *cv, size_t bytes) {
  size_t at = (cv->used + 63) & ~(size_t)63;
  cv->used = at + bytes;
  return cv->base ? cv->base + at : NULL;
}

/* Lays out (base == NULL: only measures) the buffers of work. */
static void layout(nn_work *work, const nn_net *net, carver *cv,
                   bool training) {
  size_t nb = (size_t)work->max_batch, dcol = 0;
  work->act[0] = NULL; /* the caller's input */
  work->delta[0] = NULL;
  for (int i = 0; i < net->n_layers; i++) {
    const nn_layer *l = &net->layers[i];
    size_t out = nb * nn_shape_size(l->out);
    work->col[i] = NULL;
    work->argmax[i] = NULL;
    work->mask[i] = NULL;
    if (l->kind == NN_FLATTEN || relu_in_place(net, i)) { /* same data */
      work->act[i + 1] = work->act[i];
      work->delta[i + 1] = work->delta[i];
      continue;
    }
    work->act[i + 1] = carve(cv, out * sizeof(float));
    /* Under an in-place ReLU and a max-pool the output is read only by the
     * pool's forward (its backward folds the ReLU in from the pool's own
     * output, see loss_grad): its gradient can take its place. */
    bool dead_after_pool = i + 2 < net->n_layers && relu_in_place(net, i + 1) &&
                           net->layers[i + 2].kind == NN_MAXPOOL2;
    work->delta[i + 1] = !training         ? NULL
                         : dead_after_pool ? work->act[i + 1]
                                           : carve(cv, out * sizeof(float));
    if (l->kind == NN_CONV2D) {
      /* The first layer never computes an input gradient. */
      bool din = training && i > 0;
      work->col[i] =
          carve(cv, nn_conv2d_run_col_floats(l, work->max_batch, din) *
                        sizeof(float));
      /* Backward scratch, one buffer for all layers. */
      size_t need = nn_conv2d_run_scratch_floats(l, work->max_batch, din);
      if (training && need > dcol)
        dcol = need;
    } else if (l->kind == NN_MAXPOOL2) {
      work->argmax[i] = carve(cv, out * sizeof(uint32_t));
    } else if (l->kind == NN_DROPOUT && training) {
      work->mask[i] = carve(cv, out);
    }
  }
  work->dcol = dcol ? carve(cv, dcol * sizeof(float)) : NULL;
  work->probs = carve(cv, nb * (size_t)nn_net_outputs(net) * sizeof(float));
}

int nn_work_init(nn_work *work, const nn_net *net, int max_batch,
                 bool training) {
  memset(work, 0, sizeof *work);
  if (net->error || net->n_layers == 0 || max_batch < 1 ||
      max_batch > TRAIN_MAX_BATCH)
    return COHORT_EINVAL;
  work->max_batch = max_batch;
  carver cv = {0};
  layout(work, net, &cv, training);
  void *block = NULL;
  if (posix_memalign(&block, 64, cv.used ? cv.used : 64))
    return COHORT_ENOMEM;
  cv = (carver){.base = block};
  layout(work, net, &cv, training);
  work->block = block;
  return COHORT_OK;
}

void nn_work_close(nn_work *work) {
  if (!work)
    return;
  free(work->block);
  memset(work, 0, sizeof *work);
}

const float *nn_net_forward(const nn_net *net, nn_work *work,
                            const float *params, const float *x, int batch,
                            bool training, uint64_t dropout_seed) {
  work->act[0] = (float *)x; /* read only: no layer writes its input */
  for (int i = 0; i < net->n_layers; i++) {
    const nn_layer *l = &net->layers[i];
    float *in = work->act[i], *out = work->act[i + 1];
    size_t count = (size_t)batch * nn_shape_size(l->out);
    switch (l->kind) {
    case NN_LINEAR:
      nn_linear_forward_act(l, params, in, out, batch,
                            relu_in_place(net, i + 1));
      break;
    case NN_CONV2D:
      nn_conv2d_forward_act(l, params, in, work->col[i], out, batch,
                            relu_in_place(net, i + 1));
      break;
    case NN_MAXPOOL2:
      nn_maxpool2_forward(l, in, out, work->argmax[i], batch);
      break;
    case NN_RELU:
      if (!relu_in_place(net, i)) /* else done with the bias */
        nn_relu_forward(in, out, count);
      break;
    case NN_FLATTEN:
      work->act[i + 1] = in;
      break;
    case NN_DROPOUT:
      nn_dropout_forward(l, in, out, training ? work->mask[i] : NULL, count,
                         nn_rng_mix(dropout_seed, (uint64_t)i));
      break;
    }
  }
  return work->act[net->n_layers];
}

/* Softmax cross-entropy of logits: the mean loss, and probs - onehot over
 * batch (the gradient of the mean) into delta when it is not NULL. */
static double softmax_xent(const float *logits, const uint8_t *y, int batch,
                           int classes, float *probs, float *delta) {
  double total = 0.0;
  for (int e = 0; e < batch; e++) {
    const float *z = logits + (size_t)e * classes;
    float *p = probs + (size_t)e * classes;
    float top = z[0];
    for (int k = 1; k < classes; k++)
      if (z[k] > top)
        top = z[k];
    double sum = 0.0;
    for (int k = 0; k < classes; k++) {
      p[k] = expf(z[k] - top);
      sum += p[k];
    }
    total += log(sum) - (double)(z[y[e]] - top);
    float inv = (float)(1.0 / sum);
    for (int k = 0; k < classes; k++)
      p[k] *= inv;
    if (delta) {
      float *d = delta + (size_t)e * classes;
      for (int k = 0; k < classes; k++)
        d[k] = (p[k] - (k == y[e] ? 1.0f : 0.0f)) / (float)batch;
    }
  }
  return total / batch;
}

/* Plain SGD folded into the backward pass of the layers that fuse it. */
typedef struct sgd_fusion {
  float lr, decay;
} sgd_fusion;

/* nn_net_loss_grad, or with fuse the same with every layer that
 * nn_linear_fuses_sgd stepping its weights in place (params is written
 * only then). */
static double loss_grad(const nn_net *net, nn_work *work, float *params,
                        const float *x, const uint8_t *y, int batch,
                        float *grad, uint64_t dropout_seed,
                        const sgd_fusion *fuse) {
  int last = net->n_layers;
  const float *logits =
      nn_net_forward(net, work, params, x, batch, true, dropout_seed);
  double loss = softmax_xent(logits, y, batch, nn_net_outputs(net), work->probs,
                             work->delta[last]);
  /* Layers below the first trainable one need no gradient at all, and
   * that one needs none for its input. */
  int lowest = first_trainable(net);
  bool relu_done = false;
  for (int i = last - 1; i >= lowest; i--) {
    const nn_layer *l = &net->layers[i];
    const float *in = work->act[i], *dout = work->delta[i + 1];
    float *din = i > lowest ? work->delta[i] : NULL;
    size_t count = (size_t)batch * nn_shape_size(l->out);
    switch (l->kind) {
    case NN_LINEAR:
      if (fuse && nn_linear_fuses_sgd(l, batch))
        nn_linear_backward_sgd(l, params, in, dout, din, grad, batch, fuse->lr,
                               fuse->decay);
      else
        nn_linear_backward(l, params, in, dout, din, grad, batch);
      break;
    case NN_CONV2D:
      nn_conv2d_backward(l, params, in, work->col[i], dout, din, work->dcol,
                         grad, batch);
      break;
    case NN_MAXPOOL2:
      /* An in-place ReLU below has the same buffers for its input and
       * output gradient: fold its mask into the scatter and skip it. */
      relu_done = relu_in_place(net, i - 1);
      nn_maxpool2_backward_relu(l, relu_done ? work->act[i + 1] : NULL, dout,
                                work->argmax[i], din, batch);
      break;
    case NN_RELU:
      if (!relu_done)
        nn_relu_backward(work->act[i + 1], dout, din, count);
      relu_done = false;
      break;
    case NN_FLATTEN:
      break; /* delta[i] is delta[i + 1] */
    case NN_DROPOUT:
      nn_dropout_backward(l, work->mask[i], dout, din, count);
      break;
    }
  }
  return loss;
}

double nn_net_loss_grad(const nn_net *net, nn_work *work, const float *params,
                        const float *x, const uint8_t *y, int batch,
                        float *grad, uint64_t dropout_seed) {
  /* Without a fusion nothing writes params. */
  return loss_grad(net, work, (float *)params, x, y, batch, grad, dropout_seed,
                   NULL);
}

double nn_net_train_step(const nn_net *net, nn_work *work, nn_optim *opt,
                         float *params, const float *x, const uint8_t *y,
                         int batch, float *grad, uint64_t dropout_seed) {
  bool fuses = false;
  for (int i = 0; i < net->n_layers; i++)
    fuses |= nn_linear_fuses_sgd(&net->layers[i], batch);
  if (!fuses || opt->cfg.kind != NN_OPT_SGD || opt->cfg.momentum != 0.0f) {
    double loss =
        loss_grad(net, work, params, x, y, batch, grad, dropout_seed, NULL);
    nn_optim_step(opt, params, grad);
    return loss;
  }
  sgd_fusion fuse = {opt->cfg.learning_rate, opt->cfg.weight_decay};
  double loss =
      loss_grad(net, work, params, x, y, batch, grad, dropout_seed, &fuse);
  /* The optimizer steps every tensor the backward pass did not. */
  size_t spans[2 * NN_MAX_LAYERS][2];
  int n_spans = 0;
  for (int i = 0; i < net->n_layers; i++) {
    const nn_layer *l = &net->layers[i];
    if (l->n_w && !nn_linear_fuses_sgd(l, batch)) {
      spans[n_spans][0] = l->w;
      spans[n_spans++][1] = l->w + l->n_w;
    }
    if (l->n_b) {
      spans[n_spans][0] = l->b;
      spans[n_spans++][1] = l->b + l->n_b;
    }
  }
  nn_optim_step_spans(opt, params, grad, spans, n_spans);
  return loss;
}
