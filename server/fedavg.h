/* Streaming FedAvg: each accepted update is folded into a running,
 * example-weighted sum as it arrives, so memory is O(d) whatever the number
 * of clients. Sums are kept in double to keep rounding error far below the
 * float32 model's precision. */
#ifndef COHORT_FEDAVG_H
#define COHORT_FEDAVG_H

#include <stddef.h>

typedef struct fedavg {
  size_t dim;
  double *sum;   /* sum_k n_k * delta_k, dim entries */
  double weight; /* sum_k n_k */
  size_t count;  /* updates folded in */
} fedavg;

int fedavg_init(fedavg *a, size_t dim);
void fedavg_close(fedavg *a); /* accepts NULL and a zeroed struct */
void fedavg_reset(fedavg *a);

/* Folds in one update with its example count (weight > 0, finite). The
 * caller has already rejected NaN and Inf in delta. */
int fedavg_add(fedavg *a, const float *delta, double weight);

/* out = global + sum / weight (out may alias global). COHORT_ESTATE when
 * nothing was folded in. */
int fedavg_apply(const fedavg *a, const float *global, float *out);

#endif
