/* See nn_optim.h. */
#include "nn_optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cohort_status.h"
#include "nn_pool.h"

void nn_optim_config_init(nn_optim_config *cfg) {
  *cfg = (nn_optim_config){.kind = NN_OPT_SGD,
                           .learning_rate = 0.05f,
                           .beta1 = 0.9f,
                           .beta2 = 0.999f,
                           .eps = 1e-8f};
}

static int unit_interval(float x) { return x >= 0.0f && x < 1.0f; }

int nn_optim_config_check(const nn_optim_config *cfg, char *err,
                          size_t errlen) {
  const char *bad = NULL;
  if (!(cfg->learning_rate > 0.0f) || !isfinite(cfg->learning_rate))
    bad = "learning rate must be a finite number > 0";
  else if (!unit_interval(cfg->momentum))
    bad = "momentum must be in [0, 1)";
  else if (!(cfg->weight_decay >= 0.0f) || !isfinite(cfg->weight_decay))
    bad = "weight decay must be a finite number >= 0";
  else if (cfg->kind == NN_OPT_ADAM &&
           (!unit_interval(cfg->beta1) || !unit_interval(cfg->beta2)))
    bad = "Adam's beta1 and beta2 must be in [0, 1)";
  else if (cfg->kind == NN_OPT_ADAM && !(cfg->eps > 0.0f))
    bad = "Adam's epsilon must be > 0";
  else if (cfg->kind != NN_OPT_SGD && cfg->kind != NN_OPT_ADAM)
    bad = "unknown optimizer";
  if (!bad)
    return COHORT_OK;
  snprintf(err, errlen, "%s", bad);
  return COHORT_EINVAL;
}

int nn_optimizer_parse(const char *name, nn_optimizer *out) {
  if (strcmp(name, "sgd") == 0)
    *out = NN_OPT_SGD;
  else if (strcmp(name, "adam") == 0)
    *out = NN_OPT_ADAM;
  else
    return -1;
  return 0;
}

const char *nn_optimizer_name(nn_optimizer kind) {
  return kind == NN_OPT_ADAM ? "adam" : "sgd";
}

int nn_optim_state_vectors(const nn_optim_config *cfg) {
  if (cfg->kind == NN_OPT_ADAM)
    return 2;
  return cfg->momentum > 0.0f ? 1 : 0;
}

void nn_optim_init(nn_optim *opt, const nn_optim_config *cfg, size_t n,
                   float *state) {
  memset(opt, 0, sizeof *opt);
  opt->cfg = *cfg;
  opt->n = n;
  int vectors = nn_optim_state_vectors(cfg);
  if (vectors >= 1)
    opt->m = state;
  if (vectors >= 2)
    opt->v = state + n;
  if (vectors)
    memset(state, 0, (size_t)vectors * n * sizeof *state);
}

/* One step over a range of the parameters: every element is updated on
 * its own, so the split over threads cannot change the result. */
typedef struct step_job {
  nn_optim *opt;
  float *w;
  const float *grad;
  float step, root_bc2; /* Adam's bias-corrected step size and sqrt(bc2) */
} step_job;

static void sgd_range(void *ctx, size_t begin, size_t end) {
  const step_job *j = ctx;
  const float lr = j->opt->cfg.learning_rate, wd = j->opt->cfg.weight_decay;
  const float mu = j->opt->cfg.momentum;
  float *w = j->w, *v = j->opt->m;
  const float *grad = j->grad;
  if (!v) {
    for (size_t i = begin; i < end; i++)
      w[i] -= lr * (grad[i] + wd * w[i]);
    return;
  }
  /* v starts at 0, so the first step sets it to the gradient, as PyTorch's
   * buffer initialisation does. */
  for (size_t i = begin; i < end; i++) {
    v[i] = mu * v[i] + grad[i] + wd * w[i];
    w[i] -= lr * v[i];
  }
}

static void adam_range(void *ctx, size_t begin, size_t end) {
  const step_job *j = ctx;
  const nn_optim_config *c = &j->opt->cfg;
  float *w = j->w, *m = j->opt->m, *v = j->opt->v;
  const float *grad = j->grad;
  for (size_t i = begin; i < end; i++) {
    float g = grad[i] + c->weight_decay * w[i];
    m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * g;
    v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * g * g;
    w[i] -= j->step * m[i] / (sqrtf(v[i]) / j->root_bc2 + c->eps);
  }
}

/* The update streams the weights and the gradient (6.6 MB each for the
 * CNN) once per step. Waking the pool costs more than updating a small
 * model: with 64K parameters per thread mlp:200,200 (199K parameters)
 * trained 40 % slower at batch 10 on 2 threads, so only models of 1M
 * parameters and up are split. */
#define STEP_MIN_PER_THREAD ((size_t)1 << 19)

/* The update of params[begin, end): the pool splits [0, end - begin) and
 * the job shifts its pointers by begin. */
static void step_span(nn_optim *opt, float *params, const float *grad,
                      size_t begin, size_t end) {
  nn_optim shifted = *opt;
  shifted.m = opt->m ? opt->m + begin : NULL;
  shifted.v = opt->v ? opt->v + begin : NULL;
  step_job j = {.opt = &shifted, .w = params + begin, .grad = grad + begin};
  if (opt->cfg.kind == NN_OPT_ADAM) {
    const nn_optim_config *c = &opt->cfg;
    double t = (double)(opt->steps + 1);
    const float bc1 = (float)(1.0 - pow(c->beta1, t));
    const float bc2 = (float)(1.0 - pow(c->beta2, t));
    j.step = c->learning_rate / bc1;
    j.root_bc2 = sqrtf(bc2);
    nn_parallel_for(end - begin, STEP_MIN_PER_THREAD, adam_range, &j);
  } else {
    nn_parallel_for(end - begin, STEP_MIN_PER_THREAD, sgd_range, &j);
  }
}

void nn_optim_step(nn_optim *opt, float *params, const float *grad) {
  step_span(opt, params, grad, 0, opt->n);
  opt->steps++;
}

void nn_optim_step_spans(nn_optim *opt, float *params, const float *grad,
                         const size_t (*spans)[2], int n_spans) {
  for (int s = 0; s < n_spans; s++)
    step_span(opt, params, grad, spans[s][0], spans[s][1]);
  opt->steps++;
}
