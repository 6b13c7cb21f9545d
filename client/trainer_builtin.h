/* Internal to libcohort: the built-in training engine's side of a task (the
 * zoo model the task names, trained and evaluated on the app's dataset),
 * kept apart from the protocol in client.c so that everything of models/
 * that libcohort uses sits behind this header. */
#ifndef COHORT_CLIENT_TRAINER_BUILTIN_H
#define COHORT_CLIENT_TRAINER_BUILTIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "cohort.h"
#include "pb.h"

/* The model a task names, built for a dataset's examples. */
typedef struct builtin_model builtin_model;

/* Builds the model t names for d's examples (the task's input shape and
 * classes when it gives them) and checks that it has n_params parameters,
 * the coordinator's count. Returns COHORT_OK, COHORT_EINVAL with a reason
 * in err, or COHORT_ENOMEM. Free *out with builtin_model_free. */
int builtin_model_for_task(const cohort_dataset_t *d, const Cohort__V1__Task *t,
                           size_t n_params, builtin_model **out, char *err,
                           size_t errlen);
/* Accepts NULL. */
void builtin_model_free(builtin_model *m);

/* Examples builtin_evaluate evaluates on: d's held-out part, or its
 * training part when none is held out (0 for NULL). */
uint64_t builtin_eval_size(const cohort_dataset_t *d);

/* Accuracy and mean loss of the global model on d's evaluation examples.
 * Returns COHORT_OK, COHORT_ECANCELED once *stop is set (it looks before
 * every batch), COHORT_ECALLBACK when the app's example callback failed,
 * or COHORT_EINVAL/COHORT_ENOMEM. */
int builtin_evaluate(const builtin_model *m, cohort_dataset_t *d,
                     const float *global, const volatile sig_atomic_t *stop,
                     double *accuracy, double *loss);

/* Called after every minibatch with the examples done and in all. */
typedef void (*builtin_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Trains params (equal to global on entry, global borrowed and unchanged)
 * in place on d as req says; seed is the client's, mixed with the dataset's
 * client index and the round; progress (may be NULL) hears of every
 * minibatch. Returns COHORT_OK, COHORT_ECANCELED once *stop is set,
 * COHORT_ECALLBACK when the app's example callback failed, or another
 * status, each failure with a reason in err. */
int builtin_train(const builtin_model *m, cohort_dataset_t *d,
                  const cohort_train_request *req, uint64_t seed,
                  const volatile sig_atomic_t *stop,
                  builtin_progress_fn progress, void *progress_user,
                  float *params, const float *global, cohort_train_result *res,
                  char *err, size_t errlen);

/* Whether a client with dataset d (may be NULL) and, when has_train_cb, a
 * training callback can train: COHORT_OK, or COHORT_EINVAL with the reason
 * logged (neither; or, without the engine, no callback or a dataset). */
int builtin_client_check(const cohort_dataset_t *d, int has_train_cb);

/* Examples in d's training part (0 for NULL), reported at check-in. */
uint64_t builtin_dataset_examples(const cohort_dataset_t *d);

/* The engine's thread count, process-wide; 0 = all cores. */
void builtin_threads_set(int threads);

#endif
