/* The round engine's poisoning bounds (round_bound.c, docs/security.md
 * "Poisoning"), driven directly on a temporary store: an attacker's update
 * of |d| = 2^20 with 2^29 - 1 examples among three honest ones is cut to
 * the round's bounds, whatever the order of arrival and across a restart;
 * the same uploads without the bounds move the model by about 2^20 (what
 * the code before them committed). Also the Report checks: values out of
 * range and example counts beyond the declared one are refused, nothing
 * stored. */
#include <grpc/status.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "round_fixture.h"
#include "round_internal.h"

#define POISON_EXAMPLES ((UINT64_C(1) << 29) - 1)

/* Honest clients 0, 1, 2 move every parameter by 0.01, 0.02, 0.03 with 10,
 * 20 and 30 examples; client 3 by +2^20 with 2^29 - 1. */
static const uint64_t HONEST_EXAMPLES[3] = {10, 20, 30};

static update *uniform_update(float value) {
  update *u = malloc(sizeof *u);
  CU_ASSERT_PTR_NOT_NULL_FATAL(u);
  for (size_t i = 0; i < NP; i++)
    u->delta[i] = value;
  encode(u);
  return u;
}

/* A fixture of four clients with K = 4 and the default bounds on. */
static void open_bounded(fixture *f) {
  CU_ASSERT_EQUAL_FATAL(fx_init(f), 0);
  round_config d;
  round_config_init(&d);
  f->cfg.clients_per_round = 4;
  f->cfg.round_timeout_s = 30;
  f->cfg.max_update_norm = d.max_update_norm;
  f->cfg.bound_multiplier = d.bound_multiplier;
  f->cfg.max_update_examples = d.max_update_examples;
  CU_ASSERT_EQUAL_FATAL(fx_start(f, 4), 0);
}

/* Round 1 with the poisoned update first or last; restart: a coordinator
 * restart between the uploads and the commit. Leaves the new model in
 * model (NP floats). */
static void poisoned_round(fixture *f, int poison_first, int restart,
                           float *model) {
  update *honest[3] = {uniform_update(0.01f), uniform_update(0.02f),
                       uniform_update(0.03f)};
  update *poison = uniform_update(1048576.0f);
  start_round_n(f, 1, 4);
  if (poison_first) {
    round_verdict v = send_all(f, f->id[3], 1, poison, POISON_EXAMPLES);
    CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
    /* Capped at upload, and told so. */
    CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "weight capped at 1000"));
  }
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(
        send_all(f, f->id[i], 1, honest[i], HONEST_EXAMPLES[i]).code,
        GRPC_STATUS_OK);
  if (!poison_first)
    CU_ASSERT_EQUAL(send_all(f, f->id[3], 1, poison, POISON_EXAMPLES).code,
                    GRPC_STATUS_OK);
  /* What was stored is the capped weight. */
  CU_ASSERT_EQUAL(count(f, "SELECT MAX(examples) FROM participations"), 1000);
  if (restart)
    restart_engine(f);
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, 1, "COMMITTED");
  int64_t version = -1;
  CU_ASSERT_EQUAL(latest_model(f, model, &version, NULL), 0);
  CU_ASSERT_EQUAL(version, 1);
  for (int i = 0; i < 3; i++)
    free(honest[i]);
  free(poison);
}

static void test_poisoned_update_is_bounded(void) {
  float *before = malloc(NP * sizeof *before);
  float *last = malloc(NP * sizeof *last);
  float *first = malloc(NP * sizeof *first);
  float *resumed = malloc(NP * sizeof *resumed);
  CU_ASSERT_FATAL(before && last && first && resumed);
  fixture f;
  open_bounded(&f);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, before, NULL, NULL), 0);
  poisoned_round(&f, 0, 0, last);
  fx_close(&f);
  /* Norms h, 2h, 3h and 2^20 sqrt(NP): the bound is 2 x 2h, so the
   * poisoned update becomes 0.04 everywhere; weights 10, 20, 30 and 1000:
   * it weighs 2 x 20. The mean is (0.1 + 0.4 + 0.9 + 1.6) / 100 = 0.03. */
  int off = 0;
  for (size_t i = 0; i < NP; i++)
    off += fabsf(last[i] - before[i] - 0.03f) > 1e-6f;
  CU_ASSERT_EQUAL(off, 0);

  /* The same model, bit for bit, when the attacker comes first (it then
   * sets no bound for those after it) and across a restart. */
  open_bounded(&f);
  poisoned_round(&f, 1, 0, first);
  fx_close(&f);
  CU_ASSERT_TRUE(same_bits(first, last, NP));
  open_bounded(&f);
  poisoned_round(&f, 0, 1, resumed);
  fx_close(&f);
  CU_ASSERT_TRUE(same_bits(resumed, last, NP));
  free(before);
  free(last);
  free(first);
  free(resumed);
}

static void test_without_bounds_the_poison_wins(void) {
  float *before = malloc(NP * sizeof *before);
  float *after = malloc(NP * sizeof *after);
  CU_ASSERT_FATAL(before && after);
  fixture f;
  open_bounded(&f);
  fx_close(&f);
  /* The fixture's own configuration has the bounds off (and caps weights
   * only at the declared count): the attacker owns the mean. */
  CU_ASSERT_EQUAL_FATAL(fx_init(&f), 0);
  f.cfg.clients_per_round = 4;
  f.cfg.round_timeout_s = 30;
  CU_ASSERT_EQUAL_FATAL(fx_start(&f, 4), 0);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, before, NULL, NULL), 0);
  poisoned_round(&f, 0, 0, after);
  fx_close(&f);
  CU_ASSERT(after[0] - before[0] > 900000.0f);
  free(before);
  free(after);
}

static void test_configured_norm_bound(void) {
  float *before = malloc(NP * sizeof *before);
  float *after = malloc(NP * sizeof *after);
  CU_ASSERT_FATAL(before && after);
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f), 0);
  f.cfg.round_timeout_s = 30;
  /* Each update clipped to norm 0.005 sqrt(NP): 0.01 and 0.03 everywhere
   * both become 0.005, whatever their weights. */
  f.cfg.max_update_norm = 0.005 * sqrt((double)NP);
  CU_ASSERT_EQUAL_FATAL(fx_start(&f, 2), 0);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, before, NULL, NULL), 0);
  update *a = uniform_update(0.01f), *b = uniform_update(0.03f);
  start_round(&f, 1);
  CU_ASSERT_EQUAL(send_all(&f, f.id[0], 1, a, 10).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(send_all(&f, f.id[1], 1, b, 30).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL(latest_model(&f, after, NULL, NULL), 0);
  int off = 0;
  for (size_t i = 0; i < NP; i++)
    off += fabsf(after[i] - before[i] - 0.005f) > 1e-6f;
  CU_ASSERT_EQUAL(off, 0);
  fx_close(&f);
  free(a);
  free(b);
  free(before);
  free(after);
}

/* A report of one metric by client 0 in round 1. */
static round_verdict report1(fixture *f, const char *name, double value,
                             uint64_t examples) {
  const char *names[] = {name};
  const double values[] = {value};
  return round_report(f->e, f->id[0], 1, examples, 1, names, values);
}

static void test_reports_out_of_range_refused(void) {
  fixture f;
  CU_ASSERT_EQUAL_FATAL(fx_init(&f), 0);
  f.cfg.round_timeout_s = 30;
  CU_ASSERT_EQUAL_FATAL(fx_start(&f, 2), 0);
  start_round(&f, 1);
  static const struct {
    const char *name;
    double value;
    uint64_t examples;
    const char *named; /* in the detail */
  } bad[] = {
      {"global_accuracy", 1e6, 10, "global_accuracy"},
      {"global_accuracy", -0.1, 10, "global_accuracy"},
      {"top5_accuracy", 1.5, 10, "top5_accuracy"},
      {"global_loss", -1, 10, "global_loss"},
      /* Finite, but times the examples it overflowed fed_loss to +Inf. */
      {"global_loss", 1.7e308, 10, "at most 1e+12"},
      {"global_loss", 1.000001e12, 10, "global_loss"},
      {"perplexity", -1e13, 10, "perplexity"},
      {"global_accuracy", 0.5, FX_DECLARED + 1, "num_examples"},
      {"global_accuracy", 0.5, 1000000000, "num_examples"},
      {"eval_examples", 1e9, 0, "eval_examples"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    round_verdict v = report1(&f, bad[i].name, bad[i].value, bad[i].examples);
    CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, bad[i].named));
  }
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"), 0);
  /* The edges are fine. */
  CU_ASSERT_EQUAL(report1(&f, "global_accuracy", 1, FX_DECLARED).code,
                  GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(report1(&f, "global_loss", 0, FX_DECLARED).code,
                  GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM metrics"), 3);
  CU_ASSERT_EQUAL(report1(&f, "global_loss", 1e12, FX_DECLARED).code,
                  GRPC_STATUS_OK);
  fx_close(&f);
}

/* round_bound_norm sums in the order its comment documents (eight lanes by
 * i % 8, added pairwise), so its bits are the same at every alignment of
 * the floats and every length of the last block, and it stays within
 * rounding of the exact norm. */
static void test_norm_order_and_alignment(void) {
  enum { N = 1003 };
  static float data[N], buf[N + 8];
  uint64_t s = 0x452821e638d01377ULL;
  for (size_t i = 0; i < N; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    float u = (float)(s >> 40) / 16777216.0f - 0.5f;
    data[i] = ldexpf(u, 20 - (int)((s >> 8) % 60)); /* order matters */
  }
  const size_t lens[] = {1, 7, 8, 9, 15, 16, 17, 100, 1000, N};
  size_t wrong = 0;
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    const size_t n = lens[k];
    double lane[8] = {0};
    long double exact = 0;
    for (size_t i = 0; i < n; i++) {
      lane[i % 8] += (double)data[i] * (double)data[i];
      exact += (long double)data[i] * (long double)data[i];
    }
    const double want = sqrt(((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                             ((lane[4] + lane[5]) + (lane[6] + lane[7])));
    for (size_t off = 0; off < 8; off++) {
      memcpy(buf + off, data, n * sizeof *data);
      double got = round_bound_norm(buf + off, n);
      wrong += memcmp(&got, &want, sizeof got) != 0;
    }
    CU_ASSERT(fabs(want - (double)sqrtl(exact)) <= 1e-15 * want);
  }
  CU_ASSERT_EQUAL(wrong, 0);
}

/* round_bound_take_on(isa), the one pass the coordinator takes over a
 * plain fp32 upload, on every path this CPU runs: the first index it
 * returns and where it leaves the floats and the norm. */
static size_t take_on(nn_isa isa, float *dst, const uint8_t *src, size_t n,
                      float limit, double *norm) {
  size_t first = (size_t)-1;
  CU_ASSERT_EQUAL(round_bound_take_on(isa, dst, src, n, limit, norm, &first),
                  COHORT_OK);
  return first;
}

/* ... gives what the three passes it stands for give: the floats, the
 * index of the first one NaN or beyond the limit (wherever it sits in a
 * block of 64 or the tail), and round_bound_norm's bits. */
static void test_take_is_decode_check_and_norm(void) {
  enum { N = 1003 };
  static float data[N], got[N];
  static uint8_t wire[N * sizeof(float)];
  uint64_t s = 0x13198a2e03707344ULL;
  for (size_t i = 0; i < N; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    float u = (float)(s >> 40) / 16777216.0f - 0.5f;
    data[i] = ldexpf(u, 20 - (int)((s >> 8) % 40));
  }
  const float limit = aggregate_value_limit(AGG_MEAN);
  const size_t lens[] = {1, 7, 8, 63, 64, 65, 127, 128, 1000, N};
  int paths = 0;
  for (int isa = 0; isa < NN_ISA_COUNT; isa++) {
    if (!nn_isa_runs((nn_isa)isa)) {
      size_t first = 0;
      double norm = 0;
      CU_ASSERT_EQUAL(
          round_bound_take_on((nn_isa)isa, got, wire, N, limit, &norm, &first),
          COHORT_EINVAL);
      continue;
    }
    paths++;
    size_t wrong = 0;
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
      const size_t n = lens[k];
      memcpy(wire, data, n * sizeof *data);
      memset(got, 0, sizeof got);
      double norm = -1;
      wrong += take_on((nn_isa)isa, got, wire, n, limit, &norm) != n;
      wrong += memcmp(got, data, n * sizeof *data) != 0;
      double want = round_bound_norm(data, n);
      wrong += memcmp(&norm, &want, sizeof norm) != 0;
    }
    CU_ASSERT_EQUAL(wrong, 0);

    /* One bad value at each kind of place, then a second one after it. */
    const float bad[] = {NAN, INFINITY, -INFINITY, 1048577.0f, -2.0e6f};
    const size_t at[] = {0, 5, 63, 64, 500, 959, 960, 1001, N - 1};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
      for (size_t p = 0; p < sizeof at / sizeof at[0]; p++) {
        memcpy(wire, data, sizeof wire);
        memcpy(wire + at[p] * sizeof(float), &bad[b], sizeof(float));
        if (at[p] + 3 < N)
          memcpy(wire + (at[p] + 3) * sizeof(float), &bad[0], sizeof(float));
        double norm = 0;
        CU_ASSERT_EQUAL(take_on((nn_isa)isa, got, wire, N, limit, &norm),
                        at[p]);
      }
    /* The limit itself passes; the robust kinds' passes every finite
     * float. */
    memcpy(wire, data, sizeof wire);
    const float edge = -1048576.0f, big = 3.0e38f;
    memcpy(wire + 64 * sizeof(float), &edge, sizeof edge);
    memcpy(wire + (N - 1) * sizeof(float), &edge, sizeof edge);
    double norm = 0;
    CU_ASSERT_EQUAL(take_on((nn_isa)isa, got, wire, N, limit, &norm), N);
    memcpy(wire + 700 * sizeof(float), &big, sizeof big);
    CU_ASSERT_EQUAL(take_on((nn_isa)isa, got, wire, N,
                            aggregate_value_limit(AGG_MEDIAN), &norm),
                    N);
    CU_ASSERT_EQUAL(take_on((nn_isa)isa, got, wire, N, limit, &norm), 700);
  }
  CU_ASSERT(paths >= 2); /* scalar and the baseline run everywhere */
  /* The engine's path is one of them. */
  memcpy(wire, data, sizeof wire);
  double norm = 0, want = round_bound_norm(data, N);
  CU_ASSERT_EQUAL(round_bound_take(got, wire, N, limit, &norm), N);
  CU_ASSERT_EQUAL(memcmp(&norm, &want, sizeof norm), 0);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a poisoned update (|d| = 2^20, weight 2^29 - 1) among three honest "
       "ones is cut to the round's bounds, in any order, across a restart",
       test_poisoned_update_is_bounded},
      {"without the bounds the same poisoned update owns the model",
       test_without_bounds_the_poison_wins},
      {"--max-update-norm N clips every update to N",
       test_configured_norm_bound},
      {"reports out of range are refused, naming the field; nothing stored",
       test_reports_out_of_range_refused},
      {"update norm: eight lanes in a fixed order, same bits at every "
       "alignment",
       test_norm_order_and_alignment},
      {"a plain fp32 upload in one pass, on every instruction-set path: the "
       "same floats, the first bad value's index, the norm's bits",
       test_take_is_decode_check_and_norm},
  };
  return test_add_suite("round_bound", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
