/* Streaming example-weighted FedAvg; see fedavg.h. */
#include "fedavg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"

int fedavg_init(fedavg *a, size_t dim) {
  memset(a, 0, sizeof *a);
  if (dim == 0)
    return COHORT_EINVAL;
  a->sum = calloc(dim, sizeof *a->sum);
  if (!a->sum)
    return COHORT_ENOMEM;
  a->dim = dim;
  return COHORT_OK;
}

void fedavg_close(fedavg *a) {
  if (!a)
    return;
  free(a->sum);
  memset(a, 0, sizeof *a);
}

void fedavg_reset(fedavg *a) {
  memset(a->sum, 0, a->dim * sizeof *a->sum);
  a->weight = 0;
  a->count = 0;
}

int fedavg_add(fedavg *a, const float *delta, double weight) {
  if (!(weight > 0) || !isfinite(weight))
    return COHORT_EINVAL;
  for (size_t i = 0; i < a->dim; i++)
    a->sum[i] += weight * (double)delta[i];
  a->weight += weight;
  a->count++;
  return COHORT_OK;
}

int fedavg_apply(const fedavg *a, const float *global, float *out) {
  if (a->count == 0)
    return COHORT_ESTATE;
  double inv = 1.0 / a->weight;
  for (size_t i = 0; i < a->dim; i++)
    out[i] = (float)((double)global[i] + a->sum[i] * inv);
  return COHORT_OK;
}
