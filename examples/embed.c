/* Embedding libcohort in an app: the app owns its data and its training
 * loop, and hands Cohort a callback. Cohort does the rest: enrollment,
 * check-ins, the digest-checked download, computing and uploading the delta.
 *
 *   cohort-embed-example HOST:PORT ENROLLMENT_TOKEN
 *
 * The "training" here nudges every weight a little, so the example stays
 * short; a real app runs its own optimizer over its own data in train(). */
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
  fprintf(stderr, "example: trained round %llu of model %s (%zu weights)\n",
          (unsigned long long)req->round, req->model_spec, n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST:PORT ENROLLMENT_TOKEN\n", argv[0]);
    return 2;
  }
  app state = {0};
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = argv[1];
  o.enrollment_token = argv[2];
  o.platform = "embed-example";
  o.train = train;
  o.train_user = &state;

  cohort_client_t *client = NULL;
  int rc = cohort_client_new(&o, &client);
  if (rc != COHORT_OK) {
    fprintf(stderr, "example: %s\n", cohort_strerror(rc));
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
