/* Data partitioners for simulated federations (see nn_partition.h). Every
 * spec first decides an owner (client) per example, then one counting sort
 * turns the owners into per-client index lists, so the result is a
 * permutation by construction. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "nn_partition.h"
#include "nn_rng.h"

#define PART_MAX_CLIENTS 1000000
#define PART_SHOW 64 /* characters of a bad spec quoted in a message */
/* Stream of nn_rng_mix, so a partition does not replay the numbers that other
 * users of the same run seed (initialisation, shuffling) draw. */
#define PART_STREAM 0x706172746974696fULL /* "partitio" */
/* The labels:C draws of the clients' label sets, replayed in a second pass
 * (so nothing per client is stored), on their own stream. */
#define PART_LABEL_STREAM 0x6c6162656c736574ULL /* "labelset" */
#define PART_UNOWNED UINT32_MAX
#define PART_KNOWN                                                             \
  "known specs: iid, shards:S (S >= 1 shards per client), labels:C (C "        \
  "labels per client), labelsets:L+L,L,... (each client's labels), "           \
  "dirichlet:ALPHA (label skew), quantity:ALPHA (size skew), ALPHA a number "  \
  "> 0"

typedef enum part_kind {
  PART_IID,
  PART_SHARDS,
  PART_LABELS,
  PART_LABELSETS,
  PART_DIRICHLET,
  PART_QUANTITY
} part_kind;

/* Parses spec into kind and its parameter (shards, labels or alpha; for
 * labelsets, *sets points into spec at the sets, checked later against the
 * data set by part_labelsets_check). */
static int part_parse(const char *spec, part_kind *kind, long *shards,
                      double *alpha, const char **sets, char *err,
                      size_t errlen) {
  if (!spec || !*spec)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "empty partition spec; " PART_KNOWN);
  const char *colon = strchr(spec, ':');
  size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
  const char *arg = colon ? colon + 1 : NULL;
  int show = PART_SHOW;

  if (name_len == 3 && strncmp(spec, "iid", 3) == 0) {
    if (arg)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": iid takes no parameter; "
                         "" PART_KNOWN,
                         show, spec);
    *kind = PART_IID;
    return COHORT_OK;
  }
  int shards_spec = name_len == 6 && strncmp(spec, "shards", 6) == 0;
  int labels_spec = name_len == 6 && strncmp(spec, "labels", 6) == 0;
  if (shards_spec || labels_spec) {
    const char *what = shards_spec ? "shards per client" : "labels per client";
    if (!arg || !*arg)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": missing the number of %s, "
                         "e.g. %s:2; " PART_KNOWN,
                         show, spec, what, shards_spec ? "shards" : "labels");
    const char *p = arg;
    while (*p >= '0' && *p <= '9')
      p++;
    if (*p != '\0')
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": %s \"%.*s\" is not a "
                         "whole number; " PART_KNOWN,
                         show, spec, what, show, arg);
    errno = 0;
    long s = strtol(arg, NULL, 10);
    if (errno == ERANGE || s > INT32_MAX)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": %s \"%.*s\" is too large",
                         show, spec, what, show, arg);
    if (s < 1)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": %s must be >= 1, got %ld; "
                         "" PART_KNOWN,
                         show, spec, what, s);
    *kind = shards_spec ? PART_SHARDS : PART_LABELS;
    *shards = s;
    return COHORT_OK;
  }
  if (name_len == 9 && strncmp(spec, "labelsets", 9) == 0) {
    if (!arg || !*arg)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": missing the clients' label "
                         "sets, e.g. labelsets:0+6,1+6 for two clients; "
                         "" PART_KNOWN,
                         show, spec);
    *kind = PART_LABELSETS;
    *sets = arg;
    return COHORT_OK;
  }
  int dir = name_len == 9 && strncmp(spec, "dirichlet", 9) == 0;
  int qty = name_len == 8 && strncmp(spec, "quantity", 8) == 0;
  if (dir || qty) {
    const char *name = dir ? "dirichlet" : "quantity";
    if (!arg || !*arg)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": missing ALPHA, e.g. "
                         "%s:0.5; " PART_KNOWN,
                         show, spec, name);
    char *end = NULL;
    double a = 0;
    if (*arg != ' ' && *arg != '\t')
      a = strtod(arg, &end);
    if (!end || end == arg || *end != '\0')
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": ALPHA \"%.*s\" is not a "
                         "number; " PART_KNOWN,
                         show, spec, show, arg);
    if (!isfinite(a) || !(a > 0))
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": ALPHA must be a finite "
                         "number > 0, got %.*s; " PART_KNOWN,
                         show, spec, show, arg);
    *kind = dir ? PART_DIRICHLET : PART_QUANTITY;
    *alpha = a;
    return COHORT_OK;
  }
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "unknown partition spec \"%.*s\"; " PART_KNOWN, show,
                     spec);
}

/* Draws p ~ Dirichlet(alpha, ..., alpha) over k entries into w, scaled so
 * that the largest is 1 (callers normalise by the sum). The gammas are taken
 * in log space: for alpha < 1, Gamma(alpha) = Gamma(alpha + 1) * U^(1/alpha)
 * underflows to 0 for most draws when alpha is small (0.01), which would
 * leave no mass at all. */
static void part_dirichlet(nn_rng *r, double alpha, double *w, int k) {
  double mx = -INFINITY;
  for (int i = 0; i < k; i++) {
    double lg = log(nn_rng_gamma(r, alpha < 1.0 ? alpha + 1.0 : alpha));
    if (alpha < 1.0)
      lg += log(1.0 - nn_rng_uniform(r)) / alpha; /* U in (0, 1] */
    w[i] = lg;
    if (lg > mx)
      mx = lg;
  }
  if (!(mx > -INFINITY)) {
    /* Every log weight overflowed (alpha near the smallest double): the
     * limit of the distribution, one entry chosen uniformly. */
    int one = (int)nn_rng_below(r, (uint64_t)k);
    for (int i = 0; i < k; i++)
      w[i] = i == one ? 1.0 : 0.0;
    return;
  }
  for (int i = 0; i < k; i++)
    w[i] = exp(w[i] - mx);
}

/* Assigns the cnt examples ex[0..cnt) to the k clients in proportions w
 * (positive sum): client i gets ex[cut(i-1) .. cut(i)) where cut(i) rounds
 * cnt times the cumulative share, and the last cut is cnt exactly. */
static void part_split(const uint32_t *ex, size_t cnt, const double *w, int k,
                       uint32_t *owner) {
  double total = 0;
  for (int i = 0; i < k; i++)
    total += w[i];
  double acc = 0;
  size_t prev = 0;
  for (int i = 0; i < k; i++) {
    acc += w[i];
    size_t cut = cnt;
    if (i < k - 1) {
      double c = floor((double)cnt * (acc / total) + 0.5);
      cut = c >= (double)cnt ? cnt : (size_t)c;
      if (cut < prev)
        cut = prev;
    }
    for (size_t j = prev; j < cut; j++)
      owner[ex[j]] = (uint32_t)i;
    prev = cut;
  }
}

/* Gives every empty client one example when n >= k: in ascending order, an
 * empty client takes a seeded-random example of the then largest client
 * (lowest index on ties). With an empty client and n >= k examples among at
 * most k - 1 clients, the largest holds at least two, so it stays non-empty. */
static void part_fill_empty(nn_rng *r, uint32_t *owner, size_t n, size_t *count,
                            int k) {
  if (n < (size_t)k)
    return;
  for (int c = 0; c < k; c++) {
    if (count[c])
      continue;
    int big = 0;
    for (int i = 1; i < k; i++)
      if (count[i] > count[big])
        big = i;
    size_t j = (size_t)nn_rng_below(r, count[big]);
    for (size_t i = 0; i < n; i++) {
      if (owner[i] != (uint32_t)big)
        continue;
      if (j-- == 0) {
        owner[i] = (uint32_t)c;
        break;
      }
    }
    count[big]--;
    count[c] = 1;
  }
}

/* Sorts the indices 0..n-1 by label, stable (ascending index within a
 * label), into sorted; start[c] .. start[c + 1] is label c's range. */
static void part_by_label(const uint8_t *y, size_t n, uint32_t *sorted,
                          size_t start[257]) {
  size_t fill[256];
  memset(start, 0, 257 * sizeof start[0]);
  for (size_t i = 0; i < n; i++)
    start[y[i] + 1]++;
  for (int c = 0; c < 256; c++)
    start[c + 1] += start[c];
  memcpy(fill, start, sizeof fill);
  for (size_t i = 0; i < n; i++)
    sorted[fill[y[i]]++] = (uint32_t)i;
}

/* The label count of ds: its n_classes, or more when a label says so. */
static int part_classes(const nn_dataset *ds) {
  int k = ds->n_classes > 0 && ds->n_classes <= 256 ? ds->n_classes : 0;
  for (size_t i = 0; i < ds->n; i++)
    if (ds->y[i] >= k)
      k = ds->y[i] + 1;
  return k;
}

/* A deck of the labels 0..k-1 and its inverse (pos[deck[i]] == i). */
typedef struct part_deck {
  uint8_t deck[256], pos[256];
} part_deck;

static void part_deck_init(part_deck *d, int k) {
  for (int i = 0; i < k; i++)
    d->deck[i] = d->pos[i] = (uint8_t)i;
}

static void part_deck_swap(part_deck *d, int i, int j) {
  uint8_t a = d->deck[i], b = d->deck[j];
  d->deck[i] = b;
  d->deck[j] = a;
  d->pos[b] = (uint8_t)i;
  d->pos[a] = (uint8_t)j;
}

/* Client c's labels as NIID-Bench's "#C=k" draws them, in deck[0..per):
 * first c % k, then per - 1 distinct others uniformly at random. A partial
 * Fisher-Yates shuffle of the rest of the deck (whatever its order) draws
 * them in O(per), where NIID-Bench redraws duplicates: the same
 * distribution. */
static void part_client_labels(nn_rng *r, part_deck *d, int c, int k, int per) {
  part_deck_swap(d, 0, d->pos[c % k]);
  for (int j = 1; j < per; j++)
    part_deck_swap(d, j, j + (int)nn_rng_below(r, (uint64_t)(k - j)));
}

/* labelsets: checks the written sets (labels joined by '+', sets by ','):
 * one non-empty set per client, each label below classes and named once in
 * its set. Bounded by the spec's length; nothing allocated. */
static int part_labelsets_check(const char *spec, const char *sets,
                                int n_clients, int classes, char *err,
                                size_t errlen) {
  const char *p = sets;
  long count = 0;
  for (;;) {
    unsigned char seen[256] = {0};
    for (;;) {
      if (*p < '0' || *p > '9')
        return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                           "partition spec \"%.*s\": client %ld's label set: "
                           "expected a label (a whole number) at \"%.*s\"; "
                           "sets are labels joined by '+', separated by ','",
                           PART_SHOW, spec, count, PART_SHOW, p);
      const char *digits = p;
      long v = 0;
      while (*p >= '0' && *p <= '9') {
        if (v < 100000) /* past every label: stop before overflowing */
          v = v * 10 + (*p - '0');
        p++;
      }
      if (v >= classes)
        return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                           "partition spec \"%.*s\": client %ld's label set "
                           "names label %.*s, but the data set's labels are "
                           "0 to %d",
                           PART_SHOW, spec, count,
                           (int)(p - digits) < PART_SHOW ? (int)(p - digits)
                                                         : PART_SHOW,
                           digits, classes - 1);
      if (seen[v]++)
        return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                           "partition spec \"%.*s\": client %ld's label set "
                           "names label %ld twice",
                           PART_SHOW, spec, count, v);
      if (*p != '+')
        break;
      p++;
    }
    count++;
    if (*p == '\0')
      break;
    if (*p != ',')
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "partition spec \"%.*s\": unexpected \"%.*s\" after "
                         "client %ld's label set; sets are labels joined by "
                         "'+', separated by ','",
                         PART_SHOW, spec, PART_SHOW, p, count - 1);
    p++;
  }
  if (count != n_clients)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "partition spec \"%.*s\": %ld label sets for %d "
                       "clients; give one set per client",
                       PART_SHOW, spec, count, n_clients);
  return COHORT_OK;
}

/* The clients' label sets, one client at a time in ascending order: drawn
 * (labels:C) or read from checked text (labelsets). part_sets_start
 * rewinds, so part_labels's two passes see the same sets without storing
 * one per client. */
typedef struct part_sets {
  const char *written, *at; /* labelsets: the sets' text and a cursor */
  uint64_t seed;
  int k, per; /* labels:C: the data set's labels and C */
  nn_rng r;
  part_deck d;
} part_sets;

static void part_sets_start(part_sets *s) {
  s->at = s->written;
  part_deck_init(&s->d, s->k);
  nn_rng_seed(&s->r, nn_rng_mix(s->seed, PART_LABEL_STREAM));
}

/* Client c's labels into set; returns how many. */
static int part_sets_next(part_sets *s, int c, uint8_t set[256]) {
  if (!s->written) {
    part_client_labels(&s->r, &s->d, c, s->k, s->per);
    memcpy(set, s->d.deck, (size_t)s->per);
    return s->per;
  }
  int n = 0;
  for (;;) {
    int v = 0;
    while (*s->at >= '0' && *s->at <= '9')
      v = v * 10 + (*s->at++ - '0');
    set[n++] = (uint8_t)v;
    if (*s->at != '+')
      break;
    s->at++;
  }
  if (*s->at == ',')
    s->at++;
  return n;
}

/* labels:C and labelsets. Each label's examples, shuffled, are cut into as
 * many near-equal parts as clients hold the label (the first ones one
 * example larger, as numpy's array_split), the parts going to those clients
 * in ascending order; examples of a label no client holds stay unowned. */
static void part_labels(nn_rng *r, part_sets *sets, const uint8_t *y, size_t n,
                        int n_clients, uint32_t *work, uint32_t *owner) {
  size_t holders[256] = {0}, taken[256] = {0}, start[257];
  uint8_t set[256];
  part_sets_start(sets);
  for (int c = 0; c < n_clients; c++) {
    int m = part_sets_next(sets, c, set);
    for (int j = 0; j < m; j++)
      holders[set[j]]++;
  }
  part_by_label(y, n, work, start);
  for (size_t i = 0; i < n; i++)
    owner[i] = PART_UNOWNED;
  for (int l = 0; l < sets->k; l++)
    nn_rng_shuffle(r, work + start[l], start[l + 1] - start[l]);
  part_sets_start(sets);
  for (int c = 0; c < n_clients; c++) {
    int m = part_sets_next(sets, c, set);
    for (int j = 0; j < m; j++) {
      int l = set[j];
      size_t cnt = start[l + 1] - start[l], part = taken[l]++;
      size_t base = cnt / holders[l], extra = cnt % holders[l];
      size_t first = start[l] + part * base + (part < extra ? part : extra);
      size_t len = base + (part < extra);
      for (size_t i = first; i < first + len; i++)
        owner[work[i]] = (uint32_t)c;
    }
  }
}

int nn_partition_make(const nn_dataset *ds, const char *spec, int n_clients,
                      uint64_t seed, nn_partition *out, char *err,
                      size_t errlen) {
  uint32_t *owner = NULL, *work = NULL, *index = NULL;
  size_t *offsets = NULL, *count = NULL;
  double *w = NULL;
  part_kind kind = PART_IID;
  long shards = 0;
  double alpha = 0;
  const char *written_sets = NULL;
  int rc;

  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!ds || (ds->n && !ds->y))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "partition: no data set (or one without labels)");
  if (ds->n > UINT32_MAX)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "partition: %zu examples, at most %lu are supported",
                       ds->n, (unsigned long)UINT32_MAX);
  if (n_clients < 1 || n_clients > PART_MAX_CLIENTS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "partition: the number of clients must be 1 to %d, got "
                       "%d",
                       PART_MAX_CLIENTS, n_clients);
  rc = part_parse(spec, &kind, &shards, &alpha, &written_sets, err, errlen);
  if (rc)
    return rc;
  size_t n = ds->n, k = (size_t)n_clients;
  if (kind == PART_SHARDS && (uint64_t)k * (uint64_t)shards > n)
    return errbuf_fail(
        err, errlen, COHORT_EINVAL, NULL,
        "partition spec \"%.*s\": %d clients x %ld shards = %llu "
        "shards, more than the %zu examples; use fewer shards "
        "per client or fewer clients",
        PART_SHOW, spec, n_clients, shards,
        (unsigned long long)k * (unsigned long long)shards, n);

  int classes = part_classes(ds);
  if (kind == PART_LABELS && shards > classes)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "partition spec \"%.*s\": %ld labels per client, but "
                       "the data set has %d labels; use labels:1 to "
                       "labels:%d",
                       PART_SHOW, spec, shards, classes, classes);
  if (kind == PART_LABELSETS) {
    rc = part_labelsets_check(spec, written_sets, n_clients, classes, err,
                              errlen);
    if (rc)
      return rc;
  }

  /* n may be 0 ("iid" of nothing): keep the allocations non-zero. */
  owner = malloc((n ? n : 1) * sizeof *owner);
  work = malloc((n ? n : 1) * sizeof *work);
  index = malloc((n ? n : 1) * sizeof *index);
  offsets = malloc((k + 1) * sizeof *offsets);
  count = calloc(k, sizeof *count);
  w = malloc(k * sizeof *w);
  if (!owner || !work || !index || !offsets || !count || !w) {
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                     "partition: out of memory for %zu examples and %zu "
                     "clients",
                     n, k);
    goto out;
  }

  nn_rng r;
  nn_rng_seed(&r, nn_rng_mix(seed, PART_STREAM));
  size_t start[257];
  switch (kind) {
  case PART_IID:
  case PART_QUANTITY: {
    for (size_t i = 0; i < n; i++)
      work[i] = (uint32_t)i;
    nn_rng_shuffle(&r, work, n);
    if (kind == PART_IID) {
      /* Near-equal slices with the extra examples first, exactly as
       * nn_dataset_shard cuts (rounding could place them elsewhere). */
      size_t base = n / k, extra = n % k, at = 0;
      for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < base + (c < extra); j++)
          owner[work[at++]] = (uint32_t)c;
    } else {
      part_dirichlet(&r, alpha, w, n_clients);
      part_split(work, n, w, n_clients, owner);
    }
    break;
  }
  case PART_SHARDS: {
    part_by_label(ds->y, n, work, start);
    size_t n_shards = k * (size_t)shards;
    size_t base = n / n_shards, extra = n % n_shards;
    /* A shuffled list of shard numbers, reusing index as scratch: client c
     * takes entries c * S .. c * S + S - 1. */
    uint32_t *deck = index;
    for (size_t s = 0; s < n_shards; s++)
      deck[s] = (uint32_t)s;
    nn_rng_shuffle(&r, deck, n_shards);
    for (size_t t = 0; t < n_shards; t++) {
      size_t s = deck[t];
      size_t first = s * base + (s < extra ? s : extra);
      size_t len = base + (s < extra);
      for (size_t j = first; j < first + len; j++)
        owner[work[j]] = (uint32_t)(t / (size_t)shards);
    }
    break;
  }
  case PART_LABELS:
  case PART_LABELSETS: {
    part_sets sets = {.written = written_sets,
                      .seed = seed,
                      .k = classes,
                      .per = (int)shards};
    part_labels(&r, &sets, ds->y, n, n_clients, work, owner);
    break;
  }
  case PART_DIRICHLET:
    part_by_label(ds->y, n, work, start);
    for (int c = 0; c < 256; c++) {
      size_t cnt = start[c + 1] - start[c];
      if (!cnt)
        continue;
      nn_rng_shuffle(&r, work + start[c], cnt);
      part_dirichlet(&r, alpha, w, n_clients);
      part_split(work + start[c], cnt, w, n_clients, owner);
    }
    break;
  }

  for (size_t i = 0; i < n; i++)
    if (owner[i] != PART_UNOWNED)
      count[owner[i]]++;
  if (kind == PART_DIRICHLET || kind == PART_QUANTITY)
    part_fill_empty(&r, owner, n, count, n_clients);

  /* Counting sort by owner; ascending example index within a client. */
  offsets[0] = 0;
  for (size_t c = 0; c < k; c++)
    offsets[c + 1] = offsets[c] + count[c];
  memcpy(count, offsets, k * sizeof *count); /* count is now a cursor */
  for (size_t i = 0; i < n; i++)
    if (owner[i] != PART_UNOWNED)
      index[count[owner[i]]++] = (uint32_t)i;

  out->n_clients = n_clients;
  out->n = n;
  out->offsets = offsets;
  out->index = index;
  offsets = NULL;
  index = NULL;
  rc = COHORT_OK;

out:
  free(owner);
  free(work);
  free(index);
  free(offsets);
  free(count);
  free(w);
  return rc;
}

void nn_partition_free(nn_partition *p) {
  if (!p)
    return;
  free(p->offsets);
  free(p->index);
  memset(p, 0, sizeof *p);
}

int nn_dataset_subset(const nn_dataset *src, const uint32_t *idx, size_t n,
                      nn_dataset *out) {
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!src || (n && !idx) ||
      (src->n && ((!src->x && !src->x8) || !src->y || !src->dim)))
    return COHORT_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (idx[i] >= src->n)
      return COHORT_EINVAL;
  int rc = nn_dataset_alloc_like(src, n, out);
  for (size_t i = 0; !rc && i < n; i++)
    nn_dataset_copy_row(out, i, src, idx[i]);
  return rc;
}

int nn_partition_client(const nn_dataset *ds, const char *spec, int client,
                        int n_clients, uint64_t seed, nn_dataset *out,
                        char *err, size_t errlen) {
  nn_partition p;
  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (n_clients >= 1 && (client < 0 || client >= n_clients))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "partition: client %d is not in 0..%d", client,
                       n_clients - 1);
  int rc = nn_partition_make(ds, spec, n_clients, seed, &p, err, errlen);
  if (rc)
    return rc;
  size_t first = p.offsets[client];
  rc = nn_dataset_subset(ds, p.index + first, p.offsets[client + 1] - first,
                         out);
  if (rc)
    errbuf_fail(err, errlen, rc, NULL,
                "partition: out of memory copying client %d's "
                "share",
                client);
  nn_partition_free(&p);
  return rc;
}

static int part_digits(size_t v) {
  int d = 1;
  while (v >= 10) {
    v /= 10;
    d++;
  }
  return d;
}

void nn_partition_summary(const nn_partition *p, const nn_dataset *ds,
                          FILE *f) {
  if (!p || !ds || !f || !p->offsets || p->n != ds->n || (ds->n && !ds->y)) {
    if (f)
      fprintf(f, "partition summary: partition and data set do not match\n");
    return;
  }
  size_t total[256] = {0};
  int labels = ds->n_classes > 0 && ds->n_classes <= 256 ? ds->n_classes : 0;
  for (size_t i = 0; i < ds->n; i++)
    if (ds->y[i] >= labels)
      labels = ds->y[i] + 1;
  int wn = part_digits(ds->n) + 1;
  if (wn < 6)
    wn = 6;
  fprintf(f, "%6s %*s %6s", "client", wn, "n", "labels");
  for (int c = 0; c < labels; c++)
    fprintf(f, " %*d", wn, c);
  fputc('\n', f);
  for (int k = 0; k < p->n_clients; k++) {
    size_t hist[256] = {0};
    int distinct = 0;
    for (size_t j = p->offsets[k]; j < p->offsets[k + 1]; j++) {
      uint32_t i = p->index[j];
      if (i < ds->n)
        hist[ds->y[i]]++;
    }
    for (int c = 0; c < labels; c++) {
      distinct += hist[c] > 0;
      total[c] += hist[c];
    }
    fprintf(f, "%6d %*zu %6d", k, wn, p->offsets[k + 1] - p->offsets[k],
            distinct);
    for (int c = 0; c < labels; c++)
      fprintf(f, " %*zu", wn, hist[c]);
    fputc('\n', f);
  }
  int distinct = 0;
  for (int c = 0; c < labels; c++)
    distinct += total[c] > 0;
  fprintf(f, "%6s %*zu %6d", "total", wn, p->offsets[p->n_clients], distinct);
  for (int c = 0; c < labels; c++)
    fprintf(f, " %*zu", wn, total[c]);
  fputc('\n', f);
}
