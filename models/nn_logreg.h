/* Multinomial logistic regression (dim -> classes, softmax cross-entropy)
 * trained by minibatch SGD. The model is one flat float vector:
 * W[classes][dim] followed by b[classes]. Deterministic for a seed. */
#ifndef COHORT_NN_LOGREG_H
#define COHORT_NN_LOGREG_H

#include <stddef.h>
#include <stdint.h>

#include "nn_dataset.h"

/* dim * classes + classes */
size_t nn_logreg_param_count(size_t dim, int classes);

/* Small seeded random weights (uniform in +-1/sqrt(dim)), zero biases. */
void nn_logreg_init(float *params, size_t dim, int classes, uint64_t seed);

typedef struct nn_train_opts {
  int epochs;          /* >= 1 */
  int batch_size;      /* >= 1 */
  float learning_rate; /* > 0 */
  float fedprox_mu;    /* proximal term towards the starting weights; 0 = off;
                          learning_rate * fedprox_mu must be <= 1 */
  uint64_t seed;       /* shuffling order */
} nn_train_opts;

/* Trains params in place on ds (ds->dim and ds->n_classes must match the
 * model). Examples are shuffled each epoch with the seed. *mean_loss (may be
 * NULL) gets the mean training loss over the last epoch. Returns COHORT_OK,
 * COHORT_EINVAL (bad opts, an empty data set, a label outside
 * [0, n_classes)) or COHORT_ENOMEM. params carries no length, so the caller
 * checks nn_logreg_param_count(ds->dim, ds->n_classes) against its model. */
int nn_logreg_train(float *params, const nn_dataset *ds,
                    const nn_train_opts *opts, double *mean_loss);

/* Mean cross-entropy loss and accuracy of params on ds. */
void nn_logreg_evaluate(const float *params, const nn_dataset *ds,
                        double *accuracy, double *loss);

/* Loss and gradient of the mean loss over examples [first, first + count)
 * of ds, in the layout of params; exposed for gradient checks. */
double nn_logreg_loss_grad(const float *params, const nn_dataset *ds,
                           size_t first, size_t count, float *grad);

#endif
