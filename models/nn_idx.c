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
#include "fd_io.h"
#include "nn_dataset.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* u8, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u /* u8, 1 dimension */

/* Caps that no real data set reaches, so that a corrupt or hostile header
 * is rejected outright instead of steering the allocations. */
#define IDX_MAX_N 10000000u
#define IDX_MAX_DIM (1u << 20)
#define IDX_MAX_PIXELS ((uint64_t)1 << 31) /* 2 GiB of bytes */

#define IDX_CHUNK (1u << 16) /* bytes per gzread */
#define IDX_FIRST_ALLOC ((size_t)1 << 20)

static int idx_open(const char *path, gzFile *gz, char *err, size_t errlen) {
  *gz = NULL;
  int fd = fd_open_regular(path, NULL);
  if (fd < 0)
    return errbuf_fail(err, errlen, COHORT_EIO, path, "cannot open: %s",
                       fd_open_strerror(errno));
  errno = 0;
  *gz = gzdopen(fd, "rb");
  if (!*gz) {
    close(fd);
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

/* Reads exactly want payload bytes (pixels or labels, kept as bytes). The
 * buffer starts small and doubles as data arrives, so a header that lies
 * about its size costs at most twice what the file really holds. */
static int idx_payload(gzFile gz, const char *path, size_t want, void **out,
                       size_t *got_out, char *err, size_t errlen) {
  unsigned char *chunk = NULL, *buf = NULL;
  size_t cap = 0, got = 0;
  int rc = COHORT_OK;

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
      unsigned char *nb = realloc(buf, ncap);
      if (!nb) {
        rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path,
                         "out of memory reading %zu bytes", want);
        goto out;
      }
      buf = nb;
      cap = ncap;
    }
    memcpy(buf + got, chunk, (size_t)n);
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

/* Opens both files, validates their headers against each other and reads
 * all the labels (one byte per example, small next to the pixels): fills
 * out's n, dim, shape, n_classes and y, leaves out->x NULL and *gi open at
 * the first image for the caller to read pixels from. */
static int idx_open_labelled(const char *images_path, const char *labels_path,
                             gzFile *gi, nn_dataset *out, char *err,
                             size_t errlen) {
  gzFile gl = NULL;
  uint32_t idims[3] = {0}, ldims[1] = {0};
  void *y = NULL;
  size_t got = 0;
  int rc;

  *gi = NULL;
  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!images_path || !labels_path)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_idx_load",
                       "missing file name");

  rc = idx_open(images_path, gi, err, errlen);
  if (rc)
    goto out;
  rc = idx_header(*gi, images_path, IDX_MAGIC_IMAGES, "u8 3-D images", idims, 3,
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
  rc = idx_payload(gl, labels_path, n, &y, &got, err, errlen);
  if (rc)
    goto out;
  if (got < n) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, labels_path,
                     "truncated: header promises %zu labels, file holds %zu", n,
                     got);
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
  /* byte / 255.0f, exact for 255 -> 1.0f; a table, and a division that
   * vectorises when a batch becomes floats. */
  nn_dataset_set_x8_divisor(out, 255.0f);
  out->y = y;
  y = NULL;

out:
  if (gl)
    gzclose(gl);
  if (rc && *gi) {
    gzclose(*gi);
    *gi = NULL;
  }
  free(y);
  return rc;
}

int nn_idx_load(const char *images_path, const char *labels_path,
                nn_dataset *out, char *err, size_t errlen) {
  gzFile gi = NULL;
  void *x = NULL;
  size_t got = 0;
  int rc = idx_open_labelled(images_path, labels_path, &gi, out, err, errlen);
  if (rc)
    return rc;
  size_t want = out->n * out->dim;
  rc = idx_payload(gi, images_path, want, &x, &got, err, errlen);
  if (!rc && got < want)
    rc =
        errbuf_fail(err, errlen, COHORT_EFORMAT, images_path,
                    "truncated: header promises %zu images of %dx%d (%zu "
                    "bytes of pixels), file holds %zu bytes (%zu whole "
                    "images)",
                    out->n, out->height, out->width, want, got, got / out->dim);
  gzclose(gi);
  if (rc) {
    nn_dataset_close(out);
    free(x);
    return rc;
  }
  out->x8 = x;
  return COHORT_OK;
}

int nn_idx_load_labels(const char *images_path, const char *labels_path,
                       nn_dataset *out, char *err, size_t errlen) {
  gzFile gi = NULL;
  int rc = idx_open_labelled(images_path, labels_path, &gi, out, err, errlen);
  if (gi)
    gzclose(gi);
  return rc;
}

/* Orders (row << 32 | position) keys by row, then position. */
static int idx_key_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Seeks to byte at of the decompressed data. Returns 1 there, 0 when the
 * data ends before it, -1 with err filled in for corrupt gzip data. */
static int idx_seek(gzFile gz, const char *path, z_off_t at, char *err,
                    size_t errlen, int *rc) {
  if (gzseek(gz, at, SEEK_SET) == at)
    return 1;
  int zerr = Z_OK;
  const char *msg = gzerror(gz, &zerr);
  if (zerr == Z_OK || zerr == Z_BUF_ERROR) /* the data ended first */
    return 0;
  *rc = errbuf_fail(err, errlen, COHORT_EFORMAT, path, "corrupt gzip data: %s",
                    msg ? msg : "unknown zlib error");
  return -1;
}

/* Reads image rows[key >> 32] into row (uint32_t)key of x, visiting the
 * file in ascending order: gzseek skips forward by decompressing into
 * zlib's own buffer (a gzip'd file) or by lseek (a plain one), so only the
 * chosen records are kept and nothing holds the whole file. Then reads the
 * file's last pixel, so that a truncated file is refused as nn_idx_load
 * refuses it. */
static int idx_read_rows(gzFile gi, const char *path, const nn_dataset *ds,
                         const uint64_t *keys, size_t k, uint8_t *x, char *err,
                         size_t errlen) {
  unsigned char last_byte;
  int rc = COHORT_OK;
  const z_off_t first = 16; /* the magic and three dimensions */
  for (size_t i = 0; i < k && !rc; i++) {
    size_t row = (size_t)(keys[i] >> 32), pos = (uint32_t)keys[i];
    uint8_t *dst = x + pos * ds->dim;
    if (i && (size_t)(keys[i - 1] >> 32) == row) { /* a repeated row */
      memcpy(dst, x + (size_t)(uint32_t)keys[i - 1] * ds->dim, ds->dim);
      continue;
    }
    z_off_t at = first + (z_off_t)(row * ds->dim);
    long got = -1;
    if (idx_seek(gi, path, at, err, errlen, &rc) == 1)
      got = idx_read(gi, path, dst, (unsigned)ds->dim, err, errlen, &rc);
    if (!rc && got != (long)ds->dim)
      rc = errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                       "truncated: header promises %zu images of %dx%d, "
                       "image %zu is missing",
                       ds->n, ds->height, ds->width, row);
  }
  z_off_t last = first + (z_off_t)(ds->n * ds->dim) - 1;
  if (!rc &&
      (idx_seek(gi, path, last, err, errlen, &rc) != 1 ||
       idx_read(gi, path, &last_byte, 1, err, errlen, &rc) != 1) &&
      !rc)
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                     "truncated: header promises %zu images of %dx%d, the "
                     "file ends before the last",
                     ds->n, ds->height, ds->width);
  return rc;
}

int nn_idx_load_rows(const char *images_path, const char *labels_path,
                     const nn_dataset *labels, const uint32_t *rows, size_t k,
                     nn_dataset *out, char *err, size_t errlen) {
  gzFile gi = NULL;
  nn_dataset hdr = {0};
  uint64_t *keys = NULL;
  uint8_t *x = NULL, *y = NULL;
  int rc;

  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!labels || (k && !rows) || k > UINT32_MAX)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_idx_load_rows",
                       "bad arguments");
  /* The headers are read again, so that rows are checked against the file
   * actually read, not against what the caller remembers of it. */
  rc = idx_open_labelled(images_path, labels_path, &gi, &hdr, err, errlen);
  if (rc)
    goto out;
  if (hdr.n != labels->n || hdr.dim != labels->dim) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, images_path,
                     "changed since its labels were read");
    goto out;
  }
  keys = malloc((k ? k : 1) * sizeof *keys);
  x = malloc((k ? k : 1) * hdr.dim);
  y = malloc(k ? k : 1);
  if (!keys || !x || !y) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, images_path,
                     "out of memory for %zu images", k);
    goto out;
  }
  for (size_t i = 0; i < k; i++) {
    if (rows[i] >= hdr.n) {
      rc = errbuf_fail(err, errlen, COHORT_EINVAL, images_path,
                       "image %u asked for, the file has %zu",
                       (unsigned)rows[i], hdr.n);
      goto out;
    }
    keys[i] = (uint64_t)rows[i] << 32 | i;
    y[i] = hdr.y[rows[i]];
  }
  qsort(keys, k, sizeof *keys, idx_key_cmp);
  rc = idx_read_rows(gi, images_path, &hdr, keys, k, x, err, errlen);
  if (rc)
    goto out;
  out->n = k;
  out->dim = hdr.dim;
  out->channels = hdr.channels;
  out->height = hdr.height;
  out->width = hdr.width;
  out->n_classes = hdr.n_classes; /* of the whole file, as nn_idx_load */
  memcpy(out->x8_value, hdr.x8_value, sizeof out->x8_value);
  out->x8_divisor = hdr.x8_divisor;
  out->x8 = x;
  out->y = y;
  x = NULL;
  y = NULL;
out:
  if (gi)
    gzclose(gi);
  nn_dataset_close(&hdr);
  free(keys);
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

int nn_idx_paths(const char *dir, int train, char **images, char **labels,
                 char *err, size_t errlen) {
  *images = *labels = NULL;
  if (!dir)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_idx_paths",
                       "missing directory");
  const char *prefix = train ? "train" : "t10k";
  char base[32];
  snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
  int rc = idx_find(dir, base, images, err, errlen);
  if (!rc) {
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    rc = idx_find(dir, base, labels, err, errlen);
  }
  if (rc) {
    free(*images);
    *images = NULL;
  }
  return rc;
}

int nn_idx_load_dir(const char *dir, int train, nn_dataset *out, char *err,
                    size_t errlen) {
  char *images = NULL, *labels = NULL;

  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  int rc = nn_idx_paths(dir, train, &images, &labels, err, errlen);
  if (!rc)
    rc = nn_idx_load(images, labels, out, err, errlen);
  free(images);
  free(labels);
  return rc;
}
