/* A zoo model's parameters as a safetensors file: one tensor per weight and
 * bias, named and shaped as nn_net.h lays them out ("conv1.weight" is
 * [out][k][k][in], "fc1.weight" is [out][in]), with the spec, the input
 * shape and the class count in the metadata, so the file opens in common
 * Python tooling and can be loaded back into the same spec. */
#ifndef COHORT_NN_MODEL_IO_H
#define COHORT_NN_MODEL_IO_H

#include <stddef.h>

#include "nn_zoo.h"

/* Writes params (m->n_params floats) to path atomically. extra_meta (may be
 * NULL) adds "key", "value" string pairs ending with a NULL key. Returns
 * COHORT_OK or a negative status with a reason in err. */
int nn_model_save(const nn_model *m, const float *params, const char *path,
                  const char *const *extra_meta, char *err, size_t errlen);

/* Reads path into params (m->n_params floats). Every tensor of m must be
 * present with its exact shape; a missing, extra or misshapen tensor is an
 * error naming it ("x.safetensors: tensor fc1.weight has 784x200, the model
 * has 784x128"), and params is left untouched on failure. */
int nn_model_load(const nn_model *m, float *params, const char *path, char *err,
                  size_t errlen);

#endif
