/* See nn_train.h. */
#include "nn_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "nn_rng.h"
#include "train_limits.h"

#define EVAL_BATCH 64

void nn_train_opts_init(nn_train_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->epochs = 1;
  opts->batch_size = 32;
  nn_optim_config_init(&opts->optim);
}

/* Every label must have a logit; a data set that does not fit the net is a
 * configuration error, reported before any work. */
static int check_data(const nn_net *net, const nn_dataset *ds, char *err,
                      size_t errlen) {
  size_t want = nn_shape_size(net->input);
  if (ds->n == 0) {
    snprintf(err, errlen, "the data set is empty");
    return COHORT_EINVAL;
  }
  if (ds->dim != want) {
    snprintf(err, errlen,
             "the data has %zu features per example, the model "
             "takes %zu",
             ds->dim, want);
    return COHORT_EINVAL;
  }
  int classes = nn_net_outputs(net);
  for (size_t i = 0; i < ds->n; i++)
    if (ds->y[i] >= classes) {
      snprintf(err, errlen,
               "example %zu has label %d, the model has %d "
               "classes",
               i, ds->y[i], classes);
      return COHORT_EINVAL;
    }
  return COHORT_OK;
}

static int check_opts(const nn_train_opts *o, char *err, size_t errlen) {
  if (o->epochs < 1 || o->epochs > TRAIN_MAX_EPOCHS) {
    snprintf(err, errlen, "epochs must be in [1, %d]", TRAIN_MAX_EPOCHS);
    return COHORT_EINVAL;
  }
  if (o->batch_size < 1 || o->batch_size > TRAIN_MAX_BATCH) {
    snprintf(err, errlen, "batch size must be in [1, %d]", TRAIN_MAX_BATCH);
    return COHORT_EINVAL;
  }
  if (!(o->fedprox_mu >= 0.0f) || o->fedprox_mu > TRAIN_MAX_MU) {
    snprintf(err, errlen, "FedProx mu must be in [0, %g]", TRAIN_MAX_MU);
    return COHORT_EINVAL;
  }
  return nn_optim_config_check(&o->optim, err, errlen);
}

/* The gradient of mu/2 |w - anchor|^2 joins the loss gradient. */
static void add_proximal(float *grad, const float *w, const float *anchor,
                         size_t n, float mu) {
  for (size_t i = 0; i < n; i++)
    grad[i] += mu * (w[i] - anchor[i]);
}

/* Trains w in place from anchor (its value on entry, FedProx's centre); on
 * failure w holds whatever the steps so far made of it. */
static int train_core(const nn_net *net, float *w, const float *anchor,
                      const nn_dataset *ds, const nn_train_opts *opts,
                      double *mean_loss, char *err, size_t errlen) {
  int rc = check_opts(opts, err, errlen);
  if (!rc)
    rc = check_data(net, ds, err, errlen);
  if (rc)
    return rc;
  if (ds->n > UINT32_MAX) {
    snprintf(err, errlen, "more than 2^32 examples");
    return COHORT_EINVAL;
  }
  int batch = opts->batch_size;
  if ((size_t)batch > ds->n)
    batch = (int)ds->n;

  size_t n = net->n_params;
  int vectors = 1 + nn_optim_state_vectors(&opts->optim);
  float *arena = NULL, *xb = NULL;
  uint8_t *yb = NULL;
  uint32_t *order = NULL;
  nn_work work = {0};
  rc = COHORT_ENOMEM;
  if (n > SIZE_MAX / sizeof(float) / (size_t)vectors)
    goto out;
  /* Cache-line aligned, as the work buffers are: the short-side kernels
   * stream the large weight rows with whole-line vector loads. */
  void *block = NULL;
  if (posix_memalign(&block, 64, (size_t)vectors * n * sizeof *arena) == 0)
    arena = block;
  xb = malloc((size_t)batch * ds->dim * sizeof *xb);
  yb = malloc((size_t)batch);
  order = malloc(ds->n * sizeof *order);
  if (!arena || !xb || !yb || !order)
    goto out;
  rc = nn_work_init(&work, net, batch, true);
  if (rc)
    goto out;

  /* arena: grads | optimizer state */
  float *grad = arena;
  nn_optim opt;
  nn_optim_init(&opt, &opts->optim, n, arena + n);

  nn_rng rng;
  nn_rng_seed(&rng, opts->seed);
  for (size_t i = 0; i < ds->n; i++)
    order[i] = (uint32_t)i;
  double epoch_loss = 0.0;
  uint64_t step = 0;
  for (int epoch = 0; epoch < opts->epochs; epoch++) {
    nn_rng_shuffle(&rng, order, ds->n);
    epoch_loss = 0.0;
    for (size_t first = 0; first < ds->n; first += (size_t)batch) {
      if (opts->stop && *opts->stop) {
        snprintf(err, errlen, "stopped");
        rc = COHORT_ECANCELED;
        goto out;
      }
      int count =
          (int)(ds->n - first < (size_t)batch ? ds->n - first : (size_t)batch);
      nn_dataset_gather(ds, order + first, (size_t)count, xb, yb);
      uint64_t seed = nn_rng_mix(opts->seed, ++step);
      double loss;
      if (opts->fedprox_mu > 0.0f) {
        loss = nn_net_loss_grad(net, &work, w, xb, yb, count, grad, seed);
        add_proximal(grad, w, anchor, n, opts->fedprox_mu);
        nn_optim_step(&opt, w, grad);
      } else {
        loss =
            nn_net_train_step(net, &work, &opt, w, xb, yb, count, grad, seed);
      }
      epoch_loss += loss * count;
      if (opts->progress)
        opts->progress(opts->progress_user,
                       (uint64_t)epoch * ds->n + first + (size_t)count,
                       (uint64_t)opts->epochs * ds->n);
    }
  }
  for (size_t i = 0; i < n; i++)
    if (!isfinite(w[i])) {
      snprintf(err, errlen,
               "training diverged (non-finite weights); lower "
               "the learning rate");
      rc = COHORT_EINVAL;
      goto out;
    }
  if (mean_loss)
    *mean_loss = epoch_loss / (double)ds->n;
  rc = COHORT_OK;
out:
  nn_work_close(&work);
  free(arena);
  free(xb);
  free(yb);
  free(order);
  return rc;
}

int nn_train(const nn_net *net, float *params, const nn_dataset *ds,
             const nn_train_opts *opts, double *mean_loss, char *err,
             size_t errlen) {
  /* Cache-line aligned, as the work buffers are: the short-side kernels
   * stream the large weight rows with whole-line vector loads. */
  void *w = NULL;
  size_t bytes = net->n_params * sizeof *params;
  if (posix_memalign(&w, 64, bytes ? bytes : 64))
    return COHORT_ENOMEM;
  memcpy(w, params, bytes);
  /* The caller's params stay as they came until the end, so they are
   * FedProx's anchor without a copy. */
  int rc = train_core(net, w, params, ds, opts, mean_loss, err, errlen);
  if (!rc)
    memcpy(params, w, bytes);
  free(w);
  return rc;
}

int nn_train_in_place(const nn_net *net, float *params, const float *start,
                      const nn_dataset *ds, const nn_train_opts *opts,
                      double *mean_loss, char *err, size_t errlen) {
  return train_core(net, params, start, ds, opts, mean_loss, err, errlen);
}

int nn_evaluate(const nn_net *net, const float *params, const nn_dataset *ds,
                double *accuracy, double *loss) {
  return nn_evaluate_until(net, params, ds, NULL, accuracy, loss);
}

int nn_evaluate_until(const nn_net *net, const float *params,
                      const nn_dataset *ds, const volatile sig_atomic_t *stop,
                      double *accuracy, double *loss) {
  char err[160];
  int rc = check_data(net, ds, err, sizeof err);
  if (rc)
    return rc;
  nn_work work;
  int batch = ds->n < EVAL_BATCH ? (int)ds->n : EVAL_BATCH;
  /* Bytes (or an app's fetched examples) become floats one batch at a
   * time. */
  float *xb = ds->x ? NULL : malloc((size_t)batch * ds->dim * sizeof *xb);
  if (!ds->x && !xb)
    return COHORT_ENOMEM;
  rc = nn_work_init(&work, net, batch, false);
  if (rc) {
    free(xb);
    return rc;
  }
  int classes = nn_net_outputs(net);
  size_t correct = 0;
  double total = 0.0;
  for (size_t first = 0; first < ds->n; first += (size_t)batch) {
    if (stop && *stop) {
      rc = COHORT_ECANCELED;
      break;
    }
    int count =
        (int)(ds->n - first < (size_t)batch ? ds->n - first : (size_t)batch);
    const float *x = nn_dataset_span(ds, first, (size_t)count, xb);
    const uint8_t *y = ds->y + first;
    const float *z = nn_net_forward(net, &work, params, x, count, false, 0);
    for (int e = 0; e < count; e++) {
      const float *ze = z + (size_t)e * classes;
      int best = 0;
      for (int k = 1; k < classes; k++)
        if (ze[k] > ze[best])
          best = k;
      correct += best == y[e];
      float top = ze[best];
      double sum = 0.0;
      for (int k = 0; k < classes; k++)
        sum += exp((double)(ze[k] - top));
      total += log(sum) - (double)(ze[y[e]] - top);
    }
  }
  nn_work_close(&work);
  free(xb);
  if (rc)
    return rc;
  *accuracy = (double)correct / (double)ds->n;
  *loss = total / (double)ds->n;
  return COHORT_OK;
}
