/* libFuzzer target: a safetensors buffer (a model file, or a model blob read
 * back from the store) through nn_safetensors_parse, and the lookups a
 * loader does on what it accepted. */
#include <stddef.h>
#include <stdint.h>

#include "nn_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the floats read go, so the reads are not optimized away. */
static volatile float g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nn_st_file f;
  char err[256];
  if (nn_safetensors_parse(data, size, "fuzz", &f, err, sizeof err) == 0) {
    /* Touch every float, so a slice that runs past the data is caught. */
    float sum = 0;
    for (size_t i = 0; i < f.n_floats; i++)
      sum += f.data[i];
    g_sink = sum;
    for (size_t i = 0; i < f.n; i++)
      (void)nn_st_find(&f, f.tensors[i].name);
    for (size_t i = 0; i < f.n_meta; i++)
      (void)nn_st_meta_get(&f, f.meta[i].key);
  }
  nn_safetensors_free(&f);
  return 0;
}
