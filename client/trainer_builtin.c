/* libcohort's built-in trainer: the zoo model a task names, trained and
 * evaluated on the dataset the app loaded (dataset.c). See
 * trainer_builtin.h. */
#include "trainer_builtin.h"

#include <stdio.h>
#include <stdlib.h>

#include "dataset.h"
#include "nn_isa.h"
#include "nn_pool.h"
#include "nn_rng.h"
#include "nn_train.h"
#include "nn_zoo.h"
#include "options.h"

struct builtin_model {
  nn_model m;
};

int builtin_model_for_task(const cohort_dataset_t *d, const Cohort__V1__Task *t,
                           size_t n_params, builtin_model **out, char *err,
                           size_t errlen) {
  const nn_dataset *ds = &d->ds;
  /* The task says what the model takes; a coordinator from before that
   * field implies this data's shape and at least 10 classes. */
  nn_shape input = nn_dataset_shape(ds);
  if (t->input_channels && t->input_height && t->input_width)
    input = (nn_shape){.c = (int)t->input_channels,
                       .h = (int)t->input_height,
                       .w = (int)t->input_width};
  int classes = ds->n_classes > 10 ? ds->n_classes : 10;
  if (t->classes)
    classes = t->classes > 256 ? 257 : (int)t->classes;
  if (nn_shape_size(input) != ds->dim) {
    snprintf(err, errlen,
             "the model takes %dx%dx%d examples; this client's data has "
             "%zu features per example",
             input.h, input.w, input.c, ds->dim);
    return COHORT_EINVAL;
  }
  builtin_model *b = calloc(1, sizeof *b);
  if (!b) {
    snprintf(err, errlen, "out of memory");
    return COHORT_ENOMEM;
  }
  int rc = nn_zoo_resolve(t->model_spec, input, classes, &b->m, err, errlen);
  if (!rc && b->m.n_params != n_params) {
    snprintf(err, errlen,
             "model %s on this data has %zu parameters; the coordinator's "
             "has %zu",
             t->model_spec, b->m.n_params, n_params);
    rc = COHORT_EINVAL;
  }
  if (rc) {
    free(b);
    return rc;
  }
  *out = b;
  return COHORT_OK;
}

void builtin_model_free(builtin_model *m) { free(m); }

uint64_t builtin_eval_size(const cohort_dataset_t *d) {
  return d ? dataset_eval_set(d)->n : 0;
}

int builtin_evaluate(const builtin_model *m, cohort_dataset_t *d,
                     const float *global, const volatile sig_atomic_t *stop,
                     double *accuracy, double *loss) {
  dataset_fetch_reset(d);
  /* Seconds for a large model on much data: stop looks in at every batch. */
  int rc = nn_evaluate_until(&m->m.net, global, dataset_eval_set(d), stop,
                             accuracy, loss);
  if (!rc && d->fetch_failures)
    rc = COHORT_ECALLBACK;
  return rc;
}

int builtin_train(const builtin_model *m, cohort_dataset_t *d,
                  const cohort_train_request *req, uint64_t seed,
                  const volatile sig_atomic_t *stop,
                  builtin_progress_fn progress, void *progress_user,
                  float *params, const float *global, cohort_train_result *res,
                  char *err, size_t errlen) {
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.epochs = (int)req->epochs;
  o.batch_size = (int)req->batch_size;
  o.optim.learning_rate = req->learning_rate;
  o.fedprox_mu = req->fedprox_mu;
  /* Clients sharing a seed still shuffle differently, and each round
   * differently, yet a rerun of the same federation repeats itself. */
  o.seed = nn_rng_mix(nn_rng_mix(seed, (uint64_t)d->client_index), req->round);
  o.stop = stop;
  o.progress = progress;
  o.progress_user = progress_user;
  dataset_fetch_reset(d);
  char why[200];
  /* params start as the global model, which the client keeps: no third
   * copy of the weights while training. */
  int rc = nn_train_in_place(&m->m.net, params, global, &d->ds, &o,
                             &res->train_loss, why, sizeof why);
  if (rc == COHORT_ECANCELED)
    snprintf(err, errlen, "round %llu: stopped while training",
             (unsigned long long)req->round);
  else if (rc)
    snprintf(err, errlen, "built-in training failed: %s", why);
  else if (d->fetch_failures) {
    snprintf(err, errlen, "round %llu: the example callback failed %zu times",
             (unsigned long long)req->round, d->fetch_failures);
    rc = COHORT_ECALLBACK;
  }
  res->num_examples = d->ds.n;
  return rc;
}

int builtin_client_check(const cohort_dataset_t *d, int has_train_cb) {
  if (d || has_train_cb)
    return COHORT_OK;
  options_set_error("cohort_client_new: neither a train callback nor a "
                    "dataset for the built-in trainer");
  return COHORT_EINVAL;
}

uint64_t builtin_dataset_examples(const cohort_dataset_t *d) {
  return d ? d->ds.n : 0;
}

void builtin_threads_set(int threads) { nn_threads_set(threads); }

int cohort_isa_check(char *err, size_t cap) {
  return nn_isa_check(err, cap) ? COHORT_EINVAL : COHORT_OK;
}
