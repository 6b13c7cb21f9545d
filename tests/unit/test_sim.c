/* Tests of what cohort-sim adds: the clock source the round engine reads
 * (a deadline an hour away passes on the simulated clock in no real time),
 * the per-thread seeded stream of crypto_random, and the network and
 * device model (deterministic for a seed, presets, refused specs, dropout
 * rates, the round-trip formula). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "prg.h"
#include "round.h"
#include "round_fixture.h"
#include "sim_network.h"

/* ---- the clock source ---- */

static double fake_now;

static double fake_mono(void *ctx) {
  (void)ctx;
  return fake_now;
}

static double fake_wall(void *ctx) {
  (void)ctx;
  return 1767225600.0 + fake_now;
}

static const clock_source FAKE = {fake_mono, fake_wall, NULL};

/* The engine's upload deadline runs on the installed clock: an hour-long
 * deadline neither passes early nor needs an hour of real time. */
static void test_engine_deadline_on_clock_source(void) {
  fake_now = 1000;
  clock_set_source(&FAKE);
  CU_ASSERT_EQUAL(clock_mono_s(), 1000);
  fixture f;
  FX_INIT(f);
  f.cfg.round_timeout_s = 3600;
  f.cfg.rounds = 1;
  FX_START(f, 2);
  start_round(&f, 1);
  update *u = make_update(1);
  round_verdict v = send_all(&f, f.id[0], 1, u, 10);
  CU_ASSERT_EQUAL(v.code, 0);
  free(u);
  /* K = 2, one update in: the round waits for its deadline ... */
  fake_now += 3599;
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  int64_t round = 0;
  CU_ASSERT_EQUAL(round_current(f.e, &round), ROUND_TRAINING);
  CU_ASSERT_EQUAL(round, 1);
  /* ... which passes when the simulated clock does. */
  fake_now += 2;
  CU_ASSERT_EQUAL(round_tick(f.e), COHORT_OK);
  CU_ASSERT_EQUAL(round_current(f.e, &round), ROUND_IDLE);
  round_outcome o;
  round_last_outcome(f.e, &o);
  CU_ASSERT_EQUAL(o.round, 1);
  CU_ASSERT_EQUAL(o.committed, 1);
  CU_ASSERT_EQUAL(o.result.clients_selected, 2);
  CU_ASSERT_EQUAL(o.result.clients_aggregated, 1);
  CU_ASSERT_TRUE(isnan(o.epsilon));
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  fx_close(&f);
  clock_set_source(NULL);
  /* Back on the system clock. */
  CU_ASSERT_TRUE(clock_wall_s() > 1.7e9 && clock_wall_s() != fake_wall(NULL));
}

/* ---- crypto_random_simulate ---- */

static void *draw_on_thread(void *arg) {
  crypto_random(arg, 32);
  return NULL;
}

static void test_simulated_stream_repeats_on_its_thread_only(void) {
  uint8_t seed[32] = {7}, a[64], b[64], other[32], c[32], d[32];
  CU_ASSERT_EQUAL(crypto_random_simulate(seed), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(a, sizeof a), COHORT_OK);
  /* Another thread still draws from the CSPRNG. */
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, draw_on_thread, other), 0);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(crypto_random_simulate(seed), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(b, sizeof b), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(a, other, sizeof other), 0);
  /* prg_init_random takes its seed from the same stream. */
  prg g1, g2;
  CU_ASSERT_EQUAL(crypto_random_simulate(seed), COHORT_OK);
  CU_ASSERT_EQUAL(prg_init_random(&g1), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random_simulate(seed), COHORT_OK);
  CU_ASSERT_EQUAL(prg_init_random(&g2), COHORT_OK);
  CU_ASSERT_EQUAL(prg_u64(&g1), prg_u64(&g2));
  prg_free(&g1);
  prg_free(&g2);
  /* Ended: the CSPRNG again, two draws differ. */
  crypto_random_simulate_end();
  CU_ASSERT_EQUAL(crypto_random(c, sizeof c), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(d, sizeof d), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(c, d, sizeof c), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(c, a, sizeof c), 0);
}

/* ---- the network model ---- */

static void test_presets_parse(void) {
  const char *names[] = {"4g", "wifi", "datacenter"};
  double last_down = 0;
  for (size_t i = 0; i < 3; i++) {
    sim_net_spec s;
    char err[200] = "";
    CU_ASSERT_EQUAL(sim_net_parse(names[i], &s, err, sizeof err), COHORT_OK);
    CU_ASSERT_STRING_EQUAL(s.name, names[i]);
    CU_ASSERT_TRUE(s.down_mbps > last_down); /* 4g < wifi < datacenter */
    CU_ASSERT_TRUE(s.up_mbps > 0 && s.gflops > 0 && s.latency_ms > 0);
    CU_ASSERT_EQUAL(s.drop_download + s.drop_train + s.drop_upload, 0);
    last_down = s.down_mbps;
  }
  sim_net_spec s;
  char err[200];
  CU_ASSERT_EQUAL(sim_net_parse("4g,up=2.5,drop-upload=0.25,latency=0", &s, err,
                                sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(s.up_mbps, 2.5);
  CU_ASSERT_EQUAL(s.drop_upload, 0.25);
  CU_ASSERT_EQUAL(s.latency_ms, 0);
  CU_ASSERT_EQUAL(s.down_mbps, 20); /* the preset's */
}

static void test_bad_specs_refused_clearly(void) {
  const struct {
    const char *spec, *says;
  } bad[] = {
      {"5g", "unknown preset '5g'"},
      {"", "unknown preset ''"},
      {"wifi,speed=3", "unknown key 'speed'"},
      {"wifi,up", "'up' needs a value"},
      {"wifi,up=", "'up=' needs a value"},
      {"wifi,up=-1", "up=-1 is out of range"},
      {"wifi,up=0", "up=0 is out of range"},
      {"wifi,drop-train=1", "drop-train=1 is out of range"},
      {"wifi,down=fast", "down=fast is out of range"},
      {"wifi,latency=nan", "latency=nan is out of range"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sim_net_spec s;
    memset(&s, 0x5a, sizeof s);
    sim_net_spec before = s;
    char err[300] = "";
    CU_ASSERT_EQUAL(sim_net_parse(bad[i].spec, &s, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].says));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--network"));
    CU_ASSERT_EQUAL(memcmp(&s, &before, sizeof s), 0); /* untouched */
  }
}

static void test_devices_deterministic_for_a_seed(void) {
  sim_net_spec s;
  char err[200];
  CU_ASSERT_EQUAL_FATAL(sim_net_parse("4g", &s, err, sizeof err), COHORT_OK);
  sim_device a, b, c;
  sim_net_device(&s, 42, 7, &a);
  sim_net_device(&s, 42, 7, &b);
  sim_net_device(&s, 43, 7, &c);
  CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
  CU_ASSERT_NOT_EQUAL(a.down_Bps, c.down_Bps);
  /* Log-normal around the medians: the population's median downlink is
   * the preset's (20 Mbit/s = 2.5e6 B/s) within 10 %. */
  enum { N = 4001 };
  static double down[N];
  for (int i = 0; i < N; i++) {
    sim_device d;
    sim_net_device(&s, 1, i, &d);
    down[i] = d.down_Bps;
    CU_ASSERT_TRUE(d.down_Bps > 0 && d.up_Bps > 0 && d.flops > 0 &&
                   d.latency_s > 0);
  }
  int below = 0;
  for (int i = 0; i < N; i++)
    below += down[i] < 2.5e6;
  CU_ASSERT_TRUE(fabs(below / (double)N - 0.5) < 0.03);
}

static void test_dropout_rates_observed(void) {
  sim_net_spec s;
  char err[200];
  CU_ASSERT_EQUAL_FATAL(
      sim_net_parse("wifi,drop-download=0.1,drop-train=0.2,drop-upload=0.3", &s,
                    err, sizeof err),
      COHORT_OK);
  sim_device d;
  sim_net_device(&s, 5, 0, &d);
  enum { N = 20000 };
  int seen[4] = {0};
  for (int i = 0; i < N; i++) {
    sim_trip t;
    sim_net_trip(&s, &d, 5, 1 + i / 100, i % 100, 1e5, 1e9, 1e4, &t);
    seen[t.drop]++;
  }
  /* Phase by phase: 0.1; then 0.2 of the 0.9 left; then 0.3 of the rest. */
  double want[4] = {0.9 * 0.8 * 0.7, 0.1, 0.9 * 0.2, 0.9 * 0.8 * 0.3};
  for (int k = 0; k < 4; k++)
    CU_ASSERT_TRUE(fabs(seen[k] / (double)N - want[k]) < 0.015);
  /* The same (seed, round, client) drops the same way every time. */
  sim_trip t1, t2;
  sim_net_trip(&s, &d, 5, 3, 9, 1e5, 1e9, 1e4, &t1);
  sim_net_trip(&s, &d, 5, 3, 9, 1e5, 1e9, 1e4, &t2);
  CU_ASSERT_EQUAL(memcmp(&t1, &t2, sizeof t1), 0);
}

static void test_trip_formula(void) {
  sim_net_spec s;
  char err[200];
  CU_ASSERT_EQUAL_FATAL(sim_net_parse("wifi", &s, err, sizeof err), COHORT_OK);
  sim_device d = {
      .down_Bps = 1e6, .up_Bps = 2.5e5, .latency_s = 0.05, .flops = 2e9};
  sim_trip t;
  sim_net_trip(&s, &d, 1, 1, 1, 3e6, 4e9, 1e6, &t);
  CU_ASSERT_EQUAL(t.drop, SIM_DROP_NONE);
  /* 0.05 + 3 s down, + 2 s training, + 4 s up + 0.05. */
  CU_ASSERT_DOUBLE_EQUAL(t.downloaded_s, 3.05, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t.trained_s, 5.05, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t.arrived_s, 9.1, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(sim_net_exchange_s(&d, 2.5e5, 1e6), 2.1, 1e-12);
}

/* A stream saved, another used meanwhile, the first restored: it goes on
 * where it was, as if never interrupted. */
static void test_simulated_stream_saved_and_restored(void) {
  uint8_t seed[32] = {7}, other_seed[32] = {8}, whole[64], part[64], x[16];
  CU_ASSERT_EQUAL(crypto_random_simulate(seed), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(whole, sizeof whole), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random_simulate(seed), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(part, 32), COHORT_OK);
  crypto_simulated_stream *own = crypto_random_simulate_save();
  CU_ASSERT_PTR_NOT_NULL(own);
  CU_ASSERT_EQUAL(crypto_random_simulate(other_seed), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(x, sizeof x), COHORT_OK);
  crypto_random_simulate_restore(own);
  CU_ASSERT_EQUAL(crypto_random(part + 32, 32), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(whole, part, sizeof whole), 0);
  crypto_random_simulate_end();
  /* With no stream, save gives NULL and restore leaves the CSPRNG. */
  CU_ASSERT_PTR_NULL(crypto_random_simulate_save());
  crypto_random_simulate_restore(NULL);
  uint8_t c[32], d[32];
  CU_ASSERT_EQUAL(crypto_random(c, sizeof c), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(d, sizeof d), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(c, d, sizeof c), 0);
}

int cohort_register_suites(void) {
  static const test_case clock_tests[] = {
      {"engine deadline on the clock source",
       test_engine_deadline_on_clock_source},
  };
  static const test_case random_tests[] = {
      {"simulated stream repeats, on its thread only",
       test_simulated_stream_repeats_on_its_thread_only},
      {"simulated stream saved and restored",
       test_simulated_stream_saved_and_restored},
  };
  static const test_case net_tests[] = {
      {"presets parse, overrides apply", test_presets_parse},
      {"bad specs refused clearly", test_bad_specs_refused_clearly},
      {"devices deterministic for a seed",
       test_devices_deterministic_for_a_seed},
      {"dropout rates observed", test_dropout_rates_observed},
      {"trip formula", test_trip_formula},
  };
  int rc =
      test_add_suite("sim clock", suite_init, suite_cleanup, clock_tests, 1);
  if (!rc)
    rc = test_add_suite("sim random", NULL, NULL, random_tests,
                        sizeof random_tests / sizeof random_tests[0]);
  if (!rc)
    rc = test_add_suite("sim network", NULL, NULL, net_tests,
                        sizeof net_tests / sizeof net_tests[0]);
  return rc;
}
