/* Secure aggregation's parameters and neighbour graph (secagg.h): the
 * checks every round's secagg_params pass, and the random Harary graph
 * that tells each client whom it shares its secrets with. */
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "secagg.h"

const char *secagg_phase_name(secagg_phase p) {
  switch (p) {
  case SECAGG_ADVERTISE:
    return "advertise";
  case SECAGG_SHARE:
    return "share";
  case SECAGG_MASKED:
    return "masked";
  case SECAGG_CONSISTENCY:
    return "consistency";
  case SECAGG_UNMASK:
    return "unmask";
  case SECAGG_DONE:
    return "done";
  case SECAGG_ABORTED:
    return "aborted";
  }
  return "unknown";
}

int secagg_params_check(const secagg_params *p, char *err, size_t errlen) {
  if (!p)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg parameters missing");
  if (p->n < 2 || p->n > SECAGG_MAX_CLIENTS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg n = %u clients must be in 2..%u", p->n,
                       SECAGG_MAX_CLIENTS);
  if (p->degree < 1 || p->degree > p->n - 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg degree %u must be in 1..%u (n - 1 = complete "
                       "graph) for n = %u",
                       p->degree, p->n - 1, p->n);
  /* n k / 2 edges: a k-regular graph needs n k even. */
  if (p->degree % 2 == 1 && p->n % 2 == 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg degree %u is odd and n = %u is odd: no "
                       "%u-regular graph exists on an odd number of nodes; "
                       "use an even degree",
                       p->degree, p->n, p->degree);
  /* A client masks only with at least t neighbours, so t <= k. */
  if (p->threshold < 2 || p->threshold > p->degree)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg threshold %u must be in 2..%u (the degree): "
                       "one holder alone must never hold a secret, and a "
                       "client masks with at least t neighbours",
                       p->threshold, p->degree);
  if (p->ring_bits < 1 || p->ring_bits > 62)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg ring_bits %u must be in 1..62", p->ring_bits);
  if (p->dim == 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg dim is 0: an input needs at least 1 element");
  return COHORT_OK;
}

/* ---- the neighbour graph ---- */

struct secagg_graph {
  uint32_t n, k;
  uint32_t *nb; /* n x k: row i holds node i's neighbours, ascending */
};

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The circle: perm[j] is the node at position j, drawn by Fisher-Yates
 * from prg_derive(seed, "secagg graph"); pos is its inverse (both n
 * entries). */
static int draw_circle(uint32_t n, const uint8_t seed[PRG_SEED_LEN],
                       uint32_t *perm, uint32_t *pos) {
  uint8_t graph_seed[PRG_SEED_LEN];
  prg rng;
  memset(&rng, 0, sizeof rng);
  int rc = prg_derive(seed, "secagg graph", graph_seed);
  if (!rc)
    rc = prg_init(&rng, graph_seed);
  if (!rc) {
    for (uint32_t i = 0; i < n; i++)
      perm[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
      uint32_t j = (uint32_t)prg_below(&rng, (uint64_t)i + 1);
      uint32_t tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    for (uint32_t i = 0; i < n; i++)
      pos[perm[i]] = i;
  }
  prg_free(&rng);
  memset(graph_seed, 0, sizeof graph_seed);
  return rc;
}

/* Node v's row: the k / 2 nearest on either side of its place on the
 * circle and, for odd k (n is even then), the node opposite. For
 * k <= n - 1 the k positions are distinct: the two sides reach
 * (k - 1) / 2 + (k - 1) / 2 < n - 1 apart and never n / 2. */
static void harary_row(uint32_t n, uint32_t k, const uint32_t *perm,
                       const uint32_t *pos, uint32_t v, uint32_t *row) {
  uint32_t c = 0, at = pos[v];
  for (uint32_t d = 1; d <= k / 2; d++) {
    row[c++] = perm[(at + d) % n];
    row[c++] = perm[(at + n - d) % n];
  }
  if (k % 2 == 1)
    row[c++] = perm[(at + n / 2) % n];
  qsort(row, k, sizeof *row, cmp_u32);
}

/* Row i of the complete graph: every node but i, in order. */
static void complete_row(uint32_t n, uint32_t i, uint32_t *row) {
  uint32_t c = 0;
  for (uint32_t j = 0; j < n; j++)
    if (j != i)
      row[c++] = j;
}

static int fill_harary(secagg_graph *g, const uint8_t seed[PRG_SEED_LEN]) {
  uint32_t n = g->n;
  uint32_t *perm = malloc((size_t)n * sizeof *perm);
  uint32_t *pos = malloc((size_t)n * sizeof *pos);
  int rc = perm && pos ? draw_circle(n, seed, perm, pos) : COHORT_ENOMEM;
  for (uint32_t v = 0; v < n && !rc; v++)
    harary_row(n, g->k, perm, pos, v, g->nb + (size_t)v * g->k);
  free(perm);
  free(pos);
  return rc;
}

int secagg_graph_row(const secagg_params *p, uint32_t i, uint32_t *row) {
  if (secagg_params_check(p, NULL, 0) || i >= p->n || !row)
    return COHORT_EINVAL;
  if (p->degree == p->n - 1) {
    complete_row(p->n, i, row);
    return COHORT_OK;
  }
  uint32_t *perm = malloc((size_t)p->n * sizeof *perm);
  uint32_t *pos = malloc((size_t)p->n * sizeof *pos);
  int rc =
      perm && pos ? draw_circle(p->n, p->round_seed, perm, pos) : COHORT_ENOMEM;
  if (!rc)
    harary_row(p->n, p->degree, perm, pos, i, row);
  free(perm);
  free(pos);
  return rc;
}

int secagg_graph_new(const secagg_params *p, secagg_graph **out) {
  if (!out)
    return COHORT_EINVAL;
  *out = NULL;
  if (secagg_params_check(p, NULL, 0))
    return COHORT_EINVAL;
  secagg_graph *g = calloc(1, sizeof *g);
  if (!g)
    return COHORT_ENOMEM;
  g->n = p->n;
  g->k = p->degree;
  g->nb = malloc((size_t)g->n * g->k * sizeof *g->nb);
  if (!g->nb) {
    secagg_graph_free(g);
    return COHORT_ENOMEM;
  }
  int rc = COHORT_OK;
  if (g->k == g->n - 1) /* what the circle gives too, without the seed */
    for (uint32_t i = 0; i < g->n; i++)
      complete_row(g->n, i, g->nb + (size_t)i * g->k);
  else
    rc = fill_harary(g, p->round_seed);
  if (rc) {
    secagg_graph_free(g);
    return rc;
  }
  *out = g;
  return COHORT_OK;
}

void secagg_graph_free(secagg_graph *g) {
  if (!g)
    return;
  free(g->nb);
  free(g);
}

const uint32_t *secagg_graph_neighbours(const secagg_graph *g, uint32_t i) {
  if (!g || i >= g->n)
    return NULL;
  return g->nb + (size_t)i * g->k;
}

int secagg_graph_adjacent(const secagg_graph *g, uint32_t a, uint32_t b) {
  if (!g || a >= g->n || b >= g->n || a == b)
    return 0;
  const uint32_t *row = g->nb + (size_t)a * g->k;
  size_t lo = 0, hi = g->k; /* binary search in [lo, hi) */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (row[mid] < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g->k && row[lo] == b;
}
