/* Server optimisers (FedAvg, FedAvgM, FedAdagrad, FedAdam, FedYogi, FedProx,
 * median, trimmed mean) and their saved state; see strategy.h. */
#include "strategy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"

#define STATE_MAGIC "CSTS"
#define STATE_VERSION 1u
#define STATE_HEADER 32
#define STATE_TRAILER 8

struct strategy {
  strategy_config cfg;
  size_t n;
  uint64_t steps;
  float *m; /* n: adaptive kinds' first moment, else NULL */
  float *v; /* n: fedavgm's velocity or the second moment, else NULL */
};

static const struct {
  const char *name;
  strategy_kind kind;
} names[] = {
    {"fedavg", STRATEGY_FEDAVG},
    {"fedavgm", STRATEGY_FEDAVGM},
    {"fedadagrad", STRATEGY_FEDADAGRAD},
    {"fedadam", STRATEGY_FEDADAM},
    {"fedyogi", STRATEGY_FEDYOGI},
    {"fedprox", STRATEGY_FEDPROX},
    {"median", STRATEGY_MEDIAN},
    {"trimmed_mean", STRATEGY_TRIMMED_MEAN},
};
#define N_NAMES (sizeof names / sizeof names[0])

static int is_known(strategy_kind k) {
  for (size_t i = 0; i < N_NAMES; i++)
    if (names[i].kind == k)
      return 1;
  return 0;
}

static int is_adaptive(strategy_kind k) {
  return k == STRATEGY_FEDADAGRAD || k == STRATEGY_FEDADAM ||
         k == STRATEGY_FEDYOGI;
}

static unsigned n_vectors(strategy_kind k) {
  return is_adaptive(k) ? 2 : k == STRATEGY_FEDAVGM ? 1 : 0;
}

int strategy_parse(const char *name, strategy_kind *out) {
  if (!name)
    return COHORT_EINVAL;
  for (size_t i = 0; i < N_NAMES; i++)
    if (strcmp(name, names[i].name) == 0) {
      *out = names[i].kind;
      return COHORT_OK;
    }
  return COHORT_EINVAL;
}

const char *strategy_name(strategy_kind kind) {
  for (size_t i = 0; i < N_NAMES; i++)
    if (names[i].kind == kind)
      return names[i].name;
  return "?";
}

int strategy_config_init(strategy_kind kind, strategy_config *cfg) {
  if (!is_known(kind))
    return COHORT_EINVAL;
  memset(cfg, 0, sizeof *cfg);
  cfg->kind = kind;
  cfg->server_lr = 1.0;
  switch (kind) {
  case STRATEGY_FEDAVGM:
    cfg->momentum = 0.9;
    break;
  case STRATEGY_FEDADAGRAD:
  case STRATEGY_FEDADAM:
  case STRATEGY_FEDYOGI:
    cfg->server_lr = 1e-2;
    cfg->beta1 = 0.9;
    cfg->beta2 = kind == STRATEGY_FEDADAGRAD ? 0 : 0.99;
    cfg->tau = 1e-3;
    break;
  case STRATEGY_FEDPROX:
    cfg->mu = 0.01;
    break;
  case STRATEGY_TRIMMED_MEAN:
    cfg->trim = 0.1;
    break;
  default:
    break;
  }
  return COHORT_OK;
}

/* lo <= x < hi (hi_open) or lo <= x (no upper bound when hi is INFINITY);
 * written so that NaN fails every test. */
static int check_range(const char *strat, const char *param, double x,
                       double lo, int lo_open, double hi, char *err,
                       size_t errlen) {
  int ok = (lo_open ? x > lo : x >= lo) && (x < hi) && isfinite(x);
  if (ok)
    return COHORT_OK;
  if (isinf(hi))
    errbuf_printf(err, errlen, "%s: %s is %g; it must be %s %g", strat, param,
                  x, lo_open ? ">" : ">=", lo);
  else
    errbuf_printf(err, errlen, "%s: %s is %g; it must be in %c%g, %g)", strat,
                  param, x, lo_open ? '(' : '[', lo, hi);
  return COHORT_EINVAL;
}

int strategy_config_check(const strategy_config *cfg, char *err,
                          size_t errlen) {
  const char *s = strategy_name(cfg->kind);
  if (!is_known(cfg->kind)) {
    errbuf_printf(err, errlen, "unknown strategy kind %d", (int)cfg->kind);
    return COHORT_EINVAL;
  }
  int rc =
      check_range(s, "server_lr", cfg->server_lr, 0, 1, INFINITY, err, errlen);
  if (!rc && cfg->kind == STRATEGY_FEDAVGM)
    rc = check_range(s, "momentum", cfg->momentum, 0, 0, 1, err, errlen);
  if (!rc && is_adaptive(cfg->kind))
    rc = check_range(s, "beta1", cfg->beta1, 0, 0, 1, err, errlen);
  if (!rc && (cfg->kind == STRATEGY_FEDADAM || cfg->kind == STRATEGY_FEDYOGI))
    rc = check_range(s, "beta2", cfg->beta2, 0, 0, 1, err, errlen);
  if (!rc && is_adaptive(cfg->kind))
    rc = check_range(s, "tau", cfg->tau, 0, 1, INFINITY, err, errlen);
  /* tau^2 is v's start: it must not vanish in float. */
  if (!rc && is_adaptive(cfg->kind) && !((float)(cfg->tau * cfg->tau) > 0)) {
    errbuf_printf(err, errlen,
                  "%s: tau is %g; tau^2 underflows float, use tau >= 1e-19", s,
                  cfg->tau);
    rc = COHORT_EINVAL;
  }
  if (!rc && cfg->kind == STRATEGY_FEDPROX)
    rc = check_range(s, "mu", cfg->mu, 0, 0, INFINITY, err, errlen);
  if (!rc && cfg->kind == STRATEGY_TRIMMED_MEAN)
    rc = check_range(s, "trim", cfg->trim, 0, 0, 0.5, err, errlen);
  return rc;
}

int strategy_new(const strategy_config *cfg, size_t n, strategy **out) {
  *out = NULL;
  if (n == 0 || n > SIZE_MAX / sizeof(float) ||
      strategy_config_check(cfg, NULL, 0))
    return COHORT_EINVAL;
  strategy *s = calloc(1, sizeof *s);
  if (!s)
    return COHORT_ENOMEM;
  s->cfg = *cfg;
  s->n = n;
  unsigned nv = n_vectors(cfg->kind);
  if (nv >= 1 && !(s->v = malloc(n * sizeof *s->v)))
    goto nomem;
  if (nv == 2 && !(s->m = calloc(n, sizeof *s->m)))
    goto nomem;
  if (nv >= 1) {
    float v0 = nv == 2 ? (float)(cfg->tau * cfg->tau) : 0.0f;
    for (size_t i = 0; i < n; i++)
      s->v[i] = v0;
  }
  *out = s;
  return COHORT_OK;
nomem:
  strategy_free(s);
  return COHORT_ENOMEM;
}

void strategy_free(strategy *s) {
  if (!s)
    return;
  free(s->m);
  free(s->v);
  free(s);
}

const strategy_config *strategy_config_of(const strategy *s) { return &s->cfg; }

agg_kind strategy_aggregation(const strategy *s) {
  switch (s->cfg.kind) {
  case STRATEGY_MEDIAN:
    return AGG_MEDIAN;
  case STRATEGY_TRIMMED_MEAN:
    return AGG_TRIMMED_MEAN;
  default:
    return AGG_MEAN;
  }
}

float strategy_client_mu(const strategy *s) {
  return s->cfg.kind == STRATEGY_FEDPROX ? (float)s->cfg.mu : 0.0f;
}

uint64_t strategy_steps(const strategy *s) { return s->steps; }

int strategy_step(strategy *s, const float *x, const double *delta,
                  float *x_next) {
  const size_t n = s->n;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(delta[i]))
      return COHORT_EINVAL;
  const strategy_config *c = &s->cfg;
  const double lr = c->server_lr;
  switch (c->kind) {
  case STRATEGY_FEDAVGM:
    for (size_t i = 0; i < n; i++) {
      float v = (float)(c->momentum * (double)s->v[i] + delta[i]);
      s->v[i] = v;
      x_next[i] = (float)((double)x[i] + lr * (double)v);
    }
    break;
  case STRATEGY_FEDADAGRAD:
  case STRATEGY_FEDADAM:
  case STRATEGY_FEDYOGI:
    for (size_t i = 0; i < n; i++) {
      const double d = delta[i], d2 = d * d, vp = s->v[i];
      float m = (float)(c->beta1 * (double)s->m[i] + (1 - c->beta1) * d);
      double v;
      if (c->kind == STRATEGY_FEDADAGRAD)
        v = vp + d2;
      else if (c->kind == STRATEGY_FEDADAM)
        v = c->beta2 * vp + (1 - c->beta2) * d2;
      else
        v = vp - (1 - c->beta2) * d2 * (double)((vp > d2) - (vp < d2));
      s->m[i] = m;
      s->v[i] = (float)v;
      x_next[i] = (float)((double)x[i] +
                          lr * (double)m / (sqrt((double)s->v[i]) + c->tau));
    }
    break;
  default: /* fedavg, fedprox, median, trimmed_mean */
    for (size_t i = 0; i < n; i++)
      x_next[i] = (float)((double)x[i] + lr * delta[i]);
    break;
  }
  s->steps++;
  return COHORT_OK;
}

size_t strategy_state_bytes(const strategy *s) {
  return STATE_HEADER + STATE_TRAILER +
         (size_t)n_vectors(s->cfg.kind) * s->n * sizeof(float);
}

static void put_u32(uint8_t *p, uint32_t x) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(x >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t x) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(x >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
  uint32_t x = 0;
  for (int i = 0; i < 4; i++)
    x |= (uint32_t)p[i] << (8 * i);
  return x;
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t x = 0;
  for (int i = 0; i < 8; i++)
    x |= (uint64_t)p[i] << (8 * i);
  return x;
}

static uint64_t fnv1a64(const uint8_t *p, size_t len) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

static void put_floats(uint8_t *p, const float *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], sizeof u);
    put_u32(p + 4 * i, u);
  }
}

static void get_floats(float *v, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = get_u32(p + 4 * i);
    memcpy(&v[i], &u, sizeof u);
  }
}

void strategy_state_save(const strategy *s, uint8_t *buf) {
  unsigned nv = n_vectors(s->cfg.kind);
  memcpy(buf, STATE_MAGIC, 4);
  put_u32(buf + 4, STATE_VERSION);
  put_u32(buf + 8, (uint32_t)s->cfg.kind);
  put_u32(buf + 12, nv);
  put_u64(buf + 16, (uint64_t)s->n);
  put_u64(buf + 24, s->steps);
  uint8_t *p = buf + STATE_HEADER;
  if (nv == 2) {
    put_floats(p, s->m, s->n);
    p += 4 * s->n;
  }
  if (nv >= 1) {
    put_floats(p, s->v, s->n);
    p += 4 * s->n;
  }
  put_u64(p, fnv1a64(buf, (size_t)(p - buf)));
}

int strategy_state_load(strategy *s, const uint8_t *buf, size_t len, char *err,
                        size_t errlen) {
  if (len < STATE_HEADER + STATE_TRAILER || memcmp(buf, STATE_MAGIC, 4)) {
    errbuf_printf(err, errlen,
                  "not a saved strategy state (bad magic or %zu bytes)", len);
    return COHORT_EFORMAT;
  }
  uint32_t version = get_u32(buf + 4);
  if (version != STATE_VERSION) {
    errbuf_printf(err, errlen,
                  "saved strategy state has version %u; this server "
                  "reads version %u",
                  (unsigned)version, STATE_VERSION);
    return COHORT_EFORMAT;
  }
  if (get_u64(buf + len - STATE_TRAILER) != fnv1a64(buf, len - STATE_TRAILER)) {
    errbuf_printf(err, errlen,
                  "saved strategy state is corrupt (checksum mismatch)");
    return COHORT_EFORMAT;
  }
  uint32_t kind = get_u32(buf + 8), nv = get_u32(buf + 12);
  uint64_t n = get_u64(buf + 16);
  if (kind != (uint32_t)s->cfg.kind) {
    errbuf_printf(err, errlen, "saved state is for %s, this server runs %s",
                  strategy_name((strategy_kind)kind),
                  strategy_name(s->cfg.kind));
    return COHORT_EFORMAT;
  }
  if (n != (uint64_t)s->n) {
    errbuf_printf(err, errlen,
                  "saved state is for a model of %llu parameters, "
                  "this one has %zu",
                  (unsigned long long)n, s->n);
    return COHORT_EFORMAT;
  }
  if (nv != n_vectors(s->cfg.kind) || len != strategy_state_bytes(s)) {
    errbuf_printf(err, errlen,
                  "saved %s state has %u vectors in %zu bytes; "
                  "expected %u in %zu",
                  strategy_name(s->cfg.kind), (unsigned)nv, len,
                  n_vectors(s->cfg.kind), strategy_state_bytes(s));
    return COHORT_EFORMAT;
  }
  /* The checksum catches damage; this catches a state no step can make. */
  const uint8_t *p = buf + STATE_HEADER;
  for (size_t i = 0; i < (size_t)nv * s->n; i++) {
    uint32_t u = get_u32(p + 4 * i);
    float f;
    memcpy(&f, &u, sizeof f);
    if (!isfinite(f) || (nv == 2 && i >= s->n && f < 0)) {
      errbuf_printf(err, errlen, "saved %s state holds %s at %zu",
                    strategy_name(s->cfg.kind),
                    isfinite(f) ? "a negative v" : "NaN or inf", i);
      return COHORT_EFORMAT;
    }
  }
  if (nv == 2) {
    get_floats(s->m, p, s->n);
    p += 4 * s->n;
  }
  if (nv >= 1)
    get_floats(s->v, p, s->n);
  s->steps = get_u64(buf + 24);
  return COHORT_OK;
}
