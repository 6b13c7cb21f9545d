/* End-to-end training throughput of the engine on Fashion-MNIST: trains a
 * zoo model with nn_train, times only the training, evaluates on the test
 * set and prints one JSON line. bench/torch_baseline.py prints the same line
 * for PyTorch; bench/compare_train.sh runs both side by side.
 *
 * FLOPs: 2 * m * n * k for every matrix product backpropagation needs, per
 * example and layer with parameters (a linear layer is m = 1, n = out,
 * k = in; a conv2d is m = h * w, n = out channels, k = ksize^2 * in
 * channels): the forward product, the weight gradient, and the input
 * gradient except for the first layer with parameters, whose input needs
 * none (PyTorch skips it too). Bias, activations, pooling, softmax and the
 * optimizer are not counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cohort_status.h"
#include "flags.h"
#include "nn_dataset.h"
#include "nn_gemm.h"
#include "nn_isa.h"
#include "nn_optim.h"
#include "nn_train.h"
#include "nn_zoo.h"

typedef struct bench_opts {
  const char *model, *data, *optimizer, *isa;
  long batch, threads, samples, test_samples, epochs, seed;
  double lr, momentum;
} bench_opts;

static bench_opts g_opts;

#define NUM(x) (double)(x)
static const flag_def FLAGS[] = {
    {"model", FLAG_STRING, &g_opts.model, "logreg", 0, 0, "SPEC",
     "zoo model: " NN_ZOO_SPECS},
    {"batch", FLAG_INT, &g_opts.batch, "32", 1, 65536, "B", "minibatch size"},
    {"threads", FLAG_INT, &g_opts.threads, "1", 0, 1024, "T",
     "engine threads (0 = all online cores)"},
    {"samples", FLAG_INT, &g_opts.samples, "60000", 1, NUM(1e9), "N",
     "train on the first N training images"},
    {"test-samples", FLAG_INT, &g_opts.test_samples, "10000", 1, NUM(1e9), "N",
     "evaluate on the first N test images (fewer: a quicker run on a "
     "slow path)"},
    {"epochs", FLAG_INT, &g_opts.epochs, "1", 1, 1000, "E", "passes over them"},
    {"lr", FLAG_DOUBLE, &g_opts.lr, "0.05", 1e-9, 100, "RATE", "learning rate"},
    {"optimizer", FLAG_STRING, &g_opts.optimizer, "sgd", 0, 0, "NAME",
     "sgd or adam"},
    {"momentum", FLAG_DOUBLE, &g_opts.momentum, "0", 0, 0.999999, "M",
     "SGD momentum"},
    {"seed", FLAG_INT, &g_opts.seed, "1", 0, NUM(9007199254740991LL), "S",
     "initialisation and shuffling seed"},
    {"data", FLAG_STRING, &g_opts.data, "/usr/share/datasets/fashion-mnist", 0,
     0, "DIR", "directory of the IDX files (Debian's dataset-fashion-mnist)"},
    {"isa", FLAG_STRING, &g_opts.isa, NULL, 0, 0, "NAME",
     "kernel path: avx512, avx2, sse2, neon or scalar (sets COHORT_ISA; "
     "default: the best this CPU runs)"},
};
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const char USAGE[] =
    "usage: bench_train --model SPEC --batch B --threads T [options]\n\n"
    "Trains a zoo model on Fashion-MNIST, times the training alone and\n"
    "prints one JSON line: samples/s, GFLOP/s and test accuracy.";

/* The process's CPU seconds (all its threads): on a shared machine,
 * samples per CPU second at one thread moves far less with the load than
 * samples per second does. */
static double cpu_s(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
    return 0.0;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Forward plus backward FLOPs of one example; see the file comment. */
static double flops_per_example(const nn_net *net) {
  double total = 0.0;
  bool seen_params = false;
  for (int i = 0; i < net->n_layers; i++) {
    const nn_layer *l = &net->layers[i];
    double m, n, k;
    if (l->kind == NN_LINEAR) {
      m = 1.0;
      n = l->out.c;
      k = (double)nn_shape_size(l->in);
    } else if (l->kind == NN_CONV2D) {
      m = (double)l->out.h * l->out.w;
      n = l->out.c;
      k = (double)l->ksize * l->ksize * l->in.c;
    } else {
      continue;
    }
    total += 2.0 * m * n * k * (seen_params ? 3.0 : 2.0);
    seen_params = true;
  }
  return total;
}

int main(int argc, char **argv) {
  int rc = flags_main("bench_train", USAGE, FLAGS, N_FLAGS, argc, argv);
  if (rc >= 0)
    return rc;
  char err[256];
  if (g_opts.isa && setenv("COHORT_ISA", g_opts.isa, 1) != 0) {
    perror("bench_train: setenv");
    return 1;
  }
  if (nn_isa_check(err, sizeof err)) {
    fprintf(stderr, "bench_train: %s\n", err);
    return 2;
  }
  nn_dataset train = {0}, test = {0};
  nn_model model;
  float *params = NULL;
  rc = 1;

  nn_train_opts o;
  nn_train_opts_init(&o);
  if (nn_optimizer_parse(g_opts.optimizer, &o.optim.kind)) {
    fprintf(stderr, "bench_train: --optimizer %s: use sgd or adam\n",
            g_opts.optimizer);
    return 2;
  }
  o.epochs = (int)g_opts.epochs;
  o.batch_size = (int)g_opts.batch;
  o.optim.learning_rate = (float)g_opts.lr;
  o.optim.momentum = (float)g_opts.momentum;
  o.seed = (uint64_t)g_opts.seed;

  if (nn_idx_load_dir(g_opts.data, 1, &train, err, sizeof err) ||
      nn_idx_load_dir(g_opts.data, 0, &test, err, sizeof err)) {
    fprintf(stderr, "bench_train: %s\n", err);
    goto out;
  }
  nn_dataset_truncate(&train, (size_t)g_opts.samples);
  nn_dataset_truncate(&test, (size_t)g_opts.test_samples);
  if (nn_zoo_resolve(g_opts.model, nn_dataset_shape(&train), 10, &model, err,
                     sizeof err)) {
    fprintf(stderr, "bench_train: %s\n", err);
    goto out;
  }
  params = malloc(model.n_params * sizeof *params);
  if (!params) {
    fprintf(stderr, "bench_train: out of memory\n");
    goto out;
  }
  nn_net_init(&model.net, params, (uint64_t)g_opts.seed);
  int threads = nn_threads_set((int)g_opts.threads);

  double train_loss, t0 = clock_mono_s(), cpu0 = cpu_s();
  int trc =
      nn_train(&model.net, params, &train, &o, &train_loss, err, sizeof err);
  double seconds = clock_mono_s() - t0, cpu_seconds = cpu_s() - cpu0;
  if (trc) {
    fprintf(stderr, "bench_train: training failed: %s\n", err);
    goto out;
  }
  double acc, test_loss;
  if (nn_evaluate(&model.net, params, &test, &acc, &test_loss)) {
    fprintf(stderr, "bench_train: evaluation failed\n");
    goto out;
  }
  double examples = (double)train.n * (double)o.epochs;
  printf("{\"impl\":\"cohort\",\"model\":\"%s\",\"batch\":%ld,"
         "\"threads\":%d,\"samples\":%zu,\"epochs\":%d,\"lr\":%g,"
         "\"optimizer\":\"%s\",\"seconds\":%.4f,\"samples_per_s\":%.1f,"
         "\"gflops\":%.3f,\"train_loss\":%.5f,\"test_loss\":%.5f,"
         "\"test_accuracy\":%.4f,\"backend\":\"%s\",\"isa\":\"%s\","
         "\"cpu_seconds\":%.4f,\"samples_per_cpu_s\":%.1f}\n",
         g_opts.model, g_opts.batch, threads, train.n, o.epochs, g_opts.lr,
         nn_optimizer_name(o.optim.kind), seconds, examples / seconds,
         flops_per_example(&model.net) * examples / seconds * 1e-9, train_loss,
         test_loss, acc, nn_blas_backend(), nn_isa_name(nn_isa_best()),
         cpu_seconds, examples / cpu_seconds);
  rc = 0;
out:
  free(params);
  nn_dataset_close(&train);
  nn_dataset_close(&test);
  return rc;
}
