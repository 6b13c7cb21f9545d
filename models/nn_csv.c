/* CSV reader for labelled examples (one row per example: a label column and
 * numeric features), plain or gzip'd. The file is untrusted: rows are checked
 * field by field, lines grow a buffer up to a cap, and memory follows the
 * rows that actually arrive. A client's share is read in two streamed
 * passes (every row checked and its label kept, then only the chosen rows'
 * features), so memory follows the share, not the file. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "fd_io.h"
#include "nn_dataset.h"

#define CSV_CHUNK (1u << 16)               /* bytes per gzread */
#define CSV_MAX_LINE ((size_t)16 << 20)    /* longest accepted line */
#define CSV_MAX_VALUES ((size_t)1 << 31)   /* 8 GiB of features as floats */
#define CSV_FIRST_VALUES ((size_t)1 << 16) /* first allocation, in floats */
#define CSV_SHOW 40 /* characters of a bad field quoted in a message */

typedef struct csv_reader {
  gzFile gz;
  const char *path;
  unsigned char *chunk; /* CSV_CHUNK bytes from gzread */
  size_t chunk_len, chunk_pos;
  int eof;
  char *line; /* the current line, NUL-terminated, without LF / CRLF */
  size_t line_len, line_cap;
  unsigned long lineno; /* 1-based number of the current line */
} csv_reader;

/* Writes "path: <reason>" (line == 0) or "path:line: <reason>" into err
 * (which may be NULL) and returns rc. */
static int csv_fail(char *err, size_t errlen, int rc, const char *path,
                    unsigned long line, const char *fmt, ...) {
  char who[4096 + 24];
  if (line)
    snprintf(who, sizeof who, "%s:%lu", path, line);
  else
    snprintf(who, sizeof who, "%s", path);
  va_list ap;
  va_start(ap, fmt);
  errbuf_vfail(err, errlen, rc, who, fmt, ap);
  va_end(ap);
  return rc;
}

void nn_csv_options_init(nn_csv_options *opt) {
  if (!opt)
    return;
  memset(opt, 0, sizeof *opt);
  opt->label_column = 0;
  opt->header = NN_CSV_HEADER_AUTO;
  opt->scale = 1.0;
}

/* Refills the chunk. Returns 1 with bytes, 0 at the end, or a negative
 * status with err filled in. A gzip stream cut short is an error: it would
 * otherwise lose rows silently. */
static int csv_fill(csv_reader *rd, char *err, size_t errlen) {
  if (rd->eof)
    return 0;
  int got = gzread(rd->gz, rd->chunk, CSV_CHUNK);
  if (got > 0) {
    rd->chunk_len = (size_t)got;
    rd->chunk_pos = 0;
    return 1;
  }
  rd->eof = 1;
  /* zlib reports a stream cut short as a plain end (0) with Z_BUF_ERROR
   * left in gzerror, so the end is checked too. */
  int zerr = Z_OK;
  const char *msg = gzerror(rd->gz, &zerr);
  if (got == 0 && zerr == Z_OK)
    return 0;
  if (zerr == Z_ERRNO)
    return csv_fail(err, errlen, COHORT_EIO, rd->path, 0, "read failed: %s",
                    strerror(errno));
  if (zerr == Z_MEM_ERROR)
    return csv_fail(err, errlen, COHORT_ENOMEM, rd->path, 0, "out of memory");
  if (zerr == Z_BUF_ERROR)
    return csv_fail(err, errlen, COHORT_EFORMAT, rd->path, 0,
                    "gzip data ends early (truncated file?)");
  return csv_fail(err, errlen, COHORT_EFORMAT, rd->path, 0,
                  "corrupt gzip data: %s", msg ? msg : "unknown zlib error");
}

/* Appends n bytes to the line, growing it by doubling up to the cap. */
static int csv_append(csv_reader *rd, const unsigned char *p, size_t n,
                      char *err, size_t errlen) {
  if (rd->line_len + n + 1 > rd->line_cap) {
    if (rd->line_len + n > CSV_MAX_LINE)
      return csv_fail(err, errlen, COHORT_EFORMAT, rd->path, rd->lineno,
                      "line longer than %zu MiB", CSV_MAX_LINE >> 20);
    size_t cap = rd->line_cap ? rd->line_cap : 4096;
    while (cap < rd->line_len + n + 1)
      cap *= 2;
    if (cap > CSV_MAX_LINE + 1)
      cap = CSV_MAX_LINE + 1;
    char *nl = realloc(rd->line, cap);
    if (!nl)
      return csv_fail(err, errlen, COHORT_ENOMEM, rd->path, rd->lineno,
                      "out of memory for a line of %zu bytes",
                      rd->line_len + n);
    rd->line = nl;
    rd->line_cap = cap;
  }
  memcpy(rd->line + rd->line_len, p, n);
  rd->line_len += n;
  rd->line[rd->line_len] = '\0';
  return COHORT_OK;
}

/* Reads the next line into rd->line. Returns 1 for a line, 0 at the end of
 * the file, or a negative status. A last line without LF counts; a NUL byte
 * is rejected, since it would hide the rest of its line from the parser. */
static int csv_getline(csv_reader *rd, char *err, size_t errlen) {
  int rc, any = 0;
  rd->line_len = 0;
  rd->lineno++;
  for (;;) {
    if (rd->chunk_pos == rd->chunk_len) {
      rc = csv_fill(rd, err, errlen);
      if (rc < 0)
        return rc;
      if (rc == 0)
        break;
    }
    const unsigned char *p = rd->chunk + rd->chunk_pos;
    size_t avail = rd->chunk_len - rd->chunk_pos;
    const unsigned char *nl = memchr(p, '\n', avail);
    size_t take = nl ? (size_t)(nl - p) : avail;
    if (memchr(p, '\0', take))
      return csv_fail(err, errlen, COHORT_EFORMAT, rd->path, rd->lineno,
                      "NUL byte in the text (not a CSV file?)");
    rc = csv_append(rd, p, take, err, errlen);
    if (rc)
      return rc;
    any = 1;
    rd->chunk_pos += take + (nl ? 1 : 0);
    if (nl)
      break;
  }
  if (!any && rd->eof)
    return 0;
  /* csv_append ran at least once, so rd->line is allocated. */
  if (rd->line_len && rd->line[rd->line_len - 1] == '\r')
    rd->line[--rd->line_len] = '\0';
  return 1;
}

static int csv_blank(int c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Trims blanks and one pair of surrounding double quotes from the field
 * [s, e) in place (it is NUL-terminated at its end) and returns its start. */
static char *csv_trim(char *s, char *e) {
  while (s < e && csv_blank((unsigned char)*s))
    s++;
  while (e > s && csv_blank((unsigned char)e[-1]))
    e--;
  if (e - s >= 2 && *s == '"' && e[-1] == '"') {
    s++;
    e--;
  }
  *e = '\0';
  return s;
}

/* Parses a whole field as a number. Returns 1 for a number (finite or not),
 * 0 for anything else, including an empty field. */
static int csv_number(const char *s, double *v) {
  if (!*s)
    return 0;
  char *end = NULL;
  errno = 0;
  *v = strtod(s, &end);
  return end != s && *end == '\0';
}

/* Counts the fields of a line (commas + 1). */
static size_t csv_fields(const char *line, size_t len) {
  size_t n = 1;
  const char *p = line, *e = line + len;
  while ((p = memchr(p, ',', (size_t)(e - p)))) {
    n++;
    p++;
  }
  return n;
}

/* Whether every field of the line parses as a number (the header test). */
static int csv_all_numeric(const char *line) {
  const char *p = line;
  for (;;) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    char buf[128];
    if (len >= sizeof buf)
      len = sizeof buf - 1; /* a field this long is no number anyway */
    memcpy(buf, p, len);
    buf[len] = '\0';
    double v;
    if (!csv_number(csv_trim(buf, buf + len), &v))
      return 0;
    if (!c)
      return 1;
    p = c + 1;
  }
}

static int csv_is_blank_line(const char *s) {
  while (csv_blank((unsigned char)*s))
    s++;
  return *s == '\0';
}

/* What a pass over the file keeps. */
typedef enum csv_mode {
  CSV_ALL,    /* every row's features (floats) and label */
  CSV_LABELS, /* every row's label; features only checked */
  CSV_CHOSEN  /* the features and labels of the rows in keys */
} csv_mode;

/* State of one load, so the row parser needs few arguments. */
typedef struct csv_load {
  const char *path;
  csv_mode mode;
  double scale;
  size_t fields, label; /* fields per row; 0-based label column */
  size_t n, cap;        /* rows read (CSV_CHOSEN) or stored; rows allocated */
  float *x;             /* cap * (fields - 1) */
  uint8_t *x8;          /* CSV_CHOSEN with bytes: instead of x */
  uint8_t *y;           /* cap */
  int max_label;
  int bytes; /* CSV_LABELS: every feature so far an integer in [0, 255] */
  /* CSV_CHOSEN: (row << 32 | position) of the wanted rows, ascending, and
   * the next one to look for. */
  const uint64_t *keys;
  size_t nkeys, next;
} csv_load;

static int csv_grow(csv_load *ld, unsigned long lineno, char *err,
                    size_t errlen) {
  size_t dim = ld->mode == CSV_LABELS ? 1 : ld->fields - 1;
  if (ld->n < ld->cap || ld->mode == CSV_CHOSEN)
    return COHORT_OK;
  if ((ld->n + 1) > CSV_MAX_VALUES / dim)
    return csv_fail(err, errlen, COHORT_EFORMAT, ld->path, lineno,
                    "more than %zu values of features; the file is too large",
                    CSV_MAX_VALUES);
  /* Rows of dim features take at least 2 * dim bytes of text, so doubling
   * from a small start keeps memory within a few times the bytes read, even
   * for a single very long row. */
  size_t cap = ld->cap ? ld->cap * 2
                       : (dim < CSV_FIRST_VALUES ? CSV_FIRST_VALUES / dim : 1);
  if (cap > CSV_MAX_VALUES / dim)
    cap = CSV_MAX_VALUES / dim;
  if (ld->mode == CSV_ALL) {
    float *x = realloc(ld->x, cap * dim * sizeof(float));
    if (!x)
      return csv_fail(err, errlen, COHORT_ENOMEM, ld->path, lineno,
                      "out of memory for %zu rows of %zu features", cap, dim);
    ld->x = x;
  }
  uint8_t *y = realloc(ld->y, cap);
  if (!y)
    return csv_fail(err, errlen, COHORT_ENOMEM, ld->path, lineno,
                    "out of memory for %zu rows", cap);
  ld->y = y;
  ld->cap = cap;
  return COHORT_OK;
}

/* Parses one data row (its field count already checked): into row ld->n
 * (CSV_ALL), its label only (CSV_LABELS), or into the positions that keys
 * give it (CSV_CHOSEN; rows not wanted are skipped, the first pass having
 * checked them). */
static int csv_row(csv_load *ld, char *line, unsigned long lineno, char *err,
                   size_t errlen) {
  size_t dim = ld->fields - 1, row = ld->n, pos = row;
  if (ld->mode == CSV_CHOSEN) {
    if (ld->next == ld->nkeys || (size_t)(ld->keys[ld->next] >> 32) != row) {
      ld->n++;
      return COHORT_OK;
    }
    pos = (uint32_t)ld->keys[ld->next];
  }
  int rc = csv_grow(ld, lineno, err, errlen);
  if (rc)
    return rc;
  float *xr = ld->x ? ld->x + pos * dim : NULL;
  uint8_t *x8r = ld->x8 ? ld->x8 + pos * dim : NULL;
  char *p = line;
  for (size_t f = 0; f < ld->fields; f++) {
    char *c = strchr(p, ',');
    char *e = c ? c : p + strlen(p);
    char *next = c ? c + 1 : e;
    char *s = csv_trim(p, e);
    double v;
    if (!csv_number(s, &v))
      return csv_fail(err, errlen, COHORT_EFORMAT, ld->path, lineno,
                      "field %zu (\"%.*s%s\") is not a number", f + 1, CSV_SHOW,
                      s, strlen(s) > CSV_SHOW ? "..." : "");
    if (!isfinite(v))
      return csv_fail(err, errlen, COHORT_EFORMAT, ld->path, lineno,
                      "field %zu (\"%.*s%s\") is not a finite number", f + 1,
                      CSV_SHOW, s, strlen(s) > CSV_SHOW ? "..." : "");
    if (f == ld->label) {
      if (v != floor(v))
        return csv_fail(err, errlen, COHORT_EFORMAT, ld->path, lineno,
                        "label \"%.*s\" in field %zu is not an integer",
                        CSV_SHOW, s, f + 1);
      if (v < 0 || v > 255)
        return csv_fail(err, errlen, COHORT_EFORMAT, ld->path, lineno,
                        "label \"%.*s\" in field %zu is outside 0..255",
                        CSV_SHOW, s, f + 1);
      int label = (int)v;
      ld->y[pos] = (uint8_t)label;
      if (label > ld->max_label)
        ld->max_label = label;
    } else {
      float fv = (float)(v * ld->scale);
      if (!isfinite(fv))
        return csv_fail(err, errlen, COHORT_EFORMAT, ld->path, lineno,
                        "field %zu (\"%.*s\") times the scale %g overflows "
                        "a float",
                        f + 1, CSV_SHOW, s, ld->scale);
      bool byte = v == floor(v) && v >= 0 && v <= 255;
      ld->bytes &= byte;
      if (x8r && !byte) /* the first pass found every feature a byte */
        return csv_fail(err, errlen, COHORT_EINVAL, ld->path, lineno,
                        "field %zu (\"%.*s\") is not an integer in 0..255 "
                        "as when the labels were read: the file changed",
                        f + 1, CSV_SHOW, s);
      if (xr)
        *xr++ = fv;
      else if (x8r)
        *x8r++ = (uint8_t)v;
    }
    p = next;
  }
  if (ld->mode == CSV_CHOSEN) /* a row asked for more than once */
    for (ld->next++;
         ld->next < ld->nkeys && (size_t)(ld->keys[ld->next] >> 32) == row;
         ld->next++) {
      size_t again = (uint32_t)ld->keys[ld->next];
      if (ld->x)
        memcpy(ld->x + again * dim, ld->x + pos * dim, dim * sizeof *ld->x);
      else
        memcpy(ld->x8 + again * dim, ld->x8 + pos * dim, dim);
      ld->y[again] = ld->y[pos];
    }
  ld->n++;
  return COHORT_OK;
}

/* Sets the shape from the options or, when they give none, from dim. */
static int csv_shape(const nn_csv_options *opt, size_t dim, nn_dataset *out,
                     const char *path, char *err, size_t errlen) {
  if (opt->channels || opt->height || opt->width) {
    uint64_t prod =
        (uint64_t)opt->channels * (uint64_t)opt->height * (uint64_t)opt->width;
    if (prod != dim)
      return csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                      "shape %dx%dx%d has %llu values, the rows have %zu "
                      "features",
                      opt->channels, opt->height, opt->width,
                      (unsigned long long)prod, dim);
    out->channels = opt->channels;
    out->height = opt->height;
    out->width = opt->width;
    return COHORT_OK;
  }
  size_t s = (size_t)sqrt((double)dim);
  while (s * s > dim)
    s--;
  while ((s + 1) * (s + 1) <= dim)
    s++;
  if (s * s == dim) {
    out->channels = 1;
    out->height = (int)s;
    out->width = (int)s;
  } else {
    out->channels = (int)dim; /* dim <= CSV_MAX_LINE / 2 fits in an int */
    out->height = 1;
    out->width = 1;
  }
  return COHORT_OK;
}

/* One streamed pass over the file, keeping what ld->mode says (ld is set
 * up by the caller; its buffers are the caller's to free). Fills out's
 * shape; out's arrays are left to the caller. */
static int csv_scan(const char *path, const nn_csv_options *opt_in,
                    csv_load *ld_in, nn_dataset *out, char *err,
                    size_t errlen) {
  csv_reader rd = {0};
  csv_load ld = *ld_in;
  nn_csv_options opt;
  unsigned long blank = 0; /* first blank line not yet followed by data */
  int header = 0, rc;

  if (err && errlen)
    err[0] = '\0';
  if (opt_in)
    opt = *opt_in;
  else
    nn_csv_options_init(&opt);
  if (opt.header != NN_CSV_HEADER_AUTO && opt.header != NN_CSV_HEADER_YES &&
      opt.header != NN_CSV_HEADER_NO)
    return csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                    "header option %d is not NN_CSV_HEADER_AUTO, _YES or _NO",
                    opt.header);
  if (!isfinite(opt.scale))
    return csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                    "feature scale %g is not a finite number", opt.scale);
  if (opt.channels < 0 || opt.height < 0 || opt.width < 0 ||
      ((opt.channels || opt.height || opt.width) &&
       !(opt.channels && opt.height && opt.width)))
    return csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                    "shape %dx%dx%d: give channels, height and width all > 0, "
                    "or all 0 to derive it",
                    opt.channels, opt.height, opt.width);

  rd.path = path;
  ld.path = path;
  ld.scale = opt.scale;
  int fd = fd_open_regular(path, NULL);
  if (fd < 0)
    return csv_fail(err, errlen, COHORT_EIO, path, 0, "cannot open: %s",
                    fd_open_strerror(errno));
  errno = 0;
  rd.gz = gzdopen(fd, "rb");
  if (!rd.gz) {
    close(fd);
    /* zlib leaves errno at 0 when its own allocation failed. */
    if (errno == 0)
      return csv_fail(err, errlen, COHORT_ENOMEM, path, 0,
                      "cannot open: out of memory");
    return csv_fail(err, errlen, COHORT_EIO, path, 0, "cannot open: %s",
                    strerror(errno));
  }
  gzbuffer(rd.gz, 1u << 17);
  rd.chunk = malloc(CSV_CHUNK);
  if (!rd.chunk) {
    rc = csv_fail(err, errlen, COHORT_ENOMEM, path, 0, "out of memory");
    goto out;
  }

  while ((rc = csv_getline(&rd, err, errlen)) == 1) {
    char *line = rd.line;
    if (rd.lineno == 1 && rd.line_len >= 3 &&
        memcmp(line, "\xEF\xBB\xBF", 3) == 0)
      line += 3; /* UTF-8 byte-order mark */
    size_t len = rd.line_len - (size_t)(line - rd.line);
    if (csv_is_blank_line(line)) {
      if (!blank)
        blank = rd.lineno;
      continue;
    }
    if (blank) {
      rc = csv_fail(err, errlen, COHORT_EFORMAT, path, blank,
                    "empty line (blank lines are accepted only at the end)");
      goto out;
    }
    size_t fields = csv_fields(line, len);
    if (rd.lineno == 1) {
      header = opt.header == NN_CSV_HEADER_YES ||
               (opt.header == NN_CSV_HEADER_AUTO && !csv_all_numeric(line));
      if (fields < 2) {
        rc = csv_fail(err, errlen, COHORT_EFORMAT, path, 1,
                      "1 field; rows need a label and at least one feature");
        goto out;
      }
      if (ld.mode == CSV_CHOSEN && ld.fields != fields) {
        rc = csv_fail(err, errlen, COHORT_EINVAL, path, 1,
                      "%zu fields, %zu when its labels were read: the file "
                      "changed",
                      fields, ld.fields);
        goto out;
      }
      ld.fields = fields;
      long lc = opt.label_column;
      if (lc < 0)
        lc += (long)fields;
      if (lc < 0 || (size_t)lc >= fields) {
        rc = csv_fail(err, errlen, COHORT_EINVAL, path, 1,
                      "label column %d, but the rows have %zu fields",
                      opt.label_column, fields);
        goto out;
      }
      ld.label = (size_t)lc;
      rc = csv_shape(&opt, fields - 1, out, path, err, errlen);
      if (rc)
        goto out;
      if (header)
        continue;
    }
    if (fields != ld.fields) {
      rc = csv_fail(err, errlen, COHORT_EFORMAT, path, rd.lineno,
                    "%zu fields, expected %zu%s", fields, ld.fields,
                    header && ld.n == 0 ? " (as in the header)" : "");
      goto out;
    }
    rc = csv_row(&ld, line, rd.lineno, err, errlen);
    if (rc)
      goto out;
  }
  if (rc < 0)
    goto out;
  rc = COHORT_OK;
  if (ld.n == 0)
    rc = csv_fail(err, errlen, COHORT_EFORMAT, path, 0,
                  header ? "a header but no data rows"
                         : "empty file: no data rows");
  out->dim = ld.fields - 1;
  out->n_classes = ld.max_label + 1;
out:
  gzclose(rd.gz);
  free(rd.chunk);
  free(rd.line);
  *ld_in = ld;
  return rc;
}

/* Checks the arguments every entry point takes. */
static int csv_args(const char *path, nn_dataset *out, char *err,
                    size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!path)
    return csv_fail(err, errlen, COHORT_EINVAL, "nn_csv_load", 0,
                    "missing file name");
  return COHORT_OK;
}

/* Shrinks y (and x) to the n rows read: the slack of the last doubling
 * goes back; a failed shrink keeps the larger, still valid block. */
static void csv_shrink(csv_load *ld, size_t dim) {
  if (ld->x) {
    float *x = realloc(ld->x, ld->n * dim * sizeof(float));
    if (x)
      ld->x = x;
  }
  uint8_t *y = realloc(ld->y, ld->n);
  if (y)
    ld->y = y;
}

/* Reads every row: features and labels (CSV_ALL) or labels only
 * (CSV_LABELS), *bytes (may be NULL) telling whether every feature is a
 * byte. */
static int csv_every_row(const char *path, const nn_csv_options *opt,
                         csv_mode mode, nn_dataset *out, int *bytes, char *err,
                         size_t errlen) {
  csv_load ld = {.mode = mode, .bytes = 1};
  int rc = csv_args(path, out, err, errlen);
  if (!rc)
    rc = csv_scan(path, opt, &ld, out, err, errlen);
  if (rc) {
    if (out)
      memset(out, 0, sizeof *out);
    free(ld.x);
    free(ld.y);
    return rc;
  }
  csv_shrink(&ld, out->dim);
  out->n = ld.n;
  out->x = ld.x;
  out->y = ld.y;
  if (bytes)
    *bytes = ld.bytes;
  return COHORT_OK;
}

int nn_csv_load(const char *path, const nn_csv_options *opt, nn_dataset *out,
                char *err, size_t errlen) {
  return csv_every_row(path, opt, CSV_ALL, out, NULL, err, errlen);
}

int nn_csv_load_labels(const char *path, const nn_csv_options *opt,
                       nn_dataset *out, int *bytes, char *err, size_t errlen) {
  return csv_every_row(path, opt, CSV_LABELS, out, bytes, err, errlen);
}

/* Orders (row << 32 | position) keys by row, then position. */
static int csv_key_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int nn_csv_load_rows(const char *path, const nn_csv_options *opt,
                     const nn_dataset *labels, int bytes, const uint32_t *rows,
                     size_t k, nn_dataset *out, char *err, size_t errlen) {
  csv_load ld = {.mode = CSV_CHOSEN};
  uint64_t *keys = NULL;
  int rc = csv_args(path, out, err, errlen);
  if (rc)
    return rc;
  if (!labels || !labels->n || !labels->dim || (k && !rows) || k > UINT32_MAX ||
      labels->dim > SIZE_MAX / sizeof(float) / (k ? k : 1))
    return csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                    "nn_csv_load_rows: bad arguments");
  size_t dim = labels->dim;
  keys = malloc((k ? k : 1) * sizeof *keys);
  ld.y = malloc(k ? k : 1);
  if (bytes)
    ld.x8 = malloc((k ? k : 1) * dim);
  else
    ld.x = malloc((k ? k : 1) * dim * sizeof *ld.x);
  if (!keys || !ld.y || (!ld.x && !ld.x8)) {
    rc = csv_fail(err, errlen, COHORT_ENOMEM, path, 0,
                  "out of memory for %zu rows of %zu features", k, dim);
    goto out;
  }
  for (size_t i = 0; i < k; i++) {
    if (rows[i] >= labels->n) {
      rc = csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                    "row %u asked for, the file has %zu", (unsigned)rows[i],
                    labels->n);
      goto out;
    }
    keys[i] = (uint64_t)rows[i] << 32 | i;
  }
  qsort(keys, k, sizeof *keys, csv_key_cmp);
  ld.keys = keys;
  ld.nkeys = k;
  ld.fields = dim + 1;
  rc = csv_scan(path, opt, &ld, out, err, errlen);
  if (!rc && (ld.n != labels->n || out->dim != dim))
    rc = csv_fail(err, errlen, COHORT_EINVAL, path, 0,
                  "%zu rows of %zu features, %zu of %zu when its labels were "
                  "read: the file changed",
                  ld.n, out->dim, labels->n, dim);
  if (rc)
    goto out;
  out->n = k;
  out->n_classes = labels->n_classes; /* of the whole file, as nn_csv_load */
  for (int i = 0; i < 256; i++)
    out->x8_value[i] = (float)(i * ld.scale);
  out->x = ld.x;
  out->x8 = ld.x8;
  out->y = ld.y;
  ld.x = NULL;
  ld.x8 = NULL;
  ld.y = NULL;
out:
  if (rc)
    memset(out, 0, sizeof *out);
  free(keys);
  free(ld.x);
  free(ld.x8);
  free(ld.y);
  return rc;
}
