/* Spec strings to networks; see nn_zoo.h. */
#include "nn_zoo.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"

#define MLP_MAX_HIDDEN 8
#define MLP_MAX_WIDTH 65536

nn_shape nn_dataset_shape(const nn_dataset *ds) {
  if (ds->channels > 0 && ds->height > 0 && ds->width > 0 &&
      (size_t)ds->channels * ds->height * ds->width == ds->dim)
    return (nn_shape){.c = ds->channels, .h = ds->height, .w = ds->width};
  return (nn_shape){.c = (int)ds->dim, .h = 1, .w = 1};
}

/* Parses a strictly decimal integer in [lo, hi] spanning [s, end). */
static int parse_int(const char *s, const char *end, long lo, long hi,
                     long *out) {
  if (s == end || *s < '0' || *s > '9')
    return -1;
  char *stop;
  errno = 0;
  long v = strtol(s, &stop, 10);
  if (errno || stop != end || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

static void hidden_activation(nn_net *net, float dropout) {
  nn_net_relu(net);
  if (dropout > 0.0f)
    nn_net_dropout(net, dropout);
}

static int build_mlp(nn_net *net, const char *args, float dropout, int classes,
                     char *err, size_t errlen) {
  int layer = 0;
  const char *p = args;
  for (;;) {
    const char *end = strchr(p, ',');
    if (!end)
      end = p + strlen(p);
    long width;
    if (layer == MLP_MAX_HIDDEN ||
        parse_int(p, end, 1, MLP_MAX_WIDTH, &width)) {
      snprintf(err, errlen,
               "mlp wants 1 to %d hidden widths in [1, %d], "
               "comma separated (e.g. mlp:200,200)",
               MLP_MAX_HIDDEN, MLP_MAX_WIDTH);
      return COHORT_EINVAL;
    }
    char name[16];
    snprintf(name, sizeof name, "fc%d", ++layer);
    nn_net_linear(net, (int)width, name);
    hidden_activation(net, dropout);
    if (!*end)
      break;
    p = end + 1;
  }
  char name[16];
  snprintf(name, sizeof name, "fc%d", layer + 1);
  return nn_net_linear(net, classes, name);
}

/* A 5x5 convolution (same padding, or none), ReLU and 2x2 max-pool. */
static void conv_block(nn_net *net, int channels, bool same, const char *name) {
  if (same)
    nn_net_conv2d(net, channels, 5, name);
  else
    nn_net_conv2d_valid(net, channels, 5, name);
  nn_net_relu(net);
  nn_net_maxpool2(net);
}

static int build_cnn(nn_net *net, float dropout, int classes) {
  conv_block(net, 32, true, "conv1");
  conv_block(net, 64, true, "conv2");
  nn_net_flatten(net);
  nn_net_linear(net, 512, "fc1");
  hidden_activation(net, dropout);
  return nn_net_linear(net, classes, "fc2");
}

/* NIID-Bench's SimpleCNNMNIST (Li et al., ICDE 2022): LeNet-5's shape with
 * ReLU and max-pooling, its convolutions unpadded as PyTorch's default. */
static int build_lenet(nn_net *net, float dropout, int classes) {
  conv_block(net, 6, false, "conv1");
  conv_block(net, 16, false, "conv2");
  nn_net_flatten(net);
  nn_net_linear(net, 120, "fc1");
  hidden_activation(net, dropout);
  nn_net_linear(net, 84, "fc2");
  hidden_activation(net, dropout);
  return nn_net_linear(net, classes, "fc3");
}

/* Splits "base/dropout=P" into the base and P (0 when absent). */
static int parse_modifiers(const char *spec, char *base, size_t baselen,
                           float *dropout, char *err, size_t errlen) {
  *dropout = 0.0f;
  const char *slash = strchr(spec, '/');
  size_t len = slash ? (size_t)(slash - spec) : strlen(spec);
  if (len >= baselen) {
    snprintf(err, errlen, "model spec too long");
    return COHORT_EINVAL;
  }
  memcpy(base, spec, len);
  base[len] = '\0';
  if (!slash)
    return COHORT_OK;
  const char *arg = slash + 1;
  char *stop;
  errno = 0;
  double p = strncmp(arg, "dropout=", 8) == 0 ? strtod(arg + 8, &stop) : -1;
  if (p < 0.0 || p >= 1.0 || errno || arg[8] == '\0' || *stop != '\0' ||
      !isfinite(p)) {
    snprintf(err, errlen,
             "model modifier '%s': expected /dropout=P with P "
             "in [0, 1)",
             arg);
    return COHORT_EINVAL;
  }
  *dropout = (float)p;
  return COHORT_OK;
}

int nn_zoo_resolve(const char *spec, nn_shape input, int classes, nn_model *out,
                   char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (strlen(spec) >= sizeof out->spec) {
    snprintf(err, errlen, "model spec longer than %d characters",
             NN_MAX_SPEC - 1);
    return COHORT_EINVAL;
  }
  if (classes < 2 || classes > 256) {
    snprintf(err, errlen, "model %s needs 2 to 256 classes, not %d", spec,
             classes);
    return COHORT_EINVAL;
  }
  char base[NN_MAX_SPEC];
  float dropout;
  int rc = parse_modifiers(spec, base, sizeof base, &dropout, err, errlen);
  if (rc)
    return rc;
  nn_net *net = &out->net;
  nn_net_begin(net, input);
  if (strcmp(base, "logreg") == 0) {
    nn_net_flatten(net);
    rc = nn_net_linear(net, classes, "linear");
  } else if (strncmp(base, "mlp:", 4) == 0) {
    nn_net_flatten(net);
    rc = build_mlp(net, base + 4, dropout, classes, err, errlen);
    if (rc && !net->error) /* its spec did not parse: err says why */
      return rc;
  } else if (strcmp(base, "cnn") == 0) {
    if (input.h < 4 || input.w < 4) {
      snprintf(err, errlen,
               "cnn needs images of at least 4x4, the data is "
               "%dx%dx%d",
               input.h, input.w, input.c);
      return COHORT_EINVAL;
    }
    rc = build_cnn(net, dropout, classes);
  } else if (strcmp(base, "lenet") == 0) {
    /* 16 - 4 = 12, pooled 6, - 4 = 2, pooled 1. */
    if (input.h < 16 || input.w < 16) {
      snprintf(err, errlen,
               "lenet needs images of at least 16x16, the data is "
               "%dx%dx%d",
               input.h, input.w, input.c);
      return COHORT_EINVAL;
    }
    rc = build_lenet(net, dropout, classes);
  } else {
    snprintf(err, errlen, "unknown model spec '%s' (known: %s)", spec,
             NN_ZOO_SPECS);
    return COHORT_EINVAL;
  }
  if (rc || net->error) {
    snprintf(err, errlen,
             "model %s cannot take examples of %dx%dx%d "
             "(too large or too small)",
             spec, input.h, input.w, input.c);
    return COHORT_EINVAL;
  }
  if (net->n_params > NN_ZOO_MAX_PARAMS) {
    snprintf(err, errlen, "model %s has %zu parameters; at most %zu", spec,
             net->n_params, NN_ZOO_MAX_PARAMS);
    return COHORT_EINVAL;
  }
  snprintf(out->spec, sizeof out->spec, "%s", spec);
  out->classes = classes;
  out->n_params = net->n_params;
  return COHORT_OK;
}
