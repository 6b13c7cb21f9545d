/* libFuzzer target: a CSV data set (plain or gzip'd) through nn_csv_load.
 * The first byte picks the options (label column, header mode, shape); the
 * rest is the file. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_support.h"
#include "nn_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  nn_csv_options opt;
  nn_csv_options_init(&opt);
  static const int label_columns[4] = {0, -1, 1, -3};
  opt.label_column = label_columns[data[0] & 3];
  opt.header = (data[0] >> 2) % 3; /* AUTO, YES, NO */
  if (data[0] & 0x20)
    opt.scale = 1.0 / 255;
  if (data[0] & 0x40) { /* an explicit shape: 1 x 2 x 2 */
    opt.channels = 1;
    opt.height = 2;
    opt.width = 2;
  }
  char path[FUZZ_PATH_MAX], err[256];
  fuzz_write_file("data.csv", data + 1, size - 1, path);
  nn_dataset ds = {0};
  (void)nn_csv_load(path, &opt, &ds, err, sizeof err);
  nn_dataset_close(&ds);
  return 0;
}
