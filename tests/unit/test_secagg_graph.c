/* Tests of secure aggregation's parameters (secagg.h): the checks on a
 * round's secagg_params; the random Harary neighbour graph (regular,
 * symmetric, sorted, connected, reproducible from the round seed, nodes
 * placed uniformly) and a client's row of it; the parameter finder, whose
 * bounds (secagg_params.h) are compared with binomial tails summed term by
 * term here, and whose choices are checked against the bounds themselves;
 * the dropout that over-selection adds; and what a client's policy
 * accepts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "secagg.h"
#include "secagg_params.h"

static secagg_params params(uint32_t n, uint32_t k, uint32_t t, uint32_t seed) {
  secagg_params p;
  memset(&p, 0, sizeof p);
  p.n = n;
  p.degree = k;
  p.threshold = t;
  p.ring_bits = 32;
  p.dim = 10;
  for (int i = 0; i < 4; i++)
    p.round_seed[i] = (uint8_t)(seed >> (8 * i));
  p.round_seed[31] = 0xa5;
  return p;
}

/* ---- parameter checks ---- */

static void test_params_check_table(void) {
  static const struct {
    uint32_t n, k, t;
    unsigned bits;
    size_t dim;
    const char *want; /* NULL: accepted; else a substring of the reason */
  } cases[] = {
      {3, 2, 2, 62, 1, NULL}, /* the smallest round */
      {10, 9, 9, 1, 5, NULL}, /* complete, every neighbour needed */
      {10, 4, 3, 32, 5, NULL},
      {10, 3, 2, 32, 5, NULL}, /* odd k on even n */
      {11, 4, 4, 32, 5, NULL},
      {SECAGG_MAX_CLIENTS, 2, 2, 32, 5, NULL},
      /* Two clients: k = 1 leaves no threshold in 2..k. */
      {2, 1, 1, 32, 1, "secagg threshold 1 must be in 2..1 (the degree)"},
      {2, 1, 2, 62, 1, "threshold 2 must be in 2..1"},
      {10, 9, 10, 1, 5, "threshold 10 must be in 2..9"}, /* t = k + 1 */
      {11, 4, 5, 32, 5, "threshold 5 must be in 2..4"},
      {1, 1, 1, 32, 5, "secagg n = 1 clients must be in 2..65535"},
      {SECAGG_MAX_CLIENTS + 1, 2, 2, 32, 5, "n = 65536 clients"},
      {10, 0, 1, 32, 5, "secagg degree 0 must be in 1..9"},
      {10, 10, 6, 32, 5, "secagg degree 10 must be in 1..9"},
      {11, 3, 2, 32, 5, "degree 3 is odd and n = 11 is odd"},
      {10, 4, 2, 32, 5, NULL}, /* t <= k / 2: safe against a curious one */
      {10, 3, 1, 32, 5, "threshold 1 must be in 2..3"}, /* one holder */
      {10, 4, 6, 32, 5, "secagg threshold 6 must be in 2..4 (the degree)"},
      {10, 4, 0, 32, 5, "threshold 0 must be in 2..4"},
      {10, 4, 3, 0, 5, "secagg ring_bits 0 must be in 1..62"},
      {10, 4, 3, 63, 5, "ring_bits 63"},
      {10, 4, 3, 32, 0, "secagg dim is 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    secagg_params p = params(cases[i].n, cases[i].k, cases[i].t, 1);
    p.ring_bits = cases[i].bits;
    p.dim = cases[i].dim;
    char err[256] = "";
    int rc = secagg_params_check(&p, err, sizeof err);
    if (!cases[i].want) {
      CU_ASSERT_EQUAL(rc, COHORT_OK);
      if (rc)
        printf("\n  case %zu refused: %s\n", i, err);
    } else {
      CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
      CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].want));
      if (!strstr(err, cases[i].want))
        printf("\n  case %zu: '%s' lacks '%s'\n", i, err, cases[i].want);
    }
  }
  CU_ASSERT_EQUAL(secagg_params_check(NULL, NULL, 0), COHORT_EINVAL);
}

static void test_phase_names(void) {
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_ADVERTISE), "advertise");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_SHARE), "share");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_MASKED), "masked");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_CONSISTENCY), "consistency");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_UNMASK), "unmask");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_DONE), "done");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name(SECAGG_ABORTED), "aborted");
  CU_ASSERT_STRING_EQUAL(secagg_phase_name((secagg_phase)99), "unknown");
}

/* ---- the graph ---- */

/* Every node has exactly k neighbours, ascending (so distinct), none of
 * them itself, and adjacency is symmetric and agrees with the lists. */
static void check_regular(const secagg_graph *g, uint32_t n, uint32_t k) {
  uint8_t *row = calloc(n, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  for (uint32_t a = 0; a < n; a++) {
    const uint32_t *nb = secagg_graph_neighbours(g, a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nb);
    memset(row, 0, n);
    for (uint32_t j = 0; j < k; j++) {
      CU_ASSERT_FATAL(nb[j] < n);
      CU_ASSERT_NOT_EQUAL(nb[j], a);
      if (j > 0)
        CU_ASSERT(nb[j - 1] < nb[j]);
      row[nb[j]] = 1;
    }
    for (uint32_t b = 0; b < n; b++) {
      int adj = secagg_graph_adjacent(g, a, b);
      CU_ASSERT_EQUAL(adj, row[b]);
      CU_ASSERT_EQUAL(adj, secagg_graph_adjacent(g, b, a));
    }
  }
  free(row);
}

/* Connected components of the graph, by breadth-first search. */
static uint32_t components(const secagg_graph *g, uint32_t n, uint32_t k) {
  uint32_t *queue = malloc(n * sizeof *queue);
  uint8_t *seen = calloc(n, 1);
  uint32_t count = 0;
  CU_ASSERT_FATAL(queue && seen);
  for (uint32_t s = 0; s < n; s++) {
    if (seen[s])
      continue;
    count++;
    uint32_t head = 0, tail = 0;
    queue[tail++] = s;
    seen[s] = 1;
    while (head < tail) {
      const uint32_t *nb = secagg_graph_neighbours(g, queue[head++]);
      for (uint32_t j = 0; j < k; j++)
        if (!seen[nb[j]]) {
          seen[nb[j]] = 1;
          queue[tail++] = nb[j];
        }
    }
  }
  free(queue);
  free(seen);
  return count;
}

static void test_graph_regular_symmetric_sorted(void) {
  static const uint32_t nk[][2] = {{3, 2},   {4, 3},    {5, 2},   {5, 4},
                                   {8, 2},   {8, 3},    {8, 5},   {9, 6},
                                   {10, 3},  {10, 7},   {10, 8},  {64, 10},
                                   {101, 4}, {101, 60}, {200, 31}};
  for (size_t i = 0; i < sizeof nk / sizeof nk[0]; i++) {
    uint32_t n = nk[i][0], k = nk[i][1];
    secagg_params p = params(n, k, k / 2 + 1, 7);
    secagg_graph *g = NULL;
    CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
    check_regular(g, n, k);
    secagg_graph_free(g);
  }
}

static void test_graph_connected(void) {
  static const uint32_t nk[][2] = {{3, 2},    {8, 2},     {8, 3},    {10, 3},
                                   {50, 2},   {50, 5},    {51, 4},   {1000, 2},
                                   {1000, 3}, {1000, 48}, {4097, 16}};
  for (size_t i = 0; i < sizeof nk / sizeof nk[0]; i++)
    for (uint32_t seed = 1; seed <= 5; seed++) {
      uint32_t n = nk[i][0], k = nk[i][1];
      secagg_params p = params(n, k, k / 2 + 1, seed);
      secagg_graph *g = NULL;
      CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
      CU_ASSERT_EQUAL(components(g, n, k), 1);
      secagg_graph_free(g);
    }
  /* k = 1 would join each node to the opposite one only, a perfect
   * matching (bound (3) never passes it); it leaves no threshold in 2..k,
   * so no round has it. */
  secagg_params p = params(12, 1, 2, 3);
  secagg_graph *g = NULL;
  uint32_t row[1];
  CU_ASSERT_EQUAL(secagg_graph_new(&p, &g), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(g);
  CU_ASSERT_EQUAL(secagg_graph_row(&p, 0, row), COHORT_EINVAL);
}

static void test_graph_odd_degree_even_n(void) {
  /* Circle sides of (k - 1) / 2 plus the opposite node: for k = 3 on
   * n = 10, removing a node's two circle neighbours still leaves it its
   * opposite, so every node keeps degree 3 and the graph stays whole. */
  for (uint32_t k = 3; k <= 9; k += 2)
    for (uint32_t seed = 1; seed <= 3; seed++) {
      secagg_params p = params(10, k, k / 2 + 1, seed);
      secagg_graph *g = NULL;
      CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
      check_regular(g, 10, k);
      CU_ASSERT_EQUAL(components(g, 10, k), 1);
      secagg_graph_free(g);
    }
  /* Odd k on odd n is refused, and *out is cleared. */
  secagg_params p = params(10, 3, 2, 1);
  secagg_graph *g = NULL, *keep = NULL;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &keep), COHORT_OK);
  g = keep;
  p = params(9, 3, 2, 1);
  CU_ASSERT_EQUAL(secagg_graph_new(&p, &g), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(g);
  secagg_graph_free(keep);
}

static int same_graph(const secagg_graph *a, const secagg_graph *b, uint32_t n,
                      uint32_t k) {
  for (uint32_t i = 0; i < n; i++)
    if (memcmp(secagg_graph_neighbours(a, i), secagg_graph_neighbours(b, i),
               k * sizeof(uint32_t)))
      return 0;
  return 1;
}

static void test_graph_deterministic_per_seed(void) {
  secagg_params p1 = params(100, 6, 4, 11), p2 = params(100, 6, 4, 12);
  secagg_graph *a = NULL, *b = NULL, *c = NULL;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p1, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p1, &b), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p2, &c), COHORT_OK);
  CU_ASSERT(same_graph(a, b, 100, 6));
  CU_ASSERT(!same_graph(a, c, 100, 6));
  secagg_graph_free(a);
  secagg_graph_free(b);
  secagg_graph_free(c);
  /* The threshold, ring and dimension play no part in the graph. */
  p2 = p1;
  p2.threshold = 6;
  p2.ring_bits = 20;
  p2.dim = 3;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p1, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p2, &b), COHORT_OK);
  CU_ASSERT(same_graph(a, b, 100, 6));
  secagg_graph_free(a);
  secagg_graph_free(b);
}

static void test_graph_complete(void) {
  static const uint32_t ns[] = {3, 4, 7, 10, 33};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    uint32_t n = ns[i];
    for (uint32_t seed = 1; seed <= 2; seed++) {
      secagg_params p = params(n, n - 1, n - 1, seed);
      secagg_graph *g = NULL;
      CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
      check_regular(g, n, n - 1);
      for (uint32_t a = 0; a < n; a++) {
        const uint32_t *nb = secagg_graph_neighbours(g, a);
        for (uint32_t j = 0; j < n - 1; j++)
          CU_ASSERT_EQUAL(nb[j], j < a ? j : j + 1);
      }
      secagg_graph_free(g);
    }
  }
}

/* The permutation places each node uniformly on the circle: over many
 * seeds every pair of nodes is adjacent with probability k / (n - 1). */
static void test_graph_uniform_over_seeds(void) {
  enum { N = 8, SEEDS = 2800 };
  for (uint32_t k = 2; k <= 3; k++) {
    unsigned count[N][N];
    memset(count, 0, sizeof count);
    for (uint32_t s = 0; s < SEEDS; s++) {
      secagg_params p = params(N, k, k / 2 + 1, 1000 + s);
      secagg_graph *g = NULL;
      CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
      for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++)
          count[a][b] += (unsigned)secagg_graph_adjacent(g, a, b);
      secagg_graph_free(g);
    }
    double q = (double)k / (N - 1), mean = SEEDS * q;
    double sd = sqrt(SEEDS * q * (1 - q)); /* 23.9 for k = 2, 26.2 for 3 */
    for (uint32_t a = 0; a < N; a++)
      for (uint32_t b = a + 1; b < N; b++)
        CU_ASSERT(fabs(count[a][b] - mean) < 5 * sd);
  }
}

static void test_graph_refusals(void) {
  secagg_graph *g = NULL;
  secagg_params p = params(10, 4, 5, 1); /* t above k */
  CU_ASSERT_EQUAL(secagg_graph_new(&p, &g), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(g);
  CU_ASSERT_EQUAL(secagg_graph_new(NULL, &g), COHORT_EINVAL);
  p = params(10, 4, 3, 1);
  CU_ASSERT_EQUAL(secagg_graph_new(&p, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
  CU_ASSERT_PTR_NULL(secagg_graph_neighbours(g, 10));
  CU_ASSERT_EQUAL(secagg_graph_adjacent(g, 0, 10), 0);
  CU_ASSERT_EQUAL(secagg_graph_adjacent(g, 10, 0), 0);
  CU_ASSERT_EQUAL(secagg_graph_adjacent(g, 3, 3), 0);
  secagg_graph_free(g);
  secagg_graph_free(NULL);
}

/* A client's row alone (secagg_graph_row, O(n)) is the graph's row, for
 * sparse and complete graphs, odd and even k, many seeds; a row of a plan
 * that is not valid, or of a node outside it, is refused. */
static void test_graph_row_matches_graph(void) {
  static const uint32_t nk[][2] = {
      {3, 2},  {4, 2},  {4, 3},   {5, 2},   {5, 4},   {6, 3},    {6, 5},
      {8, 3},  {8, 4},  {8, 7},   {9, 2},   {9, 8},   {10, 9},   {12, 5},
      {33, 6}, {50, 7}, {64, 10}, {64, 63}, {101, 4}, {101, 60}, {200, 31}};
  unsigned rows = 0, bad = 0;
  uint32_t *row = malloc(200 * sizeof *row);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  for (size_t i = 0; i < sizeof nk / sizeof nk[0]; i++)
    for (uint32_t seed = 1; seed <= 4; seed++) {
      uint32_t n = nk[i][0], k = nk[i][1];
      secagg_params p = params(n, k, k / 2 + 1, 100 * seed + (uint32_t)i);
      secagg_graph *g = NULL;
      CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
      for (uint32_t v = 0; v < n; v++) {
        memset(row, 0xff, 200 * sizeof *row);
        int rc = secagg_graph_row(&p, v, row);
        rows++;
        if (rc != COHORT_OK ||
            memcmp(row, secagg_graph_neighbours(g, v), k * sizeof *row) ||
            (k < 200 && row[k] != UINT32_MAX)) /* nothing past k */
          bad++;
      }
      secagg_graph_free(g);
    }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(rows > 2000);
  secagg_params p = params(10, 4, 3, 1);
  CU_ASSERT_EQUAL(secagg_graph_row(&p, 10, row), COHORT_EINVAL);
  CU_ASSERT_EQUAL(secagg_graph_row(&p, 0, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL(secagg_graph_row(NULL, 0, row), COHORT_EINVAL);
  p = params(11, 3, 2, 1); /* odd k, odd n */
  CU_ASSERT_EQUAL(secagg_graph_row(&p, 0, row), COHORT_EINVAL);
  p = params(10, 4, 5, 1); /* t above k */
  CU_ASSERT_EQUAL(secagg_graph_row(&p, 0, row), COHORT_EINVAL);
  free(row);
}

/* ---- the bounds ---- */

static double binom_coef(unsigned m, unsigned i) {
  double c = 1;
  for (unsigned j = 1; j <= i; j++)
    c = c * (double)(m - i + j) / j;
  return c;
}

/* P[lo <= X <= hi], X ~ Binomial(m, p), term by term. */
static double direct(unsigned m, double p, unsigned lo, unsigned hi) {
  double s = 0;
  for (unsigned i = lo; i <= hi && i <= m; i++)
    s += binom_coef(m, i) * pow(p, i) * pow(1 - p, m - i);
  return s;
}

/* a and b agree as logs of probabilities: both -inf, or within 1e-9. */
static int near_log(double a, double b) {
  if (isinf(a) || isinf(b))
    return a == b;
  return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void test_tail_against_direct_sums(void) {
  /* A tail worked out by hand: P[Binomial(10, 1/2) >= 8] = 56 / 1024. */
  CU_ASSERT(near_log(secagg_ln_binom_upper(10, 0.5, 8), log(56.0 / 1024)));
  static const double ps[] = {0, 1e-4, 0.01, 0.05, 0.3, 0.5, 0.7, 0.99, 1};
  unsigned bad = 0;
  for (unsigned m = 1; m <= 40; m++)
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
      for (unsigned t = 0; t <= m + 1; t++) {
        double want = direct(m, ps[pi], t, m);
        double got = secagg_ln_binom_upper(m, ps[pi], t);
        if (!near_log(got, log(want)) && bad++ < 5)
          printf("\n  m %u p %g t %u: %.17g, direct %.17g\n", m, ps[pi], t, got,
                 log(want));
      }
  CU_ASSERT_EQUAL(bad, 0);
  /* Large m: the upper tail of p and the lower tail of 1 - p add to 1,
   * whichever side of the mode t falls on (to lgamma's rounding of
   * ln 3000! ~ 2e4, a few 1e-12). */
  for (unsigned t = 0; t <= 3001; t += 7) {
    double up = exp(secagg_ln_binom_upper(3000, 0.1, t));
    double low = t == 0 ? 0 : exp(secagg_ln_binom_upper(3000, 0.9, 3001 - t));
    CU_ASSERT(fabs(up + low - 1) < 1e-10);
  }
}

static void test_bounds_against_direct_sums(void) {
  static const double rates[] = {0, 0.02, 0.1, 0.3};
  unsigned bad = 0;
  for (uint32_t k = 1; k <= 30; k++)
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++)
      for (uint32_t t = k / 2 + 1; t <= k + 1; t++) {
        double x = rates[r];
        /* (1): fewer than t of the k neighbours survive. */
        double want1 = log2(50 * direct(k, 1 - x, 0, t - 1));
        /* (2): t or more of them are corrupt. */
        double want2 = log2(50 * direct(k + 1, x, t, k + 1));
        if (!near_log(secagg_bound_correctness(50, k, t, x), want1) ||
            !near_log(secagg_bound_reconstruct(50, k, t, x), want2))
          bad++;
      }
  CU_ASSERT_EQUAL(bad, 0);
  /* (3): n^2 (dropout + corrupt)^(2 floor(k / 2)). */
  CU_ASSERT(near_log(secagg_bound_isolate(100, 10, 0.1, 0.1),
                     log2(1e4 * pow(0.2, 10))));
  CU_ASSERT(near_log(secagg_bound_isolate(100, 11, 0.1, 0.1),
                     log2(1e4 * pow(0.2, 10))));
  CU_ASSERT(near_log(secagg_bound_isolate(1000, 1, 0.1, 0.1), log2(1e6)));
  CU_ASSERT(near_log(secagg_bound_isolate(100, 10, 0, 0), -INFINITY));
  CU_ASSERT(near_log(secagg_bound_isolate(100, 99, 0.5, 0.4), -INFINITY));
}

/* The exposure bound is (2) at the count each adversary needs. */
static void test_exposed_per_adversary(void) {
  for (uint32_t k = 1; k <= 30; k++)
    for (uint32_t t = 1; t <= k + 1; t++) {
      CU_ASSERT_EQUAL(secagg_bound_exposed(100, k, t, 0.1, SECAGG_CURIOUS),
                      secagg_bound_reconstruct(100, k, t, 0.1));
      double want = 2 * t > k + 1
                        ? secagg_bound_reconstruct(100, k, 2 * t - k - 1, 0.1)
                        : log2(100.0); /* n certainties */
      CU_ASSERT(near_log(
          secagg_bound_exposed(100, k, t, 0.1, SECAGG_SEMI_MALICIOUS), want));
    }
}

/* ---- the finder ---- */

/* The corrupt holders an adversary needs at degree k and threshold t: a
 * curious coordinator t; a semi-malicious one gets one kind of share from
 * each honest holder and both from the A corrupt ones, so it needs
 * k + 1 + A >= 2 t (0: none, 2 t <= k + 1). */
static uint32_t holders_needed(secagg_adversary adv, uint32_t k, uint32_t t) {
  if (adv == SECAGG_CURIOUS)
    return t;
  return 2 * t > k + 1 ? 2 * t - k - 1 : 0;
}

/* t withstands the goal's corrupt clients and adversary, as docs/secagg.md
 * states it: the holders needed (and t >= 2) are reached by corrupt ones
 * with probability bound (2) within the goal, and are more than the
 * colluders a coordinator may place around a client, whatever the odds. */
static int secure(const secagg_goal *g, uint32_t k, uint32_t t) {
  double sec = -(double)g->security_bits;
  uint32_t a = holders_needed(g->adversary, k, t);
  return t >= 2 && a > 0 && a > g->colluders &&
         secagg_bound_reconstruct(g->n, k, a, g->corrupt) <= sec;
}

static int meets(const secagg_goal *g, uint32_t k, uint32_t t) {
  return secagg_bound_correctness(g->n, k, t, g->dropout) <=
             -(double)g->correctness_bits &&
         secure(g, k, t) &&
         secagg_bound_isolate(g->n, k, g->dropout, g->corrupt) <=
             -(double)g->security_bits;
}

/* The finder as docs/secagg.md states it, with a plain scan over t up to k
 * (a client masks with at least t neighbours; the last k, n - 1, has the
 * parity of the step, so the loop reaches it). */
static int reference_finder(const secagg_goal *g, uint32_t *k_out,
                            uint32_t *t_out) {
  uint32_t n = g->n, step = n % 2 == 0 ? 1 : 2;
  double sec = -(double)g->security_bits, cor = -(double)g->correctness_bits;
  for (uint32_t k = step == 1 ? 1 : 2; k <= n - 1; k += step) {
    if (k < n - 1 && secagg_bound_isolate(n, k, g->dropout, g->corrupt) > sec)
      continue;
    for (uint32_t t = 1; t <= k; t++)
      if (secure(g, k, t)) {
        if (secagg_bound_correctness(n, k, t, g->dropout) <= cor) {
          *k_out = k;
          *t_out = t;
          return COHORT_OK;
        }
        break;
      }
  }
  return COHORT_EINVAL;
}

static void test_finder_matches_reference(void) {
  static const uint32_t ns[] = {2, 3, 7, 10, 31, 64, 200, 301};
  static const double ds[] = {0, 0.05, 0.1, 0.2, 0.3};
  static const double cs[] = {0, 0.01, 0.05, 0.2};
  static const unsigned bits[][2] = {{40, 20}, {20, 10}, {64, 30}};
  unsigned bad = 0, found = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof ds / sizeof ds[0]; b++)
      for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (size_t e = 0; e < 2 * sizeof bits / sizeof bits[0]; e++) {
          secagg_goal g = {ns[a],
                           ds[b],
                           cs[c],
                           bits[e / 2][0],
                           bits[e / 2][1],
                           e % 2 ? SECAGG_CURIOUS : SECAGG_SEMI_MALICIOUS,
                           0};
          uint32_t k = 0, t = 0, rk = 0, rt = 0;
          int rc = secagg_find_params(&g, &k, &t, NULL, 0);
          int rrc = reference_finder(&g, &rk, &rt);
          found += rc == COHORT_OK;
          if (rc != rrc || (!rc && (k != rk || t != rt))) {
            if (bad++ < 5)
              printf("\n  n %u dropout %g corrupt %g %u/%u %s: %d (%u, %u), "
                     "reference %d (%u, %u)",
                     g.n, g.dropout, g.corrupt, g.security_bits,
                     g.correctness_bits, secagg_adversary_name(g.adversary), rc,
                     k, t, rrc, rk, rt);
          }
        }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(found > 200); /* the grid is not all refusals */
}

static void test_finder_n1000_logarithmic(void) {
  secagg_goal goal = {1000, 0.1, 0.1, 40, 20, SECAGG_SEMI_MALICIOUS, 0};
  uint32_t k = 0, t = 0;
  char err[512] = "";
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                        COHORT_OK);
  printf("\n  n 1000, dropout 0.1, corrupt 0.1, 40/20 bits: k %u, t %u "
         "(bounds 2^%.1f, 2^%.1f, 2^%.1f) ",
         k, t, secagg_bound_correctness(1000, k, t, 0.1),
         secagg_bound_exposed(1000, k, t, 0.1, SECAGG_SEMI_MALICIOUS),
         secagg_bound_isolate(1000, k, 0.1, 0.1));
  CU_ASSERT(k < 1000 / 4);
  CU_ASSERT(2 * t > k + 1 && t <= k);
  CU_ASSERT(meets(&goal, k, t));
  /* t is the smallest that keeps corrupt clients out: with t - 1, the
   * corrupt holders plus half the honest ones would suffice. */
  CU_ASSERT(secagg_bound_reconstruct(1000, k, 2 * t - k - 1, 0.1) <= -40.0);
  CU_ASSERT(secagg_bound_reconstruct(1000, k, 2 * t - k - 3, 0.1) > -40.0);
  /* No smaller degree, k - 2 among them, meets all three with any t. */
  CU_ASSERT_FATAL(k > 2);
  for (uint32_t j = 1; j < k; j++)
    for (uint32_t u = 1; u <= j; u++)
      CU_ASSERT(!meets(&goal, j, u));
  /* The result is a valid round. */
  secagg_params p = params(1000, k, t, 5);
  CU_ASSERT_EQUAL(secagg_params_check(&p, err, sizeof err), COHORT_OK);
}

static void test_finder_monotone(void) {
  static const uint32_t ns[] = {100, 1000, 5001};
  static const double cs[] = {0, 0.05, 0.2};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof cs / sizeof cs[0]; b++) {
      /* More dropout: k never smaller, and once refused, refused. */
      uint32_t last = 0;
      int refused = 0;
      for (double d = 0; d < 0.5; d += 0.025) {
        secagg_goal goal = {ns[a], d, cs[b], 40, 20, SECAGG_SEMI_MALICIOUS, 0};
        uint32_t k = 0, t = 0;
        int rc = secagg_find_params(&goal, &k, &t, NULL, 0);
        if (rc) {
          refused = 1;
          continue;
        }
        CU_ASSERT(!refused);
        CU_ASSERT(k >= last);
        CU_ASSERT(meets(&goal, k, t) || k == ns[a] - 1);
        last = k;
      }
    }
  /* More corruption likewise. */
  uint32_t last = 0;
  for (double c = 0; c < 0.3; c += 0.02) {
    secagg_goal goal = {1000, 0.1, c, 40, 20, SECAGG_SEMI_MALICIOUS, 0};
    uint32_t k = 0, t = 0;
    CU_ASSERT_EQUAL_FATAL(secagg_find_params(&goal, &k, &t, NULL, 0),
                          COHORT_OK);
    CU_ASSERT(k >= last);
    last = k;
  }
}

static void test_finder_complete_for_small_n(void) {
  /* Ten clients, 2% corrupt: the survivors of k = 8 may fall apart
   * (bound (3): 100 * 0.02^8 = 2^-38.5 > 2^-40), so the finder falls back
   * to full SecAgg, with t = 9 (bound (2) 2^-44.2; t = 8 gives 2^-36.4). */
  secagg_goal goal = {10, 0, 0.02, 40, 20, SECAGG_CURIOUS, 0};
  uint32_t k = 0, t = 0;
  char err[512] = "";
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(k, 9);
  CU_ASSERT_EQUAL(t, 9);
  CU_ASSERT(secagg_bound_isolate(10, 8, 0, 0.02) > -40.0);
  CU_ASSERT(near_log(secagg_bound_reconstruct(10, 9, 9, 0.02),
                     log2(10 * direct(10, 0.02, 9, 10))));
  CU_ASSERT(secagg_bound_reconstruct(10, 9, 9, 0.02) <= -40.0);
  CU_ASSERT(secagg_bound_reconstruct(10, 9, 8, 0.02) > -40.0);
  /* Against a semi-malicious coordinator t = 9 would need only
   * 2 t - k - 1 = 8 corrupt holders (one honest holder per kind of share
   * makes up the rest), and 8 of 10 is too likely; t = 10 would need all
   * ten, but a client masks with at most k = 9 neighbours: refused, with
   * that reason. */
  goal.adversary = SECAGG_SEMI_MALICIOUS;
  k = t = 77;
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(k == 77 && t == 77);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "degree k = 9 (the complete graph)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bound (2) needs t = 10"));
  CU_ASSERT_PTR_NULL(strstr(err, "bits short")); /* bound (2) is met */
  CU_ASSERT(secure(&goal, 9, 10) && !secure(&goal, 9, 9));
  /* 0.4% dropout and 0.1% corrupt: t = 6 keeps the corrupt holders out at
   * k = 8 and k = 9 (bound (2) at 5: 2^-39.5, 2^-38.5), and k = 8 keeps
   * the survivors connected, but a client of k = 8 fails to get t shares
   * with probability 10 P[Binomial(8, 0.004) >= 3] = 2^-14.8; k = 9 with
   * t = 6 meets both (10 P[Binomial(9, 0.004) >= 4] = 2^-21.6). */
  goal = (secagg_goal){10, 0.004, 0.001, 40, 20, SECAGG_CURIOUS, 0};
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(k, 9);
  CU_ASSERT_EQUAL(t, 6);
  CU_ASSERT(secagg_bound_isolate(10, 8, 0.004, 0.001) <= -40.0);
  CU_ASSERT(log2(10 * direct(8, 0.004, 3, 8)) > -20.0);
  CU_ASSERT(near_log(secagg_bound_correctness(10, 8, 6, 0.004),
                     log2(10 * direct(8, 0.996, 0, 5))));
  CU_ASSERT(secagg_bound_correctness(10, 8, 6, 0.004) > -20.0);
  CU_ASSERT(secagg_bound_reconstruct(10, 9, 5, 0.001) > -40.0);
  CU_ASSERT(secagg_bound_correctness(10, 9, 6, 0.004) <= -20.0);
  CU_ASSERT(log2(10 * direct(9, 0.004, 4, 9)) <= -20.0);
  /* At 1% dropout even the complete graph falls short: bound (1) over
   * its k = 9 neighbours (not the k + 1 holders) is 10 P[Binomial(9, 0.01)
   * >= 4] = 2^-16.3. */
  goal.dropout = 0.01;
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fails to complete with probability "
                                     "bound 2^-16.3"));
  CU_ASSERT(near_log(secagg_bound_correctness(10, 9, 6, 0.01),
                     log2(10 * direct(9, 0.01, 4, 9))));
  /* The same goal at 1000 clients gets a sparse graph. */
  goal.n = 1000;
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT(k < 999 && t <= k);
  CU_ASSERT(meets(&goal, k, t));
  /* Two clients: the only graph is one edge, k = 1, which leaves no
   * threshold in 2..k under either adversary. Three: the triangle with
   * t = 2 (a semi-malicious coordinator: 2 t > k + 1). */
  for (int adv = 0; adv < 2; adv++) {
    secagg_goal two = {2, 0, 0, 40, 20, (secagg_adversary)adv, 0};
    CU_ASSERT_EQUAL(secagg_find_params(&two, &k, &t, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "degree k = 1"));
    secagg_goal three = {3, 0, 0, 40, 20, (secagg_adversary)adv, 0};
    CU_ASSERT_EQUAL(secagg_find_params(&three, &k, &t, err, sizeof err),
                    COHORT_OK);
    CU_ASSERT_EQUAL(k, 2);
    CU_ASSERT_EQUAL(t, 2);
  }
}

/* n = 1000, dropout 0.3, corrupt 0.05 (the benchmark's SecAgg+ cell): a
 * curious coordinator lets t fall to what keeps the corrupt holders out,
 * and k with it; a semi-malicious one needs a majority beyond the
 * corrupt holders, which 70% survival reaches only at a large degree. */
static void test_finder_adversaries(void) {
  secagg_goal goal = {1000, 0.3, 0.05, 40, 20, SECAGG_CURIOUS, 0};
  uint32_t kc = 0, tc = 0, ks = 0, ts = 0;
  char err[512] = "";
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&goal, &kc, &tc, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(meets(&goal, kc, tc));
  CU_ASSERT(2 * tc <= kc); /* not a majority */
  CU_ASSERT(secagg_bound_reconstruct(1000, kc, tc - 1, 0.05) > -40.0);
  goal.adversary = SECAGG_SEMI_MALICIOUS;
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&goal, &ks, &ts, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(meets(&goal, ks, ts));
  CU_ASSERT(!meets(&goal, kc, tc)); /* the curious pair falls short */
  printf("\n  n 1000, dropout 0.3, corrupt 0.05: curious k %u t %u, "
         "semi-malicious k %u t %u ",
         kc, tc, ks, ts);
  CU_ASSERT(kc * 2 < ks);

  /* secagg_find_threshold for the complete graph, and the names. */
  uint32_t t = 0;
  goal.n = 500;
  CU_ASSERT_EQUAL_FATAL(secagg_find_threshold(&goal, 499, &t, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(secure(&goal, 499, t) && !secure(&goal, 499, t - 1));
  CU_ASSERT(t > 251); /* above n / 2 + 1: the corrupt holders count */
  goal.adversary = SECAGG_CURIOUS;
  CU_ASSERT_EQUAL_FATAL(secagg_find_threshold(&goal, 499, &t, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(secure(&goal, 499, t) && !secure(&goal, 499, t - 1));
  CU_ASSERT(t < 100);
  CU_ASSERT_EQUAL(secagg_find_threshold(&goal, 500, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "degree 500 must be in 1..499"));
  secagg_adversary a = SECAGG_CURIOUS;
  CU_ASSERT_EQUAL(secagg_adversary_parse("semi-malicious", &a), COHORT_OK);
  CU_ASSERT_EQUAL(a, SECAGG_SEMI_MALICIOUS);
  CU_ASSERT_EQUAL(secagg_adversary_parse("curious", &a), COHORT_OK);
  CU_ASSERT_EQUAL(a, SECAGG_CURIOUS);
  CU_ASSERT_STRING_EQUAL(secagg_adversary_name(a), "curious");
  CU_ASSERT_EQUAL(secagg_adversary_parse("malicious", &a), COHORT_EINVAL);
  CU_ASSERT_EQUAL(secagg_adversary_parse(NULL, &a), COHORT_EINVAL);
  goal.adversary = (secagg_adversary)7;
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &kc, &tc, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "adversary 7"));
}

/* The coordinator's and the benchmark's choice: the finder or the complete
 * graph or the degree given, each with its threshold, and the fallback
 * (with the reason) when the bounds cannot be met. */
static void test_choose_graph(void) {
  secagg_goal goal = {1000, 0.1, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, 0};
  uint32_t k = 0, t = 0, fk = 0, ft = 0;
  char err[512] = "";
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &fk, &ft, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_choose_graph(&goal, 1, 0, &k, &t, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT(k == fk && t == ft);
  CU_ASSERT_EQUAL(secagg_choose_graph(&goal, 0, 0, &k, &t, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(k, 999);
  CU_ASSERT(secure(&goal, 999, t) && !secure(&goal, 999, t - 1));
  /* A degree given wins over the finder and is capped at n - 1. */
  CU_ASSERT_EQUAL(secagg_choose_graph(&goal, 1, 40, &k, &t, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(k, 40);
  CU_ASSERT(secure(&goal, 40, t) && !secure(&goal, 40, t - 1));
  goal.n = 10;
  CU_ASSERT_EQUAL(secagg_choose_graph(&goal, 1, 40, &k, &t, err, sizeof err),
                  COHORT_EINVAL); /* 10 clients cannot hold 5% corrupt out */
  CU_ASSERT_EQUAL(k, 9);
  CU_ASSERT_EQUAL(t, 6); /* the majority: 2 t > k + 1 */
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "even 10 corrupt holders"));
  /* Plus with no qualifying degree: the complete graph, and the finder's
   * reason. */
  CU_ASSERT_EQUAL(secagg_choose_graph(&goal, 1, 0, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(k == 9 && t == 6);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bits short"));
  CU_ASSERT_EQUAL(secagg_majority_threshold(9), 6);
  CU_ASSERT_EQUAL(secagg_majority_threshold(4), 3);
  CU_ASSERT_EQUAL(secagg_majority_threshold(1), 2);
}

static void test_finder_refusals(void) {
  uint32_t k = 77, t = 77;
  char err[512] = "";
  secagg_goal goal = {1000, 0.9, 0.5, 40, 20, SECAGG_SEMI_MALICIOUS, 0};
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "complete graph (k = 999)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fails to complete"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bits short"));
  CU_ASSERT(k == 77 && t == 77);
  /* Ten clients cannot keep 40 bits against 5% corrupt: even all ten
   * holders colluding is 10 * 0.05^10 = 2^-39.9. */
  goal = (secagg_goal){10, 0, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, 0};
  CU_ASSERT_EQUAL(secagg_find_params(&goal, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "reconstruction by corrupt clients"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "0.1 bits short"));

  static const struct {
    secagg_goal g;
    const char *want;
  } bad[] = {
      {{1, 0.1, 0.1, 40, 20, SECAGG_SEMI_MALICIOUS, 0},
       "n = 1 clients must be in 2..65535"},
      {{65536, 0.1, 0.1, 40, 20, SECAGG_SEMI_MALICIOUS, 0}, "n = 65536"},
      {{100, 1.0, 0.1, 40, 20, SECAGG_SEMI_MALICIOUS, 0},
       "dropout 1 must be in [0, 1)"},
      {{100, -0.1, 0.1, 40, 20, SECAGG_SEMI_MALICIOUS, 0}, "dropout -0.1"},
      {{100, NAN, 0.1, 40, 20, SECAGG_SEMI_MALICIOUS, 0}, "dropout nan"},
      {{100, 0.1, 1.5, 40, 20, SECAGG_SEMI_MALICIOUS, 0},
       "corrupt 1.5 must be in [0, 1)"},
      {{100, 0.1, 0.1, 0, 20, SECAGG_SEMI_MALICIOUS, 0},
       "security_bits 0 must be in 1..128"},
      {{100, 0.1, 0.1, 40, 129, SECAGG_SEMI_MALICIOUS, 0},
       "correctness_bits 129 must be in 1..128"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_EQUAL(secagg_find_params(&bad[i].g, &k, &t, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].want));
  }
  CU_ASSERT_EQUAL(secagg_find_params(NULL, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
}

/* ---- over-selection ---- */

/* Selecting 1 + o times the clients needed and ending MASKED once enough
 * are in makes each client survive with (1 - dropout) / (1 + o) at best:
 * no over-selection leaves the dropout as it is; 30% over-selection with
 * no dropout is a dropout of 0.3 / 1.3. */
static void test_effective_dropout(void) {
  static const double ds[] = {0, 0.05, 0.1, 0.3, 0.9};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
    CU_ASSERT_EQUAL(secagg_effective_dropout(ds[i], 0), ds[i]);
    CU_ASSERT_EQUAL(secagg_effective_dropout(ds[i], -0.5), ds[i]);
    double last = ds[i];
    for (double o = 0.1; o < 2.0; o += 0.1) {
      double e = secagg_effective_dropout(ds[i], o);
      CU_ASSERT(fabs(e - (1 - (1 - ds[i]) / (1 + o))) < 1e-15);
      CU_ASSERT(e > last && e < 1);
      last = e;
    }
  }
  CU_ASSERT(fabs(secagg_effective_dropout(0, 0.3) - 0.3 / 1.3) < 1e-15);
  CU_ASSERT(fabs(secagg_effective_dropout(0.3, 0.3) - (1 - 0.7 / 1.3)) < 1e-15);
  /* The finder then plans for the larger dropout: a degree no smaller. */
  secagg_goal a = {1000, 0.1, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, 0}, b = a;
  b.dropout = secagg_effective_dropout(0.1, 0.3);
  uint32_t ka = 0, ta = 0, kb = 0, tb = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&a, &ka, &ta, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&b, &kb, &tb, NULL, 0), COHORT_OK);
  CU_ASSERT(kb > ka);
  CU_ASSERT(meets(&b, kb, tb) && !meets(&b, ka, ta));
}

/* ---- a client's policy ---- */

/* The fewest shares a plan of degree k may ask for under a policy, from
 * the definitions: the smallest t in 2..k that withstands the corrupt
 * clients, the colluders and the adversary (secure()), or else the
 * adversary's floor with one holder more than the colluders (C = 0: the
 * majority 2 t > k + 1 against a semi-malicious coordinator, 2 against a
 * curious one), above k when C colluders could fill the neighbourhood. */
static uint32_t reference_min_threshold(const secagg_policy *pol, uint32_t n,
                                        uint32_t k) {
  uint32_t c = pol->colluders < n ? pol->colluders : n;
  secagg_goal g = {n, 0, pol->corrupt, pol->security_bits, 20, pol->adversary,
                   c};
  for (uint32_t t = 2; t <= k; t++)
    if (secure(&g, k, t))
      return t;
  if (pol->adversary == SECAGG_CURIOUS)
    return c + 1 > 2 ? c + 1 : 2;
  return (c + k + 3) / 2; /* the least t with 2 t - k - 1 > c */
}

static void test_policy_min_threshold(void) {
  static const uint32_t ns[] = {3, 10, 64, 100, 1000};
  static const double cs[] = {0, 0.01, 0.05, 0.2};
  unsigned bad = 0, floors = 0, found = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
      for (int adv = 0; adv < 2; adv++)
        for (uint32_t k = 2; k < ns[a]; k += 1 + k / 4) {
          secagg_policy pol = {(secagg_adversary)adv, cs[c], 40, 0};
          uint32_t got = 0, want = reference_min_threshold(&pol, ns[a], k);
          int rc = secagg_policy_min_threshold(&pol, ns[a], k, &got, NULL, 0);
          secagg_goal g = {ns[a], 0, cs[c], 40, 20, (secagg_adversary)adv, 0};
          floors += !secure(&g, k, want);
          found += secure(&g, k, want);
          if (rc != COHORT_OK || got != want) {
            if (bad++ < 5)
              printf("\n  n %u k %u corrupt %g %s: %d %u, reference %u", ns[a],
                     k, cs[c], secagg_adversary_name(pol.adversary), rc, got,
                     want);
          }
        }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(floors > 10 && found > 10); /* both branches are reached */
  /* No t meets the goal at n = 10, k = 6, 5% corrupt: the floors. */
  secagg_policy semi = secagg_policy_default();
  secagg_policy cur = {SECAGG_CURIOUS, 0.05, 40, 0};
  uint32_t tm = 0;
  CU_ASSERT_EQUAL(secagg_policy_min_threshold(&semi, 10, 6, &tm, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(tm, secagg_majority_threshold(6));
  CU_ASSERT_EQUAL(tm, 4);
  CU_ASSERT_EQUAL(secagg_policy_min_threshold(&cur, 10, 6, &tm, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(tm, 2);
  /* The default is semi-malicious, 5% corrupt, 40 bits. */
  CU_ASSERT_EQUAL(semi.adversary, SECAGG_SEMI_MALICIOUS);
  CU_ASSERT_EQUAL(semi.corrupt, 0.05);
  CU_ASSERT_EQUAL(semi.security_bits, SECAGG_SECURITY_BITS);
  /* Refusals: an invalid policy, a degree outside 1..n - 1. */
  char err[512] = "";
  secagg_policy bad_pol = {SECAGG_SEMI_MALICIOUS, 1.0, 40, 0};
  CU_ASSERT_EQUAL(
      secagg_policy_min_threshold(&bad_pol, 100, 10, &tm, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "corrupt 1 must be in [0, 1)"));
  bad_pol = (secagg_policy){SECAGG_SEMI_MALICIOUS, 0.05, 0, 0};
  CU_ASSERT_EQUAL(
      secagg_policy_min_threshold(&bad_pol, 100, 10, &tm, err, sizeof err),
      COHORT_EINVAL);
  bad_pol = (secagg_policy){(secagg_adversary)7, 0.05, 40, 0};
  CU_ASSERT_EQUAL(
      secagg_policy_min_threshold(&bad_pol, 100, 10, &tm, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(
      secagg_policy_min_threshold(&semi, 100, 100, &tm, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "degree 100 must be in 1..99"));
  CU_ASSERT_EQUAL(
      secagg_policy_min_threshold(&semi, 100, 0, &tm, err, sizeof err),
      COHORT_EINVAL);
}

static void test_policy_check(void) {
  char err[512] = "", want[160];
  secagg_policy semi = secagg_policy_default();
  secagg_policy cur = {SECAGG_CURIOUS, 0.05, 40, 0};
  /* A plan at the finder's t, for the policy's own goal, passes; t - 1 is
   * refused, naming both numbers. */
  secagg_goal g = {1000, 0.1, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, 0};
  uint32_t k = 0, t = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&g, &k, &t, NULL, 0), COHORT_OK);
  secagg_params p = params(1000, k, t, 3);
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err), COHORT_OK);
  p.threshold = t - 1;
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err),
                  COHORT_EINVAL);
  snprintf(want, sizeof want,
           "threshold %u is below the %u this client requires of degree %u",
           t - 1, t, k);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "semi-malicious"));
  /* A curious policy accepts the curious finder's plan, which the default
   * (semi-malicious) one refuses. */
  g = (secagg_goal){1000, 0.3, 0.05, 40, 20, SECAGG_CURIOUS, 0};
  CU_ASSERT_EQUAL_FATAL(secagg_find_params(&g, &k, &t, NULL, 0), COHORT_OK);
  p = params(1000, k, t, 4);
  CU_ASSERT_EQUAL(secagg_policy_check(&cur, &p, err, sizeof err), COHORT_OK);
  p.threshold = t - 1;
  CU_ASSERT_EQUAL(secagg_policy_check(&cur, &p, err, sizeof err),
                  COHORT_EINVAL);
  p.threshold = t;
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "is below the"));
  /* The complete graph at the majority passes where no t meets the goal
   * (n = 10, 5% corrupt: the coordinator's fallback). */
  p = params(10, 9, secagg_majority_threshold(9), 5);
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err), COHORT_OK);
  p.threshold--;
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err),
                  COHORT_EINVAL);
  /* A degree too small for bound (3): at n = 1000 and 5% corrupt, k = 4
   * leaves the honest clients apart with bound 10^6 0.05^4 = 2^2.6, even
   * at a threshold high enough; k = 26 keeps them together
   * (10^6 0.05^26 < 2^-40). */
  uint32_t tm = 0;
  CU_ASSERT_EQUAL_FATAL(
      secagg_policy_min_threshold(&semi, 1000, 4, &tm, NULL, 0), COHORT_OK);
  p = params(1000, 4, 4, 6);
  CU_ASSERT(p.threshold >= tm);
  CU_ASSERT(near_log(secagg_bound_isolate(1000, 4, 0, 0.05),
                     log2(1e6 * pow(0.05, 4))));
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "degree 4 among 1000 clients leaves the "
                                     "honest ones disconnected"));
  CU_ASSERT_EQUAL(secagg_policy_check(&cur, &p, err, sizeof err),
                  COHORT_EINVAL); /* bound (3) is the same for both */
  CU_ASSERT(log2(1e6 * pow(0.05, 26)) <= -40.0);
  CU_ASSERT_EQUAL_FATAL(
      secagg_policy_min_threshold(&semi, 1000, 26, &tm, NULL, 0), COHORT_OK);
  p = params(1000, 26, tm, 6);
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err), COHORT_OK);
  /* An invalid plan is refused by secagg_params_check first. */
  p = params(1000, 26, 27, 6);
  CU_ASSERT_EQUAL(secagg_policy_check(&semi, &p, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "threshold 27 must be in 2..26"));
}

/* ---- colluders a coordinator places ---- */

/* secagg_find_threshold with C placed colluders: the smallest t that
 * bound (2) allows and that more than C corrupt holders are needed to
 * beat (t > C curious, 2 t - k - 1 > C semi-malicious), as secure()
 * states it; a refusal exactly where no t up to k is both. */
static void test_threshold_colluders(void) {
  static const uint32_t ns[] = {20, 100, 1000, 10000};
  static const double cs[] = {0, 0.05};
  static const uint32_t ks[] = {2, 5, 14, 16, 18, 19, 40, 88};
  unsigned bad = 0, refused = 0, raised = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof cs / sizeof cs[0]; b++)
      for (int adv = 0; adv < 2; adv++)
        for (size_t e = 0; e < sizeof ks / sizeof ks[0]; e++) {
          uint32_t k = ks[e];
          if (k >= ns[a])
            continue;
          const uint32_t colluders[] = {0, 1, 2, 7, 16, k - 2, k - 1};
          for (size_t f = 0; f < sizeof colluders / sizeof colluders[0]; f++) {
            uint32_t c = colluders[f];
            if (c > k) /* k - 2 of k = 1: not a case */
              continue;
            secagg_goal g = {ns[a], 0, cs[b], 40, 20, (secagg_adversary)adv, c};
            secagg_goal g0 = g;
            g0.colluders = 0;
            uint32_t want = 0, t = 0, t0 = 0;
            for (uint32_t u = 2; u <= k && !want; u++)
              if (secure(&g, k, u))
                want = u;
            int rc = secagg_find_threshold(&g, k, &t, NULL, 0);
            int ok = want ? rc == COHORT_OK && t == want : rc == COHORT_EINVAL;
            if (!rc) {
              /* More than C holders needed, and t - 1 falls short of that
               * or of bound (2). */
              ok &= holders_needed(g.adversary, k, t) > c;
              ok &= t == 2 || !secure(&g, k, t - 1);
              if (secagg_find_threshold(&g0, k, &t0, NULL, 0) == COHORT_OK) {
                ok &= t >= t0;
                raised += t > t0;
              }
            }
            refused += rc != COHORT_OK;
            if (!ok && bad++ < 5)
              printf("\n  n %u corrupt %g %s k %u C %u: rc %d t %u, want %u",
                     g.n, g.corrupt, secagg_adversary_name(g.adversary), k, c,
                     rc, t, want);
          }
        }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(refused > 10 && raised > 10); /* both reached */
  /* The cases docs/security.md names: at N = 10000, k = 16, 16 colluders
   * fill a client's neighbourhood (refused); at k = 18 the
   * semi-malicious t is 18 (2 t - k - 1 = 17 > 16), the curious 17. */
  secagg_goal g = {10000, 0, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, 16};
  uint32_t t = 0;
  CU_ASSERT_EQUAL(secagg_find_threshold(&g, 18, &t, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(t, 18);
  CU_ASSERT_EQUAL(secagg_find_threshold(&g, 16, &t, NULL, 0), COHORT_EINVAL);
  g.adversary = SECAGG_CURIOUS;
  CU_ASSERT_EQUAL(secagg_find_threshold(&g, 18, &t, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(t, 17);
}

/* The finder with C colluders equals the plain scan of its definition
 * (reference_finder with secure() counting the colluders); its k never
 * falls as C grows, and its t always needs more than C corrupt holders. */
static void test_finder_colluders(void) {
  static const uint32_t ns[] = {10, 31, 64, 200, 301};
  static const double ds[] = {0, 0.1, 0.3};
  static const double cs[] = {0, 0.05};
  static const uint32_t colluders[] = {0, 1, 3, 8, 16, 40};
  unsigned bad = 0, found = 0, refused = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof ds / sizeof ds[0]; b++)
      for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int adv = 0; adv < 2; adv++)
          for (size_t e = 0; e < sizeof colluders / sizeof colluders[0]; e++) {
            secagg_goal g = {ns[a],       ds[b], cs[c],
                             40,          20,    (secagg_adversary)adv,
                             colluders[e]};
            uint32_t k = 0, t = 0, rk = 0, rt = 0;
            int rc = secagg_find_params(&g, &k, &t, NULL, 0);
            int rrc = reference_finder(&g, &rk, &rt);
            found += rc == COHORT_OK;
            refused += rc != COHORT_OK;
            int ok = rc == rrc && (rc || (k == rk && t == rt));
            if (!rc)
              ok &= holders_needed(g.adversary, k, t) > g.colluders &&
                    meets(&g, k, t);
            if (!ok && bad++ < 5)
              printf("\n  n %u dropout %g corrupt %g %s C %u: %d (%u, %u), "
                     "reference %d (%u, %u)",
                     g.n, g.dropout, g.corrupt,
                     secagg_adversary_name(g.adversary), g.colluders, rc, k, t,
                     rrc, rk, rt);
          }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(found > 50 && refused > 10);
  /* k grows with C and t keeps up, for either adversary, until C fills
   * the complete graph. */
  static const struct {
    uint32_t n;
    double dropout;
  } goals[] = {{10000, 0}, {1000, 0.1}, {200, 0.05}};
  for (size_t i = 0; i < sizeof goals / sizeof goals[0]; i++)
    for (int adv = 0; adv < 2; adv++) {
      uint32_t last = 0, steps = 0;
      for (uint32_t c = 0; c <= 60; c++) {
        secagg_goal g = {goals[i].n, goals[i].dropout,      0.05, 40,
                         20,         (secagg_adversary)adv, c};
        uint32_t k = 0, t = 0;
        CU_ASSERT_EQUAL_FATAL(secagg_find_params(&g, &k, &t, NULL, 0),
                              COHORT_OK);
        CU_ASSERT(k >= last);
        CU_ASSERT(holders_needed(g.adversary, k, t) > c);
        CU_ASSERT(t <= k);
        steps += k > last && last;
        last = k;
      }
      CU_ASSERT(steps > 5);
    }
  /* The plans `cohort secagg plan --colluders` prints (docs/secagg.md). */
  static const struct {
    uint32_t n;
    double dropout;
    uint32_t colluders, k, t;
  } rows[] = {{10000, 0, 0, 16, 16},
              {10000, 0, 16, 18, 18},
              {1000, 0.1, 0, 88, 59},
              {1000, 0.1, 50, 124, 88}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    secagg_goal g = {
        rows[i].n,        rows[i].dropout, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS,
        rows[i].colluders};
    uint32_t k = 0, t = 0;
    CU_ASSERT_EQUAL(secagg_find_params(&g, &k, &t, NULL, 0), COHORT_OK);
    CU_ASSERT(k == rows[i].k && t == rows[i].t);
    if (k != rows[i].k || t != rows[i].t)
      printf("\n  n %u dropout %g C %u: k %u t %u, want k %u t %u", rows[i].n,
             rows[i].dropout, rows[i].colluders, k, t, rows[i].k, rows[i].t);
  }
}

/* Colluders that can fill a client's k places leave no threshold: refused
 * at that degree with a message naming them, and by the finder when they
 * fill the complete graph's; more colluders than clients is a bad goal. */
static void test_colluders_refused(void) {
  char err[512] = "", want[160];
  uint32_t k = 77, t = 77;
  for (int adv = 0; adv < 2; adv++)
    for (uint32_t deg = 4; deg <= 40; deg += 12)
      for (uint32_t c = deg; c <= deg + 2; c++) {
        secagg_goal g = {1000, 0, 0.05, 40, 20, (secagg_adversary)adv, c};
        err[0] = 0;
        t = 77;
        CU_ASSERT_EQUAL(secagg_find_threshold(&g, deg, &t, err, sizeof err),
                        COHORT_EINVAL);
        CU_ASSERT_EQUAL(t, 77);
        snprintf(want, sizeof want, "%u colluding clients", c);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
        if (!strstr(err, want))
          printf("\n  %s k %u, %u colluders: '%s' does not name them",
                 secagg_adversary_name(g.adversary), deg, c, err);
      }
  /* The finder: n - 1 colluders and more fill the complete graph. */
  for (uint32_t c = 9; c <= 10; c++) {
    secagg_goal g = {10, 0, 0, 40, 20, SECAGG_CURIOUS, c};
    err[0] = 0;
    CU_ASSERT_EQUAL(secagg_find_params(&g, &k, &t, err, sizeof err),
                    COHORT_EINVAL);
    snprintf(want, sizeof want, "%u colluding clients", c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    if (!strstr(err, want))
      printf("\n  finder n 10, %u colluders: '%s' does not name them", c, err);
  }
  CU_ASSERT(k == 77 && t == 77);
  /* More colluders than clients: the goal itself is refused, by the finder,
   * the threshold and the coordinator's choice alike. */
  secagg_goal g = {100, 0, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, 101};
  CU_ASSERT_EQUAL(secagg_find_params(&g, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "101 colluders among n = 100 clients"));
  err[0] = 0;
  CU_ASSERT_EQUAL(secagg_find_threshold(&g, 50, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "101 colluders among n = 100 clients"));
  err[0] = 0;
  CU_ASSERT_EQUAL(secagg_choose_graph(&g, 1, 0, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "101 colluders among n = 100 clients"));
  CU_ASSERT(k == 77 && t == 77);
  g.colluders = 100; /* as many as the clients: a goal, refused later */
  err[0] = 0;
  CU_ASSERT_EQUAL(secagg_find_params(&g, &k, &t, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(strstr(err, "colluders among"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "100 colluding clients"));
}

/* A client's floor with C colluders: the definitions (secure() and the
 * fallback one holder above C) over a grid, and the rows docs name. */
static void test_policy_colluders(void) {
  static const uint32_t ns[] = {10, 100, 1000, 10000};
  static const double cs[] = {0, 0.05};
  static const uint32_t colluders[] = {1, 5, 16, 30, 200};
  unsigned bad = 0, above_k = 0, found = 0;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
      for (int adv = 0; adv < 2; adv++)
        for (size_t e = 0; e < sizeof colluders / sizeof colluders[0]; e++)
          for (uint32_t k = 2; k < ns[a] && k < 200; k += 1 + k / 4) {
            secagg_policy pol = {(secagg_adversary)adv, cs[c], 40,
                                 colluders[e]};
            uint32_t got = 0, want = reference_min_threshold(&pol, ns[a], k);
            int rc = secagg_policy_min_threshold(&pol, ns[a], k, &got, NULL, 0);
            above_k += want > k;
            found += want <= k;
            uint32_t c0 = colluders[e] < ns[a] ? colluders[e] : ns[a];
            if (rc != COHORT_OK || got != want ||
                holders_needed(pol.adversary, k, got) <= c0) {
              if (bad++ < 5)
                printf("\n  n %u k %u corrupt %g %s C %u: %d %u, reference %u",
                       ns[a], k, cs[c], secagg_adversary_name(pol.adversary),
                       colluders[e], rc, got, want);
            }
          }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(above_k > 10 && found > 10);
  secagg_policy semi = secagg_policy_default(), cur = semi;
  semi.colluders = cur.colluders = 16;
  cur.adversary = SECAGG_CURIOUS;
  uint32_t tm = 0;
  CU_ASSERT_EQUAL(secagg_policy_min_threshold(&semi, 10000, 18, &tm, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(tm, 18);
  CU_ASSERT_EQUAL(secagg_policy_min_threshold(&semi, 10000, 16, &tm, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(tm, 17); /* above k: no plan of degree 16 passes */
  CU_ASSERT_EQUAL(secagg_policy_min_threshold(&cur, 10000, 18, &tm, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(tm, 17);
  CU_ASSERT_EQUAL(secagg_policy_default().colluders, 0);
}

/* secagg_policy_check with C colluders: the finder's plan without them is
 * refused, naming the floor and the colluders; the plan with them passes,
 * its t - 1 does not; a policy naming none names none. */
static void test_policy_check_colluders(void) {
  char err[512] = "";
  secagg_policy dflt = secagg_policy_default(), pol = dflt;
  pol.colluders = 16;
  secagg_params p = params(10000, 16, 16, 7); /* the finder's, C = 0 */
  CU_ASSERT_EQUAL(secagg_policy_check(&dflt, &p, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_policy_check(&pol, &p, err, sizeof err),
                  COHORT_EINVAL);
  /* No t up to k = 16 keeps 16 placed colluders out: the floor is 17. */
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "no threshold up to the degree 16 "
                                     "keeps this client's secrets among "
                                     "10000 clients"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "(it would need 17)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "and 16 colluding clients it places"));
  p = params(10000, 18, 18, 7); /* the finder's, C = 16 */
  CU_ASSERT_EQUAL(secagg_policy_check(&pol, &p, err, sizeof err), COHORT_OK);
  p.threshold = 17;
  CU_ASSERT_EQUAL(secagg_policy_check(&pol, &p, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "threshold 17 is below the 18"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "and 16 colluding clients it places"));
  /* Against a curious coordinator 17 is enough (t > 16). */
  secagg_policy cur = pol;
  cur.adversary = SECAGG_CURIOUS;
  CU_ASSERT_EQUAL(secagg_policy_check(&cur, &p, err, sizeof err), COHORT_OK);
  p.threshold = 16;
  CU_ASSERT_EQUAL(secagg_policy_check(&cur, &p, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "and 16 colluding clients it places"));
  /* The default policy's refusal says nothing of colluders. */
  p = params(10000, 18, 9, 7);
  CU_ASSERT_EQUAL(secagg_policy_check(&dflt, &p, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(strstr(err, "colluding"));
  /* Every plan the finder makes for C passes a policy naming C. */
  for (uint32_t c = 0; c <= 40; c += 4) {
    secagg_goal g = {1000, 0.1, 0.05, 40, 20, SECAGG_SEMI_MALICIOUS, c};
    uint32_t k = 0, t = 0;
    CU_ASSERT_EQUAL_FATAL(secagg_find_params(&g, &k, &t, NULL, 0), COHORT_OK);
    secagg_policy pc = dflt;
    pc.colluders = c;
    p = params(1000, k, t, 8);
    CU_ASSERT_EQUAL(secagg_policy_check(&pc, &p, err, sizeof err), COHORT_OK);
    p.threshold = t - 1;
    CU_ASSERT_EQUAL(secagg_policy_check(&pc, &p, err, sizeof err),
                    COHORT_EINVAL);
  }
}

int cohort_register_suites(void) {
  static const test_case params_tests[] = {
      {"params: accepted and refused, with the value named",
       test_params_check_table},
      {"phase names", test_phase_names},
  };
  static const test_case graph_tests[] = {
      {"k-regular, symmetric, sorted, no self loops",
       test_graph_regular_symmetric_sorted},
      {"connected for k >= 2 (k = 1 is a matching)", test_graph_connected},
      {"odd k on even n through the opposite node",
       test_graph_odd_degree_even_n},
      {"one seed, one graph; another seed, another graph",
       test_graph_deterministic_per_seed},
      {"k = n - 1 is the complete graph", test_graph_complete},
      {"every pair adjacent with probability k / (n - 1) over seeds",
       test_graph_uniform_over_seeds},
      {"bad parameters and out-of-range nodes", test_graph_refusals},
      {"a client's row equals the graph's, complete and odd k too",
       test_graph_row_matches_graph},
  };
  static const test_case finder_tests[] = {
      {"binomial tails equal term-by-term sums", test_tail_against_direct_sums},
      {"bounds (1)-(3) equal their formulas", test_bounds_against_direct_sums},
      {"bound (2) at the count each adversary needs",
       test_exposed_per_adversary},
      {"the finder equals a plain scan of its definition",
       test_finder_matches_reference},
      {"n = 1000: k is small, meets the bounds, and no smaller k does",
       test_finder_n1000_logarithmic},
      {"curious against semi-malicious: thresholds, degrees, names",
       test_finder_adversaries},
      {"the coordinator's choice of k and t, and its fallback",
       test_choose_graph},
      {"more dropout or corruption never lowers k", test_finder_monotone},
      {"small n falls back to the complete graph",
       test_finder_complete_for_small_n},
      {"impossible goals and bad input are refused", test_finder_refusals},
      {"over-selection adds to the dropout", test_effective_dropout},
      {"colluders: the threshold needs more than C corrupt holders, and is "
       "the smallest such",
       test_threshold_colluders},
      {"colluders: the finder equals its definition; k grows with C",
       test_finder_colluders},
      {"colluders: C >= k refused naming them, C > n a bad goal",
       test_colluders_refused},
  };
  static const test_case policy_tests[] = {
      {"the fewest shares a policy accepts, from the definitions",
       test_policy_min_threshold},
      {"plans a policy accepts and refuses, with the reason",
       test_policy_check},
      {"colluders: the fewest shares a policy naming C accepts",
       test_policy_colluders},
      {"colluders: plans a policy naming C refuses, naming them",
       test_policy_check_colluders},
  };
  int rc = test_add_suite("secagg params", NULL, NULL, params_tests,
                          sizeof params_tests / sizeof params_tests[0]);
  if (!rc)
    rc = test_add_suite("secagg graph", NULL, NULL, graph_tests,
                        sizeof graph_tests / sizeof graph_tests[0]);
  if (!rc)
    rc = test_add_suite("secagg finder", NULL, NULL, finder_tests,
                        sizeof finder_tests / sizeof finder_tests[0]);
  if (!rc)
    rc = test_add_suite("secagg policy", NULL, NULL, policy_tests,
                        sizeof policy_tests / sizeof policy_tests[0]);
  return rc;
}
