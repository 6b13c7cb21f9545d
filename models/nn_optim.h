/* Optimizers over flat parameter vectors: SGD (momentum, weight decay) and
 * Adam, with PyTorch's update rules so hyper-parameters carry over:
 *   SGD:  g = grad + wd * w;  v = momentum * v + g (v = g on the first step);
 *         w -= lr * v         (plain w -= lr * g when momentum is 0)
 *   Adam: g = grad + wd * w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *         w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * State vectors are borrowed views into the caller's arena. */
#ifndef COHORT_NN_OPTIM_H
#define COHORT_NN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef enum nn_optimizer { NN_OPT_SGD, NN_OPT_ADAM } nn_optimizer;

typedef struct nn_optim_config {
  nn_optimizer kind;
  float learning_rate; /* > 0 */
  float momentum;      /* SGD, in [0, 1) */
  float weight_decay;  /* L2 coefficient, >= 0 */
  float beta1, beta2;  /* Adam, in [0, 1) */
  float eps;           /* Adam, > 0 */
} nn_optim_config;

/* SGD, lr 0.05, no momentum or decay; Adam's constants 0.9, 0.999, 1e-8. */
void nn_optim_config_init(nn_optim_config *cfg);

/* COHORT_OK or COHORT_EINVAL naming the bad field in err. */
int nn_optim_config_check(const nn_optim_config *cfg, char *err, size_t errlen);

/* Parses "sgd" or "adam". Returns 0, or -1 for anything else. */
int nn_optimizer_parse(const char *name, nn_optimizer *out);
const char *nn_optimizer_name(nn_optimizer kind);

/* Optimizer state: how many floats of state per parameter it needs. */
int nn_optim_state_vectors(const nn_optim_config *cfg);

typedef struct nn_optim {
  nn_optim_config cfg;
  size_t n;
  float *m, *v; /* borrowed, n each (NULL when unused), zeroed by init */
  uint64_t steps;
} nn_optim;

/* state holds nn_optim_state_vectors(cfg) * n floats (NULL when 0). */
void nn_optim_init(nn_optim *opt, const nn_optim_config *cfg, size_t n,
                   float *state);

/* One update of params from grad (grad is read only). */
void nn_optim_step(nn_optim *opt, float *params, const float *grad);

/* One update of only the parameters in the n_spans spans [begin, end) of
 * spans (disjoint), for a caller that updated the others itself
 * (nn_net_train_step); grad is read there only. Counts as one step. */
void nn_optim_step_spans(nn_optim *opt, float *params, const float *grad,
                         const size_t (*spans)[2], int n_spans);

#endif
