/* Writes tensors through Cohort's safetensors saver and, given a second
 * path, a zoo model (mlp:3 on 2x2x1 inputs, 2 classes, parameter i = i/2)
 * through nn_model_save, for safetensors_python.sh to read back with numpy.
 * The values are chosen so their sums are exact: keep them in step with the
 * script's expectations. */
#include <stdio.h>
#include <stdlib.h>

#include "nn_model_io.h"
#include "nn_safetensors.h"

static int write_model(const char *path) {
  nn_model m;
  char err[512];
  if (nn_zoo_resolve("mlp:3", (nn_shape){.c = 1, .h = 2, .w = 2}, 2, &m, err,
                     sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  float params[23]; /* fc1 3x4 + 3, fc2 2x3 + 2 */
  if (m.n_params != sizeof params / sizeof *params)
    return 1;
  for (size_t i = 0; i < m.n_params; i++)
    params[i] = (float)i / 2.0f;
  const char *extra[] = {"round", "3", NULL};
  if (nn_model_save(&m, params, path, extra, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  float fc1_w[3 * 4], conv1_w[2 * 1 * 3 * 3];
  const float fc1_b[4] = {1.0f, -2.0f, 3.5f, 0.25f};
  const float step = 7.0f;
  char err[512];

  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s OUT.safetensors [MODEL.safetensors]\n", argv[0]);
    return 2;
  }
  if (argc == 3 && write_model(argv[2]) != 0)
    return 1;
  for (int i = 0; i < 12; i++)
    fc1_w[i] = (float)i / 8.0f; /* sum 8.25 */
  for (int i = 0; i < 18; i++)
    conv1_w[i] = (float)(i - 9) * 0.5f; /* sum -4.5 */
  const nn_st_tensor t[] = {
      {"fc1.weight", 2, {3, 4}, fc1_w},
      {"conv1.weight", 4, {2, 1, 3, 3}, conv1_w},
      {"fc1.bias", 1, {4}, fc1_b}, /* sum 2.75 */
      {"step", 0, {0}, &step},
      {"empty", 1, {0}, NULL},
  };
  const nn_st_meta meta[] = {{"cohort.model", "mlp:4"}, {"round", "12"}};
  if (nn_safetensors_save(argv[1], t, sizeof t / sizeof t[0], meta, 2, err,
                          sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  return 0;
}
