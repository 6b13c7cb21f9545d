/* Embedding libcohort in an app: the app owns its data and its training
 * loop, and hands Cohort a callback. Cohort does the rest: enrollment,
 * check-ins, the digest-checked download, computing and uploading the delta.
 *
 *   cohort-embed-example HOST:PORT ENROLLMENT_TOKEN
 *
 * The "training" here nudges every weight a little, so the example stays
 * short; a real app runs its own optimizer over its own data in train().
 * Without an evaluation callback (cohort_client_options.evaluate) the
 * coordinator's federated-evaluation tasks are declined, which it counts
 * as a decline, not a failure. */
#include <stdio.h>
#include <stdlib.h>

#include "cohort.h"

typedef struct app {
  unsigned rounds_trained;
} app;

/* Called once per round with the global model in params (n floats); leaves
 * the locally trained model there. */
static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  app *a = user;
  for (size_t i = 0; i < n; i++)
    params[i] += 0.001f;
  result->num_examples = 10;
  result->train_loss = 0.0;
  a->rounds_trained++;
  /* Fields newer than the headers an app was built with are read only
   * when the library's request has them (cohort.h, "ABI promise"). */
  unsigned inputs =
      COHORT_HAS_FIELD(req, classes)
          ? req->input_channels * req->input_height * req->input_width
          : 0;
  fprintf(stderr,
          "example: trained round %llu of model %s (%zu weights, %u inputs, "
          "%u classes)\n",
          (unsigned long long)req->round, req->model_spec, n, inputs,
          COHORT_HAS_FIELD(req, classes) ? req->classes : 0);
  /* A long loop would poll cohort_client_cancelled(req->client) and return
   * non-zero once the app stops the client. */
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST:PORT ENROLLMENT_TOKEN\n", argv[0]);
    return 2;
  }
  app state = {0};
  cohort_client_options o;
  if (cohort_client_options_init(&o) != COHORT_OK) {
    fprintf(stderr, "example: %s\n", cohort_last_error());
    return 1;
  }
  o.server = argv[1];
  o.enrollment_token = argv[2];
  o.platform = "embed-example";
  o.train = train;
  o.train_user = &state;

  cohort_client_t *client = NULL;
  int rc = cohort_client_new(&o, &client);
  if (rc != COHORT_OK) {
    fprintf(stderr, "example: %s: %s\n", cohort_strerror(rc),
            cohort_last_error());
    return 1;
  }
  rc = cohort_client_run(client); /* until the federation is over */
  if (rc != COHORT_OK)
    fprintf(stderr, "example: %s: %s\n", cohort_strerror(rc),
            cohort_client_last_error(client));
  else
    fprintf(stderr, "example: federation over after %u round(s) here\n",
            state.rounds_trained);
  cohort_client_free(client);
  return rc == COHORT_OK ? 0 : 1;
}
