/* Tests of the coordinator's pure selection helpers: pace steering
 * (pace_retry_ms and pace_wanted_at_ms against the formulas in pace.h)
 * and eligibility conditions (elig_parse, elig_check) for every operator,
 * good and bad input. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cunit_main.h"
#include "eligibility.h"
#include "pace.h"

/* ---- pace steering ---- */

/* P clients, S wanted, W seconds, t_open, clamped to [100, 60000] ms. */
static pace_inputs pace(double p, double s, double w, double until) {
  pace_inputs in = {.population = p,
                    .wanted = s,
                    .window_s = w,
                    .until_open_s = until,
                    .min_ms = 100,
                    .max_ms = 60000};
  return in;
}

static void test_pace_min_clamp(void) {
  /* u = 0 and no wait for the next selection: 0 ms, clamped to min_ms. */
  pace_inputs in = pace(1000, 2, 1, 0);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.0), 100);
  in.min_ms = 250;
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.0), 250);
  /* A spread smaller than min_ms is clamped whatever u is: L = 3 * 0.01 /
   * (2 * 1.5) = 10 ms. */
  in = pace(3, 2, 0.01, 0);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.999), 100);
}

static void test_pace_spread_formula(void) {
  /* L = P W / (S m), m = 1.5; the wait is u L. */
  CU_ASSERT_EQUAL(PACE_MARGIN, 1.5);
  pace_inputs in = pace(30, 2, 1, 0); /* L = 10 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 5000);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.25), 2500);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.75), 7500);
  /* Linear in the population. */
  in = pace(60, 2, 1, 0); /* L = 20 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 10000);
  in = pace(120, 2, 1, 0); /* L = 40 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 20000);
  /* Shrinks as more check-ins are wanted. */
  in = pace(60, 4, 1, 0); /* L = 10 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 5000);
  in = pace(60, 8, 1, 0); /* L = 5 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 2500);
  /* Linear in the window. */
  in = pace(30, 2, 2, 0); /* L = 20 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 10000);
  /* u in [0, 1) stays below L. */
  in = pace(30, 2, 1, 0);
  CU_ASSERT(pace_retry_ms(&in, 0.99999) < 10000);
  CU_ASSERT(pace_retry_ms(&in, 0.99999) >= 9999);
}

static void test_pace_until_open_and_max(void) {
  /* t_open adds: 3 s + 0.5 * 10 s. */
  pace_inputs in = pace(30, 2, 1, 3);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 8000);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.0), 3000);
  /* A negative t_open counts as 0. */
  in = pace(30, 2, 1, -5);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 5000);
  /* The longest wait is max_ms. */
  in = pace(1e6, 2, 1, 0);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 60000);
  in = pace(30, 2, 1, 1e9);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.0), 60000);
  in.max_ms = 1234;
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.0), 1234);
}

static void test_pace_degenerate_inputs(void) {
  /* Fewer than 1 wanted, no population, no window: each counts as 1 (L =
   * 1 * 1 / (1 * 1.5) s), never a division by zero. */
  pace_inputs in = pace(0, 0, 0, 0);
  in.min_ms = 0;
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.75), 500);
  in = pace(30, 0.5, 1, 0); /* S < 1 counts as 1: L = 20 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 10000);
  in = pace(30, 2, -1, 0); /* W <= 0 counts as 1 s */
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 5000);
}

/* ---- the wait of a client that already took part ---- */

static void test_after_round_formula(void) {
  /* t_end + u min_ms, in ms: 5 s to the round's expected end. */
  CU_ASSERT_EQUAL(pace_wanted_at_ms(5, 0.0, 100, 60000), 5000);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(5, 0.25, 100, 60000), 5025);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(5, 0.5, 100, 60000), 5050);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(2.5, 0.75, 200, 60000), 2650);
  /* The jitter is min_ms wide: [t_end, t_end + min_ms). */
  uint32_t lo = UINT32_MAX, hi = 0;
  for (int i = 0; i < 1000; i++) {
    uint32_t ms = pace_wanted_at_ms(3, i / 1000.0, 400, 60000);
    lo = ms < lo ? ms : lo;
    hi = ms > hi ? ms : hi;
  }
  CU_ASSERT_EQUAL(lo, 3000);
  CU_ASSERT(hi >= 3399 && hi < 3400);
  /* An end nearer than min_ms: min_ms, then the jitter. */
  CU_ASSERT_EQUAL(pace_wanted_at_ms(0.05, 0.9, 100, 60000), 190);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(0.05, 0.2, 100, 60000), 120);
}

static void test_after_round_clamps(void) {
  /* An end unknown (0) or past (negative) counts as min_ms away, and the
   * jitter still spreads the returns over [min_ms, 2 min_ms). */
  for (int i = 0; i < 10; i++) {
    double u = i / 10.0;
    CU_ASSERT_EQUAL(pace_wanted_at_ms(0, u, 100, 60000), 100 + 10 * i);
    CU_ASSERT_EQUAL(pace_wanted_at_ms(-7, u, 100, 60000), 100 + 10 * i);
    CU_ASSERT_EQUAL(pace_wanted_at_ms(-1e9, u, 250, 60000), 250 + 25 * i);
  }
  /* Far ends are clamped to max_ms. */
  CU_ASSERT_EQUAL(pace_wanted_at_ms(1e6, 0.5, 100, 60000), 60000);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(59.99, 0.5, 100, 60000), 60000);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(10, 0.0, 100, 1234), 1234);
}

/* The wait is the round's end plus jitter whatever the fleet's size: where
 * pace_retry_ms spreads 100,000 clients over its longest wait, a client that
 * took part is still told the round's end. */
static void test_after_round_has_no_population_term(void) {
  pace_inputs crowd = pace(100000, 1, 10, 2);
  CU_ASSERT_EQUAL(pace_retry_ms(&crowd, 0.5), 60000);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(2, 0.5, 100, 60000), 2050);
  CU_ASSERT_EQUAL(pace_wanted_at_ms(0, 0.5, 100, 60000), 150);
}

/* ---- how many check-ins are held ---- */

/* H = max(1000, 2 S): every client of a federation of up to 1,000 is
 * held whatever the round's size; beyond, twice the next selection. */
static void test_hold_cap_formula(void) {
  CU_ASSERT_EQUAL(PACE_HOLD_MIN, 1000);
  CU_ASSERT_EQUAL(PACE_HOLD_FACTOR, 2);
  CU_ASSERT_EQUAL(pace_hold_cap(0), 1000);
  CU_ASSERT_EQUAL(pace_hold_cap(4), 1000);
  CU_ASSERT_EQUAL(pace_hold_cap(500), 1000);
  CU_ASSERT_EQUAL(pace_hold_cap(501), 1002);
  CU_ASSERT_EQUAL(pace_hold_cap(1000), 2000);
  CU_ASSERT_EQUAL(pace_hold_cap(25000), 50000);
  CU_ASSERT_EQUAL(pace_hold_cap(SIZE_MAX), SIZE_MAX); /* no overflow */
  /* Crowded: more active clients than are held. */
  CU_ASSERT_FALSE(pace_crowded(1000, 1000));
  CU_ASSERT_TRUE(pace_crowded(1001, 1000));
  CU_ASSERT_TRUE(pace_crowded(10000, 2000));
}

/* Small federations (N = 4, 50, 500, every client selected, or a tenth of
 * them) hold every client in every case: none of them is told to wait. */
static void test_hold_limit_small_federations_hold_all(void) {
  const size_t fleets[] = {4, 50, 500, 1000};
  for (size_t i = 0; i < sizeof fleets / sizeof fleets[0]; i++) {
    size_t n = fleets[i];
    size_t wanted[] = {n, n / 10 ? n / 10 : 1};
    for (size_t k = 0; k < 2; k++)
      for (int took_part = 0; took_part < 2; took_part++)
        for (int candidate = 0; candidate < 2; candidate++)
          CU_ASSERT(pace_hold_limit(0, wanted[k], n, took_part, candidate) >=
                    n);
  }
}

/* 10,000 clients, rounds of 1,000: 2,000 held; a candidate of the open
 * draw up to 3,000; a client that just took part is not held at all. */
static void test_hold_limit_crowded_fleet(void) {
  CU_ASSERT_EQUAL(pace_hold_limit(0, 1000, 10000, 0, 0), 2000);
  CU_ASSERT_EQUAL(pace_hold_limit(0, 1000, 10000, 0, 1), 3000);
  CU_ASSERT_EQUAL(pace_hold_limit(0, 1000, 10000, 1, 0), 0);
  /* Not crowded (1,500 active, 2,000 held): a participant is held. */
  CU_ASSERT_EQUAL(pace_hold_limit(0, 1000, 1500, 1, 0), 2000);
  /* The operator's --max-held is the limit for everyone. */
  CU_ASSERT_EQUAL(pace_hold_limit(7, 1000, 10000, 1, 0), 7);
  CU_ASSERT_EQUAL(pace_hold_limit(7, 1000, 10000, 0, 1), 7);
  CU_ASSERT_EQUAL(pace_hold_limit(50000, 10, 4, 0, 0), 50000);
}

/* What a crowded fleet's turned-away clients are told (pace_retry_ms with
 * P = every active client): 10,000 active, rounds of 1,000, W = 1 s, so
 * L = 10000 / 1500 = 6.67 s: 1,500 check-ins a second, enough to refill
 * the 1,000 held places a round frees within one window. */
static void test_crowded_wait(void) {
  pace_inputs in = pace(10000, 1000, 1, 0);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.5), 3333);
  CU_ASSERT(pace_retry_ms(&in, 0.99999) < 6667);
  CU_ASSERT_EQUAL(pace_retry_ms(&in, 0.0), 100);
}

/* ---- eligibility: parsing ---- */

static void test_elig_parse_good(void) {
  static const struct {
    const char *text, *name;
    elig_op op;
    double value;
  } cases[] = {
      {"charging=1", "charging", ELIG_EQ, 1},
      {"battery>=0.5", "battery", ELIG_GE, 0.5},
      {"battery<=0.9", "battery", ELIG_LE, 0.9},
      {"temp>30", "temp", ELIG_GT, 30},
      {"temp<-5", "temp", ELIG_LT, -5},
      {"wifi!=0", "wifi", ELIG_NE, 0},
      {"net.type=2", "net.type", ELIG_EQ, 2},
      {"examples>=100", "examples", ELIG_GE, 100},
      {"free_mb>=1e3", "free_mb", ELIG_GE, 1000},
      {"x9>=-0.25", "x9", ELIG_GE, -0.25},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    elig_rule r;
    char err[200] = "untouched";
    CU_ASSERT_EQUAL(elig_parse(cases[i].text, &r, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(r.name, cases[i].name);
    CU_ASSERT_EQUAL(r.op, cases[i].op);
    CU_ASSERT_EQUAL(r.value, cases[i].value);
  }
  /* A name of exactly ELIG_MAX_NAME characters fits. */
  char text[ELIG_MAX_NAME + 8], name[ELIG_MAX_NAME + 1];
  memset(name, 'n', ELIG_MAX_NAME);
  name[ELIG_MAX_NAME] = '\0';
  snprintf(text, sizeof text, "%s=1", name);
  elig_rule r;
  char err[200];
  CU_ASSERT_EQUAL(elig_parse(text, &r, err, sizeof err), 0);
  CU_ASSERT_STRING_EQUAL(r.name, name);
}

static void test_elig_parse_bad(void) {
  char long_name[ELIG_MAX_NAME + 8];
  memset(long_name, 'n', ELIG_MAX_NAME + 1);
  strcpy(long_name + ELIG_MAX_NAME + 1, "=1");
  const char *bad[] = {"",         "=1",     "charging", "Charging=1", "x>=abc",
                       "x>=nan",   "x>=inf", "x>=-inf",  "x=",         "x>=1x",
                       "x>=1e999", "x==1",   "x=>1",     "x =1",       "x>=1 ",
                       "a-b=1",    "x~1",    ">=3",      long_name};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    elig_rule r;
    memset(&r, 0x5a, sizeof r);
    elig_rule before = r;
    char err[300] = "";
    CU_ASSERT_EQUAL(elig_parse(bad[i], &r, err, sizeof err), -1);
    CU_ASSERT_NOT_EQUAL(err[0], '\0');
    /* The reason quotes the condition, so an operator can find it. */
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%.40s'", bad[i]);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, quoted));
    CU_ASSERT_EQUAL(memcmp(&r, &before, sizeof r), 0);
  }
  /* The two kinds of reason. */
  elig_rule r;
  char err[300];
  CU_ASSERT_EQUAL(elig_parse("Charging=1", &r, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "NAME OP NUMBER"));
  CU_ASSERT_EQUAL(elig_parse("x>=nan", &r, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a finite number"));
}

/* ---- eligibility: checking ---- */

static elig_rule rule(const char *text) {
  elig_rule r;
  char err[200];
  memset(&r, 0, sizeof r);
  CU_ASSERT_EQUAL(elig_parse(text, &r, err, sizeof err), 0);
  return r;
}

static int check1(const char *cond, const char *name, double value, char *why,
                  size_t len) {
  elig_rule r = rule(cond);
  const char *names[] = {name};
  const double values[] = {value};
  return elig_check(&r, 1, 1, names, values, why, len);
}

static void test_elig_check_operators(void) {
  char why[160];
  static const struct {
    const char *cond;
    double value;
    int holds;
  } cases[] = {
      {"b>=0.5", 0.5, 1}, {"b>=0.5", 0.6, 1}, {"b>=0.5", 0.4, 0},
      {"b<=0.5", 0.5, 1}, {"b<=0.5", 0.4, 1}, {"b<=0.5", 0.6, 0},
      {"b>0.5", 0.6, 1},  {"b>0.5", 0.5, 0},  {"b<0.5", 0.4, 1},
      {"b<0.5", 0.5, 0},  {"b=1", 1, 1},      {"b=1", 0, 0},
      {"b=1", 1.0001, 0}, {"b!=0", 1, 1},     {"b!=0", 0, 0},
      {"b!=0", -0.0, 0},  {"b>=-1", -1, 1},   {"b<-1", -1.5, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    why[0] = '\0';
    int got = check1(cases[i].cond, "b", cases[i].value, why, sizeof why);
    CU_ASSERT_EQUAL(got, cases[i].holds);
    if (!got) {
      CU_ASSERT_PTR_NOT_NULL(strstr(why, "b is "));
      CU_ASSERT_PTR_NOT_NULL(strstr(why, "needs"));
    }
  }
  CU_ASSERT_EQUAL(check1("charging=1", "charging", 0, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(why, "charging is 0, needs = 1");
  CU_ASSERT_EQUAL(check1("examples>=100", "examples", 99, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(why, "examples is 99, needs >= 100");
}

static void test_elig_check_missing_and_several(void) {
  char why[160] = "";
  /* Not reported: not eligible, and told which. */
  CU_ASSERT_EQUAL(check1("charging=1", "battery", 1, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(why, "charging is not reported, needs = 1");
  elig_rule r = rule("charging=1");
  CU_ASSERT_EQUAL(elig_check(&r, 1, 0, NULL, NULL, why, sizeof why), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "charging"));
  /* A prefix or different case of a name is not the name. */
  const char *near[] = {"charg", "charging2", "CHARGING"};
  const double ones[] = {1, 1, 1};
  CU_ASSERT_EQUAL(elig_check(&r, 1, 3, near, ones, why, sizeof why), 0);
  /* No rules: everyone is eligible. */
  CU_ASSERT_EQUAL(elig_check(NULL, 0, 0, NULL, NULL, why, sizeof why), 1);
  /* Every rule must hold; the first that fails is reported. */
  elig_rule rules[3] = {rule("charging=1"), rule("battery>=0.5"),
                        rule("examples>=100")};
  const char *names[] = {"examples", "battery", "charging"};
  double values[] = {150, 0.7, 1};
  CU_ASSERT_EQUAL(elig_check(rules, 3, 3, names, values, why, sizeof why), 1);
  values[1] = 0.2;
  values[0] = 5;
  CU_ASSERT_EQUAL(elig_check(rules, 3, 3, names, values, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(why, "battery is 0.2, needs >= 0.5");
  values[1] = 0.7;
  CU_ASSERT_EQUAL(elig_check(rules, 3, 3, names, values, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(why, "examples is 5, needs >= 100");
  /* A short buffer is truncated, not overrun. */
  char tiny[8];
  memset(tiny, 'x', sizeof tiny);
  CU_ASSERT_EQUAL(elig_check(rules, 3, 3, names, values, tiny, sizeof tiny), 0);
  CU_ASSERT_EQUAL(tiny[sizeof tiny - 1], '\0');
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"pace: u = 0 gives min_ms", test_pace_min_clamp},
      {"pace: spread P W / (S m), exact ms", test_pace_spread_formula},
      {"pace: until_open adds; max_ms clamps", test_pace_until_open_and_max},
      {"pace: degenerate inputs count as 1", test_pace_degenerate_inputs},
      {"after round: t_end + u min_ms, exact ms", test_after_round_formula},
      {"after round: unknown or past end gives min_ms; max_ms clamps",
       test_after_round_clamps},
      {"after round: no population term",
       test_after_round_has_no_population_term},
      {"hold: H = max(1000, 2 S); crowded above H", test_hold_cap_formula},
      {"hold: N = 4, 50, 500, 1000 hold every client",
       test_hold_limit_small_federations_hold_all},
      {"hold: 10,000 clients, rounds of 1,000", test_hold_limit_crowded_fleet},
      {"hold: a crowded fleet's wait, exact ms", test_crowded_wait},
      {"elig_parse: every operator", test_elig_parse_good},
      {"elig_parse: bad conditions refused with a reason", test_elig_parse_bad},
      {"elig_check: each operator at its boundary", test_elig_check_operators},
      {"elig_check: missing attribute, several rules",
       test_elig_check_missing_and_several},
  };
  return test_add_suite("pace_eligibility", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
