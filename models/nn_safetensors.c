/* safetensors reader and writer for float32 tensors; see nn_safetensors.h.
 * The JSON header goes through json-c both ways. Loads validate the whole
 * header against the real size of the data before allocating anything the
 * file's numbers could steer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cohort_status.h"
#include "durable.h"
#include "errbuf.h"
#include "fd_io.h"
#include "nn_safetensors.h"
#include "wire.h"

#define ST_CHUNK ((size_t)1 << 16) /* bytes per read/write; multiple of 4 */
#define ST_NAME_SHOWN 64           /* bytes of a name quoted in errors */
#define ST_METADATA "__metadata__"

/* A printable copy of an untrusted string for an error message: control
 * bytes become '?', and long names are cut with "...". */
typedef struct st_shown {
  char s[ST_NAME_SHOWN + 4];
} st_shown;

static st_shown st_show(const char *s) {
  st_shown out;
  size_t i = 0;
  for (; s[i] && i < ST_NAME_SHOWN; i++) {
    unsigned char c = (unsigned char)s[i];
    out.s[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
  }
  if (s[i]) {
    memcpy(out.s + i, "...", 3);
    i += 3;
  }
  out.s[i] = '\0';
  return out;
}

static void st_put_u64le(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t st_get_u64le(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* 1 when s is well-formed UTF-8 (no overlongs, surrogates or values past
 * U+10FFFF), which JSON requires and Python's reader checks. */
static int st_utf8_ok(const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    unsigned c = *s;
    int more;
    unsigned min, cp;
    if (c < 0x80) {
      s++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      more = 1, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      more = 2, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      more = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return 0;
    }
    for (int i = 1; i <= more; i++) {
      if ((s[i] & 0xc0) != 0x80)
        return 0;
      cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    s += 1 + more;
  }
  return 1;
}

int64_t nn_st_numel(const nn_st_tensor *t) {
  if (!t || t->ndim < 0 || t->ndim > NN_ST_MAX_DIMS)
    return -1;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) {
    int64_t d = t->shape[i];
    if (d < 0 || (d && n > INT64_MAX / 4 / d))
      return -1;
    n *= d;
  }
  return n;
}

static int st_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first string that occurs twice among the n, or NULL. Sorts a copy of
 * the pointers; *oom is set when that copy cannot be made. */
static const char *st_first_dup(const char **names, size_t n, int *oom) {
  const char *dup = NULL;
  *oom = 0;
  if (n < 2)
    return NULL;
  const char **sorted = malloc(n * sizeof *sorted);
  if (!sorted) {
    *oom = 1;
    return NULL;
  }
  memcpy(sorted, names, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, st_cmp_str);
  for (size_t i = 1; i < n && !dup; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0)
      dup = sorted[i];
  free(sorted);
  return dup;
}

/* ---- writing ---------------------------------------------------------- */

/* Checks what save/encode were given; *data_bytes gets the buffer size. */
static int st_check_input(const char *who, const nn_st_tensor *t, size_t n,
                          const nn_st_meta *meta, size_t n_meta,
                          uint64_t *data_bytes, char *err, size_t errlen) {
  const char **names = NULL;
  uint64_t total = 0;
  int rc = COHORT_OK, oom = 0;

  if ((n && !t) || (n_meta && !meta))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "%s is NULL but its count is not 0",
                       n && !t ? "tensors" : "meta");
  for (size_t i = 0; i < n; i++) {
    if (!t[i].name)
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "tensor %zu has no name", i);
    st_shown nm = st_show(t[i].name);
    if (!st_utf8_ok(t[i].name))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "tensor '%s': name is not valid UTF-8", nm.s);
    if (strcmp(t[i].name, ST_METADATA) == 0)
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "tensor '%s': the name is reserved for metadata",
                         nm.s);
    if (t[i].ndim < 0 || t[i].ndim > NN_ST_MAX_DIMS)
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "tensor '%s': %d dimensions, expected 0 to %d", nm.s,
                         t[i].ndim, NN_ST_MAX_DIMS);
    int64_t numel = nn_st_numel(&t[i]);
    if (numel < 0)
      return errbuf_fail(
          err, errlen, COHORT_EINVAL, who,
          "tensor '%s': a size is negative or the sizes multiply "
          "past 2^61",
          nm.s);
    if (numel && !t[i].data)
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "tensor '%s': data is NULL for %lld values", nm.s,
                         (long long)numel);
    uint64_t bytes = 4 * (uint64_t)numel;
    if (bytes > (uint64_t)INT64_MAX - total)
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "the tensors add up to more than 2^63 bytes");
    total += bytes;
  }
  for (size_t i = 0; i < n_meta; i++) {
    if (!meta[i].key || !meta[i].value)
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "metadata entry %zu has a NULL %s", i,
                         meta[i].key ? "value" : "key");
    if (!st_utf8_ok(meta[i].key) || !st_utf8_ok(meta[i].value))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "metadata '%s': not valid UTF-8",
                         st_show(meta[i].key).s);
  }

  size_t most = n > n_meta ? n : n_meta;
  names = malloc((most ? most : 1) * sizeof *names);
  if (!names)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, who, "out of memory");
  for (size_t i = 0; i < n; i++)
    names[i] = t[i].name;
  const char *dup = st_first_dup(names, n, &oom);
  if (!oom && dup) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, who,
                     "tensor name '%s' is given twice", st_show(dup).s);
    goto out;
  }
  for (size_t i = 0; !oom && i < n_meta; i++)
    names[i] = meta[i].key;
  if (!oom)
    dup = st_first_dup(names, n_meta, &oom);
  if (oom) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, who, "out of memory");
    goto out;
  }
  if (dup) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, who,
                     "metadata key '%s' is given twice", st_show(dup).s);
    goto out;
  }
  *data_bytes = total;
out:
  free(names);
  return rc;
}

/* Adds v to o under key (array when key is NULL), taking v over; returns
 * -1 when v is NULL (a failed allocation) or the add fails. */
static int st_add(json_object *o, const char *key, json_object *v) {
  if (!v)
    return -1;
  int r = key ? json_object_object_add(o, key, v) : json_object_array_add(o, v);
  if (r != 0) {
    json_object_put(v);
    return -1;
  }
  return 0;
}

/* Builds u64 N + the JSON header padded to a multiple of 8 into a new
 * buffer *out of *len = 8 + N bytes. */
static int st_header(const char *who, const nn_st_tensor *t, size_t n,
                     const nn_st_meta *meta, size_t n_meta, uint8_t **out,
                     size_t *len, char *err, size_t errlen) {
  json_object *root = json_object_new_object();
  int bad = !root;
  *out = NULL;
  if (!bad && n_meta) {
    json_object *m = json_object_new_object();
    bad = st_add(root, ST_METADATA, m) != 0;
    for (size_t i = 0; !bad && i < n_meta; i++)
      bad = st_add(m, meta[i].key, json_object_new_string(meta[i].value));
  }
  uint64_t at = 0;
  for (size_t i = 0; !bad && i < n; i++) {
    json_object *e = json_object_new_object();
    json_object *shape = json_object_new_array();
    json_object *offs = json_object_new_array();
    uint64_t bytes = 4 * (uint64_t)nn_st_numel(&t[i]);
    bad = !e || !shape || !offs;
    for (int d = 0; !bad && d < t[i].ndim; d++)
      bad = st_add(shape, NULL, json_object_new_int64(t[i].shape[d]));
    bad = bad || st_add(offs, NULL, json_object_new_int64((int64_t)at)) ||
          st_add(offs, NULL, json_object_new_int64((int64_t)(at + bytes))) ||
          st_add(e, "dtype", json_object_new_string("F32"));
    if (bad) {
      json_object_put(e);
      json_object_put(shape);
      json_object_put(offs);
      break;
    }
    /* st_add owns its value from here, added or not. */
    if (st_add(e, "shape", shape) != 0) {
      json_object_put(offs);
      json_object_put(e);
      bad = 1;
    } else if (st_add(e, "data_offsets", offs) != 0) {
      json_object_put(e);
      bad = 1;
    } else {
      bad = st_add(root, t[i].name, e) != 0;
    }
    at += bytes;
  }
  size_t jlen = 0;
  const char *json =
      bad ? NULL
          : json_object_to_json_string_length(
                root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
                &jlen);
  if (!json) {
    json_object_put(root);
    return errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                       "out of memory building the header");
  }
  size_t padded = (jlen + 7) / 8 * 8;
  uint8_t *buf = malloc(8 + padded);
  if (!buf) {
    json_object_put(root);
    return errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                       "out of memory building the header");
  }
  st_put_u64le(buf, padded);
  memcpy(buf + 8, json, jlen);
  memset(buf + 8 + jlen, ' ', padded - jlen);
  json_object_put(root);
  *out = buf;
  *len = 8 + padded;
  return COHORT_OK;
}

int nn_safetensors_encode(const nn_st_tensor *tensors, size_t n,
                          const nn_st_meta *meta, size_t n_meta, void **buf,
                          size_t *len, char *err, size_t errlen) {
  const char *who = "safetensors encode";
  uint8_t *hdr = NULL;
  size_t hlen = 0;
  uint64_t data_bytes = 0;

  if (err && errlen)
    err[0] = '\0';
  if (!buf || !len)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who, "no output buffer");
  *buf = NULL;
  *len = 0;
  int rc =
      st_check_input(who, tensors, n, meta, n_meta, &data_bytes, err, errlen);
  if (rc)
    return rc;
  rc = st_header(who, tensors, n, meta, n_meta, &hdr, &hlen, err, errlen);
  if (rc)
    return rc;
  if (data_bytes > SIZE_MAX - hlen) {
    free(hdr);
    return errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                       "%llu bytes of tensors do not fit in memory",
                       (unsigned long long)data_bytes);
  }
  uint8_t *out = realloc(hdr, hlen + (size_t)data_bytes);
  if (!out) {
    free(hdr);
    return errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                       "out of memory for %llu bytes",
                       (unsigned long long)(hlen + data_bytes));
  }
  size_t at = hlen;
  for (size_t i = 0; i < n; i++) {
    size_t numel = (size_t)nn_st_numel(&tensors[i]);
    if (numel)
      wire_put_f32le(out + at, tensors[i].data, numel);
    at += 4 * numel;
  }
  *buf = out;
  *len = at;
  return COHORT_OK;
}

static int st_write_all(int fd, const uint8_t *p, size_t len) {
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w == 0)
      errno = EIO;
    if (w <= 0)
      return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

int nn_safetensors_save(const char *path, const nn_st_tensor *tensors, size_t n,
                        const nn_st_meta *meta, size_t n_meta, char *err,
                        size_t errlen) {
  uint8_t *hdr = NULL, *stage = NULL;
  char *tmp = NULL;
  size_t hlen = 0;
  uint64_t data_bytes = 0;
  int fd = -1, rc;

  if (err && errlen)
    err[0] = '\0';
  if (!path || !*path)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_safetensors_save",
                       "missing file name");
  rc = st_check_input(path, tensors, n, meta, n_meta, &data_bytes, err, errlen);
  if (rc)
    return rc;
  rc = st_header(path, tensors, n, meta, n_meta, &hdr, &hlen, err, errlen);
  if (rc)
    return rc;
  size_t tlen = strlen(path) + sizeof ".tmp-XXXXXX";
  tmp = malloc(tlen);
  stage = malloc(ST_CHUNK);
  if (!tmp || !stage) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path, "out of memory");
    goto out;
  }
  snprintf(tmp, tlen, "%s.tmp-XXXXXX", path);
  fd = mkstemp(tmp);
  if (fd < 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                     "cannot create the temporary file %s: %s", tmp,
                     strerror(errno));
    free(tmp);
    tmp = NULL; /* nothing to remove */
    goto out;
  }
  if (st_write_all(fd, hdr, hlen) != 0)
    goto io_fail;
  for (size_t i = 0; i < n; i++) {
    size_t left = (size_t)nn_st_numel(&tensors[i]);
    const float *src = tensors[i].data;
    while (left) {
      size_t k = left < ST_CHUNK / 4 ? left : ST_CHUNK / 4;
      wire_put_f32le(stage, src, k);
      if (st_write_all(fd, stage, 4 * k) != 0)
        goto io_fail;
      src += k;
      left -= k;
    }
  }
  if (fsync(fd) != 0)
    goto io_fail;
  int c = close(fd);
  fd = -1;
  if (c != 0)
    goto io_fail;
  if (rename(tmp, path) != 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                     "cannot rename %s over it: %s", tmp, strerror(errno));
    goto out;
  }
  free(tmp);
  tmp = NULL;
  if (durable_sync_folder(path) != 0)
    rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                     "written, but syncing its folder failed: %s",
                     strerror(errno));
  goto out;

io_fail:
  rc = errbuf_fail(err, errlen, COHORT_EIO, path, "writing %s failed: %s", tmp,
                   errno ? strerror(errno) : "short write");
out:
  if (fd >= 0)
    close(fd);
  if (tmp)
    unlink(tmp);
  free(tmp);
  free(stage);
  free(hdr);
  return rc;
}

/* ---- reading ---------------------------------------------------------- */

/* Duplicate keys. json-c keeps the last of a repeated key without a word,
 * which would let a hostile header hide a tensor or a second dtype; so the
 * raw text is walked once more and each object's keys are compared. The
 * text has already been accepted by json-c, which bounds the nesting. */
typedef struct st_scan {
  const char *p, *end;
  struct json_tokener *tok; /* unescapes keys that hold escapes */
  char *dup;                /* first repeated key, malloc'd */
  int dup_depth;            /* 0: in the top object, a tensor name */
  int oom;
} st_scan;

static void st_scan_ws(st_scan *s) {
  while (s->p < s->end &&
         (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

/* Skips a string literal starting at s->p; returns 0, or -1 at the end. */
static int st_scan_string(st_scan *s) {
  if (s->p >= s->end || *s->p != '"')
    return -1;
  for (s->p++; s->p < s->end; s->p++) {
    if (*s->p == '\\')
      s->p++;
    else if (*s->p == '"') {
      s->p++;
      return 0;
    }
  }
  return -1;
}

/* The key literal [a, b) (quotes included) as a malloc'd C string, cut at
 * the first NUL as json-c cuts its keys. */
static char *st_scan_key(st_scan *s, const char *a, const char *b) {
  if (!memchr(a, '\\', (size_t)(b - a)))
    return strndup(a + 1, (size_t)(b - a - 2));
  json_tokener_reset(s->tok);
  json_object *o = json_tokener_parse_ex(s->tok, a, (int)(b - a));
  char *k = o ? strdup(json_object_get_string(o)) : NULL;
  json_object_put(o);
  return k;
}

static int st_scan_value(st_scan *s, int depth);

static int st_scan_object(st_scan *s, int depth) {
  char **keys = NULL;
  size_t n = 0, cap = 0;
  int r = -1;
  s->p++; /* '{' */
  st_scan_ws(s);
  if (s->p < s->end && *s->p == '}') {
    s->p++;
    return 0;
  }
  for (;;) {
    st_scan_ws(s);
    const char *a = s->p;
    if (st_scan_string(s) != 0)
      goto out;
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 16;
      char **nk = realloc(keys, ncap * sizeof *nk);
      if (!nk) {
        s->oom = 1;
        goto out;
      }
      keys = nk;
      cap = ncap;
    }
    if (!(keys[n] = st_scan_key(s, a, s->p))) {
      s->oom = 1;
      goto out;
    }
    n++;
    st_scan_ws(s);
    if (s->p >= s->end || *s->p != ':')
      goto out;
    s->p++;
    if (st_scan_value(s, depth + 1) != 0)
      goto out;
    st_scan_ws(s);
    if (s->p < s->end && *s->p == ',') {
      s->p++;
      continue;
    }
    if (s->p < s->end && *s->p == '}') {
      s->p++;
      break;
    }
    goto out;
  }
  r = 0;
  if (!s->dup) {
    int oom = 0;
    const char *d = st_first_dup((const char **)keys, n, &oom);
    s->oom |= oom;
    if (d) {
      s->dup = strdup(d);
      s->dup_depth = depth;
      s->oom |= !s->dup;
    }
  }
out:
  for (size_t i = 0; i < n; i++)
    free(keys[i]);
  free(keys);
  return s->oom ? -1 : r;
}

static int st_scan_value(st_scan *s, int depth) {
  st_scan_ws(s);
  if (s->p >= s->end || depth > 64)
    return -1;
  if (*s->p == '{')
    return st_scan_object(s, depth);
  if (*s->p == '"')
    return st_scan_string(s);
  if (*s->p == '[') {
    s->p++;
    st_scan_ws(s);
    if (s->p < s->end && *s->p == ']') {
      s->p++;
      return 0;
    }
    for (;;) {
      if (st_scan_value(s, depth + 1) != 0)
        return -1;
      st_scan_ws(s);
      if (s->p < s->end && *s->p == ',') {
        s->p++;
        continue;
      }
      if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 0;
      }
      return -1;
    }
  }
  /* A number or a literal. */
  while (s->p < s->end && !strchr(",]} \t\n\r", *s->p))
    s->p++;
  return 0;
}

/* One tensor entry of the header, validated; the name is json-c's. */
typedef struct st_entry {
  const char *name;
  int ndim;
  int64_t shape[NN_ST_MAX_DIMS];
  uint64_t begin, end;
} st_entry;

static int st_cmp_entry(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return strcmp(x->name, y->name);
}

static const char *st_type_name(json_object *o) {
  return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

/* Reads a non-negative integer; returns -1 for anything else. json-c
 * clamps integers past INT64_MAX to it, which every check below rejects as
 * too large. */
static int st_get_index(json_object *o, int64_t *v) {
  if (!o || json_object_get_type(o) != json_type_int)
    return -1;
  *v = json_object_get_int64(o);
  return *v < 0 ? -1 : 0;
}

static int st_parse_entry(const char *who, const char *name, json_object *v,
                          uint64_t data_len, st_entry *e, char *err,
                          size_t errlen) {
  st_shown nm = st_show(name);
  json_object *dtype, *shape, *offs;
  e->name = name;
  if (json_object_get_type(v) != json_type_object)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': entry is not an object (%s)", nm.s,
                       st_type_name(v));
  if (!json_object_object_get_ex(v, "dtype", &dtype))
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': no dtype", nm.s);
  if (json_object_get_type(dtype) != json_type_string)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': dtype is not a string (%s)", nm.s,
                       st_type_name(dtype));
  const char *dt = json_object_get_string(dtype);
  if (strcmp(dt, "F32") != 0)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': dtype %s not supported, only F32", nm.s,
                       st_show(dt).s);

  if (!json_object_object_get_ex(v, "shape", &shape))
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': no shape", nm.s);
  if (json_object_get_type(shape) != json_type_array)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': shape is not an array (%s)", nm.s,
                       st_type_name(shape));
  size_t nd = json_object_array_length(shape);
  if (nd > NN_ST_MAX_DIMS)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': %zu dimensions, at most %d supported",
                       nm.s, nd, NN_ST_MAX_DIMS);
  e->ndim = (int)nd;
  uint64_t numel = 1;
  for (size_t d = 0; d < nd; d++) {
    json_object *x = json_object_array_get_idx(shape, d);
    int64_t dim;
    if (st_get_index(x, &dim) != 0)
      return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                         "tensor '%s': shape[%zu] is not a non-negative "
                         "integer (%s)",
                         nm.s, d,
                         x && json_object_get_type(x) == json_type_int
                             ? "negative"
                             : st_type_name(x));
    e->shape[d] = dim;
    /* Checked at every step, as the reference does, even if a later 0
     * would bring the product back down. */
    if (dim && numel > (uint64_t)INT64_MAX / 4 / (uint64_t)dim)
      return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                         "tensor '%s': the shape's product overflows at "
                         "shape[%zu] = %lld",
                         nm.s, d, (long long)dim);
    numel *= (uint64_t)dim;
  }

  if (!json_object_object_get_ex(v, "data_offsets", &offs))
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': no data_offsets", nm.s);
  int64_t b, en;
  if (json_object_get_type(offs) != json_type_array ||
      json_object_array_length(offs) != 2 ||
      st_get_index(json_object_array_get_idx(offs, 0), &b) != 0 ||
      st_get_index(json_object_array_get_idx(offs, 1), &en) != 0)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': data_offsets must be two non-negative "
                       "integers [begin, end]",
                       nm.s);
  if (b > en)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': data_offsets [%lld, %lld] end before they "
                       "begin",
                       nm.s, (long long)b, (long long)en);
  e->begin = (uint64_t)b;
  e->end = (uint64_t)en;
  if (e->end > data_len)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensor '%s': data_offsets [%lld, %lld] reach past the "
                       "data buffer of %llu bytes",
                       nm.s, (long long)b, (long long)en,
                       (unsigned long long)data_len);
  if (e->end - e->begin != 4 * numel)
    return errbuf_fail(
        err, errlen, COHORT_EFORMAT, who,
        "tensor '%s': data_offsets [%lld, %lld] hold %llu bytes, "
        "its shape needs %llu (4 x %llu floats)",
        nm.s, (long long)b, (long long)en,
        (unsigned long long)(e->end - e->begin),
        (unsigned long long)(4 * numel), (unsigned long long)numel);
  return COHORT_OK;
}

/* Validates the header text against data_len bytes of data and fills *out
 * with everything but the data's values: tensors, metadata, names, and an
 * uninitialised float buffer of data_len bytes for the caller to fill. */
static int st_read_header(const char *who, const char *text, size_t hlen,
                          uint64_t data_len, nn_st_file *out, char *err,
                          size_t errlen) {
  struct json_tokener *tok = NULL;
  json_object *root = NULL, *md = NULL;
  st_entry *ents = NULL;
  st_scan scan = {0};
  size_t n = 0, n_meta = 0, strbytes = 0;
  int rc = COHORT_OK;

  if (hlen > INT_MAX) /* json-c takes an int length */
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who, "header too large");
  tok = json_tokener_new();
  if (!tok)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, who, "out of memory");
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  root = json_tokener_parse_ex(tok, text, (int)hlen);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  if (!root && jerr == json_tokener_continue) {
    /* A bare number or literal can end with the text, and json-c waits for
     * more; a NUL tells it the text is over. Still wanting more means the
     * text stops inside a value. */
    root = json_tokener_parse_ex(tok, "", 1);
    if (root || json_tokener_get_error(tok) == json_tokener_success)
      jerr = json_tokener_success;
  }
  if (!root && jerr == json_tokener_success) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                     "header is not a JSON object (null)");
    goto out;
  }
  if (!root) {
    int oom = 0;
#if JSON_C_VERSION_NUM >= (17 << 8) /* 0.17 has a code for it */
    oom = jerr == json_tokener_error_memory;
#endif
    if (oom)
      rc = errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                       "out of memory parsing the header");
    else if (jerr == json_tokener_continue)
      rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "header is not valid JSON: it ends inside a value");
    else
      rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "header is not valid JSON: %s at byte %zu",
                       json_tokener_error_desc(jerr),
                       json_tokener_get_parse_end(tok));
    goto out;
  }
  if (json_object_get_type(root) == json_type_object &&
      json_tokener_get_parse_end(tok) != hlen) {
    rc = errbuf_fail(
        err, errlen, COHORT_EFORMAT, who,
        "header has bytes after its JSON object, at byte %zu of %zu",
        json_tokener_get_parse_end(tok), hlen);
    goto out;
  }
  if (json_object_get_type(root) != json_type_object) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                     "header is not a JSON object (%s)", st_type_name(root));
    goto out;
  }

  scan.p = text;
  scan.end = text + hlen;
  scan.tok = tok;
  if (st_scan_value(&scan, 0) != 0 || scan.oom) {
    rc = scan.oom
             ? errbuf_fail(err, errlen, COHORT_ENOMEM, who, "out of memory")
             : errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                           "header could not be scanned for duplicate keys");
    goto out;
  }
  if (scan.dup) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                     scan.dup_depth == 0
                         ? "tensor name '%s' appears twice in the header"
                         : "key '%s' appears twice in one object of the header",
                     st_show(scan.dup).s);
    goto out;
  }

  size_t total = (size_t)json_object_object_length(root);
  ents = malloc((total ? total : 1) * sizeof *ents);
  if (!ents) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, who, "out of memory");
    goto out;
  }
  json_object_object_foreach(root, key, val) {
    if (strcmp(key, ST_METADATA) == 0) {
      if (json_object_get_type(val) != json_type_object) {
        rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                         "__metadata__ is not an object (%s)",
                         st_type_name(val));
        goto out;
      }
      json_object_object_foreach(val, mk, mv) {
        if (json_object_get_type(mv) != json_type_string) {
          rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                           "metadata '%s': value is not a string (%s)",
                           st_show(mk).s, st_type_name(mv));
          goto out;
        }
        strbytes += strlen(mk) + 1 + strlen(json_object_get_string(mv)) + 1;
        n_meta++;
      }
      md = val;
      continue;
    }
    rc = st_parse_entry(who, key, val, data_len, &ents[n], err, errlen);
    if (rc)
      goto out;
    strbytes += strlen(key) + 1;
    n++;
  }

  /* The buffer must be exactly the tensors, back to back. */
  qsort(ents, n, sizeof *ents, st_cmp_entry);
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (ents[i].begin < at) {
      rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "tensors '%s' and '%s' overlap: bytes [%llu, %llu) and "
                       "[%llu, %llu)",
                       st_show(ents[i - 1].name).s, st_show(ents[i].name).s,
                       (unsigned long long)ents[i - 1].begin,
                       (unsigned long long)ents[i - 1].end,
                       (unsigned long long)ents[i].begin,
                       (unsigned long long)ents[i].end);
      goto out;
    }
    if (ents[i].begin > at) {
      rc = errbuf_fail(
          err, errlen, COHORT_EFORMAT, who,
          "gap in the data buffer: bytes [%llu, %llu) before tensor "
          "'%s' belong to no tensor",
          (unsigned long long)at, (unsigned long long)ents[i].begin,
          st_show(ents[i].name).s);
      goto out;
    }
    at = ents[i].end;
  }
  if (at != data_len) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                     "%llu trailing bytes after the last tensor's data (the "
                     "tensors end at byte %llu of a %llu-byte buffer)",
                     (unsigned long long)(data_len - at),
                     (unsigned long long)at, (unsigned long long)data_len);
    goto out;
  }
  if (data_len > SIZE_MAX) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                     "%llu bytes of data do not fit in memory",
                     (unsigned long long)data_len);
    goto out;
  }

  out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
  out->meta = calloc(n_meta ? n_meta : 1, sizeof *out->meta);
  out->priv = malloc(strbytes ? strbytes : 1);
  out->data = malloc(data_len ? (size_t)data_len : sizeof(float));
  if (!out->tensors || !out->meta || !out->priv || !out->data) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, who,
                     "out of memory for %llu bytes of tensors",
                     (unsigned long long)data_len);
    goto out;
  }
  char *str = out->priv;
  for (size_t i = 0; i < n; i++) {
    nn_st_tensor *t = &out->tensors[i];
    size_t l = strlen(ents[i].name) + 1;
    t->name = memcpy(str, ents[i].name, l);
    str += l;
    t->ndim = ents[i].ndim;
    memcpy(t->shape, ents[i].shape, sizeof t->shape);
    t->data = out->data + ents[i].begin / 4;
  }
  if (md) {
    size_t i = 0;
    json_object_object_foreach(md, mk, mv) {
      size_t kl = strlen(mk) + 1;
      const char *v = json_object_get_string(mv);
      size_t vl = strlen(v) + 1;
      out->meta[i].key = memcpy(str, mk, kl);
      out->meta[i].value = memcpy(str + kl, v, vl);
      str += kl + vl;
      i++;
    }
  }
  out->n = n;
  out->n_meta = n_meta;
  out->n_floats = (size_t)data_len / 4;

out:
  free(scan.dup);
  free(ents);
  json_object_put(root);
  json_tokener_free(tok);
  if (rc)
    nn_safetensors_free(out);
  return rc;
}

/* Checks the u64 header length against the caps and the bytes that follow
 * it (rest). */
static int st_check_hlen(const char *who, uint64_t hlen, uint64_t rest,
                         char *err, size_t errlen) {
  if (hlen == 0)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who, "header length is 0");
  if (hlen > NN_ST_MAX_HEADER)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "header length %llu is over the limit of %llu bytes",
                       (unsigned long long)hlen,
                       (unsigned long long)NN_ST_MAX_HEADER);
  if (hlen > rest)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "header length %llu is larger than the file: only %llu "
                       "bytes follow the length field",
                       (unsigned long long)hlen, (unsigned long long)rest);
  return COHORT_OK;
}

int nn_safetensors_parse(const void *buf, size_t len, const char *name,
                         nn_st_file *out, char *err, size_t errlen) {
  const char *who = name ? name : "safetensors buffer";
  const uint8_t *p = buf;
  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who, "no output");
  memset(out, 0, sizeof *out);
  if (!buf && len)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who, "buffer is NULL");
  if (len < 8)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, who,
                       "%zu bytes, too short for the 8-byte header length",
                       len);
  uint64_t hlen = st_get_u64le(p);
  int rc = st_check_hlen(who, hlen, len - 8, err, errlen);
  if (rc)
    return rc;
  size_t data_len = len - 8 - (size_t)hlen;
  rc = st_read_header(who, (const char *)p + 8, (size_t)hlen, data_len, out,
                      err, errlen);
  if (rc)
    return rc;
  wire_get_f32le(out->data, p + 8 + hlen, out->n_floats);
  return COHORT_OK;
}

int nn_safetensors_load(const char *path, nn_st_file *out, char *err,
                        size_t errlen) {
  uint8_t len8[8], *stage = NULL;
  char *text = NULL;
  int fd = -1, rc = COHORT_OK;
  struct stat sb;

  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!path)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "nn_safetensors_load",
                       "missing file name");
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errbuf_fail(err, errlen, COHORT_EIO, path, "cannot open: %s",
                       strerror(errno));
  if (fstat(fd, &sb) != 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path, "cannot stat: %s",
                     strerror(errno));
    goto out;
  }
  if (!S_ISREG(sb.st_mode)) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path, "not a regular file");
    goto out;
  }
  uint64_t size = (uint64_t)sb.st_size;
  if (size < 8) {
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                     "file has %llu bytes, too short for the 8-byte header "
                     "length",
                     (unsigned long long)size);
    goto out;
  }
  ssize_t got = fd_pread_full(fd, len8, 8, 0);
  if (got != 8)
    goto read_fail;
  uint64_t hlen = st_get_u64le(len8);
  rc = st_check_hlen(path, hlen, size - 8, err, errlen);
  if (rc)
    goto out;
  text = malloc((size_t)hlen);
  if (!text) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path,
                     "out of memory for a %llu-byte header",
                     (unsigned long long)hlen);
    goto out;
  }
  got = fd_pread_full(fd, text, (size_t)hlen, 8);
  if (got < 0 || (uint64_t)got != hlen)
    goto read_fail;
  rc = st_read_header(path, text, (size_t)hlen, size - 8 - hlen, out, err,
                      errlen);
  if (rc)
    goto out;
  free(text);
  text = NULL;

  stage = malloc(ST_CHUNK);
  if (!stage) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, path, "out of memory");
    goto out;
  }
  for (size_t done = 0; done < out->n_floats;) {
    size_t k = out->n_floats - done;
    if (k > ST_CHUNK / 4)
      k = ST_CHUNK / 4;
    got = fd_pread_full(fd, stage, 4 * k, (off_t)(8 + hlen + 4 * done));
    if (got < 0 || (size_t)got != 4 * k)
      goto read_fail;
    wire_get_f32le(out->data + done, stage, k);
    done += k;
  }
  goto out;

read_fail:
  /* Short only when the file shrank since fstat. */
  rc = got < 0 ? errbuf_fail(err, errlen, COHORT_EIO, path, "read failed: %s",
                             strerror(errno))
               : errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                             "truncated while reading: the file shrank");
out:
  if (rc)
    nn_safetensors_free(out);
  if (fd >= 0)
    close(fd);
  free(text);
  free(stage);
  return rc;
}

const nn_st_tensor *nn_st_find(const nn_st_file *f, const char *name) {
  if (!f || !name)
    return NULL;
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->tensors[i].name, name) == 0)
      return &f->tensors[i];
  return NULL;
}

const char *nn_st_meta_get(const nn_st_file *f, const char *key) {
  if (!f || !key)
    return NULL;
  for (size_t i = 0; i < f->n_meta; i++)
    if (strcmp(f->meta[i].key, key) == 0)
      return f->meta[i].value;
  return NULL;
}

void nn_safetensors_free(nn_st_file *f) {
  if (!f)
    return;
  free(f->tensors);
  free(f->meta);
  free(f->data);
  free(f->priv);
  memset(f, 0, sizeof *f);
}
