/* Secure aggregation's parameter finder (secagg_find_params, secagg.h):
 * the smallest neighbour degree k, and its Shamir threshold t, whose union
 * bounds (secagg_params.h; derived in docs/secagg.md) on failing to
 * complete and on leaking more than the sum meet the goal. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "secagg.h"
#include "secagg_params.h"

/* Terms past the point where the rest is below 2^-60 of the sum cannot
 * change a double. */
#define TAIL_REST 0x1p-60
#define LN2 0.693147180559945309417232121458176568

/* ln P[X = i], X ~ Binomial(m, p), 0 < p < 1. lgamma's only shared state
 * is signgam, which positive arguments always set to the same 1. */
static double ln_pmf(uint32_t m, uint32_t i, double ln_p, double ln_q) {
  return lgamma((double)m + 1) - lgamma((double)i + 1) -
         lgamma((double)(m - i) + 1) + (double)i * ln_p +
         (double)(m - i) * ln_q;
}

double secagg_ln_binom_upper(uint32_t m, double p, uint32_t t) {
  if (t == 0)
    return 0.0;
  if (t > m || !(p > 0.0))
    return -INFINITY;
  if (p >= 1.0)
    return 0.0;
  double ln_p = log(p), ln_q = log1p(-p), odds = p / (1.0 - p);
  double term = 1.0, sum = 1.0; /* relative to the first term summed */
  if ((double)t > (double)(m + 1) * p - 1.0) {
    /* At or past the mode: terms fall from t on, by ratios
     * r_i = (m - i) / (i + 1) * odds that fall too, so the terms after i
     * add up to at most term_i * r_i / (1 - r_i). */
    for (uint32_t i = t; i < m; i++) {
      double r = (double)(m - i) / (double)(i + 1) * odds;
      if (r < 1.0 && term * r <= TAIL_REST * sum * (1.0 - r))
        break;
      term *= r;
      sum += term;
    }
    return ln_pmf(m, t, ln_p, ln_q) + log(sum);
  }
  /* The mode is in the tail: 1 - P[X <= t - 1], where the lower tail's
   * terms fall from t - 1 downwards, by ratios
   * s_i = i / ((m - i + 1) odds) that fall too. */
  for (uint32_t i = t - 1; i > 0; i--) {
    double s = (double)i / ((double)(m - i + 1) * odds);
    if (s < 1.0 && term * s <= TAIL_REST * sum * (1.0 - s))
      break;
    term *= s;
    sum += term;
  }
  double lower = exp(ln_pmf(m, t - 1, ln_p, ln_q)) * sum;
  return log1p(-lower);
}

double secagg_bound_correctness(uint32_t n, uint32_t k, uint32_t t,
                                double dropout) {
  /* Binomial(k, 1 - dropout) < t  <=>  Binomial(k, dropout) >= k + 1 - t:
   * summed in dropout itself, so 1 - (1 - dropout) is never rounded. */
  if (t == 0)
    return -INFINITY;
  if (t > k + 1)
    t = k + 1;
  return log2((double)n) + secagg_ln_binom_upper(k, dropout, k + 1 - t) / LN2;
}

double secagg_bound_reconstruct(uint32_t n, uint32_t k, uint32_t t,
                                double corrupt) {
  return log2((double)n) + secagg_ln_binom_upper(k + 1, corrupt, t) / LN2;
}

uint32_t secagg_holders_needed(uint32_t k, uint32_t t,
                               secagg_adversary adversary) {
  if (adversary == SECAGG_CURIOUS)
    return t;
  return 2 * (uint64_t)t > (uint64_t)k + 1 ? (uint32_t)(2 * (uint64_t)t - k - 1)
                                           : 0;
}

double secagg_bound_exposed(uint32_t n, uint32_t k, uint32_t t, double corrupt,
                            secagg_adversary adversary) {
  uint32_t need = secagg_holders_needed(k, t, adversary);
  if (need == 0)
    return log2((double)n);
  return secagg_bound_reconstruct(n, k, need, corrupt);
}

double secagg_bound_isolate(uint32_t n, uint32_t k, double dropout,
                            double corrupt) {
  if (n < 2 || k >= n - 1)
    return -INFINITY;
  double removed = dropout + corrupt;
  uint32_t run = 2 * (k / 2); /* two runs of floor(k / 2) */
  double ln2n = 2.0 * log2((double)n);
  if (run == 0)
    return ln2n; /* k = 1: a perfect matching, never connected */
  if (!(removed > 0.0))
    return -INFINITY;
  return ln2n + (double)run * log2(removed);
}

/* ---- the search ---- */

const char *secagg_adversary_name(secagg_adversary a) {
  return a == SECAGG_CURIOUS ? "curious" : "semi-malicious";
}

int secagg_adversary_parse(const char *s, secagg_adversary *out) {
  if (s && strcmp(s, "semi-malicious") == 0)
    *out = SECAGG_SEMI_MALICIOUS;
  else if (s && strcmp(s, "curious") == 0)
    *out = SECAGG_CURIOUS;
  else
    return COHORT_EINVAL;
  return COHORT_OK;
}

/* The threshold the adversary needs, given a: the fewest holders that
 * corrupt clients reach with probability within the goal (bound (2)).
 * Curious: t = a, but at least 2, so that one holder alone never has a
 * secret. Semi-malicious: the coordinator can get each honest holder to
 * reveal one kind of share, and the A corrupt ones reveal both, so it
 * gets both secrets of a client iff k + 1 + A >= 2 t; t = ceil((a + k +
 * 1) / 2) makes that need A >= a. */
static uint32_t threshold_of(secagg_adversary adv, uint32_t k, uint32_t a) {
  if (adv == SECAGG_CURIOUS)
    return a > 2 ? a : 2;
  return (a + k + 2) / 2;
}

/* A semi-malicious coordinator with no corrupt holder: 2 t > k + 1. */
uint32_t secagg_majority_threshold(uint32_t degree) {
  return threshold_of(SECAGG_SEMI_MALICIOUS, degree, 1);
}

/* What the search knows about a(k), the smallest a in [1, k + 1] that keeps
 * reconstruction by corrupt clients within 2^-bits: it never falls as k
 * grows, and rises by at most one per unit of k, since one more holder
 * makes a + 1 corrupt ones no likelier than a were among the old
 * (Binomial(m + 1, p) <= Binomial(m, p) + 1). So after the first binary
 * search, each k costs a tail or two. */
typedef struct count_hint {
  uint32_t k, a; /* a at degree k; k = 0 while none is known */
} count_hint;

/* a(k) (bound (2) falls as a grows), or 0 when even a = k + 1 does not
 * meet it. */
static uint32_t smallest_safe_count(uint32_t n, uint32_t k, double corrupt,
                                    unsigned bits, count_hint *hint) {
  uint32_t lo = 1, hi = k + 1;
  double goal = -(double)bits;
  if (hint->k) {
    lo = hint->a;
    if ((uint64_t)hint->a + (k - hint->k) < hi)
      hi = hint->a + (k - hint->k);
    /* Rounding could in principle break the step bound: widen then. */
    if (secagg_bound_reconstruct(n, k, hi, corrupt) > goal)
      hi = k + 1;
  }
  if (secagg_bound_reconstruct(n, k, hi, corrupt) > goal)
    return 0;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (secagg_bound_reconstruct(n, k, mid, corrupt) <= goal)
      hi = mid;
    else
      lo = mid + 1;
  }
  hint->k = k;
  hint->a = lo;
  return lo;
}

static int check_goal(const secagg_goal *goal, char *err, size_t errlen) {
  if (!goal)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "secagg goal missing");
  uint32_t n = goal->n;
  double d = goal->dropout, c = goal->corrupt;
  if (n < 2 || n > SECAGG_MAX_CLIENTS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: n = %u clients must be in 2..%u", n,
                       SECAGG_MAX_CLIENTS);
  if (!(d >= 0.0 && d < 1.0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: dropout %g must be in [0, 1)", d);
  if (!(c >= 0.0 && c < 1.0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: corrupt %g must be in [0, 1)", c);
  if (goal->security_bits < 1 || goal->security_bits > 128)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: security_bits %u must be in 1..128",
                       goal->security_bits);
  if (goal->correctness_bits < 1 || goal->correctness_bits > 128)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: correctness_bits %u must be in 1..128",
                       goal->correctness_bits);
  if (goal->colluders > n)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: %u colluders among n = %u clients",
                       goal->colluders, n);
  if (goal->adversary != SECAGG_SEMI_MALICIOUS &&
      goal->adversary != SECAGG_CURIOUS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal: adversary %d is neither semi-malicious "
                       "nor curious",
                       (int)goal->adversary);
  return COHORT_OK;
}

static int refuse_reconstruct(const secagg_goal *g, uint32_t k, uint32_t a,
                              char *err, size_t errlen) {
  double b = secagg_bound_reconstruct(g->n, k, k + 1, g->corrupt);
  if (a) /* a meets the goal, but its threshold is above k */
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal n = %u, dropout %g, corrupt %g: no "
                       "threshold up to k qualifies for degree k = %u%s; "
                       "against a %s coordinator %s needs t = %u, "
                       "and a client masks with at most k neighbours",
                       g->n, g->dropout, g->corrupt, k,
                       k == g->n - 1 ? " (the complete graph)" : "",
                       secagg_adversary_name(g->adversary),
                       g->colluders && a == g->colluders + 1
                           ? "keeping out the colluders it places"
                           : "bound (2)",
                       threshold_of(g->adversary, k, a));
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg goal n = %u, dropout %g, corrupt %g: no "
                     "threshold up to k qualifies for degree k = %u%s; "
                     "even %u corrupt holders bound reconstruction by "
                     "corrupt clients only by 2^%.1f, not the 2^-%u asked "
                     "(%.1f bits short)",
                     g->n, g->dropout, g->corrupt, k,
                     k == g->n - 1 ? " (the complete graph)" : "", k + 1, b,
                     g->security_bits, b + g->security_bits);
}

/* The corrupt holders the adversary must not reach at degree k: bound
 * (2)'s a(k) for clients corrupt at random, and more than the colluders
 * a coordinator may place anywhere it likes; 0 when no count up to k + 1
 * does. */
static uint32_t needed_count(const secagg_goal *g, uint32_t k,
                             count_hint *hint) {
  uint32_t a = smallest_safe_count(g->n, k, g->corrupt, g->security_bits, hint);
  if (a && g->colluders >= a)
    a = g->colluders < k ? g->colluders + 1 : 0;
  return a;
}

/* The goal's smallest t at degree k against bound (2), or the refusal
 * (also when it exceeds k: a client masks with at least t neighbours). */
static int threshold_at(const secagg_goal *g, uint32_t k, count_hint *hint,
                        uint32_t *t, char *err, size_t errlen) {
  uint32_t a = needed_count(g, k, hint);
  if (!a && g->colluders >= k)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal n = %u: %u colluding clients placed "
                       "around one client can fill its %u neighbours; no "
                       "threshold keeps its secrets",
                       g->n, g->colluders, k);
  if (!a || threshold_of(g->adversary, k, a) > k)
    return refuse_reconstruct(g, k, a, err, errlen);
  *t = threshold_of(g->adversary, k, a);
  return COHORT_OK;
}

int secagg_find_threshold(const secagg_goal *goal, uint32_t degree,
                          uint32_t *threshold, char *err, size_t errlen) {
  int rc = check_goal(goal, err, errlen);
  if (rc)
    return rc;
  if (!threshold || degree < 1 || degree > goal->n - 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg degree %u must be in 1..%u", degree,
                       goal->n - 1);
  count_hint hint = {0, 0};
  return threshold_at(goal, degree, &hint, threshold, err, errlen);
}

int secagg_find_params(const secagg_goal *goal, uint32_t *degree,
                       uint32_t *threshold, char *err, size_t errlen) {
  int rc = check_goal(goal, err, errlen);
  if (rc)
    return rc;
  if (!degree || !threshold)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg goal's results missing");
  uint32_t n = goal->n;
  double d = goal->dropout, c = goal->corrupt;
  unsigned sec = goal->security_bits, cor = goal->correctness_bits;
  secagg_adversary adv = goal->adversary;

  /* Odd degrees need an even n (n k / 2 edges). Bound (3) costs O(1);
   * past it, (1) at the smallest t the adversary allows (a = 1) says
   * whether any t can do, and only then is a(k) looked for. Tails stop
   * where their terms vanish. */
  uint32_t step = n % 2 == 0 ? 1 : 2;
  count_hint hint = {0, 0};
  for (uint32_t k = step == 1 ? 1 : 2; k < n - 1; k += step) {
    if (secagg_bound_isolate(n, k, d, c) > -(double)sec ||
        secagg_bound_correctness(n, k, threshold_of(adv, k, 1), d) >
            -(double)cor)
      continue;
    uint32_t a = needed_count(goal, k, &hint);
    uint32_t t = a ? threshold_of(adv, k, a) : 0;
    if (t && t <= k && secagg_bound_correctness(n, k, t, d) <= -(double)cor) {
      *degree = k;
      *threshold = t;
      return COHORT_OK;
    }
  }

  /* The complete graph: original SecAgg. */
  uint32_t k = n - 1, t;
  if ((rc = threshold_at(goal, k, &hint, &t, err, errlen)))
    return rc;
  double b = secagg_bound_correctness(n, k, t, d);
  if (b > -(double)cor)
    return errbuf_fail(
        err, errlen, COHORT_EINVAL, NULL,
        "secagg goal n = %u, dropout %g, corrupt %g: no degree and threshold "
        "qualify; the complete graph (k = %u) needs t >= %u against "
        "reconstruction by corrupt clients with a %s coordinator (2^-%u), "
        "and then a round fails to complete with probability bound 2^%.1f, "
        "not the 2^-%u asked (%.1f bits short)",
        n, d, c, k, t, secagg_adversary_name(adv), sec, b, cor, b + cor);
  *degree = k;
  *threshold = t;
  return COHORT_OK;
}

int secagg_choose_graph(const secagg_goal *goal, int sparse, uint32_t degree,
                        uint32_t *k, uint32_t *t, char *err, size_t errlen) {
  int rc = check_goal(goal, err, errlen);
  if (rc)
    return rc;
  uint32_t n = goal->n;
  *k = degree ? (degree < n - 1 ? degree : n - 1) : n - 1;
  if (sparse && !degree) {
    rc = secagg_find_params(goal, k, t, err, errlen);
    if (rc == COHORT_OK)
      return COHORT_OK;
    *k = n - 1; /* full SecAgg, at the threshold below */
  }
  int trc =
      secagg_find_threshold(goal, *k, t, rc ? NULL : err, rc ? 0 : errlen);
  if (trc)
    *t = secagg_majority_threshold(*k);
  return rc ? rc : trc;
}

double secagg_effective_dropout(double dropout, double over_select) {
  if (!(over_select > 0))
    return dropout;
  return 1.0 - (1.0 - dropout) / (1.0 + over_select);
}

/* ---- what a client accepts ---- */

secagg_policy secagg_policy_default(void) {
  return (secagg_policy){.adversary = SECAGG_SEMI_MALICIOUS,
                         .corrupt = 0.05,
                         .colluders = 0,
                         .security_bits = SECAGG_SECURITY_BITS};
}

/* The policy as a goal for n clients; dropout plays no part in a floor. */
static secagg_goal policy_goal(const secagg_policy *policy, uint32_t n) {
  return (secagg_goal){.n = n,
                       .dropout = 0,
                       .corrupt = policy->corrupt,
                       .colluders =
                           policy->colluders < n ? policy->colluders : n,
                       .security_bits = policy->security_bits,
                       .correctness_bits = SECAGG_CORRECTNESS_BITS,
                       .adversary = policy->adversary};
}

int secagg_policy_min_threshold(const secagg_policy *policy, uint32_t n,
                                uint32_t k, uint32_t *t_min, char *err,
                                size_t errlen) {
  secagg_goal goal = policy_goal(policy, n);
  int rc = check_goal(&goal, err, errlen);
  if (rc)
    return rc;
  if (k < 1 || k > n - 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg degree %u must be in 1..%u", k, n - 1);
  count_hint hint = {0, 0};
  if (threshold_at(&goal, k, &hint, t_min, NULL, 0) != COHORT_OK)
    *t_min = threshold_of(policy->adversary, k, goal.colluders + 1);
  return COHORT_OK;
}

int secagg_policy_check(const secagg_policy *policy, const secagg_params *p,
                        char *err, size_t errlen) {
  int rc = secagg_params_check(p, err, errlen);
  if (rc)
    return rc;
  uint32_t t_min;
  rc =
      secagg_policy_min_threshold(policy, p->n, p->degree, &t_min, err, errlen);
  if (rc)
    return rc;
  char placed[80] = "";
  if (policy->colluders)
    snprintf(placed, sizeof placed, " and %u colluding clients it places",
             policy->colluders);
  if (t_min > p->degree)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "no threshold up to the degree %u keeps this "
                       "client's secrets among %u clients against a %s "
                       "coordinator with %g%% corrupt clients%s (it would "
                       "need %u)",
                       p->degree, p->n,
                       secagg_adversary_name(policy->adversary),
                       100 * policy->corrupt, placed, t_min);
  if (p->threshold < t_min) {
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "threshold %u is below the %u this client requires "
                       "of degree %u among %u clients against a %s "
                       "coordinator with %g%% corrupt clients%s",
                       p->threshold, t_min, p->degree, p->n,
                       secagg_adversary_name(policy->adversary),
                       100 * policy->corrupt, placed);
  }
  double iso = secagg_bound_isolate(p->n, p->degree, 0, policy->corrupt);
  if (iso > -(double)policy->security_bits)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "degree %u among %u clients leaves the honest ones "
                       "disconnected by %g%% corrupt clients with "
                       "probability bound 2^%.1f, above the 2^-%u this "
                       "client requires",
                       p->degree, p->n, 100 * policy->corrupt, iso,
                       policy->security_bits);
  return COHORT_OK;
}
