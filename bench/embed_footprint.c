/* What embedding libcohort costs an app in memory: an app with its own
 * trainer (a plain C loop over the model's floats, 199,210 of them for
 * mlp:200,200) built twice, with libcohort taking part in a federation
 * (bench_embed_footprint HOST:PORT TOKEN) and with libcohort's calls
 * removed (bench_embed_footprint_bare ROUNDS: the same trainer on a vector
 * of its own, as many rounds). A third argument, a directory, keeps the
 * global model in a file there (cohort_client_set_model_dir), as an app on
 * a device short of memory would. bench/embed_footprint.sh runs both under
 * GNU time and prints the difference of their peak RSS. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cohort.h"

/* Parameters of mlp:200,200 on 28x28 inputs and 10 classes. */
#define MLP_200_200 199210

/* The app's trainer: every weight pulled towards a target of its own. */
static int train(void *user, const cohort_train_request *req, float *w,
                 size_t n, cohort_train_result *result) {
  double loss = 0;
  for (uint32_t e = 0; e < req->epochs; e++) {
    loss = 0;
    for (size_t j = 0; j < n; j++) {
      float err = w[j] - (float)((j % 7) * 0.01);
      loss += (double)err * err / (double)n;
      w[j] -= 0.1f * err;
    }
  }
  result->num_examples = 1000;
  result->train_loss = loss;
  fprintf(stderr, "footprint: round %llu, %zu weights, loss %g\n",
          (unsigned long long)req->round, n, loss);
  return 0;
}

#ifdef FOOTPRINT_BARE
int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ROUNDS\n", argv[0]);
    return 2;
  }
  float *w = calloc(MLP_200_200, sizeof *w);
  if (!w)
    return 1;
  cohort_train_request req = {.model_spec = "mlp:200,200", .epochs = 1};
  cohort_train_result res;
  for (req.round = 1; req.round <= strtoull(argv[1], NULL, 10); req.round++)
    train(NULL, &req, w, MLP_200_200, &res);
  free(w);
  return 0;
}
#else
int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s HOST:PORT ENROLLMENT_TOKEN [MODEL_DIR]\n",
            argv[0]);
    return 2;
  }
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = argv[1];
  o.enrollment_token = argv[2];
  o.train = train;
  cohort_client_t *c = NULL;
  int rc = cohort_client_new(&o, &c);
  if (rc == COHORT_OK && argc == 4)
    rc = cohort_client_set_model_dir(c, argv[3]);
  if (rc == COHORT_OK)
    rc = cohort_client_run(c);
  if (rc != COHORT_OK)
    fprintf(stderr, "footprint: %s: %s\n", cohort_strerror(rc),
            cohort_client_last_error(c));
  cohort_client_free(c);
  return rc == COHORT_OK ? 0 : 1;
}
#endif
