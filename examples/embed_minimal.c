/* The smallest app that takes part in a federation: its own trainer (least
 * squares by normalised SGD, in plain C) on synthetic data it makes itself,
 * so it needs no data files and runs on a libcohort built without the
 * engine (-DCOHORT_ENGINE=OFF). Whatever model the coordinator names, the
 * app fits its n weights w so that w . x_i = y_i on its examples.
 *
 *   embed_minimal HOST:PORT ENROLLMENT_TOKEN
 *
 * Prints each round's training loss to stderr; exits 0 when the federation
 * is over, 1 on an error, 2 on bad usage. */
#include <stdint.h>
#include <stdio.h>

#include "cohort.h"

#define EXAMPLES 32

/* Feature j of example i in [-1, 1): a hash, made when needed, so the data
 * set costs no memory however large the model is. */
static float feature(uint32_t i, size_t j) {
  uint32_t x = i * 2654435761u ^ (uint32_t)j * 2246822519u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  x *= 0x297a2d39u;
  x ^= x >> 15;
  return (float)x / 2147483648.0f - 1.0f;
}

/* The label the app's model should learn: +1 or -1. */
static float label(uint32_t i) { return (i & 1) ? 1.0f : -1.0f; }

/* The training callback: one pass over the examples per epoch. */
static int train(void *user, const cohort_train_request *req, float *w,
                 size_t n, cohort_train_result *result) {
  unsigned *rounds = user;
  double loss = 0;
  for (uint32_t e = 0; e < req->epochs; e++) {
    loss = 0;
    for (uint32_t i = 0; i < EXAMPLES; i++) {
      double pred = 0, norm = 0;
      for (size_t j = 0; j < n; j++) {
        float x = feature(i, j);
        pred += (double)w[j] * x;
        norm += (double)x * x;
      }
      double err = pred - label(i);
      loss += err * err / EXAMPLES;
      float step = (float)(0.5 * err / norm); /* half the way to y_i */
      for (size_t j = 0; j < n; j++)
        w[j] -= step * feature(i, j);
    }
  }
  result->num_examples = EXAMPLES;
  result->train_loss = loss;
  (*rounds)++;
  fprintf(stderr, "embed_minimal: round %llu, %zu weights, loss %.6f\n",
          (unsigned long long)req->round, n, loss);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST:PORT ENROLLMENT_TOKEN\n", argv[0]);
    return 2;
  }
  unsigned rounds = 0;
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = argv[1];
  o.enrollment_token = argv[2];
  o.train = train;
  o.train_user = &rounds;
  cohort_client_t *client = NULL;
  int rc = cohort_client_new(&o, &client);
  if (rc == COHORT_OK)
    rc = cohort_client_run(client); /* until the federation is over */
  if (rc == COHORT_OK)
    fprintf(stderr, "embed_minimal: federation over after %u round(s)\n",
            rounds);
  else
    fprintf(stderr, "embed_minimal: %s: %s\n", cohort_strerror(rc),
            cohort_client_last_error(client));
  cohort_client_free(client);
  return rc == COHORT_OK ? 0 : 1;
}
