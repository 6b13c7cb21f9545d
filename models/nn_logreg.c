/* Multinomial logistic regression trained by minibatch SGD with an optional
 * FedProx term. It runs in every client every round, so the hot loops run
 * contiguously over the feature dimension, in a fixed order (bit-identical
 * results for a seed), with independent accumulators the compiler can
 * vectorize without reassociating. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "nn_logreg.h"

/* Logits on the stack up to this many classes (u8 labels allow 256). */
#define LR_STACK_CLASSES 256

/* splitmix64: tiny, seedable with any value (0 included), and good enough
 * for shuffling and initialization in a simulation. */
static uint64_t lr_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

size_t nn_logreg_param_count(size_t dim, int classes) {
  if (classes <= 0)
    return 0;
  return dim * (size_t)classes + (size_t)classes;
}

void nn_logreg_init(float *params, size_t dim, int classes, uint64_t seed) {
  if (!params || dim == 0 || classes <= 0)
    return;
  size_t nw = dim * (size_t)classes;
  float scale = 1.0f / sqrtf((float)dim);
  uint64_t state = seed;
  for (size_t i = 0; i < nw; i++) {
    /* 24 random bits give every float in [0, 1) on a uniform grid. */
    float u = (float)(lr_next(&state) >> 40) * 0x1p-24f;
    params[i] = (2.0f * u - 1.0f) * scale;
  }
  memset(params + nw, 0, (size_t)classes * sizeof(float));
}

/* Eight running sums in a fixed order: the compiler can keep them in vector
 * registers, and the result does not depend on whether it does. */
static float lr_dot(const float *restrict a, const float *restrict b,
                    size_t n) {
  float acc[8] = {0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++)
      acc[k] += a[i + k] * b[i + k];
  float tail = 0.0f;
  for (; i < n; i++)
    tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/* Blocks of eight for the same reason: at -O2 gcc vectorizes a loop of
 * known trip count, not one that would need a scalar epilogue. */
static void lr_axpy(float *restrict y, float a, const float *restrict x,
                    size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++)
      y[i + k] += a * x[i + k];
  for (; i < n; i++)
    y[i] += a * x[i];
}

/* Forward pass for one example: z gets the logits, then (when delta is not
 * NULL) delta gets d loss / d logits = softmax(z) - onehot(label). Returns
 * the cross-entropy; the max is subtracted before exp so that large logits
 * cannot overflow. */
static double lr_forward(const float *params, size_t dim, int classes,
                         const float *x, int label, float *z, float *delta) {
  const float *bias = params + dim * (size_t)classes;
  float zmax = -INFINITY;
  for (int c = 0; c < classes; c++) {
    z[c] = bias[c] + lr_dot(params + (size_t)c * dim, x, dim);
    if (z[c] > zmax)
      zmax = z[c];
  }
  float sum = 0.0f;
  for (int c = 0; c < classes; c++)
    sum += expf(z[c] - zmax);
  float lse = zmax + logf(sum);
  if (delta) {
    for (int c = 0; c < classes; c++)
      delta[c] = expf(z[c] - lse);
    if (label < classes)
      delta[label] -= 1.0f;
  }
  /* train rejects such labels; evaluate must not read past z for them. */
  if (label >= classes)
    return INFINITY;
  return (double)lse - (double)z[label];
}

double nn_logreg_loss_grad(const float *params, const nn_dataset *ds,
                           size_t first, size_t count, float *grad) {
  assert(params && ds && grad && first <= ds->n && count <= ds->n - first);
  size_t dim = ds->dim;
  int classes = ds->n_classes;
  size_t np = nn_logreg_param_count(dim, classes);
  float zbuf[LR_STACK_CLASSES], dbuf[LR_STACK_CLASSES];
  float *z = zbuf, *delta = dbuf;
  double loss = 0.0;

  memset(grad, 0, np * sizeof(float));
  if (first > ds->n)
    return 0.0;
  if (count > ds->n - first) /* a caller's mistake must not read past n */
    count = ds->n - first;
  if (count == 0 || classes <= 0)
    return 0.0;
  if (classes > LR_STACK_CLASSES) {
    z = malloc(2 * (size_t)classes * sizeof(float));
    if (!z)
      return NAN;
    delta = z + classes;
  }
  float *gb = grad + dim * (size_t)classes;
  for (size_t i = first; i < first + count; i++) {
    const float *x = ds->x + i * dim;
    loss += lr_forward(params, dim, classes, x, ds->y[i], z, delta);
    for (int c = 0; c < classes; c++) {
      lr_axpy(grad + (size_t)c * dim, delta[c], x, dim);
      gb[c] += delta[c];
    }
  }
  float inv = 1.0f / (float)count;
  for (size_t k = 0; k < np; k++)
    grad[k] *= inv;
  if (z != zbuf)
    free(z);
  return loss / (double)count;
}

void nn_logreg_evaluate(const float *params, const nn_dataset *ds,
                        double *accuracy, double *loss) {
  double acc = 0.0, sum = 0.0;
  float zbuf[LR_STACK_CLASSES];
  float *z = zbuf;

  if (!params || !ds || ds->n == 0 || ds->n_classes <= 0)
    goto out;
  if (ds->n_classes > LR_STACK_CLASSES) {
    z = malloc((size_t)ds->n_classes * sizeof(float));
    if (!z) {
      acc = sum = NAN;
      goto out;
    }
  }
  size_t correct = 0;
  for (size_t i = 0; i < ds->n; i++) {
    sum += lr_forward(params, ds->dim, ds->n_classes, ds->x + i * ds->dim,
                      ds->y[i], z, NULL);
    int best = 0; /* first maximum wins ties, deterministically */
    for (int c = 1; c < ds->n_classes; c++)
      if (z[c] > z[best])
        best = c;
    correct += best == ds->y[i];
  }
  acc = (double)correct / (double)ds->n;
  sum /= (double)ds->n;
  if (z != zbuf)
    free(z);
out:
  if (accuracy)
    *accuracy = acc;
  if (loss)
    *loss = sum;
}

static int lr_check(const float *params, const nn_dataset *ds,
                    const nn_train_opts *o) {
  if (!params || !ds || !o)
    return COHORT_EINVAL;
  if (o->epochs < 1 || o->batch_size < 1 || !(o->learning_rate > 0.0f) ||
      !isfinite(o->learning_rate) || !(o->fedprox_mu >= 0.0f) ||
      !isfinite(o->fedprox_mu))
    return COHORT_EINVAL;
  /* The explicit proximal step scales w - w0 by (1 - lr * mu); past 1 it
   * overshoots the start, past 2 it diverges. Tested in float, as the step
   * computes it, so that 0.2f * 5.0f counts as 1. */
  if (o->learning_rate * o->fedprox_mu > 1.0f)
    return COHORT_EINVAL;
  if (ds->n == 0 || ds->n > UINT32_MAX || ds->dim == 0 || ds->n_classes < 1 ||
      !ds->x || !ds->y)
    return COHORT_EINVAL;
  for (size_t i = 0; i < ds->n; i++)
    if (ds->y[i] >= ds->n_classes) /* would index past the bias vector */
      return COHORT_EINVAL;
  return COHORT_OK;
}

int nn_logreg_train(float *params, const nn_dataset *ds,
                    const nn_train_opts *opts, double *mean_loss) {
  uint32_t *order = NULL;
  float *delta = NULL, *start = NULL, *z = NULL;
  int rc = lr_check(params, ds, opts);
  if (rc)
    return rc;

  size_t n = ds->n, dim = ds->dim;
  int classes = ds->n_classes;
  size_t np = nn_logreg_param_count(dim, classes);
  size_t batch = (size_t)opts->batch_size < n ? (size_t)opts->batch_size : n;
  float lr = opts->learning_rate, mu = opts->fedprox_mu;
  float *bias = params + dim * (size_t)classes;
  double epoch_loss = 0.0;

  order = malloc(n * sizeof *order);
  delta = malloc(batch * (size_t)classes * sizeof *delta);
  z = malloc((size_t)classes * sizeof *z);
  if (mu > 0.0f)
    start = malloc(np * sizeof *start);
  if (!order || !delta || !z || (mu > 0.0f && !start)) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  if (start)
    memcpy(start, params, np * sizeof *start);
  for (size_t i = 0; i < n; i++)
    order[i] = (uint32_t)i;

  uint64_t rng = opts->seed;
  for (int epoch = 0; epoch < opts->epochs; epoch++) {
    /* Fisher-Yates; the modulo bias is below n / 2^64, far under noise. */
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = (size_t)(lr_next(&rng) % (uint64_t)(i + 1));
      uint32_t t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    epoch_loss = 0.0;
    for (size_t b0 = 0; b0 < n; b0 += batch) {
      size_t bn = n - b0 < batch ? n - b0 : batch;
      const uint32_t *rows = order + b0;
      /* All deltas first: the step uses the gradient at the weights the
       * batch started from. */
      for (size_t r = 0; r < bn; r++)
        epoch_loss +=
            lr_forward(params, dim, classes, ds->x + (size_t)rows[r] * dim,
                       ds->y[rows[r]], z, delta + r * (size_t)classes);
      float step = lr / (float)bn;
      if (start) {
        /* Gradient of mu/2 ||w - w0||^2, taken before the data step so it,
         * too, is evaluated at the batch's starting weights. */
        float shrink = lr * mu;
        for (size_t k = 0; k < np; k++)
          params[k] -= shrink * (params[k] - start[k]);
      }
      /* One example at a time keeps its row in L1 while all classes use it;
       * the weights (classes x dim floats) stay in cache across examples. */
      for (size_t r = 0; r < bn; r++) {
        const float *x = ds->x + (size_t)rows[r] * dim;
        const float *d = delta + r * (size_t)classes;
        for (int c = 0; c < classes; c++)
          lr_axpy(params + (size_t)c * dim, -step * d[c], x, dim);
      }
      for (int c = 0; c < classes; c++) {
        float g = 0.0f;
        for (size_t r = 0; r < bn; r++)
          g += delta[r * (size_t)classes + (size_t)c];
        bias[c] -= step * g;
      }
    }
  }
  if (mean_loss)
    *mean_loss = epoch_loss / (double)n;

out:
  free(order);
  free(delta);
  free(start);
  free(z);
  return rc;
}
