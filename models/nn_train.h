/* Minibatch training and evaluation of an nn_net on an nn_dataset.
 *
 * One call owns the trained copy of the parameters and one float arena of
 * gradients and optimizer state, each n_params long; the caller's vector is
 * the FedProx anchor. Besides, memory is one batch (its floats and the
 * net's nn_work) and four bytes of shuffling order per example: never a
 * float copy of the data. The caller's parameter vector is copied in and
 * the result copied back, so a failed call leaves it untouched
 * (nn_train_in_place saves that copy). Deterministic for a seed and a
 * thread count (nn_gemm.h). */
#ifndef COHORT_NN_TRAIN_H
#define COHORT_NN_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "nn_dataset.h"
#include "nn_net.h"
#include "nn_optim.h"

typedef struct nn_train_opts {
  int epochs;     /* >= 1 */
  int batch_size; /* >= 1; the last batch of an epoch may be smaller */
  nn_optim_config optim;
  float fedprox_mu; /* proximal term mu/2 |w - w_start|^2; 0 = off */
  uint64_t seed;    /* shuffling order and dropout masks */
  /* Non-NULL: looked at before every minibatch; once *stop is set (from
   * another thread or a signal handler) training ends early with
   * COHORT_ECANCELED. */
  const volatile sig_atomic_t *stop;
  /* Non-NULL: called after every minibatch with the examples trained so
   * far and the total (epochs * examples), for a progress display. */
  void (*progress)(void *user, uint64_t done, uint64_t total);
  void *progress_user;
} nn_train_opts;

/* 1 epoch, batch 32, nn_optim_config_init's SGD, no FedProx, seed 0, no stop
 * flag. */
void nn_train_opts_init(nn_train_opts *opts);

/* Trains params (n_params of net) in place on ds. The data set must match
 * the net's input size and every label must be below its outputs.
 * *mean_loss (may be NULL) gets the mean training loss over the last epoch.
 * Returns COHORT_OK, COHORT_EINVAL with a reason in err (bad options, empty
 * or mismatched data), COHORT_ECANCELED (opts->stop was set; params are
 * left untouched) or COHORT_ENOMEM. */
int nn_train(const nn_net *net, float *params, const nn_dataset *ds,
             const nn_train_opts *opts, double *mean_loss, char *err,
             size_t errlen);

/* nn_train without its copy of the model, for a caller that keeps the
 * starting point anyway (a client keeps the global model to subtract):
 * params, equal to start on entry, are trained in place; start (n_params,
 * borrowed, unchanged) is FedProx's anchor. The same steps and results as
 * nn_train, but on any failure params hold a partial result. */
int nn_train_in_place(const nn_net *net, float *params, const float *start,
                      const nn_dataset *ds, const nn_train_opts *opts,
                      double *mean_loss, char *err, size_t errlen);

/* Accuracy and mean cross-entropy of params on ds (dropout off). Returns
 * COHORT_OK, COHORT_EINVAL (mismatched or empty data) or COHORT_ENOMEM. */
int nn_evaluate(const nn_net *net, const float *params, const nn_dataset *ds,
                double *accuracy, double *loss);

/* nn_evaluate that looks at *stop (may be NULL) before every batch, as
 * nn_train_opts.stop, and returns COHORT_ECANCELED once it is set (accuracy
 * and loss untouched): a client's federated evaluation of a large model on
 * much data takes seconds, and a stop must not wait for it. */
int nn_evaluate_until(const nn_net *net, const float *params,
                      const nn_dataset *ds, const volatile sig_atomic_t *stop,
                      double *accuracy, double *loss);

#endif
