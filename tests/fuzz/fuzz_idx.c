/* libFuzzer target: an IDX image file and its label file (plain or gzip'd)
 * through nn_idx_load, then nn_idx_load_labels and nn_idx_load_rows as the
 * client's share loader uses them. Input: a 2-byte little-endian length of
 * the image file, the image file, then the label file. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_support.h"
#include "nn_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t n_images = (size_t)data[0] | (size_t)data[1] << 8;
  data += 2;
  size -= 2;
  if (n_images > size)
    n_images = size;
  char images[FUZZ_PATH_MAX], labels[FUZZ_PATH_MAX], err[256];
  fuzz_write_file("images", data, n_images, images);
  fuzz_write_file("labels", data + n_images, size - n_images, labels);
  nn_dataset all = {0}, lab = {0}, some = {0};
  if (nn_idx_load(images, labels, &all, err, sizeof err) == 0 &&
      nn_idx_load_labels(images, labels, &lab, err, sizeof err) == 0 &&
      lab.n > 0) {
    uint32_t rows[3] = {(uint32_t)(lab.n - 1), 0, (uint32_t)(lab.n / 2)};
    (void)nn_idx_load_rows(images, labels, &lab, rows, 3, &some, err,
                           sizeof err);
  }
  nn_dataset_close(&all);
  nn_dataset_close(&lab);
  nn_dataset_close(&some);
  return 0;
}
