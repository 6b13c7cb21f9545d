/* The model zoo by spec string, the same strings on the coordinator and the
 * clients (--model SPEC). Today: "logreg" (784 -> 10); the training-engine
 * issue adds mlp and cnn behind the same interface. */
#ifndef COHORT_NN_ZOO_H
#define COHORT_NN_ZOO_H

#include <stddef.h>
#include <stdint.h>

#include "nn_dataset.h"
#include "nn_logreg.h"

typedef struct nn_model {
  char spec[64];
  size_t input_dim;
  int classes;
  size_t n_params;
} nn_model;

/* Resolves spec for inputs of input_dim features and classes labels. An
 * unknown spec gets COHORT_EINVAL and a reason listing the known ones. */
int nn_zoo_resolve(const char *spec, size_t input_dim, int classes,
                   nn_model *out, char *err, size_t errlen);

void nn_zoo_init(const nn_model *m, float *params, uint64_t seed);
int nn_zoo_train(const nn_model *m, float *params, const nn_dataset *ds,
                 const nn_train_opts *opts, double *mean_loss);
void nn_zoo_evaluate(const nn_model *m, const float *params,
                     const nn_dataset *ds, double *accuracy, double *loss);

#endif
