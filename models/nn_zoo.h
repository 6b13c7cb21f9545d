/* The model zoo by spec string, the same strings on the coordinator, the
 * clients and the benchmarks (--model SPEC):
 *   logreg             multinomial logistic regression (one linear layer)
 *   mlp:H1[,H2,...]    ReLU hidden layers of those widths ("mlp:200,200" is
 *                      McMahan et al.'s 2NN)
 *   cnn                McMahan et al.'s FedAvg CNN: conv5x5x32, pool,
 *                      conv5x5x64, pool, fc512, fc (1,663,370 parameters
 *                      on 28x28x1 with 10 classes)
 *   lenet              NIID-Bench's "simple-cnn" for MNIST-like images
 *                      (SimpleCNNMNIST): conv5x5x6, pool, conv5x5x16, pool,
 *                      fc120, fc84, fc, convolutions without padding
 *                      (44,426 parameters on 28x28x1 with 10 classes;
 *                      needs images of at least 16x16)
 * Any of them may end in "/dropout=P" (P in [0, 1)): dropout after each
 * hidden activation. */
#ifndef COHORT_NN_ZOO_H
#define COHORT_NN_ZOO_H

#include <stddef.h>
#include <stdint.h>

#include "nn_dataset.h"
#include "nn_net.h"

#define NN_ZOO_SPECS                                                           \
  "logreg, mlp:H1[,H2,...], cnn, lenet (each optionally /dropout=P)"
#define NN_MAX_SPEC 64
/* The most parameters a zoo model may have: 512 MiB of float32 weights.
 * A model is kept whole in memory several times over (global, update,
 * sums) and stored as one SQLite blob (at most 1e9 bytes by default); a
 * larger one is refused before anything is allocated. */
#define NN_ZOO_MAX_PARAMS ((size_t)1 << 27)

typedef struct nn_model {
  char spec[NN_MAX_SPEC];
  int classes;
  size_t n_params;
  nn_net net;
} nn_model;

/* Builds spec for examples of shape input and classes labels. A bad spec, a
 * shape the model cannot take or more than NN_ZOO_MAX_PARAMS parameters
 * gets COHORT_EINVAL and a reason in err. */
int nn_zoo_resolve(const char *spec, nn_shape input, int classes, nn_model *out,
                   char *err, size_t errlen);

/* The shape of ds's examples (a flat dim x 1 x 1 when the reader gave
 * none). */
nn_shape nn_dataset_shape(const nn_dataset *ds);

#endif
