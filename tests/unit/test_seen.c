/* Tests of seen_set (server/seen.h), the coordinator's clients by id: every
 * id of a large fleet found again after the array and its hash index grew,
 * sequential, scattered, negative and extreme ids alike; the active count
 * against a brute-force count over a scripted run of check-ins; and what a
 * new client starts with and what free leaves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "seen.h"

#define N_SEQ 100000
#define N_RANDOM 100000

/* splitmix64: a fixed-seed stream, so failures reproduce. */
static uint64_t next_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Every id in ids[0..n) is in s at the index of its first sight, with the
 * fields a new client starts with, and get returns that same entry. */
static void assert_all_found(seen_set *s, const int64_t *ids, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    seen_client *c = seen_set_find(s, ids[i]);
    if (c != &s->items[i] || c->id != ids[i] || c->part_round != -1 ||
        c->checked_in_at != 0 || c->listed)
      bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  size_t n_before = s->n;
  for (size_t i = 0; i < n; i += 97)
    CU_ASSERT_PTR_EQUAL(seen_set_get(s, ids[i]), &s->items[i]);
  CU_ASSERT_EQUAL(s->n, n_before); /* a known id adds nothing */
}

static void test_sequential_ids(void) {
  seen_set s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_PTR_NULL(seen_set_find(&s, 1)); /* empty: no index yet */
  int64_t *ids = malloc(N_SEQ * sizeof *ids);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
  for (size_t i = 0; i < N_SEQ; i++) {
    ids[i] = (int64_t)i + 1;
    seen_client *c = seen_set_get(&s, ids[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    if (c->id != ids[i] || s.n != i + 1)
      CU_FAIL("seen_set_get did not add the new id");
  }
  CU_ASSERT_EQUAL(s.n, N_SEQ);
  /* The index stays at most half full. */
  CU_ASSERT(2 * s.n <= s.n_slots);
  assert_all_found(&s, ids, N_SEQ);
  /* Ids never added are not found. */
  size_t found = 0;
  for (int64_t id = N_SEQ + 1; id <= N_SEQ + 10000; id++)
    found += seen_set_find(&s, id) != NULL;
  for (int64_t id = -10000; id <= 0; id++)
    found += seen_set_find(&s, id) != NULL;
  CU_ASSERT_EQUAL(found, 0);
  seen_set_free(&s);
  free(ids);
}

static void test_random_and_extreme_ids(void) {
  static const int64_t extremes[] = {INT64_MIN, INT64_MIN + 1, -1,   0, 1,
                                     INT64_MAX, INT64_MAX - 1, -4096};
  const size_t n_ext = sizeof extremes / sizeof extremes[0];
  seen_set s;
  memset(&s, 0, sizeof s);
  int64_t *ids = malloc((N_RANDOM + n_ext) * sizeof *ids);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
  size_t n = 0;
  for (size_t i = 0; i < n_ext; i++) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen_set_get(&s, extremes[i]));
    ids[n++] = extremes[i];
  }
  uint64_t rng = 42;
  while (n < N_RANDOM + n_ext) {
    /* Half of them negative; ids that share their low bits, which a weak
     * hash would pile into one slot, every 8th. */
    int64_t id = (int64_t)next_u64(&rng);
    if (n % 8 == 0)
      id = (int64_t)((uint64_t)id << 40);
    if (seen_set_find(&s, id))
      continue; /* a repeat: get must not add it twice (checked below) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen_set_get(&s, id));
    ids[n++] = id;
  }
  CU_ASSERT_EQUAL(s.n, n);
  assert_all_found(&s, ids, n);
  /* Other random ids are not found. */
  size_t found = 0;
  uint64_t other = 7;
  for (size_t i = 0; i < 10000; i++) {
    int64_t id = (int64_t)next_u64(&other);
    seen_client *c = seen_set_find(&s, id);
    found += c != NULL && c->id != id; /* a hit must at least be that id */
  }
  CU_ASSERT_EQUAL(found, 0);
  seen_set_free(&s);
  free(ids);
}

/* Checked-in state survives growth: entries that were listed before the
 * array moved keep their times and their place in check-in order. */
static void test_list_survives_growth(void) {
  seen_set s;
  memset(&s, 0, sizeof s);
  for (int64_t id = 0; id < 10; id++) {
    seen_client *c = seen_set_get(&s, -id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    seen_set_checked_in(&s, c, 1.0 + (double)id);
  }
  for (int64_t id = 1000; id < 50000; id++)
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen_set_get(&s, id));
  for (int64_t id = 0; id < 10; id++) {
    seen_client *c = seen_set_find(&s, -id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->id, -id);
    CU_ASSERT_EQUAL(c->checked_in_at, 1.0 + (double)id);
    CU_ASSERT_EQUAL(c->listed, 1);
  }
  /* Window 4.5 at time 10: check-ins at 6..10 (ids 5..9) count. */
  CU_ASSERT_EQUAL(seen_set_active(&s, 10.0, 4.5), 5);
  CU_ASSERT_EQUAL(seen_set_find(&s, -4)->listed, 0);
  CU_ASSERT_EQUAL(seen_set_find(&s, -5)->listed, 1);
  seen_set_free(&s);
}

/* Clients that checked in within window of now, counted the slow way. */
static size_t brute_active(const seen_set *s, double now, double window) {
  size_t n = 0;
  for (size_t i = 0; i < s->n; i++)
    if (s->items[i].checked_in_at != 0 &&
        now - s->items[i].checked_in_at <= window)
      n++;
  return n;
}

/* A scripted run: time moves forward in quarter seconds (exact in double,
 * so the window's edge is exact too), clients check in again and again,
 * new ones appear (the array grows under the list), some are seen but never
 * check in, and pauses longer than the window empty the count before
 * clients come back. After each step the O(1) count equals the scan. */
static void test_active_matches_brute_force(void) {
  const double window = 100.0;
  seen_set s;
  memset(&s, 0, sizeof s);
  uint64_t rng = 2026;
  double now = 1.0;
  size_t mismatches = 0, max_active = 0, steps = 20000;
  for (size_t step = 0; step < steps; step++) {
    uint64_t r = next_u64(&rng);
    if (r % 500 == 0)
      now += window + 1 + (double)(r % 7); /* a pause: everyone falls out */
    else
      now += 0.25 * (double)(r % 3); /* 0, 0.25 or 0.5 s */
    /* Ids from a pool that grows with the run, some negative. */
    size_t pool = 20 + step / 20;
    int64_t id = (int64_t)(next_u64(&rng) % pool) - 10;
    seen_client *c = seen_set_get(&s, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    if (r % 11 != 0) /* sometimes only seen, not checked in */
      seen_set_checked_in(&s, c, now);
    if (r % 13 == 0) { /* some steps ask twice at the same time */
      size_t again = seen_set_active(&s, now, window);
      mismatches += again != brute_active(&s, now, window);
    }
    size_t got = seen_set_active(&s, now, window);
    size_t want = brute_active(&s, now, window);
    mismatches += got != want;
    if (got > max_active)
      max_active = got;
  }
  CU_ASSERT_EQUAL(mismatches, 0);
  /* The script exercised what it meant to: many active at once, and many
   * clients in all. */
  CU_ASSERT(max_active > 100);
  CU_ASSERT(s.n > 500);
  /* A long pause with no check-ins: nobody is active. */
  now += window + 0.5;
  CU_ASSERT_EQUAL(seen_set_active(&s, now, window), 0);
  CU_ASSERT_EQUAL(s.n_listed, 0);
  CU_ASSERT_EQUAL(s.head, 0);
  CU_ASSERT_EQUAL(s.tail, 0);
  seen_set_free(&s);
}

/* A client that checks in again moves to the back: it is counted while the
 * others around its first check-in fall out, and counted again after it
 * fell out itself and came back. */
static void test_checkin_again_moves_to_back(void) {
  seen_set s;
  memset(&s, 0, sizeof s);
  seen_client *c;
  for (int64_t id = 1; id <= 3; id++) {
    c = seen_set_get(&s, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    seen_set_checked_in(&s, c, (double)id); /* 1 at t=1, 2 at 2, 3 at 3 */
  }
  CU_ASSERT_EQUAL(seen_set_active(&s, 3.0, 5.0), 3);
  /* Client 1, the oldest, checks in again at 5: now the newest. */
  seen_set_checked_in(&s, seen_set_find(&s, 1), 5.0);
  CU_ASSERT_EQUAL(s.n_listed, 3); /* moved, not listed twice */
  CU_ASSERT_EQUAL(s.items[s.tail - 1].id, 1);
  CU_ASSERT_EQUAL(s.items[s.head - 1].id, 2);
  /* At 7.5 with a window of 5: 2 (t=2) is out, 3 (t=3) and 1 (t=5) in. */
  CU_ASSERT_EQUAL(seen_set_active(&s, 7.5, 5.0), 2);
  CU_ASSERT_EQUAL(seen_set_find(&s, 2)->listed, 0);
  CU_ASSERT_EQUAL(seen_set_find(&s, 1)->listed, 1);
  /* The edge: exactly window_s ago still counts. */
  CU_ASSERT_EQUAL(seen_set_active(&s, 8.0, 5.0), 2);
  CU_ASSERT_EQUAL(seen_set_active(&s, 8.5, 5.0), 1);
  CU_ASSERT_EQUAL(seen_set_active(&s, 20.0, 5.0), 0);
  /* Back after falling out: counted again, once each. */
  seen_set_checked_in(&s, seen_set_find(&s, 3), 21.0);
  seen_set_checked_in(&s, seen_set_find(&s, 2), 22.0);
  seen_set_checked_in(&s, seen_set_find(&s, 3), 23.0);
  CU_ASSERT_EQUAL(seen_set_active(&s, 23.0, 5.0), 2);
  CU_ASSERT_EQUAL(s.items[s.head - 1].id, 2);
  CU_ASSERT_EQUAL(s.items[s.tail - 1].id, 3);
  /* A client seen but never checked in is not active. */
  CU_ASSERT_PTR_NOT_NULL_FATAL(seen_set_get(&s, 99));
  CU_ASSERT_EQUAL(seen_set_active(&s, 23.0, 5.0), 2);
  seen_set_free(&s);
}

static void test_new_client_fields_and_free(void) {
  seen_set s;
  memset(&s, 0, sizeof s);
  seen_set_free(&s); /* an empty set frees */
  seen_client *c = seen_set_get(&s, 77);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(c->id, 77);
  CU_ASSERT_EQUAL(c->part_round, -1); /* 0 is a round id */
  CU_ASSERT_EQUAL(c->sampled_round, 0);
  CU_ASSERT_EQUAL(c->sampled, 0);
  CU_ASSERT_EQUAL(c->told_done, 0);
  CU_ASSERT_EQUAL(c->touched_at, 0);
  CU_ASSERT_EQUAL(c->checked_in_at, 0);
  CU_ASSERT_EQUAL(c->listed, 0);
  c->part_round = 5;
  seen_set_checked_in(&s, c, 3.0);
  for (int64_t id = 0; id < 100; id++) /* past the first growth */
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen_set_get(&s, id * 1000003));
  CU_ASSERT_EQUAL(seen_set_find(&s, 77)->part_round, 5);

  seen_set_free(&s);
  CU_ASSERT_PTR_NULL(s.items);
  CU_ASSERT_PTR_NULL(s.slots);
  CU_ASSERT_EQUAL(s.n, 0);
  CU_ASSERT_EQUAL(s.cap, 0);
  CU_ASSERT_EQUAL(s.n_slots, 0);
  CU_ASSERT_EQUAL(s.head, 0);
  CU_ASSERT_EQUAL(s.tail, 0);
  CU_ASSERT_EQUAL(s.n_listed, 0);
  CU_ASSERT_PTR_NULL(seen_set_find(&s, 77));
  CU_ASSERT_EQUAL(seen_set_active(&s, 4.0, 10.0), 0);
  /* Usable again after free, from scratch. */
  c = seen_set_get(&s, 77);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(c->part_round, -1);
  CU_ASSERT_EQUAL(s.n, 1);
  seen_set_free(&s);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"100,000 sequential ids found after growth, others not",
       test_sequential_ids},
      {"100,000 random, negative and extreme ids found after growth",
       test_random_and_extreme_ids},
      {"check-in order and times survive growth", test_list_survives_growth},
      {"active count equals a brute-force count over a scripted run",
       test_active_matches_brute_force},
      {"checking in again moves a client to the back, counted again",
       test_checkin_again_moves_to_back},
      {"new client starts with part_round -1; free resets the set",
       test_new_client_fields_and_free},
  };
  return test_add_suite("seen", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
