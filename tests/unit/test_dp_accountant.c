/* Tests of the Renyi-DP accountant (common/dp/dp_accountant.h): RDP against a
 * numerical integration of its definition and against TensorFlow Privacy's
 * published values, epsilon against published DP-SGD epsilons, composition,
 * monotonicity, and the planner's round trip and refusals. */
#include <math.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "dp_accountant.h"

static int close_rel(double got, double want, double rel) {
  return fabs(got - want) <= rel * fabs(want);
}

/* The definition, integrated: A_alpha = E_{x~mu0}[(mu(x)/mu0(x))^alpha]
 * with mu0 = N(0, z^2) and mu = (1-q) mu0 + q N(1, z^2), so that
 * mu/mu0 = 1 - q + q e^((2x-1)/(2z^2)). The integrand of A - 1 is taken
 * as mu0 * expm1(alpha log1p(u)), which keeps A - 1 precise when it is
 * O(q^2); the mass lies within 40 z of [0, alpha], the peak of
 * mu0 (q r)^alpha being at x = alpha. Composite Simpson with 200000
 * panels: far below 1e-9 relative on these smooth integrands. */
static double rdp_by_quadrature(double q, double z, double alpha) {
  const double lo = -40 * z, hi = alpha + 40 * z;
  const int n = 200000;
  const double h = (hi - lo) / n, two_z2 = 2 * z * z;
  const double log_norm = -log(z) - 0.5 * log(2 * 3.14159265358979323846);
  double sum = 0;
  for (int i = 0; i <= n; i++) {
    double x = lo + i * h, lmu0 = log_norm - x * x / two_z2;
    double g = alpha * log1p(q * expm1((2 * x - 1) / two_z2));
    double f = fabs(g) < 1 ? exp(lmu0) * expm1(g) : exp(lmu0 + g) - exp(lmu0);
    sum += (i == 0 || i == n ? 1 : i % 2 ? 4 : 2) * f;
  }
  return log1p(sum * h / 3) / (alpha - 1);
}

static void test_rdp_matches_integration(void) {
  static const struct {
    double q, z, alpha;
  } pts[] = {
      {0.01, 1.1, 2},    {0.01, 1.1, 12},   {0.1, 2.0, 5},    {0.2, 0.8, 3},
      {0.5, 1.5, 8},     {0.001, 1.0, 32},  {0.01, 1.1, 2.5}, {0.05, 1.3, 7.25},
      {0.3, 1.0, 1.5},   {0.01, 0.7, 4.4},  {0.9, 3.0, 3.7},  {0.001, 2.0, 1.1},
      {0.02, 0.9, 10.9}, {0.0001, 1.2, 20}, {0.99, 1.0, 6.5}, {0.5, 30, 1.3},
      {0.3, 0.4, 1.9},
  };
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
    double got = dp_rdp_sampled_gaussian(pts[i].q, pts[i].z, pts[i].alpha);
    double want = rdp_by_quadrature(pts[i].q, pts[i].z, pts[i].alpha);
    CU_ASSERT(want > 0 && isfinite(want));
    if (!close_rel(got, want, 1e-6))
      fprintf(stderr, "\nq=%g z=%g alpha=%g: rdp %.12g, integral %.12g\n",
              pts[i].q, pts[i].z, pts[i].alpha, got, want);
    CU_ASSERT(close_rel(got, want, 1e-6));
  }
}

/* Orders near an integer k go through the erfc series, order k through the
 * binomial sum: the two must meet, which neither alone could check. Both
 * carry about 1e-16 absolute error on log A (the resolution of A near 1),
 * hence the absolute slack in the order check. */
static void test_rdp_fractional_meets_integer(void) {
  static const double qs[] = {1e-4, 0.01, 0.3, 0.9};
  static const double zs[] = {0.6, 1.1, 4};
  static const double ks[] = {2, 5, 13, 40};
  for (size_t a = 0; a < 4; a++)
    for (size_t b = 0; b < 3; b++)
      for (size_t c = 0; c < 4; c++) {
        double at = dp_rdp_sampled_gaussian(qs[a], zs[b], ks[c]);
        double below = dp_rdp_sampled_gaussian(qs[a], zs[b], ks[c] - 1e-7);
        double above = dp_rdp_sampled_gaussian(qs[a], zs[b], ks[c] + 1e-7);
        CU_ASSERT(isfinite(at) && at > 0);
        /* RDP grows with the order. */
        CU_ASSERT(below <= at * (1 + 1e-9) + 1e-15);
        CU_ASSERT(at <= above * (1 + 1e-9) + 1e-15);
        CU_ASSERT(close_rel(below, at, 1e-5));
        CU_ASSERT(close_rel(above, at, 1e-5));
      }
}

/* TensorFlow Privacy, tensorflow_privacy/privacy/analysis/
 * rdp_accountant_test.py (test_compute_rdp_scalar, test_compute_rdp_sequence,
 * test_compute_rdp_no_sampling): compute_rdp(q, z, steps, orders), checked
 * there to 5 places (absolute 1e-5), as here. */
static void test_rdp_tf_privacy_values(void) {
  CU_ASSERT(fabs(10 * dp_rdp_sampled_gaussian(0.1, 2, 5) - 0.07737) < 1e-5);
  static const double orders[] = {1.5, 2.5, 5, 50, 100};
  static const double want[] = {0.00065, 0.001085, 0.00218075, 0.023846,
                                167.416307};
  for (size_t i = 0; i < 5; i++)
    CU_ASSERT(fabs(50 * dp_rdp_sampled_gaussian(0.01, 2.5, orders[i]) -
                   want[i]) < 1e-5);
  CU_ASSERT_DOUBLE_EQUAL(dp_rdp_sampled_gaussian(1, 10, 20), 0.1, 1e-15);
}

static void test_rdp_full_sampling_closed_form(void) {
  static const double zs[] = {0.5, 1, 1.1, 7.3};
  for (size_t i = 0; i < 4; i++)
    for (size_t k = 0; k < dp_orders_count; k++)
      CU_ASSERT_DOUBLE_EQUAL(dp_rdp_sampled_gaussian(1, zs[i], dp_orders[k]),
                             dp_orders[k] / (2 * zs[i] * zs[i]), 1e-12);
  /* TensorFlow Privacy's rdp_accountant_test.py
   * (test_get_privacy_spent_check_target_delta): z = 4.530877117 without
   * sampling is (1, 1e-6)-DP through the improved conversion. */
  double order = 0;
  dp_accountant a;
  dp_accountant_init(&a);
  CU_ASSERT_EQUAL(dp_accountant_add(&a, 1, 4.530877117, 1), COHORT_OK);
  CU_ASSERT(fabs(dp_accountant_epsilon(&a, 1e-6, &order) - 1) < 1e-5);
  CU_ASSERT(order > 1 && order < 64);
}

/* The classic conversion (Mironov 2017, Proposition 3), which TensorFlow
 * Privacy's compute_dp_sgd_privacy used in 2019, over its order list then. */
static double classic_epsilon(double q, double z, double steps, double delta) {
  static const double low[] = {1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5};
  double orders[10 + 59 + 3], best = INFINITY;
  size_t n = 0;
  for (size_t i = 0; i < 10; i++)
    orders[n++] = low[i];
  for (int k = 5; k < 64; k++)
    orders[n++] = k;
  orders[n++] = 128;
  orders[n++] = 256;
  orders[n++] = 512;
  for (size_t i = 0; i < n; i++) {
    double eps = steps * dp_rdp_sampled_gaussian(q, z, orders[i]) -
                 log(delta) / (orders[i] - 1);
    if (eps < best)
      best = eps;
  }
  return best;
}

static void test_epsilon_published_dp_sgd(void) {
  /* TensorFlow Privacy, compute_dp_sgd_privacy_test.py (test Test0, Test1):
   * compute_dp_sgd_privacy(n, batch, z, epochs, delta), steps = ceil(epochs
   * n / batch), Poisson rate batch / n, dp_accounting's improved
   * conversion; both optimal orders are on our list. */
  double order = 0;
  dp_accountant a;
  dp_accountant_init(&a);
  CU_ASSERT_EQUAL(dp_accountant_add(&a, 150.0 / 60000, 1.3, 6000), COHORT_OK);
  CU_ASSERT(fabs(dp_accountant_epsilon(&a, 1e-5, &order) - 0.7242234026109595) <
            1e-7);
  CU_ASSERT_EQUAL(order, 19);
  dp_accountant_init(&a);
  CU_ASSERT_EQUAL(dp_accountant_add(&a, 100.0 / 100000, 1.0, 30000), COHORT_OK);
  CU_ASSERT(fabs(dp_accountant_epsilon(&a, 1e-7, &order) - 1.4154988495444842) <
            1e-7);
  CU_ASSERT_EQUAL(order, 13);

  /* Same file, test_dp_sgd_privacy_statement_no_user_dp_with_rdp: 10000
   * examples, batch 64, 5 epochs, z = 2 halved for microbatching, delta
   * 1e-6; "Epsilon assuming Poisson sampling: 1.616" with dp_accounting's
   * default orders, which are ours; 782 = ceil(5 / 0.0064) steps. */
  double eps = dp_epsilon(64.0 / 10000, 1.0, 782, 1e-6);
  CU_ASSERT(fabs(eps - 1.616) < 0.0005);

  /* compute_dp_sgd_privacy.py's docstring (TensorFlow Privacy, 2019): MNIST,
   * N = 60000, batch 256, z = 1.12, 60 epochs (14063 steps), delta 1e-5
   * "satisfies (2.92, 1e-5)-DP" with the classic conversion. The improved
   * conversion on our orders must give less. */
  double q = 256.0 / 60000, classic = classic_epsilon(q, 1.12, 14063, 1e-5);
  CU_ASSERT(fabs(classic - 2.92) < 0.005);
  eps = dp_epsilon(q, 1.12, 14063, 1e-5);
  CU_ASSERT(eps < classic - 0.3 && eps > 2.4);
  /* Abadi et al. 2016's setting, z = 1.1: "about 3" classically. */
  CU_ASSERT(fabs(classic_epsilon(q, 1.1, 14063, 1e-5) - 3.0) < 0.05);
}

static void test_monotone_and_composition(void) {
  double prev = INFINITY;
  for (double z = 0.5; z < 20; z *= 1.3) {
    double eps = dp_epsilon(0.01, z, 1000, 1e-5);
    CU_ASSERT(eps < prev);
    prev = eps;
  }
  prev = 0;
  for (uint64_t t = 1; t < 100000; t *= 3) {
    double eps = dp_epsilon(0.01, 1.1, t, 1e-5);
    CU_ASSERT(eps > prev);
    prev = eps;
  }
  /* Smaller delta, larger epsilon. */
  CU_ASSERT(dp_epsilon(0.01, 1.1, 1000, 1e-7) >
            dp_epsilon(0.01, 1.1, 1000, 1e-5));

  dp_accountant once, twice, mixed;
  dp_accountant_init(&once);
  dp_accountant_init(&twice);
  dp_accountant_init(&mixed);
  CU_ASSERT_EQUAL(dp_accountant_epsilon(&once, 1e-5, NULL), 0);
  CU_ASSERT_EQUAL(dp_accountant_add(&once, 0.02, 0.9, 2000), COHORT_OK);
  CU_ASSERT_EQUAL(dp_accountant_add(&twice, 0.02, 0.9, 1000), COHORT_OK);
  CU_ASSERT_EQUAL(dp_accountant_add(&twice, 0.02, 0.9, 1000), COHORT_OK);
  CU_ASSERT_EQUAL(dp_accountant_add(&twice, 0.5, 3, 0), COHORT_OK);
  for (size_t i = 0; i < dp_orders_count; i++)
    CU_ASSERT(close_rel(twice.rdp[i], once.rdp[i], 1e-12));
  double o1, o2;
  CU_ASSERT(close_rel(dp_accountant_epsilon(&twice, 1e-5, &o2),
                      dp_accountant_epsilon(&once, 1e-5, &o1), 1e-12));
  CU_ASSERT_EQUAL(o1, o2);
  CU_ASSERT(close_rel(dp_accountant_epsilon(&once, 1e-5, NULL),
                      dp_epsilon(0.02, 0.9, 2000, 1e-5), 1e-12));
  /* Different mechanisms add order by order, so the mix lies between the
   * parts and their worst doubled. */
  CU_ASSERT_EQUAL(dp_accountant_add(&mixed, 0.02, 0.9, 1000), COHORT_OK);
  CU_ASSERT_EQUAL(dp_accountant_add(&mixed, 0.01, 2.0, 1000), COHORT_OK);
  double mix = dp_accountant_epsilon(&mixed, 1e-5, NULL);
  CU_ASSERT(mix > dp_epsilon(0.02, 0.9, 1000, 1e-5));
  CU_ASSERT(mix < dp_epsilon(0.02, 0.9, 2000, 1e-5));
  for (size_t i = 0; i < dp_orders_count; i++)
    CU_ASSERT(
        close_rel(mixed.rdp[i],
                  1000 * (dp_rdp_sampled_gaussian(0.02, 0.9, dp_orders[i]) +
                          dp_rdp_sampled_gaussian(0.01, 2.0, dp_orders[i])),
                  1e-12));
}

static void test_planner_round_trip(void) {
  static const struct {
    double eps, q;
    uint64_t rounds;
    double delta;
  } cases[] = {
      {3, 0.01, 1000, 1e-5},
      {1, 0.001, 10000, 1e-6},
      {8, 0.1, 100, 1e-5},
      {0.5, 1, 1, 1e-5},
      {2.5186864791, 256.0 / 60000, 14063, 1e-5},
      {10, 0.05, 50000, 1e-8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double z = -1;
    char err[256] = "";
    int rc = dp_noise_for_epsilon(cases[i].eps, cases[i].q, cases[i].rounds,
                                  cases[i].delta, &z, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
    double got = dp_epsilon(cases[i].q, z, cases[i].rounds, cases[i].delta);
    CU_ASSERT(got <= cases[i].eps);
    CU_ASSERT(got > cases[i].eps * (1 - 1e-3));
    CU_ASSERT(dp_epsilon(cases[i].q, z * (1 - 1e-3), cases[i].rounds,
                         cases[i].delta) > cases[i].eps);
  }
  /* The MNIST setting backwards: epsilon 2.5187 needs z = 1.12. */
  double z = 0;
  CU_ASSERT_EQUAL(dp_noise_for_epsilon(2.5186864791, 256.0 / 60000, 14063, 1e-5,
                                       &z, NULL, 0),
                  COHORT_OK);
  CU_ASSERT(fabs(z - 1.12) < 1.12 * 2e-4);
  /* A budget so loose that the search floor already meets it. */
  CU_ASSERT_EQUAL(dp_noise_for_epsilon(1e9, 0.01, 10, 1e-5, &z, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(z, 0.01, 1e-12);
}

static void test_refusals(void) {
  struct {
    double eps, q;
    uint64_t rounds;
    double delta;
    const char *says;
  } bad[] = {
      {0, 0.01, 100, 1e-5, "epsilon"},
      {-1, 0.01, 100, 1e-5, "epsilon"},
      {NAN, 0.01, 100, 1e-5, "epsilon"},
      {INFINITY, 0.01, 100, 1e-5, "epsilon"},
      {1, 0, 100, 1e-5, "sampling rate"},
      {1, 1.5, 100, 1e-5, "sampling rate"},
      {1, 0.01, 0, 1e-5, "rounds"},
      {1, 0.01, 100, 0, "delta"},
      {1, 0.01, 100, 1, "delta"},
      {1e-6, 1, 1000000, 1e-10, "out of reach"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double z = 42;
    char err[256] = "";
    CU_ASSERT_EQUAL(dp_noise_for_epsilon(bad[i].eps, bad[i].q, bad[i].rounds,
                                         bad[i].delta, &z, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT(strstr(err, bad[i].says) != NULL);
    CU_ASSERT_EQUAL(z, 42);
  }
  CU_ASSERT(isnan(dp_rdp_sampled_gaussian(0, 1, 2)));
  CU_ASSERT(isnan(dp_rdp_sampled_gaussian(1.01, 1, 2)));
  CU_ASSERT(isnan(dp_rdp_sampled_gaussian(0.1, 0, 2)));
  CU_ASSERT(isnan(dp_rdp_sampled_gaussian(0.1, INFINITY, 2)));
  CU_ASSERT(isnan(dp_rdp_sampled_gaussian(0.1, 1, 1)));
  CU_ASSERT(isnan(dp_rdp_sampled_gaussian(0.1, 1, NAN)));
  CU_ASSERT(isinf(dp_rdp_sampled_gaussian(0.1, 1, INFINITY)));
  dp_accountant a;
  dp_accountant_init(&a);
  CU_ASSERT_EQUAL(dp_accountant_add(&a, 0, 1, 1), COHORT_EINVAL);
  CU_ASSERT_EQUAL(dp_accountant_add(&a, 0.1, -1, 1), COHORT_EINVAL);
  CU_ASSERT_EQUAL(dp_accountant_add(&a, 0.1, NAN, 1), COHORT_EINVAL);
  CU_ASSERT_EQUAL(dp_accountant_epsilon(&a, 1e-5, NULL), 0);
  CU_ASSERT(isnan(dp_accountant_epsilon(&a, 0, NULL)));
  CU_ASSERT(isnan(dp_accountant_epsilon(&a, 1, NULL)));
  CU_ASSERT(isnan(dp_epsilon(0.01, 1, 10, 2)));
  CU_ASSERT(isnan(dp_epsilon(2, 1, 10, 1e-5)));
}

/* Every order over a wide grid: finite, non-negative, and increasing in the
 * order (a property of Renyi divergence, up to the 1e-16 resolution of log
 * A), with no overflow, no NaN and no series given up (+INFINITY). */
static void test_rdp_wide_grid(void) {
  static const double qs[] = {1e-9, 1e-6, 1e-3, 0.05, 0.5, 0.999};
  static const double zs[] = {0.3, 0.7, 1, 3, 30, 1000};
  for (size_t a = 0; a < 6; a++)
    for (size_t b = 0; b < 6; b++) {
      double prev = 0;
      for (size_t k = 0; k < dp_orders_count; k++) {
        double r = dp_rdp_sampled_gaussian(qs[a], zs[b], dp_orders[k]);
        CU_ASSERT(r >= 0 && isfinite(r));
        CU_ASSERT(r >= prev * (1 - 1e-9) - 1e-15);
        prev = r;
      }
    }
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"RDP equals numerical integration of its definition",
       test_rdp_matches_integration},
      {"fractional-order series meets the integer-order sum",
       test_rdp_fractional_meets_integer},
      {"RDP matches TensorFlow Privacy's published values",
       test_rdp_tf_privacy_values},
      {"q = 1 is the Gaussian mechanism", test_rdp_full_sampling_closed_form},
      {"epsilon matches published DP-SGD epsilons",
       test_epsilon_published_dp_sgd},
      {"monotone in z, rounds and delta; rounds compose",
       test_monotone_and_composition},
      {"planner round trip", test_planner_round_trip},
      {"refusals and bad arguments", test_refusals},
      {"RDP finite and increasing in the order over a wide grid",
       test_rdp_wide_grid},
  };
  return test_add_suite("dp_accountant", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
