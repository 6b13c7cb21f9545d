/* IDX reader for MNIST-style data sets (u8 image cubes and u8 label vectors)
 * as Debian ships them, gzip'd or plain. Header counts are untrusted: the
 * buffers grow with the bytes that actually arrive, never with the claim. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "nn_dataset.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* u8, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u /* u8, 1 dimension */

/* Caps that no real data set reaches, so that a corrupt or hostile header
 * is rejected outright instead of steering the allocations. */
#define IDX_MAX_N 10000000u
#define IDX_MAX_DIM (1u << 20)
#define IDX_MAX_PIXELS ((uint64_t)1 << 31) /* 8 GiB once scaled to float */

#define IDX_CHUNK (1u << 16) /* bytes per gzread */
#define IDX_FIRST_ALLOC ((size_t)1 << 20)

static int idx_open(const char *path, gzFile *gz, char *err, size_t errlen) {
  errno = 0;
  *gz = gzopen(path, "rb");
  if (!*gz) {
    /* zlib leaves errno at 0 when its own allocation failed. */
    if (errno == 0)
      return errbuf_fail(err, errlen, COHORT_ENOMEM, path,
                         "cannot open: out of memory");
    return errbuf_fail(err, errlen, COHORT_EIO, path, "cannot open: %s",
                       strerror(errno));
  }
  /* Larger than zlib's 8 KiB default: the big files are read in one sweep. */
  gzbuffer(*gz, 1u << 17);
  return COHORT_OK;
}

/* Reads up to len bytes. Returns the count read (short only at the end of
 * the data) or -1 on a read error, with err filled in. A gzip stream that
 * stops early is reported as a short read, so the caller's message about
 * truncation names what was missing. */
static long idx_read(gzFile gz, const char *path, void *buf, unsigned len,
                     char *err, size_t errlen, int *rc) {
  int got = gzread(gz, buf, len);
  if (got >= 0)
    return got;
  int zerr = Z_OK;
  const char *msg = gzerror(gz, &zerr);
  if (zerr == Z_BUF_ERROR) /* "unexpected end of file" */
    return 0;
  if (zerr == Z_ERRNO) {
    *rc = errbuf_fail(err, errlen, COHORT_EIO, path, "read failed: %s",
                      strerror(errno));
  } else if (zerr == Z_MEM_ERROR) {
    *rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path, "out of memory");
  } else {
    *rc =
        errbuf_fail(err, errlen, COHORT_EFORMAT, path, "corrupt gzip data: %s",
                    msg ? msg : "unknown zlib error");
  }
  return -1;
}

/* Reads the magic and ndims big-endian u32 dimensions. */
static int idx_header(gzFile gz, const char *path, uint32_t want_magic,
                      const char *kind, uint32_t *dims, int ndims, char *err,
                      size_t errlen) {
  unsigned char hdr[4 * 4];
  unsigned want = 4u * (unsigned)(1 + ndims);
  int rc = COHORT_OK;
  long got = idx_read(gz, path, hdr, want, err, errlen, &rc);
  if (got < 0)
    return rc;
  if (got < 4)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                       "file has %ld bytes, too short for an IDX header", got);
  uint32_t magic = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
                   (uint32_t)hdr[2] << 8 | (uint32_t)hdr[3];
  if (magic != want_magic)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                       "bad magic 0x%08x, expected 0x%08x (IDX %s)",
                       (unsigned)magic, (unsigned)want_magic, kind);
  if ((unsigned long)got < want)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                       "truncated IDX header: expected %u bytes, read %ld",
                       want, got);
  for (int i = 0; i < ndims; i++) {
    const unsigned char *p = hdr + 4 * (i + 1);
    dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
              (uint32_t)p[2] << 8 | (uint32_t)p[3];
  }
  return COHORT_OK;
}

/* Reads exactly want payload bytes. With scale set the bytes become floats
 * b/255 (pixels), otherwise they are kept as bytes (labels). The buffer
 * starts small and doubles as data arrives, so a header that lies about its
 * size costs at most twice what the file really holds. */
static int idx_payload(gzFile gz, const char *path, size_t want, int scale,
                       void **out, size_t *got_out, char *err, size_t errlen) {
  float to_unit[256];
  size_t esz = scale ? sizeof(float) : 1;
  unsigned char *chunk = NULL, *buf = NULL;
  size_t cap = 0, got = 0;
  int rc = COHORT_OK;

  /* A table keeps x / 255.0f exact (255 -> 1.0f) without a divide per pixel;
   * it lives on the stack so concurrent loads share nothing. */
  for (int i = 0; i < 256; i++)
    to_unit[i] = (float)i / 255.0f;
  chunk = malloc(IDX_CHUNK);
  if (!chunk) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path, "out of memory");
    goto out;
  }
  while (got < want) {
    size_t ask = want - got < IDX_CHUNK ? want - got : IDX_CHUNK;
    long n = idx_read(gz, path, chunk, (unsigned)ask, err, errlen, &rc);
    if (n < 0)
      goto out;
    if (n == 0)
      break;
    if (got + (size_t)n > cap) {
      size_t ncap = cap ? cap * 2 : IDX_FIRST_ALLOC;
      while (ncap < got + (size_t)n)
        ncap *= 2;
      if (ncap > want)
        ncap = want;
      unsigned char *nb = realloc(buf, ncap * esz);
      if (!nb) {
        rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path,
                         "out of memory reading %zu bytes", want);
        goto out;
      }
      buf = nb;
      cap = ncap;
    }
    if (scale) {
      float *dst = (float *)buf + got;
      for (long i = 0; i < n; i++)
        dst[i] = to_unit[chunk[i]];
    } else {
      memcpy(buf + got, chunk, (size_t)n);
    }
    got += (size_t)n;
  }
out:
  free(chunk);
  if (rc) {
    free(buf);
    buf = NULL;
  }
  *out = buf;
  *got_out = got;
  return rc;
}

int nn_idx_load(const char *images_path, const char *labels_path,
                nn_dataset *out, char *err, size_t errlen) {
  gzFile gi = NULL, gl = NULL;
  uint32_t idims[3] = {0}, ldims[1] = {0};
  void *x = NULL, *y = NULL;
  size_t got = 0;
  int rc;

  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!images_path || !labels_path)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_idx_load",
                       "missing file name");

  rc = idx_open(images_path, &gi, err, errlen);
  if (rc)
    goto out;
  rc = idx_header(gi, images_path, IDX_MAGIC_IMAGES, "u8 3-D images", idims, 3,
                  err, errlen);
  if (rc)
    goto out;
  uint64_t dim = (uint64_t)idims[1] * idims[2];
  if (idims[0] == 0 || idims[0] > IDX_MAX_N) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, images_path,
                     "header claims %u images; expected 1 to %u", idims[0],
                     IDX_MAX_N);
    goto out;
  }
  if (dim == 0 || dim > IDX_MAX_DIM) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, images_path,
                     "header claims %ux%u images; expected 1 to %u pixels each",
                     idims[1], idims[2], IDX_MAX_DIM);
    goto out;
  }
  if ((uint64_t)idims[0] * dim > IDX_MAX_PIXELS) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, images_path,
                     "header claims %u images of %ux%u, over the cap of %llu "
                     "pixels",
                     idims[0], idims[1], idims[2],
                     (unsigned long long)IDX_MAX_PIXELS);
    goto out;
  }

  rc = idx_open(labels_path, &gl, err, errlen);
  if (rc)
    goto out;
  rc = idx_header(gl, labels_path, IDX_MAGIC_LABELS, "u8 labels", ldims, 1, err,
                  errlen);
  if (rc)
    goto out;
  if (ldims[0] != idims[0]) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, labels_path,
                     "label file has %u labels, image file has %u images",
                     ldims[0], idims[0]);
    goto out;
  }

  size_t n = idims[0];
  rc = idx_payload(gl, labels_path, n, 0, &y, &got, err, errlen);
  if (rc)
    goto out;
  if (got < n) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, labels_path,
                     "truncated: header promises %zu labels, file holds %zu", n,
                     got);
    goto out;
  }
  size_t want = n * (size_t)dim;
  rc = idx_payload(gi, images_path, want, 1, &x, &got, err, errlen);
  if (rc)
    goto out;
  if (got < want) {
    rc =
        errbuf_fail(err, errlen, COHORT_EFORMAT, images_path,
                    "truncated: header promises %zu images of %ux%u (%zu bytes "
                    "of pixels), file holds %zu bytes (%zu whole images)",
                    n, idims[1], idims[2], want, got, got / (size_t)dim);
    goto out;
  }

  int max_label = 0;
  const uint8_t *labels = y;
  for (size_t i = 0; i < n; i++)
    if (labels[i] > max_label)
      max_label = labels[i];
  out->n = n;
  out->dim = (size_t)dim;
  out->channels = 1;
  out->height = (int)idims[1];
  out->width = (int)idims[2];
  out->n_classes = max_label + 1;
  out->x = x;
  out->y = y;
  x = y = NULL;

out:
  if (gi)
    gzclose(gi);
  if (gl)
    gzclose(gl);
  free(x);
  free(y);
  return rc;
}

/* Sets *path to "<dir>/<base>.gz" or else "<dir>/<base>", whichever exists;
 * NULL with an error when neither does. */
static int idx_find(const char *dir, const char *base, char **path, char *err,
                    size_t errlen) {
  size_t dl = strlen(dir);
  const char *sep = dl && dir[dl - 1] == '/' ? "" : "/";
  size_t len = dl + strlen(sep) + strlen(base) + sizeof ".gz";
  char *p = malloc(len);
  *path = NULL;
  if (!p)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, dir, "out of memory");
  snprintf(p, len, "%s%s%s.gz", dir, sep, base);
  if (access(p, F_OK) == 0) {
    *path = p;
    return COHORT_OK;
  }
  snprintf(p, len, "%s%s%s", dir, sep, base);
  if (access(p, F_OK) == 0) {
    *path = p;
    return COHORT_OK;
  }
  free(p);
  return errbuf_fail(err, errlen, COHORT_EIO, dir,
                     "neither %s.gz nor %s exists (is the data set installed, "
                     "e.g. Debian's dataset-fashion-mnist?)",
                     base, base);
}

int nn_idx_load_dir(const char *dir, int train, nn_dataset *out, char *err,
                    size_t errlen) {
  char *images = NULL, *labels = NULL;
  int rc;

  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!dir)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_idx_load_dir",
                       "missing directory");
  const char *prefix = train ? "train" : "t10k";
  char base[32];
  snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
  rc = idx_find(dir, base, &images, err, errlen);
  if (rc)
    goto out;
  snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
  rc = idx_find(dir, base, &labels, err, errlen);
  if (rc)
    goto out;
  rc = nn_idx_load(images, labels, out, err, errlen);
out:
  free(images);
  free(labels);
  return rc;
}
