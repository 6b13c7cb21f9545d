/* safetensors files of float32 tensors (https://github.com/huggingface/
 * safetensors), so a Cohort model opens in numpy, PyTorch and friends, and a
 * model from them opens here. Only dtype F32 is read or written.
 *
 * Layout: u64 little-endian N, N bytes of JSON header, then the data buffer.
 * The header maps each tensor name to {"dtype","shape","data_offsets"} and
 * may hold "__metadata__", a string-to-string map. Offsets are relative to
 * the buffer, and the tensors cover the buffer exactly, without gaps or
 * overlaps. Files are untrusted: every load validates all of this before it
 * allocates anything sized by the file. */
#ifndef COHORT_NN_SAFETENSORS_H
#define COHORT_NN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define NN_ST_MAX_DIMS 8
/* The reference implementation's cap; larger headers are rejected. */
#define NN_ST_MAX_HEADER ((uint64_t)100000000)

/* One named tensor: ndim (0 for a scalar, up to NN_ST_MAX_DIMS) sizes in
 * shape[0..ndim), row-major float data of shape[0] * ... * shape[ndim-1]
 * values (1 for a scalar; 0 when a size is 0, and data may then be NULL). */
typedef struct nn_st_tensor {
  const char *name;
  int ndim;
  int64_t shape[NN_ST_MAX_DIMS];
  const float *data;
} nn_st_tensor;

/* One "__metadata__" entry: UTF-8 strings. */
typedef struct nn_st_meta {
  const char *key;
  const char *value;
} nn_st_meta;

/* A loaded file. Everything the pointers reach is owned by the struct and
 * released by nn_safetensors_free: the tensors are in the order of their
 * data in the file, and their data are consecutive slices of one float
 * array `data` of n_floats values (the whole buffer, ready to be treated as
 * one flat vector). Zero-size tensors still get a non-NULL data pointer.
 * priv is internal. */
typedef struct nn_st_file {
  size_t n;
  nn_st_tensor *tensors;
  size_t n_meta;
  nn_st_meta *meta;
  float *data;
  size_t n_floats;
  void *priv;
} nn_st_file;

/* Error reporting, for every function below: on failure err (which may be
 * NULL; errlen bytes) receives one line "<file or name>: <problem>", e.g.
 * "m.safetensors: tensor 'w': dtype F16 not supported, only F32"; on
 * success it is set to "". Return values are cohort_status codes:
 * COHORT_OK, COHORT_EINVAL (bad arguments or tensors given to save/encode),
 * COHORT_EFORMAT (a malformed file or buffer), COHORT_EIO (the file system),
 * COHORT_ENOMEM. All functions are thread-safe on distinct arguments. */

/* Number of floats in t (1 for a scalar), or -1 when ndim is out of range,
 * a size is negative, or the product exceeds INT64_MAX / 4. */
int64_t nn_st_numel(const nn_st_tensor *t);

/* Serialises the n tensors (their data in the order given) and the n_meta
 * metadata entries (none when n_meta is 0; meta may then be NULL) into a new
 * malloc'd buffer *buf of *len bytes, which the caller frees. Names must be
 * distinct, valid UTF-8 and not "__metadata__"; metadata keys must be
 * distinct. The JSON header is padded with spaces to a multiple of 8 bytes,
 * so the data starts 8-aligned. Borrows everything; on failure *buf is NULL
 * and *len 0. */
int nn_safetensors_encode(const nn_st_tensor *tensors, size_t n,
                          const nn_st_meta *meta, size_t n_meta, void **buf,
                          size_t *len, char *err, size_t errlen);

/* Writes the same bytes to path, atomically: into "path.tmp-XXXXXX" in the
 * same folder, fsync'd, renamed over path, and the folder fsync'd. On any
 * failure the temporary file is removed and whatever was at path is left as
 * it was; the one exception is a failed fsync of the folder after the
 * rename, reported as COHORT_EIO "written, but syncing its folder failed"
 * with the new file in place. The new file has mode 0600 (mkstemp's); the
 * folder must exist. */
int nn_safetensors_save(const char *path, const nn_st_tensor *tensors, size_t n,
                        const nn_st_meta *meta, size_t n_meta, char *err,
                        size_t errlen);

/* Reads a file written by any safetensors writer into *out, which is zeroed
 * first and left zeroed on failure. Only F32 tensors are accepted; the
 * file's bytes must be exactly the header plus the tensors' data. A name
 * that occurs twice in the header is an error. */
int nn_safetensors_load(const char *path, nn_st_file *out, char *err,
                        size_t errlen);

/* As nn_safetensors_load, from len bytes at buf (e.g. a blob from SQLite),
 * which are borrowed and copied from. name (NULL: "safetensors buffer")
 * stands for the file in error messages. */
int nn_safetensors_parse(const void *buf, size_t len, const char *name,
                         nn_st_file *out, char *err, size_t errlen);

/* The tensor called name, or NULL. Linear in f->n. */
const nn_st_tensor *nn_st_find(const nn_st_file *f, const char *name);

/* The metadata value for key, or NULL. */
const char *nn_st_meta_get(const nn_st_file *f, const char *key);

/* Releases what a load or parse stored in f and zeroes it; f may be NULL
 * or already freed. */
void nn_safetensors_free(nn_st_file *f);

#endif
