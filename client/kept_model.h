/* The last global model a client downloaded: kept for the task it came
 * with (the update is the trained weights minus it) and for a repeated task
 * of the same version. In memory by default. With a directory
 * (cohort_client_set_model_dir), in an unnamed file there instead, written
 * as the chunks arrive and read back in small blocks: while the app trains,
 * the client then holds one copy of the model (the working weights) rather
 * than two, for devices where memory is scarcer than storage (issue 22).
 * Its digest is checked once the download is whole and again on every read
 * from the file, so a changed file is refused, never trained on. */
#ifndef COHORT_KEPT_MODEL_H
#define COHORT_KEPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "crypto.h"
#include "pb_iov.h"

typedef struct kept_model {
  int fd;          /* the unnamed file; -1: kept in memory */
  float *mem;      /* in memory: the weights (wire bytes while downloading) */
  size_t len;      /* bytes of the model kept or downloading; 0: none */
  size_t received; /* bytes of it received so far */
  crypto_sha256_ctx *hash; /* of the bytes received, while downloading */
  int whole;               /* downloaded and its digest checked */
  uint64_t version;
  uint8_t sha[CRYPTO_SHA256_LEN];
} kept_model;

void kept_model_init(kept_model *k);
/* Keeps later models in an unnamed file in dir (mode 0600, gone when the
 * process ends), or in memory again when dir is NULL; drops the one kept.
 * COHORT_EIO, naming dir, when no file can be made there. */
int kept_model_use_dir(kept_model *k, const char *dir, char *err,
                       size_t errlen);
/* Drops the model kept (its memory, or the file's contents). */
void kept_model_drop(kept_model *k);
/* Drops the model and closes the file. */
void kept_model_free(kept_model *k);

/* 1 when the whole model of this version, size and digest is kept. */
int kept_model_has(const kept_model *k, uint64_t version, size_t len,
                   const uint8_t sha[CRYPTO_SHA256_LEN]);
/* Starts the download of a len-byte model, dropping the one kept. */
int kept_model_begin(kept_model *k, size_t len);
/* Appends the next n bytes of the model from src. COHORT_EPROTO when they
 * overrun the model or src is short, COHORT_EIO when the file cannot be
 * written (err says why). */
int kept_model_append(kept_model *k, pb_iov *src, size_t n, char *err,
                      size_t errlen);
/* Ends the download: COHORT_EDIGEST unless every byte came and they hash to
 * sha; then the model is kept as version. On failure nothing is kept. */
int kept_model_finish(kept_model *k, uint64_t version,
                      const uint8_t sha[CRYPTO_SHA256_LEN]);

/* The weights when kept in memory; NULL when they are in the file. */
const float *kept_model_weights(const kept_model *k);
/* dst (len / 4 floats) = the kept weights. From the file, every read
 * checks the digest: a model changed there (COHORT_EDIGEST) or that cannot
 * be read back (COHORT_EIO) is dropped, so the next task downloads it
 * again; dst may then hold part of it, unusable. */
int kept_model_load(kept_model *k, float *dst, char *err, size_t errlen);
/* dst -= the kept weights: a trained copy becomes its delta. Fails as
 * kept_model_load does. */
int kept_model_subtract(kept_model *k, float *dst, char *err, size_t errlen);

#endif
