/* Labelled examples in memory and the IDX reader (MNIST, Fashion-MNIST, as
 * Debian ships them: gzip'd or plain). Pixels are scaled to [0, 1]. */
#ifndef COHORT_NN_DATASET_H
#define COHORT_NN_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct nn_dataset {
  size_t n;      /* examples */
  size_t dim;    /* features per example (784 for 28x28 images) */
  int n_classes; /* labels are in [0, n_classes) */
  /* Shape of one example, channels * height * width == dim: 1 x rows x cols
   * for IDX images; a flat vector is dim x 1 x 1. Layers that need images
   * (conv2d) read it; the rest see dim features. */
  int channels, height, width;
  float *x;      /* n * dim, row-major, owned */
  uint8_t *y;    /* n labels, owned */
} nn_dataset;

/* Reads an IDX image file (magic 0x00000803, u8 pixels) and its IDX label
 * file (magic 0x00000801). Either may be gzip-compressed (detected by its
 * magic bytes, not the name). Validates magics, dimensions, matching counts
 * and that the files are not truncated; n_classes is max label + 1. On failure
 * returns a negative cohort_status and writes a one-line reason naming the file
 * into err. */
int nn_idx_load(const char *images_path, const char *labels_path,
                nn_dataset *out, char *err, size_t errlen);

/* Loads "train-images-idx3-ubyte[.gz]" + "train-labels-idx1-ubyte[.gz]"
 * (train != 0) or the "t10k-" pair (train == 0) from dir. */
int nn_idx_load_dir(const char *dir, int train, nn_dataset *out, char *err,
                    size_t errlen);

/* Copies the index-th of count contiguous, near-equal slices of src into
 * out (index in [0, count)). The first (src->n % count) slices get one extra
 * example, so every example lands in exactly one slice. */
int nn_dataset_shard(const nn_dataset *src, int index, int count,
                     nn_dataset *out);

/* Keeps only the first n examples (no-op when n >= ds->n). */
void nn_dataset_truncate(nn_dataset *ds, size_t n);

/* Frees the arrays and zeroes *ds. Accepts NULL and a zeroed dataset. */
void nn_dataset_close(nn_dataset *ds);

#endif
