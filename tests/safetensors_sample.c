/* Writes a small model through Cohort's safetensors saver, for
 * safetensors_python.sh to read back with numpy. The values are chosen so
 * their sums are exact: keep them in step with the script's expectations. */
#include <stdio.h>

#include "nn_safetensors.h"

int main(int argc, char **argv) {
  float fc1_w[3 * 4], conv1_w[2 * 1 * 3 * 3];
  const float fc1_b[4] = {1.0f, -2.0f, 3.5f, 0.25f};
  const float step = 7.0f;
  char err[512];

  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
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
