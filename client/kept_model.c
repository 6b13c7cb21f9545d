/* The client's kept global model; see kept_model.h. */
#define _GNU_SOURCE /* O_TMPFILE, mkostemp */
#include "kept_model.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bigbuf.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "fd_io.h"
#include "wire.h"

/* Floats read from the file at a time: 8 KiB, on the stack twice over. */
#define KEPT_BLOCK_FLOATS 2048

void kept_model_init(kept_model *k) {
  memset(k, 0, sizeof *k);
  k->fd = -1;
}

/* An unnamed file in dir, mode 0600: O_TMPFILE where the file system has
 * it, otherwise a named one removed at once. Either way nothing is left
 * behind by a crash. */
static int open_unnamed(const char *dir) {
#ifdef O_TMPFILE
  /* O_EXCL: nobody can give it a name later (linkat). */
  int fd = open(dir, O_TMPFILE | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
    return fd;
#endif
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/.cohort-model-XXXXXX", dir) >=
      (int)sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd2 = mkostemp(path, O_CLOEXEC);
  if (fd2 >= 0 && unlink(path) != 0) {
    int saved = errno; /* it would stay named: not kept there */
    close(fd2);
    errno = saved;
    return -1;
  }
  return fd2;
}

int kept_model_use_dir(kept_model *k, const char *dir, char *err,
                       size_t errlen) {
  int fd = -1;
  if (dir) {
    fd = open_unnamed(dir);
    if (fd < 0)
      return errbuf_fail(err, errlen, COHORT_EIO, dir,
                         "cannot keep the model there: %s", strerror(errno));
  }
  kept_model_free(k);
  k->fd = fd;
  return COHORT_OK;
}

static void abort_hash(kept_model *k) {
  if (k->hash) {
    uint8_t discard[CRYPTO_SHA256_LEN];
    crypto_sha256_end(k->hash, discard);
    k->hash = NULL;
  }
}

void kept_model_drop(kept_model *k) {
  abort_hash(k);
  if (k->fd >= 0) {
    /* Truncated, the file's pages leave the page cache too. */
    if (ftruncate(k->fd, 0) != 0) {
      /* nothing to do: the next model overwrites it, and reads are
       * bounded by len */
    }
  } else {
    bigbuf_free(k->mem, k->len);
  }
  k->mem = NULL;
  k->len = k->received = 0;
  k->whole = 0;
  k->version = 0;
}

void kept_model_free(kept_model *k) {
  kept_model_drop(k);
  if (k->fd >= 0)
    close(k->fd);
  k->fd = -1;
}

int kept_model_has(const kept_model *k, uint64_t version, size_t len,
                   const uint8_t sha[CRYPTO_SHA256_LEN]) {
  return k->whole && k->version == version && k->len == len &&
         memcmp(k->sha, sha, CRYPTO_SHA256_LEN) == 0;
}

int kept_model_begin(kept_model *k, size_t len) {
  /* The one kept is of no more use, and would double the peak while the
   * new one arrives. */
  kept_model_drop(k);
  if (k->fd < 0) {
    k->mem = bigbuf_alloc(len);
    if (!k->mem)
      return COHORT_ENOMEM;
  }
  k->len = len;
  k->hash = crypto_sha256_begin();
  if (!k->hash) {
    kept_model_drop(k);
    return COHORT_ENOMEM;
  }
  return COHORT_OK;
}

int kept_model_append(kept_model *k, pb_iov *src, size_t n, char *err,
                      size_t errlen) {
  if (!k->hash || n > k->len - k->received)
    return COHORT_EPROTO;
  if (k->fd < 0) {
    uint8_t *dst = (uint8_t *)k->mem + k->received;
    int rc = pb_iov_copy(src, dst, n);
    if (rc)
      return rc;
    if (crypto_sha256_update(k->hash, dst, n))
      return COHORT_ENOMEM;
    k->received += n;
    return COHORT_OK;
  }
  uint8_t block[KEPT_BLOCK_FLOATS * sizeof(float)];
  while (n > 0) {
    size_t m = n < sizeof block ? n : sizeof block;
    int rc = pb_iov_copy(src, block, m);
    if (rc)
      return rc;
    if (crypto_sha256_update(k->hash, block, m))
      return COHORT_ENOMEM;
    if (fd_pwrite_all(k->fd, block, m, (off_t)k->received) != 0)
      return errbuf_fail(err, errlen, COHORT_EIO, "the kept model's file", "%s",
                         strerror(errno));
    k->received += m;
    n -= m;
  }
  return COHORT_OK;
}

int kept_model_finish(kept_model *k, uint64_t version,
                      const uint8_t sha[CRYPTO_SHA256_LEN]) {
  uint8_t digest[CRYPTO_SHA256_LEN];
  int ended = k->hash && crypto_sha256_end(k->hash, digest) == 0;
  k->hash = NULL; /* ended above, or there was none */
  int ok =
      ended && k->received == k->len && memcmp(digest, sha, sizeof digest) == 0;
  if (!ok) {
    kept_model_drop(k);
    return COHORT_EDIGEST;
  }
  if (k->fd < 0) {
    /* bigbuf's alignment suits floats; each is read out before it is
     * written back, so the bytes become the weights in place. */
    const uint8_t *bytes = (const uint8_t *)k->mem;
    for (size_t i = 0; i < k->len / sizeof(float); i++) {
      float v;
      wire_get_f32le(&v, bytes + i * sizeof v, 1);
      k->mem[i] = v;
    }
  }
  k->whole = 1;
  k->version = version;
  memcpy(k->sha, sha, CRYPTO_SHA256_LEN);
  return COHORT_OK;
}

const float *kept_model_weights(const kept_model *k) {
  return k->whole && k->fd < 0 ? k->mem : NULL;
}

/* Reads the file's model block by block, checking its digest, into dst
 * (subtract 0) or subtracted from dst (subtract 1). */
static int file_pass(const kept_model *k, float *dst, int subtract, char *err,
                     size_t errlen) {
  crypto_sha256_ctx *hash = crypto_sha256_begin();
  if (!hash)
    return COHORT_ENOMEM;
  uint8_t raw[KEPT_BLOCK_FLOATS * sizeof(float)];
  float vals[KEPT_BLOCK_FLOATS];
  int rc = COHORT_OK;
  for (size_t at = 0; !rc && at < k->len;) {
    size_t m = k->len - at < sizeof raw ? k->len - at : sizeof raw;
    /* A whole block (reads may come short), so that floats never straddle
     * two reads. */
    ssize_t got = fd_pread_full(k->fd, raw, m, (off_t)at);
    if (got != (ssize_t)m) {
      rc = errbuf_fail(err, errlen, COHORT_EIO, "the kept model's file", "%s",
                       got < 0 ? strerror(errno) : "shorter than the model");
      break;
    }
    if (crypto_sha256_update(hash, raw, m)) {
      rc = COHORT_ENOMEM;
      break;
    }
    size_t count = m / sizeof(float);
    float *out = dst + at / sizeof(float);
    wire_get_f32le(vals, raw, count);
    if (subtract)
      for (size_t i = 0; i < count; i++)
        out[i] -= vals[i];
    else
      memcpy(out, vals, count * sizeof(float));
    at += m;
  }
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256_end(hash, digest) != 0 && !rc)
    rc = COHORT_ENOMEM;
  if (!rc && memcmp(digest, k->sha, sizeof digest) != 0)
    rc = errbuf_fail(err, errlen, COHORT_EDIGEST, "the kept model's file",
                     "changed since it was downloaded; refused");
  return rc;
}

/* file_pass, dropping a model that cannot be read back as it came, so that
 * the next task downloads it again instead of failing on it for good. */
static int checked_pass(kept_model *k, float *dst, int subtract, char *err,
                        size_t errlen) {
  int rc = file_pass(k, dst, subtract, err, errlen);
  if (rc == COHORT_EDIGEST || rc == COHORT_EIO)
    kept_model_drop(k);
  return rc;
}

int kept_model_load(kept_model *k, float *dst, char *err, size_t errlen) {
  if (!k->whole)
    return COHORT_ESTATE;
  if (k->fd >= 0)
    return checked_pass(k, dst, 0, err, errlen);
  memcpy(dst, k->mem, k->len);
  return COHORT_OK;
}

int kept_model_subtract(kept_model *k, float *dst, char *err, size_t errlen) {
  if (!k->whole)
    return COHORT_ESTATE;
  if (k->fd >= 0)
    return checked_pass(k, dst, 1, err, errlen);
  for (size_t i = 0; i < k->len / sizeof(float); i++)
    dst[i] -= k->mem[i];
  return COHORT_OK;
}
