/* The token-bucket table of the coordinator's rate limits (ratelimit.h):
 * a burst, then refusals that name the wait; refill at the rate; keys
 * apart; and a flood of new keys through a small fixed table neither
 * grows it nor frees a key in use from its limit. */
#include <CUnit/CUnit.h>
#include <stdio.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "ratelimit.h"

static ratelimit *make(double rate, double burst, size_t slots) {
  ratelimit_config c = {.rate = rate, .burst = burst, .slots = slots};
  ratelimit *r = NULL;
  CU_ASSERT_EQUAL_FATAL(ratelimit_new(&c, &r), COHORT_OK);
  return r;
}

static void test_burst_then_wait(void) {
  ratelimit *r = make(2, 5, 64); /* 2 a second, 5 at once */
  double t = 100;
  for (int i = 0; i < 5; i++)
    CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), 0);
  int64_t wait = ratelimit_take(r, "a", t);
  CU_ASSERT(wait >= 499 && wait <= 500);         /* one token at 2/s */
  CU_ASSERT_EQUAL(ratelimit_take(r, "b", t), 0); /* another key's bucket */
  CU_ASSERT_NOT_EQUAL(ratelimit_take(r, "a", t + 0.4), 0);
  CU_ASSERT_EQUAL(ratelimit_take(r, "a", t + 0.5), 0);
  /* Refill stops at the burst: after a long pause, 5 again, not more. */
  int allowed = 0;
  for (int i = 0; i < 20; i++)
    allowed += ratelimit_take(r, "a", t + 1000) == 0;
  CU_ASSERT_EQUAL(allowed, 5);
  CU_ASSERT_EQUAL(ratelimit_take(NULL, "a", t), 0); /* no limiter: allowed */
  ratelimit_free(r);
  ratelimit_free(NULL);
}

/* ratelimit_wait answers as ratelimit_take would and takes nothing: a
 * limit charged only by the calls that fail (service.c's refused
 * sessions). */
/* ratelimit_refund gives back a token taken, never beyond the burst, and
 * not for a key the table does not hold: a check-in that selects its
 * client (service.c) costs nothing, the others what they did. */
static void test_refund_gives_back_one(void) {
  ratelimit *r = make(1, 2, 64);
  double t = 100;
  for (int i = 0; i < 10; i++) { /* taken and given back: never limited */
    CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), 0);
    ratelimit_refund(r, "a", t);
  }
  ratelimit_refund(r, "a", t); /* a full bucket stays at its burst */
  CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), 0);
  CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), 0);
  CU_ASSERT_NOT_EQUAL(ratelimit_take(r, "a", t), 0);
  ratelimit_refund(r, "a", t); /* one back: one more call */
  CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), 0);
  CU_ASSERT_NOT_EQUAL(ratelimit_take(r, "a", t), 0);
  ratelimit_refund(r, "unknown", t); /* not stored: a full bucket anyway */
  CU_ASSERT_EQUAL(ratelimit_wait(r, "unknown", t), 0);
  ratelimit_refund(NULL, "a", t);
  ratelimit_free(r);
}

static void test_wait_takes_nothing(void) {
  ratelimit *r = make(2, 3, 64);
  double t = 100;
  for (int i = 0; i < 10; i++)
    CU_ASSERT_EQUAL(ratelimit_wait(r, "a", t), 0); /* unknown: full */
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(ratelimit_wait(r, "a", t), 0);
    CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), 0);
  }
  int64_t wait = ratelimit_wait(r, "a", t);
  CU_ASSERT(wait >= 499 && wait <= 500);
  CU_ASSERT_EQUAL(ratelimit_take(r, "a", t), wait);
  CU_ASSERT_EQUAL(ratelimit_wait(r, "a", t + 0.5), 0); /* refilled */
  CU_ASSERT_EQUAL(ratelimit_wait(r, "a", t + 0.5), 0); /* still there */
  CU_ASSERT_EQUAL(ratelimit_take(r, "a", t + 0.5), 0);
  CU_ASSERT_NOT_EQUAL(ratelimit_wait(r, "a", t + 0.5), 0);
  CU_ASSERT_EQUAL(ratelimit_wait(NULL, "a", t), 0);
  ratelimit_free(r);
}

static void test_bad_config(void) {
  ratelimit *r = NULL;
  ratelimit_config zero_rate = {.rate = 0, .burst = 5, .slots = 64};
  ratelimit_config no_burst = {.rate = 1, .burst = 0.5, .slots = 64};
  ratelimit_config no_slots = {.rate = 1, .burst = 1, .slots = 0};
  CU_ASSERT_EQUAL(ratelimit_new(&zero_rate, &r), COHORT_EINVAL);
  CU_ASSERT_EQUAL(ratelimit_new(&no_burst, &r), COHORT_EINVAL);
  CU_ASSERT_EQUAL(ratelimit_new(&no_slots, &r), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(r);
}

static void test_flood_of_keys(void) {
  /* 64 slots, 100,000 addresses: the attacker interleaves its own calls
   * with the flood and stays limited all along (its bucket, in use, is
   * never the one evicted), while each new address gets its burst. */
  ratelimit *r = make(1, 3, 64);
  double t = 0;
  int attacker_allowed = 0, fresh_refused = 0;
  char key[32];
  for (int i = 0; i < 100000; i++) {
    t += 1e-4; /* 10 s in all: the attacker's 1/s earns about 10 more */
    snprintf(key, sizeof key, "ipv4:10.%d.%d.%d", i >> 16, (i >> 8) & 255,
             i & 255);
    fresh_refused += ratelimit_take(r, key, t) != 0;
    if (i % 7 == 0)
      attacker_allowed += ratelimit_take(r, "ipv4:192.0.2.1", t) == 0;
  }
  CU_ASSERT_EQUAL(fresh_refused, 0);
  CU_ASSERT(attacker_allowed >= 3 && attacker_allowed <= 3 + 11);
  ratelimit_free(r);
}

static void test_long_keys(void) {
  ratelimit *r = make(1, 1, 64);
  char a[200], b[200];
  memset(a, 'x', sizeof a - 1), a[sizeof a - 1] = '\0';
  memcpy(b, a, sizeof b);
  b[sizeof b - 2] = 'y'; /* differs past the cut: the same bucket */
  CU_ASSERT_EQUAL(ratelimit_take(r, a, 1), 0);
  CU_ASSERT_NOT_EQUAL(ratelimit_take(r, b, 1), 0);
  ratelimit_free(r);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a burst, then refusals naming the wait, refilled at the rate",
       test_burst_then_wait},
      {"a rate, burst or size that cannot work is refused", test_bad_config},
      {"a wait is told without taking a token", test_wait_takes_nothing},
      {"a refund gives back one token, never beyond the burst",
       test_refund_gives_back_one},
      {"100,000 addresses through 64 slots: each gets its burst, a key in "
       "use stays limited",
       test_flood_of_keys},
      {"keys past the length cap share a bucket, and do not overflow",
       test_long_keys},
  };
  return test_add_suite("ratelimit", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
