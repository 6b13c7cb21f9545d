/* Renyi-DP accountant of the Poisson-subsampled Gaussian mechanism and the
 * planner that inverts it; see dp_accountant.h for the contract and
 * docs/privacy.md ("The accountant") for the formulas and their sources. */
#include "dp_accountant.h"

#include <math.h>

#include "cohort_status.h"
#include "errbuf.h"

/* dp_accounting's DEFAULT_RDP_ORDERS (Google's differential-privacy
 * library, the accountant behind TensorFlow Privacy), so that epsilons can
 * be checked against it digit for digit: 1.1 .. 10.9 by 0.1, where the
 * best order lies for the budgets people use, every integer 11 .. 63, and
 * 128 .. 1024 for tiny epsilons or very large z. */
const double dp_orders[] = {
    1.1,  1.2,  1.3,  1.4,  1.5,  1.6,  1.7,  1.8,  1.9, 2,   2.1, 2.2, 2.3,
    2.4,  2.5,  2.6,  2.7,  2.8,  2.9,  3,    3.1,  3.2, 3.3, 3.4, 3.5, 3.6,
    3.7,  3.8,  3.9,  4,    4.1,  4.2,  4.3,  4.4,  4.5, 4.6, 4.7, 4.8, 4.9,
    5,    5.1,  5.2,  5.3,  5.4,  5.5,  5.6,  5.7,  5.8, 5.9, 6,   6.1, 6.2,
    6.3,  6.4,  6.5,  6.6,  6.7,  6.8,  6.9,  7,    7.1, 7.2, 7.3, 7.4, 7.5,
    7.6,  7.7,  7.8,  7.9,  8,    8.1,  8.2,  8.3,  8.4, 8.5, 8.6, 8.7, 8.8,
    8.9,  9,    9.1,  9.2,  9.3,  9.4,  9.5,  9.6,  9.7, 9.8, 9.9, 10,  10.1,
    10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 10.9, 11,  12,  13,  14,  15,
    16,   17,   18,   19,   20,   21,   22,   23,   24,  25,  26,  27,  28,
    29,   30,   31,   32,   33,   34,   35,   36,   37,  38,  39,  40,  41,
    42,   43,   44,   45,   46,   47,   48,   49,   50,  51,  52,  53,  54,
    55,   56,   57,   58,   59,   60,   61,   62,   63,  128, 256, 512, 1024};
const size_t dp_orders_count = sizeof dp_orders / sizeof dp_orders[0];

_Static_assert(sizeof dp_orders / sizeof dp_orders[0] <= DP_ORDERS_MAX,
               "dp_orders must fit dp_accountant.rdp");

/* Beyond this order the binomial sum would take too long; such orders are
 * reported as +INFINITY, which is a valid (if useless) bound. */
#define ALPHA_MAX 1e6
/* The alternating tail of the fractional series is summed with Euler's
 * transform (repeated averaging of the last EULER_LEVELS + 1 partial sums)
 * until two successive estimates agree to SERIES_REL_TOL of A - 1, or to
 * SERIES_ABS_TOL of A, under which a double cannot resolve A anyway. The
 * cap guards against a series that will not settle: such an order is
 * reported as +INFINITY, a valid (if useless) bound. */
#define EULER_LEVELS 12
#define SERIES_REL_TOL 1e-12
#define SERIES_ABS_TOL 1e-17
#define SERIES_MAX_TERMS 100000

static const double LN_HALF = -0.69314718055994530942;
static const double SQRT2 = 1.41421356237309504880;
static const double LN_PI = 1.14472988584940017414;

/* log(exp(x) + exp(y)) without overflow; -INFINITY stands for 0. */
static double log_add(double x, double y) {
  double hi = x > y ? x : y, lo = x > y ? y : x;
  if (lo == -INFINITY)
    return hi;
  return hi + log1p(exp(lo - hi));
}

/* log(erfc(x)), accurate where erfc underflows: past 25 the asymptotic
 * series erfc(x) ~ exp(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + ...), taken
 * in log form to the x^-8 term (TensorFlow Privacy's _log_erfc). */
static double log_erfc(double x) {
  if (x < 25)
    return log(erfc(x));
  double r = 1 / (x * x);
  return -LN_PI / 2 - log(x) - x * x +
         r * (-0.5 + r * (0.625 + r * (-37.0 / 24 + r * (353.0 / 64))));
}

/* log A_alpha for integer alpha and 0 < q < 1:
 *   A = sum_{k=0}^{alpha} C(alpha,k) (1-q)^(alpha-k) q^k e^((k^2-k)/(2z^2)).
 * Summed as m + log1p(rest), m the largest term, so that log A keeps its
 * relative precision when A is 1 + O(q^2). */
static double log_a_int(double q, double z, double alpha) {
  const double lq = log(q), l1q = log1p(-q), two_z2 = 2 * z * z;
  double m = -INFINITY, rest = 0, lc = 0; /* lc: log C(alpha, k) */
  for (double k = 0; k <= alpha; k++) {
    double s = lc + k * lq + (alpha - k) * l1q + (k * k - k) / two_z2;
    if (s > m) {
      rest = m == -INFINITY ? 0 : (1 + rest) * exp(m - s);
      m = s;
    } else {
      rest += exp(s - m);
    }
    lc += log((alpha - k) / (k + 1));
  }
  return m + log1p(rest);
}

/* log A_alpha for fractional alpha and 0 < q < 1 (Mironov, Talwar, Zhang
 * 2019, Section 3.3; TensorFlow Privacy's _compute_log_a_frac). A is the
 * integral of mu0(x) (1 - q + q r(x))^alpha, r(x) = e^((2x - 1)/(2 z^2)).
 * Split it at z0, where the two summands are equal (q r(z0) = 1 - q); on
 * each side expand the power binomially in the smaller summand over the
 * larger and integrate each term against a Gaussian tail: term i is
 * e^s0 + e^s1 below, with C(alpha, i) in front. Those coefficients are
 * positive up to i = ceil(alpha) (the head, summed in log space) and then
 * alternate in sign while the terms shrink only like i^-(alpha+2) when q
 * is near 1/2 or z is small: summing until they are negligible, as
 * TensorFlow Privacy does, can take millions of terms there. The tail is
 * therefore summed relative to the head and accelerated by Euler's
 * transform, which converges geometrically on such smooth alternating
 * series. */
static double log_a_frac(double q, double z, double alpha) {
  const double lq = log(q), l1q = log1p(-q), two_z2 = 2 * z * z;
  const double z0 = z * z * log(1 / q - 1) + 0.5, scale = SQRT2 * z;
  const int head = (int)ceil(alpha);
  double la = -INFINITY, lc = 0; /* lc: log |C(alpha, i)| */
  double partial[EULER_LEVELS + 1], avg[EULER_LEVELS + 1];
  double tail = 0, sign = 1, prev = NAN;
  int agreed = 0;
  for (int n = 0; n < SERIES_MAX_TERMS; n++) {
    double i = n, j = alpha - i;
    double s0 = lc + i * lq + j * l1q + (i * i - i) / two_z2 + LN_HALF +
                log_erfc((i - z0) / scale);
    double s1 = lc + j * lq + i * l1q + (j * j - j) / two_z2 + LN_HALF +
                log_erfc((z0 - j) / scale);
    double s = log_add(s0, s1);
    if (isnan(s))
      return INFINITY;
    lc += log(fabs(alpha - i) / (i + 1));
    if (n <= head) {
      la = log_add(la, s);
      continue;
    }
    sign = -sign;
    tail += sign * exp(s - la);
    int k = n - head - 1; /* tail terms so far, less one */
    partial[k % (EULER_LEVELS + 1)] = tail;
    if (k < EULER_LEVELS)
      continue;
    /* Oldest to newest, then average neighbours EULER_LEVELS times. */
    for (int m = 0; m <= EULER_LEVELS; m++)
      avg[m] = partial[(k + 1 + m) % (EULER_LEVELS + 1)];
    for (int level = EULER_LEVELS; level > 0; level--)
      for (int m = 0; m < level; m++)
        avg[m] = (avg[m] + avg[m + 1]) / 2;
    double est = avg[0];
    if (est <= -1) /* the tail cannot outweigh the head */
      return INFINITY;
    double log_a = la + log1p(est);
    /* (A - 1) / A, the yardstick for relative precision. */
    double excess = -expm1(-log_a);
    if (fabs(est - prev) <= SERIES_REL_TOL * fabs(excess) + SERIES_ABS_TOL) {
      if (++agreed == 2)
        return log_a;
    } else {
      agreed = 0;
    }
    prev = est;
  }
  return INFINITY;
}

double dp_rdp_sampled_gaussian(double q, double z, double alpha) {
  if (!(q > 0 && q <= 1) || !(z > 0 && isfinite(z)) || !(alpha > 1))
    return NAN;
  if (q == 1) /* the Gaussian mechanism itself */
    return alpha / (2 * z * z);
  if (alpha > ALPHA_MAX)
    return INFINITY;
  double log_a =
      alpha == floor(alpha) ? log_a_int(q, z, alpha) : log_a_frac(q, z, alpha);
  if (isnan(log_a) || log_a == INFINITY)
    return INFINITY;
  /* A >= 1 in exact arithmetic; a hair below is rounding. */
  return log_a > 0 ? log_a / (alpha - 1) : 0;
}

void dp_accountant_init(dp_accountant *a) {
  for (size_t i = 0; i < DP_ORDERS_MAX; i++)
    a->rdp[i] = 0;
}

int dp_accountant_add(dp_accountant *a, double q, double z, uint64_t rounds) {
  if (!(q > 0 && q <= 1) || !(z > 0 && isfinite(z)))
    return COHORT_EINVAL;
  if (rounds == 0)
    return COHORT_OK;
  for (size_t i = 0; i < dp_orders_count; i++)
    a->rdp[i] += (double)rounds * dp_rdp_sampled_gaussian(q, z, dp_orders[i]);
  return COHORT_OK;
}

/* (epsilon, delta)-DP from RDP r at order alpha: Canonne, Kamath, Steinke
 * 2020, "The Discrete Gaussian for Differential Privacy", Proposition 12
 * (arXiv:2004.00010 v4; also Asoodeh et al. 2020, "A Better Bound Gives a
 * Hundred Rounds", arXiv:2001.05990 v1 Eq. 20), as dp_accounting's (and so
 * TensorFlow Privacy's) compute_epsilon applies it:
 *   epsilon = r + log1p(-1/alpha) - (log(delta) + log(alpha)) / (alpha - 1),
 * and epsilon = 0 when delta^2 >= 1 - e^-r: the KL divergence, at most r,
 * then already bounds delta by sqrt(1 - e^-KL) (Bretagnolle-Huber). The
 * classic conversion of Mironov 2017, "Renyi Differential Privacy",
 * Proposition 3, r - log(delta) / (alpha - 1), is larger by
 * log(alpha) / (alpha - 1) - log1p(-1/alpha) > 0. */
static double epsilon_at_order(double r, double alpha, double delta) {
  if (r == INFINITY)
    return INFINITY;
  if (delta * delta + expm1(-r) > 0)
    return 0;
  double eps = r + log1p(-1 / alpha) - (log(delta) + log(alpha)) / (alpha - 1);
  return eps > 0 ? eps : 0;
}

double dp_accountant_epsilon(const dp_accountant *a, double delta,
                             double *order) {
  double best = INFINITY, best_order = dp_orders[0];
  if (!(delta > 0 && delta < 1)) {
    best = NAN;
  } else {
    for (size_t i = 0; i < dp_orders_count; i++) {
      double eps = epsilon_at_order(a->rdp[i], dp_orders[i], delta);
      if (eps < best) {
        best = eps;
        best_order = dp_orders[i];
      }
    }
  }
  if (order)
    *order = best_order;
  return best;
}

double dp_epsilon(double q, double z, uint64_t rounds, double delta) {
  dp_accountant a;
  dp_accountant_init(&a);
  if (dp_accountant_add(&a, q, z, rounds) != COHORT_OK)
    return NAN;
  return dp_accountant_epsilon(&a, delta, NULL);
}

/* The planner's search range of z; 1e-2 already adds so little noise that
 * an epsilon it meets is no constraint. */
#define PLAN_Z_MIN 1e-2
#define PLAN_Z_MAX 1e4
#define PLAN_REL_PRECISION 1e-4

int dp_noise_for_epsilon(double epsilon, double q, uint64_t rounds,
                         double delta, double *z, char *err, size_t errlen) {
  static const char *who = "privacy planner";
  if (!(epsilon > 0 && isfinite(epsilon)))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "epsilon must be a number > 0, got %g", epsilon);
  if (!(q > 0 && q <= 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "sampling rate must be in (0, 1], got %g", q);
  if (rounds == 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "rounds must be at least 1");
  if (!(delta > 0 && delta < 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "delta must be in (0, 1), got %g", delta);
  double hi = PLAN_Z_MAX, lo = PLAN_Z_MIN;
  double eps_hi = dp_epsilon(q, hi, rounds, delta);
  if (!(eps_hi <= epsilon))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "epsilon %g at delta %g is out of reach: even noise "
                       "multiplier %g gives epsilon %g after %llu rounds of "
                       "q=%g; allow a larger epsilon or delta, or fewer rounds",
                       epsilon, delta, hi, eps_hi, (unsigned long long)rounds,
                       q);
  if (dp_epsilon(q, lo, rounds, delta) <= epsilon) {
    *z = lo;
    return COHORT_OK;
  }
  /* Invariant: epsilon(lo) > target >= epsilon(hi); epsilon falls as z
   * grows (each order's RDP does), so halve [lo, hi] in log z. */
  while (hi > lo * (1 + PLAN_REL_PRECISION)) {
    double mid = sqrt(lo * hi);
    if (dp_epsilon(q, mid, rounds, delta) <= epsilon)
      hi = mid;
    else
      lo = mid;
  }
  *z = hi;
  return COHORT_OK;
}
