/* Update codecs: a spec parsed into a chain, the sizes both sides of a
 * round derive from it, and the orchestration of the stages (declared in
 * codec_internal.h) for encoding, decoding, the coordinator's once-per-round
 * finish and secure aggregation's ring. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "wire.h"

/* Indices are 32-bit on the wire, and rotation pads to a power of two:
 * 2^31 is the largest dimension whose padded length still fits. */
#define DIM_MAX ((size_t)1 << 31)
#define SKETCH_ROWS_MAX 16
#define SKETCH_COLS_MAX (1u << 26)
#define ZSTD_LEVEL_MIN 1
#define ZSTD_LEVEL_MAX 19
#define ZSTD_LEVEL_DEFAULT 3

#define STAGES_HELP                                                            \
  "rot, randk:F, topk:F, sketch:RxC[:K], ef, mom:RHO, fp32, fp16, bf16, "      \
  "qB, zstd[:L]"

/* ---- parsing ---- */

/* The token that filled each slot of the chain, for duplicate and
 * dependency messages. */
typedef struct parse_state {
  codec *c;
  const char *rot, *select, *ef, *mom, *value, *zstd;
  int zstd_level_given;
} parse_state;

static int bad(char *err, size_t errlen, const char *tok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "codec '<tok>': <reason>", COHORT_EINVAL. */
static int bad(char *err, size_t errlen, const char *tok, const char *fmt,
               ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "codec '%s': %s", tok,
                     why);
}

/* Takes a slot of the chain for tok; a second claim is a conflict. */
static int claim(const char **slot, const char *tok, const char *rule,
                 char *err, size_t errlen) {
  if (*slot)
    return bad(err, errlen, tok, "'%s' is already given; %s", *slot, rule);
  *slot = tok;
  return COHORT_OK;
}

/* Decimal digits only, s[0..len), at most max. */
static int parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out) {
  uint64_t v = 0;
  if (len == 0)
    return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (max - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* A plain decimal number ("0.1", "1e-3"): strtod alone would also take
 * "nan", "inf" and hex floats. */
static int parse_real(const char *s, double *out) {
  if (!*s || strspn(s, "0123456789.eE-") != strlen(s))
    return -1;
  char *end;
  double v = strtod(s, &end);
  if (*end || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

static int parse_rot(parse_state *st, const char *tok, const char *arg,
                     char *err, size_t errlen) {
  st->c->rotate = 1;
  return claim(&st->rot, tok, "one rot", err, errlen);
}

static int parse_fraction(parse_state *st, codec_select kind, const char *tok,
                          const char *arg, char *err, size_t errlen) {
  int rc = claim(&st->select, tok, "at most one of randk, topk and sketch", err,
                 errlen);
  if (rc)
    return rc;
  double f;
  if (parse_real(arg, &f) || !(f > 0 && f <= 1))
    return bad(err, errlen, tok, "F must be a number in (0, 1]");
  st->c->select = kind;
  st->c->fraction = f;
  return COHORT_OK;
}

static int parse_randk(parse_state *st, const char *tok, const char *arg,
                       char *err, size_t errlen) {
  return parse_fraction(st, SELECT_RANDK, tok, arg, err, errlen);
}

static int parse_topk(parse_state *st, const char *tok, const char *arg,
                      char *err, size_t errlen) {
  return parse_fraction(st, SELECT_TOPK, tok, arg, err, errlen);
}

/* arg: "RxC" or "RxC:K". */
static int parse_sketch(parse_state *st, const char *tok, const char *arg,
                        char *err, size_t errlen) {
  int rc = claim(&st->select, tok, "at most one of randk, topk and sketch", err,
                 errlen);
  if (rc)
    return rc;
  const char *x = strchr(arg, 'x');
  if (!x)
    return bad(err, errlen, tok, "write sketch:RxC[:K], e.g. sketch:5x20000");
  const char *cols = x + 1, *colon = strchr(cols, ':');
  size_t cols_len = colon ? (size_t)(colon - cols) : strlen(cols);
  uint64_t r, cc, k = 0;
  if (parse_uint(arg, (size_t)(x - arg), SKETCH_ROWS_MAX, &r) || r == 0)
    return bad(err, errlen, tok, "R must be 1..%d", SKETCH_ROWS_MAX);
  if (parse_uint(cols, cols_len, SKETCH_COLS_MAX, &cc) || cc == 0)
    return bad(err, errlen, tok, "C must be 1..%u", SKETCH_COLS_MAX);
  if (colon) {
    if (parse_uint(colon + 1, strlen(colon + 1), cc, &k) || k == 0)
      return bad(err, errlen, tok, "K must be 1..C (%u)", (unsigned)cc);
  } else if (cc / 4 == 0) {
    return bad(err, errlen, tok,
               "the default K = C / 4 is 0; give K (sketch:RxC:K)");
  }
  st->c->select = SELECT_SKETCH;
  st->c->rows = (unsigned)r;
  st->c->cols = (unsigned)cc;
  st->c->heavy = (size_t)k;
  return COHORT_OK;
}

static int parse_ef(parse_state *st, const char *tok, const char *arg,
                    char *err, size_t errlen) {
  st->c->error_feedback = 1;
  return claim(&st->ef, tok, "one ef", err, errlen);
}

static int parse_mom(parse_state *st, const char *tok, const char *arg,
                     char *err, size_t errlen) {
  int rc = claim(&st->mom, tok, "one mom", err, errlen);
  if (rc)
    return rc;
  double rho;
  if (parse_real(arg, &rho) || !(rho > 0 && rho < 1))
    return bad(err, errlen, tok, "RHO must be a number in (0, 1)");
  st->c->momentum = rho;
  return COHORT_OK;
}

static int parse_value(parse_state *st, codec_value v, const char *tok,
                       char *err, size_t errlen) {
  st->c->value = v;
  return claim(&st->value, tok, "one value stage (fp32, fp16, bf16 or qB)", err,
               errlen);
}

static int parse_fp32(parse_state *st, const char *tok, const char *arg,
                      char *err, size_t errlen) {
  return parse_value(st, VALUE_FP32, tok, err, errlen);
}

static int parse_fp16(parse_state *st, const char *tok, const char *arg,
                      char *err, size_t errlen) {
  return parse_value(st, VALUE_FP16, tok, err, errlen);
}

static int parse_bf16(parse_state *st, const char *tok, const char *arg,
                      char *err, size_t errlen) {
  return parse_value(st, VALUE_BF16, tok, err, errlen);
}

/* tok: "q" and its digits. */
static int parse_q(parse_state *st, const char *tok, char *err, size_t errlen) {
  int rc = parse_value(st, VALUE_Q, tok, err, errlen);
  if (rc)
    return rc;
  uint64_t b;
  if (parse_uint(tok + 1, strlen(tok + 1), 16, &b) || b == 0)
    return bad(err, errlen, tok, "B must be 1..16");
  st->c->qbits = (unsigned)b;
  return COHORT_OK;
}

static int parse_zstd(parse_state *st, const char *tok, const char *arg,
                      char *err, size_t errlen) {
  int rc = claim(&st->zstd, tok, "one zstd", err, errlen);
  if (rc)
    return rc;
  uint64_t level = ZSTD_LEVEL_DEFAULT;
  if (arg && (parse_uint(arg, strlen(arg), ZSTD_LEVEL_MAX, &level) ||
              level < ZSTD_LEVEL_MIN))
    return bad(err, errlen, tok, "L must be %d..%d", ZSTD_LEVEL_MIN,
               ZSTD_LEVEL_MAX);
  st->c->zstd = 1;
  st->c->zstd_level = (int)level;
  st->zstd_level_given = arg != NULL;
  return COHORT_OK;
}

typedef enum stage_arg { ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL } stage_arg;

typedef int (*stage_parse_fn)(parse_state *st, const char *tok, const char *arg,
                              char *err, size_t errlen);

static const struct stage_syntax {
  const char *name;
  stage_arg arg;
  const char *form; /* how to write it, for a missing argument */
  stage_parse_fn parse;
} stages[] = {
    {"rot", ARG_NONE, "rot", parse_rot},
    {"randk", ARG_REQUIRED, "randk:F", parse_randk},
    {"topk", ARG_REQUIRED, "topk:F", parse_topk},
    {"sketch", ARG_REQUIRED, "sketch:RxC[:K]", parse_sketch},
    {"ef", ARG_NONE, "ef", parse_ef},
    {"mom", ARG_REQUIRED, "mom:RHO", parse_mom},
    {"fp32", ARG_NONE, "fp32", parse_fp32},
    {"fp16", ARG_NONE, "fp16", parse_fp16},
    {"bf16", ARG_NONE, "bf16", parse_bf16},
    {"zstd", ARG_OPTIONAL, "zstd[:L]", parse_zstd},
};

static int parse_token(parse_state *st, const char *tok, char *err,
                       size_t errlen) {
  const char *colon = strchr(tok, ':');
  size_t name_len = colon ? (size_t)(colon - tok) : strlen(tok);
  const char *arg = colon ? colon + 1 : NULL;
  for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
    const struct stage_syntax *s = &stages[i];
    if (strlen(s->name) != name_len || memcmp(s->name, tok, name_len) != 0)
      continue;
    if (arg && s->arg == ARG_NONE)
      return bad(err, errlen, tok, "%s takes no argument", s->name);
    if (s->arg == ARG_REQUIRED && (!arg || !*arg))
      return bad(err, errlen, tok, "write %s", s->form);
    return s->parse(st, tok, arg, err, errlen);
  }
  if (tok[0] == 'q' && strspn(tok + 1, "0123456789") == name_len - 1)
    return arg ? bad(err, errlen, tok, "qB takes no argument")
               : parse_q(st, tok, err, errlen);
  return bad(err, errlen, tok, "unknown stage; the stages are " STAGES_HELP);
}

/* Rules that need the whole chain. */
static int check_chain(const parse_state *st, char *err, size_t errlen) {
  codec_select sel = st->c->select;
  if (st->ef && sel != SELECT_TOPK && sel != SELECT_SKETCH)
    return bad(err, errlen, st->ef, "ef needs topk or sketch");
  if (st->mom && sel != SELECT_SKETCH)
    return bad(err, errlen, st->mom, "mom needs sketch");
  return COHORT_OK;
}

/* The shortest decimal that reads back as v, so "0.10" and ".1" both give
 * "0.1". */
static void format_real(double v, char *buf, size_t len) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, len, "%.*g", prec, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

typedef struct spec_buf {
  char *s;
  size_t cap, len;
} spec_buf;

static void spec_add(spec_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends "+stage" ("stage" first); a result that does not fit leaves len
 * >= cap. */
static void spec_add(spec_buf *b, const char *fmt, ...) {
  if (b->len >= b->cap)
    return;
  if (b->len)
    b->s[b->len++] = '+';
  va_list ap;
  va_start(ap, fmt);
  int n =
      b->len < b->cap ? vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap) : 0;
  va_end(ap);
  b->len += n > 0 ? (size_t)n : 0;
}

/* The canonical spec, in application order. */
static int format_spec(const parse_state *st, char *err, size_t errlen) {
  codec *c = st->c;
  spec_buf b = {c->spec, sizeof c->spec, 0};
  char num[32];
  if (c->rotate)
    spec_add(&b, "rot");
  switch (c->select) {
  case SELECT_NONE:
    break;
  case SELECT_RANDK:
  case SELECT_TOPK:
    format_real(c->fraction, num, sizeof num);
    spec_add(&b, "%s:%s", c->select == SELECT_RANDK ? "randk" : "topk", num);
    break;
  case SELECT_SKETCH:
    if (c->heavy)
      spec_add(&b, "sketch:%ux%u:%zu", c->rows, c->cols, c->heavy);
    else
      spec_add(&b, "sketch:%ux%u", c->rows, c->cols);
    break;
  }
  if (c->error_feedback)
    spec_add(&b, "ef");
  if (c->momentum > 0) {
    format_real(c->momentum, num, sizeof num);
    spec_add(&b, "mom:%s", num);
  }
  switch (c->value) {
  case VALUE_FP32:
    /* The default: spelled out only when it is the whole chain. */
    if (b.len == 0 && !c->zstd)
      spec_add(&b, "fp32");
    break;
  case VALUE_FP16:
    spec_add(&b, "fp16");
    break;
  case VALUE_BF16:
    spec_add(&b, "bf16");
    break;
  case VALUE_Q:
    spec_add(&b, "q%u", c->qbits);
    break;
  }
  if (c->zstd && st->zstd_level_given)
    spec_add(&b, "zstd:%d", c->zstd_level);
  else if (c->zstd)
    spec_add(&b, "zstd");
  if (b.len >= b.cap)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec spec: its canonical form is longer than %d "
                       "characters",
                       CODEC_SPEC_MAX - 1);
  return COHORT_OK;
}

int codec_parse(const char *spec, codec **out, char *err, size_t errlen) {
  *out = NULL;
  if (!spec || !*spec)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec spec is empty; e.g. fp32, q8, rot+q4, "
                       "randk:0.1+q8");
  size_t len = strlen(spec);
  if (len >= CODEC_SPEC_MAX)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec spec of %zu characters is too long (at most "
                       "%d)",
                       len, CODEC_SPEC_MAX - 1);
  /* Tokens point into buf, with each '+' cut to a NUL. */
  char buf[CODEC_SPEC_MAX];
  memcpy(buf, spec, len + 1);
  codec *c = calloc(1, sizeof *c);
  if (!c)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                       "out of memory parsing codec '%s'", spec);
  parse_state st = {.c = c};
  int rc = COHORT_OK;
  for (char *tok = buf; tok && !rc;) {
    char *plus = strchr(tok, '+');
    if (plus)
      *plus = '\0';
    rc = *tok ? parse_token(&st, tok, err, errlen)
              : bad(err, errlen, spec, "empty stage (a '+' too many)");
    tok = plus ? plus + 1 : NULL;
  }
  if (!rc)
    rc = check_chain(&st, err, errlen);
  if (!rc)
    rc = format_spec(&st, err, errlen);
  if (rc) {
    free(c);
    return rc;
  }
  *out = c;
  return COHORT_OK;
}

void codec_free(codec *c) { free(c); }

const char *codec_spec(const codec *c) { return c->spec; }

/* ---- properties ---- */

int codec_summable(const codec *c) {
  return c->select != SELECT_TOPK && c->value == VALUE_Q && !c->zstd;
}

const char *codec_summable_help(void) {
  return "secure aggregation sums integers, so it needs a summable codec: qB "
         "(B = 1..16) alone or after rot, randk:F or sketch:RxC (with ef or "
         "mom), and a common clip; not topk, fp32, fp16, bf16 or zstd. For "
         "example q8, rot+q8, randk:0.1+q8, sketch:5x20000+q8";
}

int codec_linear(const codec *c) { return c->select != SELECT_TOPK; }

int codec_size_exact(const codec *c) { return !c->zstd; }

int codec_client_memory(const codec *c) {
  return c->select == SELECT_TOPK && c->error_feedback;
}

int codec_plain_fp32(const codec *c) {
  return c->value == VALUE_FP32 && !c->rotate && c->select == SELECT_NONE &&
         !c->zstd && !codec_client_memory(c);
}

size_t codec_rotated_dim(const codec *c, size_t d) {
  if (!c->rotate || d == 0)
    return d;
  if (d > (SIZE_MAX >> 1) + 1)
    return 0;
  size_t p = 1;
  while (p < d)
    p <<= 1;
  return p;
}

size_t codec_keep_count(double fraction, size_t n) {
  if (n == 0)
    return 0;
  double x = fraction * (double)n;
  /* F n is often an integer in decimal (0.7 of 10) that binary rounding
   * puts a hair above it; ceil must not add one then. */
  double r = round(x);
  double k = fabs(x - r) <= 1e-12 * x ? r : ceil(x);
  if (k < 1)
    return 1;
  return k >= (double)n ? n : (size_t)k;
}

/* ---- sizes ---- */

/* What a chain makes of params p. */
typedef struct layout {
  size_t n;           /* length after rotation */
  size_t k;           /* randk, topk: kept coordinates */
  size_t vals;        /* values the value stage writes */
  size_t m;           /* linear domain */
  size_t index_bytes; /* topk: the packed indices, before the values */
  size_t raw;         /* payload before zstd */
  size_t wire;        /* payload (a bound with zstd) */
} layout;

static int layout_of(const codec *c, const codec_params *p, layout *l,
                     char *err, size_t errlen) {
  memset(l, 0, sizeof *l);
  if (p->dim == 0 || p->dim > DIM_MAX)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: the model has %zu elements; 1 to %zu are "
                       "supported",
                       c->spec, p->dim, DIM_MAX);
  if (!isfinite(p->clip) || p->clip < 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: clip %g must be a finite number >= 0",
                       c->spec, (double)p->clip);
  l->n = codec_rotated_dim(c, p->dim);
  switch (c->select) {
  case SELECT_NONE:
    l->vals = l->m = l->n;
    break;
  case SELECT_RANDK:
    l->k = codec_keep_count(c->fraction, l->n);
    l->vals = l->m = l->k;
    break;
  case SELECT_TOPK:
    l->k = codec_keep_count(c->fraction, l->n);
    l->vals = l->k;
    l->m = l->n;
    l->index_bytes = topk_index_bytes(l->n, l->k);
    break;
  case SELECT_SKETCH:
    l->vals = l->m = (size_t)c->rows * c->cols;
    break;
  }
  l->raw = l->index_bytes + values_wire_size(c, l->vals, p->clip);
  l->wire = c->zstd ? zstd_bound(l->raw) : l->raw;
  return COHORT_OK;
}

size_t codec_wire_size(const codec *c, const codec_params *p) {
  layout l;
  return layout_of(c, p, &l, NULL, 0) ? 0 : l.wire;
}

size_t codec_linear_dim(const codec *c, const codec_params *p) {
  layout l;
  return layout_of(c, p, &l, NULL, 0) ? 0 : l.m;
}

/* ---- encoding ---- */

static int out_of_memory(char *err, size_t errlen, const codec *c) {
  return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                     "codec %s: out of memory", c->spec);
}

/* For the stages that return a bare status (rotation, randk, topk
 * selection, sketching): only an allocation or OpenSSL failure. */
static int stage_failed(const codec *c, int rc, char *err, size_t errlen) {
  return errbuf_fail(err, errlen, rc, NULL, "codec %s: %s", c->spec,
                     cohort_strerror(rc));
}

/* Rotation and selection: *vals gets the l->vals values the value stage
 * writes (allocated; the caller frees it), *idx the kept coordinates of
 * randk and topk (allocated, else NULL). residual: topk+ef's memory, added
 * to the delta, or NULL. */
static int select_values(const codec *c, const codec_params *p, const layout *l,
                         const float *delta, const float *residual,
                         float **vals, uint32_t **idx, char *err,
                         size_t errlen) {
  *vals = NULL;
  *idx = NULL;
  float *x = malloc(l->n * sizeof *x);
  if (!x)
    return out_of_memory(err, errlen, c);
  for (size_t i = 0; i < p->dim; i++)
    x[i] = residual ? delta[i] + residual[i] : delta[i];
  memset(x + p->dim, 0, (l->n - p->dim) * sizeof *x);
  int rc = COHORT_OK;
  if (wire_first_nonfinite(x, p->dim) < p->dim) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "codec %s: the delta%s has a value that is not finite",
                     c->spec, residual ? " plus residual" : "");
    goto out;
  }
  if (c->rotate && (rc = rotate_forward(p->seed, x, l->n)) != COHORT_OK) {
    stage_failed(c, rc, err, errlen);
    goto out;
  }
  switch (c->select) {
  case SELECT_NONE:
    break;
  case SELECT_RANDK:
  case SELECT_TOPK:
    *idx = malloc(l->k * sizeof **idx);
    if (!*idx) {
      rc = out_of_memory(err, errlen, c);
      goto out;
    }
    rc = c->select == SELECT_RANDK ? randk_indices(p->seed, l->n, l->k, *idx)
                                   : topk_select(x, l->n, l->k, *idx);
    if (rc) {
      stage_failed(c, rc, err, errlen);
      goto out;
    }
    /* In place: indices ascend, so idx[j] >= j is not yet overwritten. */
    for (size_t j = 0; j < l->k; j++)
      x[j] = x[(*idx)[j]];
    break;
  case SELECT_SKETCH: {
    float *table = calloc(l->vals, sizeof *table);
    if (!table) {
      rc = out_of_memory(err, errlen, c);
      goto out;
    }
    rc = sketch_accumulate(c, p->seed, x, l->n, table);
    free(x);
    x = table;
    if (rc) {
      stage_failed(c, rc, err, errlen);
      goto out;
    }
    break;
  }
  }
  /* A huge but finite delta can still overflow float once rotated or
   * summed into sketch buckets. */
  if (wire_first_nonfinite(x, l->vals) < l->vals)
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "codec %s: the delta is too large to encode (a value "
                     "overflows float)",
                     c->spec);
out:
  if (rc) {
    free(x);
    free(*idx);
    *idx = NULL;
    return rc;
  }
  *vals = x;
  return COHORT_OK;
}

static int decode_model(const codec *c, const codec_params *p, const layout *l,
                        const uint8_t *raw, double *work, char *err,
                        size_t errlen);

/* topk+ef: the residual becomes what the coordinator will not see of
 * delta + residual, measured by decoding the payload itself so that the
 * value stage's rounding is fed back too. */
static int update_residual(const codec *c, const codec_params *p,
                           const layout *l, const uint8_t *raw,
                           const float *delta, float *residual, char *err,
                           size_t errlen) {
  double *sent = malloc(l->n * sizeof *sent);
  if (!sent)
    return out_of_memory(err, errlen, c);
  int rc = decode_model(c, p, l, raw, sent, err, errlen);
  if (!rc)
    for (size_t i = 0; i < p->dim; i++)
      residual[i] = (float)((double)(delta[i] + residual[i]) - sent[i]);
  free(sent);
  return rc;
}

int codec_encode(const codec *c, const codec_params *p, const float *delta,
                 float *residual, prg *rng, uint8_t *out, size_t *out_len,
                 char *err, size_t errlen) {
  layout l;
  int rc = layout_of(c, p, &l, err, errlen);
  if (rc)
    return rc;
  if (codec_client_memory(c) && !residual)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: error feedback needs the client's residual",
                       c->spec);
  const float *vals = NULL;
  float *owned = NULL;
  uint32_t *idx = NULL;
  uint8_t *raw = c->zstd ? malloc(l.raw) : out;
  if (!raw)
    return out_of_memory(err, errlen, c);
  if (!c->rotate && c->select == SELECT_NONE && !codec_client_memory(c) &&
      l.n == p->dim) {
    /* Nothing to transform: the value stage reads the delta itself, with
     * no copy of a whole model (issue 22: an app's peak memory). */
    if (wire_first_nonfinite(delta, p->dim) < p->dim) {
      rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: the delta has a value that is not finite",
                       c->spec);
      goto out;
    }
    vals = delta;
  } else {
    rc =
        select_values(c, p, &l, delta, codec_client_memory(c) ? residual : NULL,
                      &owned, &idx, err, errlen);
    if (rc)
      goto out;
    vals = owned;
  }
  if (c->select == SELECT_TOPK)
    topk_pack_indices(idx, l.n, l.k, raw);
  rc = values_encode(c, vals, l.vals, p->clip, rng, raw + l.index_bytes, err,
                     errlen);
  if (!rc && codec_client_memory(c))
    rc = update_residual(c, p, &l, raw, delta, residual, err, errlen);
  if (rc)
    goto out;
  if (c->zstd)
    rc = zstd_compress_payload(c->zstd_level, raw, l.raw, out, l.wire, out_len,
                               err, errlen);
  else
    *out_len = l.raw;
out:
  free(owned);
  free(idx);
  if (raw != out)
    free(raw);
  return rc;
}

/* ---- decoding ---- */

/* raw: the payload after zstd, l->raw bytes, into lin (l->m floats). */
static int decode_raw(const codec *c, const codec_params *p, const layout *l,
                      const uint8_t *raw, float *lin, char *err,
                      size_t errlen) {
  if (c->select != SELECT_TOPK)
    return values_decode(c, raw, l->vals, p->clip, lin, err, errlen);
  uint32_t *idx = malloc(l->k * sizeof *idx);
  float *kept = malloc(l->k * sizeof *kept);
  int rc = idx && kept ? COHORT_OK : out_of_memory(err, errlen, c);
  if (!rc)
    rc = topk_unpack_indices(raw, l->n, l->k, idx, err, errlen);
  if (!rc)
    rc = values_decode(c, raw + l->index_bytes, l->k, p->clip, kept, err,
                       errlen);
  if (!rc) {
    memset(lin, 0, l->n * sizeof *lin);
    for (size_t j = 0; j < l->k; j++)
      lin[idx[j]] = kept[j];
  }
  free(idx);
  free(kept);
  return rc;
}

int codec_decode_linear(const codec *c, const codec_params *p,
                        const uint8_t *in, size_t len, float *lin, char *err,
                        size_t errlen) {
  layout l;
  int rc = layout_of(c, p, &l, err, errlen);
  if (rc)
    return rc;
  if (!c->zstd) {
    if (len != l.raw)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "codec %s: a payload of %zu bytes is the wrong size: "
                         "%zu elements take %zu",
                         c->spec, len, p->dim, l.raw);
    return decode_raw(c, p, &l, in, lin, err, errlen);
  }
  if (len == 0 || len > l.wire)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: a payload of %zu bytes is the wrong size: "
                       "%zu elements take 1 to %zu",
                       c->spec, len, p->dim, l.wire);
  uint8_t *raw = malloc(l.raw);
  if (!raw)
    return out_of_memory(err, errlen, c);
  rc = zstd_decompress_payload(in, len, raw, l.raw, err, errlen);
  if (!rc)
    rc = decode_raw(c, p, &l, raw, lin, err, errlen);
  free(raw);
  return rc;
}

/* The linear map back: lin (l->m doubles) to work (l->n doubles, the model
 * domain in its first p->dim). */
static int finish_into(const codec *c, const codec_params *p, const layout *l,
                       codec_state *state, const double *lin, double *work,
                       char *err, size_t errlen) {
  int rc = COHORT_OK;
  switch (c->select) {
  case SELECT_NONE:
  case SELECT_TOPK:
    memmove(work, lin, l->n * sizeof *work);
    break;
  case SELECT_RANDK: {
    uint32_t *idx = malloc(l->k * sizeof *idx);
    if (!idx)
      return out_of_memory(err, errlen, c);
    rc = randk_indices(p->seed, l->n, l->k, idx);
    if (rc)
      stage_failed(c, rc, err, errlen);
    else {
      /* Each coordinate is kept with probability k / n. */
      double scale = (double)l->n / (double)l->k;
      memset(work, 0, l->n * sizeof *work);
      for (size_t j = 0; j < l->k; j++)
        work[idx[j]] = lin[j] * scale;
    }
    free(idx);
    break;
  }
  case SELECT_SKETCH:
    rc = sketch_unsketch(c, p->seed, state, lin, l->n, work, err, errlen);
    break;
  }
  if (!rc && c->rotate && (rc = rotate_inverse(p->seed, work, l->n)) != 0)
    stage_failed(c, rc, err, errlen);
  return rc;
}

/* raw payload to the model domain without state: work (l->n doubles). */
static int decode_model(const codec *c, const codec_params *p, const layout *l,
                        const uint8_t *raw, double *work, char *err,
                        size_t errlen) {
  float *lin = malloc(l->m * sizeof *lin);
  double *lind = malloc(l->m * sizeof *lind);
  int rc = lin && lind ? COHORT_OK : out_of_memory(err, errlen, c);
  if (!rc)
    rc = decode_raw(c, p, l, raw, lin, err, errlen);
  if (!rc) {
    for (size_t i = 0; i < l->m; i++)
      lind[i] = lin[i];
    rc = finish_into(c, p, l, NULL, lind, work, err, errlen);
  }
  free(lin);
  free(lind);
  return rc;
}

int codec_finish(const codec *c, const codec_params *p, codec_state *state,
                 const double *lin, double *delta, char *err, size_t errlen) {
  layout l;
  int rc = layout_of(c, p, &l, err, errlen);
  if (rc)
    return rc;
  /* Padding needs room beyond the d outputs. */
  double *work = l.n == p->dim ? delta : malloc(l.n * sizeof *work);
  if (!work)
    return out_of_memory(err, errlen, c);
  rc = finish_into(c, p, &l, state, lin, work, err, errlen);
  if (work != delta) {
    if (!rc)
      memcpy(delta, work, p->dim * sizeof *delta);
    free(work);
  }
  return rc;
}

int codec_decode(const codec *c, const codec_params *p, const uint8_t *in,
                 size_t len, float *delta, char *err, size_t errlen) {
  layout l;
  int rc = layout_of(c, p, &l, err, errlen);
  if (rc)
    return rc;
  float *lin = malloc(l.m * sizeof *lin);
  double *lind = malloc(l.m * sizeof *lind);
  double *work = malloc(l.n * sizeof *work);
  if (!lin || !lind || !work) {
    rc = out_of_memory(err, errlen, c);
    goto out;
  }
  rc = codec_decode_linear(c, p, in, len, lin, err, errlen);
  if (rc)
    goto out;
  for (size_t i = 0; i < l.m; i++)
    lind[i] = lin[i];
  rc = finish_into(c, p, &l, NULL, lind, work, err, errlen);
  if (rc)
    goto out;
  for (size_t i = 0; i < p->dim; i++) {
    delta[i] = (float)work[i];
    /* randk's n / k scale can push a large kept value past float. */
    if (!isfinite(delta[i])) {
      rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: decoded value %zu overflows float", c->spec,
                       i);
      goto out;
    }
  }
out:
  free(lin);
  free(lind);
  free(work);
  return rc;
}

/* ---- coordinator state ---- */

static int keeps_state(const codec *c) {
  return c->select == SELECT_SKETCH && (c->error_feedback || c->momentum > 0);
}

size_t codec_state_bytes(const codec *c, const codec_params *p) {
  return keeps_state(c) ? sketch_state_bytes(c) : 0;
}

codec_state *codec_state_new(const codec *c, const codec_params *p) {
  return keeps_state(c) ? sketch_state_new(c) : NULL;
}

void codec_state_save(const codec_state *s, uint8_t *out) {
  sketch_state_save(s, out);
}

int codec_state_load(codec_state *s, const uint8_t *in, size_t len) {
  return sketch_state_load(s, in, len);
}

void codec_state_free(codec_state *s) {
  if (s)
    sketch_state_free(s);
}

/* ---- the ring ---- */

unsigned codec_ring_bits(const codec *c) {
  return codec_summable(c) ? c->qbits : 0;
}

static int ring_check(const codec *c, const codec_params *p, char *err,
                      size_t errlen) {
  if (!codec_summable(c))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s is not summable: %s", c->spec,
                       codec_summable_help());
  if (!(p->clip > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s in the ring needs a common clip > 0 (a "
                       "per-payload scale cannot be summed)",
                       c->spec);
  return COHORT_OK;
}

int codec_encode_ring(const codec *c, const codec_params *p, const float *delta,
                      prg *rng, uint64_t *ring, char *err, size_t errlen) {
  layout l;
  int rc = ring_check(c, p, err, errlen);
  if (!rc)
    rc = layout_of(c, p, &l, err, errlen);
  if (rc)
    return rc;
  if (!rng)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: q%u needs a random generator", c->spec,
                       c->qbits);
  float *vals;
  uint32_t *idx;
  rc = select_values(c, p, &l, delta, NULL, &vals, &idx, err, errlen);
  if (rc)
    return rc;
  values_quantize_levels(c, vals, l.vals, p->clip, rng, ring);
  free(vals);
  free(idx);
  return COHORT_OK;
}

int codec_ring_sum_to_linear(const codec *c, const codec_params *p,
                             const uint64_t *sum, uint64_t n_summands,
                             double *lin, char *err, size_t errlen) {
  layout l;
  int rc = ring_check(c, p, err, errlen);
  if (!rc)
    rc = layout_of(c, p, &l, err, errlen);
  if (rc)
    return rc;
  uint64_t top = ((uint64_t)1 << c->qbits) - 1;
  if (n_summands == 0 || n_summands > UINT64_MAX / top)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "codec %s: %llu summands cannot be decoded", c->spec,
                       (unsigned long long)n_summands);
  /* Each summand adds at most top; more means the ring wrapped. */
  uint64_t max = n_summands * top;
  for (size_t i = 0; i < l.m; i++)
    if (sum[i] > max)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "codec %s: ring sum element %zu is %llu, above %llu "
                         "summands times %llu: the ring wrapped or a share "
                         "is corrupt",
                         c->spec, i, (unsigned long long)sum[i],
                         (unsigned long long)n_summands,
                         (unsigned long long)top);
  values_levels_sum_to_float(c, sum, l.m, p->clip, n_summands, lin);
  return COHORT_OK;
}
