/* Labelled examples in memory and the IDX reader (MNIST, Fashion-MNIST, as
 * Debian ships them: gzip'd or plain). Pixels are scaled to [0, 1]. Image
 * data stays one byte a feature, as in the file, and becomes float one
 * batch at a time (nn_dataset_gather), so a client's share costs a quarter
 * of what float32 would. */
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
  /* The features, row-major, n * dim, owned: exactly one of x and x8 is set
   * (both NULL when n == 0). x8 holds bytes, feature value x8_value[byte]
   * (IDX pixels: byte / 255); readers of features go through
   * nn_dataset_gather or nn_dataset_span, which handle both. */
  float *x;
  uint8_t *x8;
  float x8_value[256];
  /* When not 0, x8_value[b] is (float)b / x8_divisor for every byte b
   * (nn_dataset_set_x8_divisor), and bytes become floats by that division,
   * vectorised, rather than by a lookup per feature. */
  float x8_divisor;
  /* Set by nn_dataset_pack: x8 then holds each example packed (see there),
   * example i at x8 + x8_offsets[i], x8_offsets[n] bytes in all. Only
   * nn_dataset_gather, nn_dataset_span, nn_dataset_truncate and
   * nn_dataset_close take a packed data set; nn_dataset_alloc_like refuses
   * one as a model. */
  uint32_t *x8_offsets;
  uint8_t *y; /* n labels, owned */
  /* Features an app keeps in its own memory (cohort_dataset_from_callback):
   * set instead of x and x8, and nn_dataset_gather and nn_dataset_span
   * ask fetch for each example's dim floats. An example fetch cannot give
   * is left zero and counted in *fetch_failures, which the caller checks
   * after training or evaluating. Not owned. */
  int (*fetch)(void *user, size_t index, float *features);
  void *fetch_user;
  size_t *fetch_failures;
} nn_dataset;

/* Copies rows[0 .. k) of ds into x (k * dim floats, converted from bytes
 * where ds holds them) and their labels into y (may be NULL). rows must be
 * < ds->n. The values are those the features stand for, bit for bit. */
void nn_dataset_gather(const nn_dataset *ds, const uint32_t *rows, size_t k,
                       float *x, uint8_t *y);

/* Sets ds's table of byte values to (float)b / divisor for every byte b,
 * and x8_divisor to divisor. */
void nn_dataset_set_x8_divisor(nn_dataset *ds, float divisor);

/* dst[0 .. n) = the values of the bytes src[0 .. n) in ds's table, with the
 * vector kernel of the CPU's path when ds->x8_divisor is set. */
void nn_dataset_bytes_to_floats(const nn_dataset *ds, const uint8_t *src,
                                size_t n, float *dst);

/* Packs ds's byte features in place, so that a client's share costs about
 * what its non-zero bytes do: an example whose bitmap of non-zero features
 * (bit j of byte j / 8; dim / 8 bytes, rounded up) and non-zero bytes
 * together take fewer than dim bytes is stored as those two, the bytes in
 * feature order; any other example stays as it was (its dim bytes). Images with
 * a blank background are about half zeros (Fashion-MNIST: 61% of the bytes
 * remain). The features read back through nn_dataset_gather and nn_dataset_span
 * are the same floats, bit for bit. Does nothing to a data set of floats, of
 * fetched examples, already packed, or of more than 4 GiB; when memory is short
 * it leaves ds as it was (packing only saves memory). Works example by example
 * in the same block, which then shrinks: the peak is the unpacked data set plus
 * one example. */
void nn_dataset_pack(nn_dataset *ds);

/* Example row of a packed ds (nn_dataset_pack) into x (dim floats). */
void nn_dataset_unpack_row(const nn_dataset *ds, size_t row, float *x);

/* Example index's features from ds->fetch into x (dim floats); zeros and
 * a count in *ds->fetch_failures when fetch fails. */
void nn_dataset_fetch(const nn_dataset *ds, size_t index, float *x);

/* The features of examples [first, first + k) as floats: a pointer into
 * ds->x when ds holds floats, else buf (k * dim floats) filled in. */
const float *nn_dataset_span(const nn_dataset *ds, size_t first, size_t k,
                             float *buf);

/* Sets *out to an empty data set shaped as like (dim, classes, shape,
 * storage) with room for n examples (x or x8 as like's, and y); n == 0
 * allocates nothing. Returns COHORT_OK or COHORT_ENOMEM (*out zeroed), or
 * COHORT_EINVAL when like is packed (nn_dataset_pack): its rows cannot be
 * copied. */
int nn_dataset_alloc_like(const nn_dataset *like, size_t n, nn_dataset *out);

/* Copies example j of src into example i of dst (same dim and storage). */
void nn_dataset_copy_row(nn_dataset *dst, size_t i, const nn_dataset *src,
                         size_t j);

/* Reads an IDX image file (magic 0x00000803, u8 pixels) and its IDX label
 * file (magic 0x00000801). Either may be gzip-compressed (detected by its
 * magic bytes, not the name). Validates magics, dimensions, matching counts
 * and that the files are not truncated; n_classes is max label + 1. On failure
 * returns a negative cohort_status and writes a one-line reason naming the file
 * into err. */
int nn_idx_load(const char *images_path, const char *labels_path,
                nn_dataset *out, char *err, size_t errlen);

/* Options of nn_csv_load; set them with nn_csv_options_init, then change
 * what differs. */
typedef struct nn_csv_options {
  /* Column of the label, 0-based; a negative value counts from the end
   * (-1 = last column). Default 0. The other columns are the features, in
   * file order. */
  int label_column;
  /* NN_CSV_HEADER_AUTO (default): the first row is a header when one of its
   * fields is not a number. NN_CSV_HEADER_YES / _NO force it. */
  int header;
  /* Every feature is multiplied by it (1.0 / 255 for 0..255 pixel CSVs such
   * as Kaggle's Fashion-MNIST); default 1.0. Must be finite. */
  double scale;
  /* Shape of one example, channels * height * width == features per row.
   * All three 0 (the default): a feature count that is a perfect square
   * s * s becomes 1 x s x s (a 784-column image CSV feeds a CNN as 28 x 28),
   * any other count d becomes d x 1 x 1. */
  int channels, height, width;
} nn_csv_options;

enum { NN_CSV_HEADER_AUTO = 0, NN_CSV_HEADER_YES = 1, NN_CSV_HEADER_NO = 2 };

/* Sets the defaults: label column 0, header auto-detected, scale 1.0, shape
 * derived from the feature count. */
void nn_csv_options_init(nn_csv_options *opt);

/* Reads a comma-separated file, plain or gzip'd (detected by its magic
 * bytes), of one example per line: a label and the features. opt may be NULL
 * for the defaults. Lines end in LF or CRLF; fields may carry surrounding
 * blanks and double quotes but no embedded commas; blank lines are accepted
 * only at the end of the file; a UTF-8 byte-order mark is skipped. Every row
 * must have the same number of fields, every field must be a finite number,
 * labels integers in [0, 255]; n_classes is max label + 1. Lines may be up to
 * 16 MiB long; memory grows with the rows actually read. On failure returns a
 * negative cohort_status, leaves *out zeroed and writes a one-line reason
 * naming the file and, for a bad row, the line ("data.csv:17: 785 fields,
 * expected 786") into err (may be NULL). Thread-safe: no shared state. */
int nn_csv_load(const char *path, const nn_csv_options *opt, nn_dataset *out,
                char *err, size_t errlen);

/* The two passes of a share: nn_csv_load_labels reads the file as
 * nn_csv_load does (every row checked, the same errors) but keeps only the
 * labels: out->x is NULL, the rest (n, dim, shape, n_classes, all n labels)
 * filled in, and *bytes (may be NULL) set when every feature is an integer
 * in [0, 255]. A partitioner decides from these which rows a client keeps;
 * nn_csv_load_rows then reads the file again and keeps only rows[0 .. k)
 * (any order; repeats allowed), row i of out being row rows[i], each
 * feature the float nn_csv_load gives for it: stored as bytes (out->x8,
 * x8_value[b] = b * scale) when bytes is set, else as floats. labels and
 * bytes are what the first pass gave for the same file and options (a file
 * that changed since is refused). Memory is the labels (a byte a row),
 * the k chosen rows and one line, whatever the file's size. */
int nn_csv_load_labels(const char *path, const nn_csv_options *opt,
                       nn_dataset *out, int *bytes, char *err, size_t errlen);
int nn_csv_load_rows(const char *path, const nn_csv_options *opt,
                     const nn_dataset *labels, int bytes, const uint32_t *rows,
                     size_t k, nn_dataset *out, char *err, size_t errlen);

/* Loads "train-images-idx3-ubyte[.gz]" + "train-labels-idx1-ubyte[.gz]"
 * (train != 0) or the "t10k-" pair (train == 0) from dir. */
int nn_idx_load_dir(const char *dir, int train, nn_dataset *out, char *err,
                    size_t errlen);

/* Sets *images and *labels (malloc'd) to dir's "train-" (train != 0) or
 * "t10k-" IDX pair, each file gzip'd or plain, as nn_idx_load_dir reads. */
int nn_idx_paths(const char *dir, int train, char **images, char **labels,
                 char *err, size_t errlen);

/* Reads an IDX pair as nn_idx_load does but no pixels: out->x8 is NULL, the
 * rest (n, dim, shape, n_classes, all n labels) is filled in. A partitioner
 * decides from these which examples a client keeps, then nn_idx_load_rows
 * decodes only those. */
int nn_idx_load_labels(const char *images_path, const char *labels_path,
                       nn_dataset *out, char *err, size_t errlen);

/* Decodes only the images rows[0 .. k) (any order; repeats allowed) into
 * out, row i of out being image rows[i], byte for byte what nn_idx_load
 * gives for that image; n_classes is the whole file's, as nn_idx_load's.
 * labels is what nn_idx_load_labels read from the same pair (a file that
 * changed since is refused). The file is visited once, forward: a gzip'd
 * one is streamed through zlib (the skipped images cost CPU, not memory), a
 * plain one is read by seeking to each chosen image, so memory is out's k
 * images (a byte a pixel) and zlib's 128 KiB buffer, whatever the file's
 * size. The whole file is still checked to hold every image its header
 * promises. */
int nn_idx_load_rows(const char *images_path, const char *labels_path,
                     const nn_dataset *labels, const uint32_t *rows, size_t k,
                     nn_dataset *out, char *err, size_t errlen);

/* Chooses from the labels alone (labels->x may be NULL) which examples to
 * decode: sets *rows (malloc'd, freed by the caller) and *k. Returns a
 * cohort_status, err filled in on failure. */
typedef int (*nn_row_chooser)(const nn_dataset *labels, void *ctx,
                              uint32_t **rows, size_t *k, char *err,
                              size_t errlen);

/* Loads from path (as nn_dataset_load_path reads it) only the examples that
 * choose picks, in its order: the labels first, then only the chosen
 * examples (nn_idx_load_rows for an IDX folder, nn_csv_load_rows for a CSV
 * file), so memory follows the share, not the file. */
int nn_dataset_load_chosen(const char *path, int train, nn_row_chooser choose,
                           void *ctx, nn_dataset *out, char *err,
                           size_t errlen);

/* Loads path as Cohort's tools take data: a folder is read as IDX
 * (nn_idx_load_dir with train), anything else as a CSV file with the default
 * options (label first, header detected, shape derived). */
int nn_dataset_load_path(const char *path, int train, nn_dataset *out,
                         char *err, size_t errlen);

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
