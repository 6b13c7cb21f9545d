/* Tests of secure aggregation's state machines (common/secagg/secagg.h): an
 * in-process driver runs n clients and a coordinator through the four
 * phases with clients dropping out at chosen phases, and checks the sum
 * bit for bit against the plain ring sum of the survivors' inputs (or a
 * clean abort where a set-arithmetic model of the protocol predicts one);
 * every out-of-order or malformed message is refused without changing
 * either side; the coordinator never collects both kinds of share of one
 * client; masked uploads look uniform; a tampered share is refused. Fixed
 * seeds throughout, so a failure reproduces. COHORT_SECAGG_TIMING=1 times
 * n = 100, dim = 100k with 30% dropping after SHARE (=N: N clients;
 * COHORT_SECAGG_DROP=0..3: the phase they drop in). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "mask.h"
#include "pb.h"
#include "prg.h"
#include "secagg.h"
#include "secagg_pack.h"

#define NEVER SECAGG_DONE /* the drop phase of a client that stays */
#define ERRLEN 256

/* ---- the in-process driver ---- */

typedef struct sim {
  secagg_params p;
  secagg_server *srv;
  secagg_client **cl;
  prg *rng;              /* n: each client's own */
  uint64_t *input;       /* n * dim */
  secagg_phase *drop;    /* n: the first phase it sends nothing in */
  secagg_phase *refused; /* n: the phase it refused its message in */
  /* With keep set: each message a client sent, by phase and client. */
  int keep;
  uint8_t **sent[SECAGG_DONE];
  size_t *sent_len[SECAGG_DONE];
  double server_s, client_s; /* thread CPU seconds spent in each side */
  char err[ERRLEN];
} sim;

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t ring_mask(unsigned bits) { return (UINT64_C(1) << bits) - 1; }

static void sim_free(sim *s) {
  if (s->cl)
    for (uint32_t i = 0; i < s->p.n; i++) {
      secagg_client_free(s->cl[i]);
      prg_free(&s->rng[i]);
    }
  for (int ph = 0; ph < SECAGG_DONE; ph++) {
    if (s->sent[ph])
      for (uint32_t i = 0; i < s->p.n; i++)
        free(s->sent[ph][i]);
    free(s->sent[ph]);
    free(s->sent_len[ph]);
  }
  secagg_server_free(s->srv);
  free(s->cl);
  free(s->rng);
  free(s->input);
  free(s->drop);
  free(s->refused);
  memset(s, 0, sizeof *s);
}

/* Client i's rng is seeded with seed * 1000003 + i, the inputs with seed;
 * inputs are uniform below 2^B. */
static int sim_init(sim *s, const secagg_params *p, uint64_t seed, int keep) {
  memset(s, 0, sizeof *s);
  s->p = *p;
  s->keep = keep;
  uint32_t n = p->n;
  s->cl = calloc(n, sizeof *s->cl);
  s->rng = calloc(n, sizeof *s->rng);
  s->input = malloc(n * p->dim * sizeof *s->input);
  s->drop = malloc(n * sizeof *s->drop);
  s->refused = malloc(n * sizeof *s->refused);
  for (int ph = 0; ph < SECAGG_DONE; ph++) {
    s->sent[ph] = calloc(n, sizeof *s->sent[ph]);
    s->sent_len[ph] = calloc(n, sizeof *s->sent_len[ph]);
  }
  if (!s->cl || !s->rng || !s->input || !s->drop || !s->refused)
    return COHORT_ENOMEM;
  prg g;
  if (prg_init_u64(&g, seed))
    return COHORT_EIO;
  for (size_t e = 0; e < n * p->dim; e++)
    s->input[e] = prg_u64(&g) & ring_mask(p->ring_bits);
  prg_free(&g);
  int rc = secagg_server_new(p, &s->srv, s->err, sizeof s->err);
  for (uint32_t i = 0; i < n && !rc; i++) {
    s->drop[i] = NEVER;
    s->refused[i] = NEVER;
    rc = prg_init_u64(&s->rng[i], seed * 1000003u + i);
    if (!rc)
      rc =
          secagg_client_new(p, i, &s->rng[i], &s->cl[i], s->err, sizeof s->err);
  }
  return rc;
}

/* Every client that sent in the previous phase (and neither drops now nor
 * refused before) gets the coordinator's message and sends its own. A
 * client that refuses (EINVAL: too few peers, shares or survivors in its
 * neighbourhood) is recorded and sends nothing. Returns the first other
 * failure. */
static int sim_send(sim *s, secagg_phase ph) {
  for (uint32_t i = 0; i < s->p.n; i++) {
    if (s->drop[i] <= ph || s->refused[i] != NEVER)
      continue;
    if (ph > SECAGG_ADVERTISE &&
        !secagg_server_heard(s->srv, (secagg_phase)(ph - 1), i))
      continue;
    uint8_t *in = NULL, *out = NULL;
    size_t in_len = 0, out_len = 0;
    int rc;
    double t0 = cpu_s();
    if (ph > SECAGG_ADVERTISE) {
      rc =
          secagg_server_message(s->srv, i, &in, &in_len, s->err, sizeof s->err);
      if (rc)
        return rc;
    }
    double t1 = cpu_s();
    secagg_client *c = s->cl[i];
    switch (ph) {
    case SECAGG_ADVERTISE:
      rc = secagg_client_advertise(c, &out, &out_len, s->err, sizeof s->err);
      break;
    case SECAGG_SHARE:
      rc = secagg_client_share(c, in, in_len, &out, &out_len, s->err,
                               sizeof s->err);
      break;
    case SECAGG_MASKED:
      rc = secagg_client_mask(c, in, in_len, s->input + i * s->p.dim, &out,
                              &out_len, s->err, sizeof s->err);
      break;
    default:
      rc = secagg_client_unmask(c, in, in_len, &out, &out_len, s->err,
                                sizeof s->err);
      break;
    }
    double t2 = cpu_s();
    free(in);
    if (rc == COHORT_EINVAL) {
      s->refused[i] = ph;
      continue;
    }
    if (rc)
      return rc;
    rc = secagg_server_receive(s->srv, i, ph, out, out_len, s->err,
                               sizeof s->err);
    double t3 = cpu_s();
    s->server_s += (t1 - t0) + (t3 - t2);
    s->client_s += t2 - t1;
    if (s->keep) {
      s->sent[ph][i] = out;
      s->sent_len[ph][i] = out_len;
    } else {
      free(out);
    }
    if (rc)
      return rc;
  }
  return COHORT_OK;
}

static int sim_close(sim *s) {
  double t0 = cpu_s();
  int rc = secagg_server_close_phase(s->srv, s->err, sizeof s->err);
  s->server_s += cpu_s() - t0;
  return rc;
}

/* All four phases; the first failing close's status (EABORTED) or a
 * driver failure. */
static int sim_run(sim *s) {
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_UNMASK; ph++) {
    int rc = sim_send(s, (secagg_phase)ph);
    if (rc)
      return rc;
    rc = sim_close(s);
    if (rc)
      return rc;
  }
  return COHORT_OK;
}

/* The plain ring sum of the inputs of the clients heard in MASKED. */
static void plain_sum(const sim *s, uint64_t *want) {
  memset(want, 0, s->p.dim * sizeof *want);
  for (uint32_t i = 0; i < s->p.n; i++)
    if (secagg_server_heard(s->srv, SECAGG_MASKED, i))
      ring_add(want, s->input + i * s->p.dim, s->p.dim, s->p.ring_bits);
}

/* Whether the coordinator's sum is the plain sum of the survivors. */
static int sum_matches(const sim *s) {
  size_t dim = s->p.dim;
  uint64_t *got = calloc(dim, sizeof *got), *want = calloc(dim, sizeof *want);
  uint32_t count = 0;
  int ok = got && want && secagg_server_sum(s->srv, got, &count) == COHORT_OK &&
           count == secagg_server_count(s->srv, SECAGG_MASKED);
  if (ok) {
    plain_sum(s, want);
    ok = memcmp(got, want, dim * sizeof *got) == 0;
  }
  free(got);
  free(want);
  return ok;
}

/* Whether, over all the SecAggUnmask messages the coordinator took, no
 * client's shares were revealed of both kinds, and each kind is the right
 * one: seed shares of clients heard in MASKED, key shares of the others. */
static int one_kind_per_owner(const sim *s) {
  const uint32_t n = s->p.n;
  uint8_t *kinds = calloc(n, 1); /* bit 0: seed share seen, bit 1: key */
  int ok = kinds != NULL;
  for (uint32_t i = 0; i < n && ok; i++) {
    if (!s->sent[SECAGG_UNMASK][i])
      continue;
    Cohort__V1__SecAggUnmask *m = cohort__v1__sec_agg_unmask__unpack(
        NULL, s->sent_len[SECAGG_UNMASK][i], s->sent[SECAGG_UNMASK][i]);
    ok = m != NULL;
    for (size_t r = 0; ok && r < m->n_reveals; r++) {
      uint32_t o = m->reveals[r]->owner;
      ok = o < n && m->reveals[r]->mask_key ==
                        !secagg_server_heard(s->srv, SECAGG_MASKED, o);
      if (ok)
        kinds[o] |= m->reveals[r]->mask_key ? 2 : 1;
    }
    if (m)
      cohort__v1__sec_agg_unmask__free_unpacked(m, NULL);
  }
  for (uint32_t o = 0; o < n && ok; o++)
    ok = kinds[o] != 3;
  free(kinds);
  return ok;
}

/* ---- a model of the outcome, by set arithmetic ---- */

enum { OUT_DONE, OUT_PHASE_BELOW_T, OUT_SECRET_BELOW_T };

static uint32_t count_in(const secagg_graph *g, uint32_t k, uint32_t i,
                         int with_self, const uint8_t *set) {
  const uint32_t *nb = secagg_graph_neighbours(g, i);
  uint32_t c = with_self && set[i];
  for (uint32_t j = 0; j < k; j++)
    c += set[nb[j]];
  return c;
}

/* What the protocol must do when client i sends nothing from phase
 * drop[i] on: which clients refuse a message (refused[i], the phase) and
 * how the round ends. */
static int model(const secagg_params *p, const secagg_phase *drop,
                 secagg_phase *refused) {
  const uint32_t n = p->n, k = p->degree, t = p->threshold;
  secagg_graph *g = NULL;
  if (secagg_graph_new(p, &g))
    return -1;
  uint8_t *in[SECAGG_DONE];
  for (int ph = 0; ph < SECAGG_DONE; ph++)
    in[ph] = calloc(n, 1);
  int out = OUT_DONE;
  for (uint32_t i = 0; i < n; i++)
    refused[i] = NEVER;
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_UNMASK && out == OUT_DONE;
       ph++) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
      if ((int)drop[i] <= ph || (ph > 0 && !in[ph - 1][i]))
        continue;
      /* The client's own checks on the coordinator's message. */
      int ok = ph == SECAGG_ADVERTISE ||
               (ph == SECAGG_SHARE && count_in(g, k, i, 1, in[0]) >= t) ||
               (ph == SECAGG_MASKED && count_in(g, k, i, 0, in[1]) + 1 >= t) ||
               (ph == SECAGG_UNMASK && count_in(g, k, i, 1, in[2]) >= t);
      if (!ok) {
        refused[i] = (secagg_phase)ph;
        continue;
      }
      in[ph][i] = 1;
      c++;
    }
    if (c < t)
      out = OUT_PHASE_BELOW_T;
  }
  for (uint32_t i = 0; i < n && out == OUT_DONE; i++) {
    if (in[SECAGG_MASKED][i]) {
      if (count_in(g, k, i, 1, in[SECAGG_UNMASK]) < t)
        out = OUT_SECRET_BELOW_T;
    } else if (in[SECAGG_SHARE][i] &&
               count_in(g, k, i, 0, in[SECAGG_MASKED]) > 0) {
      if (count_in(g, k, i, 0, in[SECAGG_UNMASK]) < t)
        out = OUT_SECRET_BELOW_T;
    }
  }
  for (int ph = 0; ph < SECAGG_DONE; ph++)
    free(in[ph]);
  secagg_graph_free(g);
  return out;
}

/* ---- 1. the property test ---- */

static void random_params(prg *g, secagg_params *p) {
  memset(p, 0, sizeof *p);
  p->n = 3 + (uint32_t)prg_below(g, 28); /* 3 .. 30 */
  if (prg_below(g, 5) < 2) {
    p->degree = p->n - 1;
  } else {
    do
      p->degree = 1 + (uint32_t)prg_below(g, p->n - 1);
    while (p->n % 2 && p->degree % 2);
  }
  p->threshold = 1 + (uint32_t)prg_below(g, p->degree + 1);
  static const unsigned widths[] = {8, 20, 32, 62};
  p->ring_bits = widths[prg_below(g, 4)];
  p->dim = 1 + (size_t)prg_below(g, 50);
  prg_bytes(g, p->round_seed, sizeof p->round_seed);
}

static void test_secagg_property(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 20240601), COHORT_OK);
  int outcomes[3] = {0}, refusals = 0, full = 0, plus = 0;
  for (int cfg = 0; cfg < 200; cfg++) {
    secagg_params p;
    random_params(&g, &p);
    char err[ERRLEN] = "";
    CU_ASSERT_EQUAL_FATAL(secagg_params_check(&p, err, sizeof err), COHORT_OK);
    sim s;
    int rc = sim_init(&s, &p, 5000 + (uint64_t)cfg, 1);
    CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
    /* Up to n - t dropouts mostly; one configuration in five may lose
     * more, to reach the aborts. */
    uint32_t most = p.n - p.threshold;
    if (prg_below(&g, 5) == 0)
      most = p.n;
    uint32_t drops = (uint32_t)prg_below(&g, (uint64_t)most + 1);
    for (uint32_t d = 0; d < drops; d++) {
      uint32_t i = (uint32_t)prg_below(&g, p.n);
      s.drop[i] = (secagg_phase)prg_below(&g, 4);
    }
    secagg_phase *want_refused = malloc(p.n * sizeof *want_refused);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want_refused);
    int want = model(&p, s.drop, want_refused);
    rc = sim_run(&s);
    int got;
    if (rc == COHORT_OK) {
      got = OUT_DONE;
      CU_ASSERT_EQUAL(secagg_server_phase(s.srv), SECAGG_DONE);
      int ok = sum_matches(&s);
      CU_ASSERT(ok);
      if (!ok)
        printf("\nconfig %d: the sum is wrong\n", cfg);
    } else {
      CU_ASSERT_EQUAL(rc, COHORT_EABORTED);
      CU_ASSERT_EQUAL(secagg_server_phase(s.srv), SECAGG_ABORTED);
      const char *why = secagg_server_abort_reason(s.srv);
      got = strstr(why, "threshold") ? OUT_PHASE_BELOW_T : OUT_SECRET_BELOW_T;
      CU_ASSERT(strlen(why) > 0);
      uint64_t *sum = calloc(p.dim, sizeof *sum);
      CU_ASSERT_EQUAL(secagg_server_sum(s.srv, sum, NULL), COHORT_EABORTED);
      free(sum);
    }
    CU_ASSERT_EQUAL(got, want);
    CU_ASSERT_EQUAL(memcmp(s.refused, want_refused, p.n * sizeof *want_refused),
                    0);
    if (got != want)
      printf("\nconfig %d: n %u k %u t %u B %u dim %zu: outcome %d, the model "
             "says %d (%s)\n",
             cfg, p.n, p.degree, p.threshold, p.ring_bits, p.dim, got, want,
             s.err);
    CU_ASSERT(one_kind_per_owner(&s));
    for (uint32_t i = 0; i < p.n; i++)
      refusals += s.refused[i] != NEVER;
    outcomes[got]++;
    if (p.degree == p.n - 1)
      full++;
    else
      plus++;
    free(want_refused);
    sim_free(&s);
  }
  prg_free(&g);
  /* The configurations reach every outcome, on both kinds of graph. */
  CU_ASSERT(outcomes[OUT_DONE] >= 50);
  CU_ASSERT(outcomes[OUT_PHASE_BELOW_T] > 0);
  CU_ASSERT(outcomes[OUT_SECRET_BELOW_T] > 0);
  CU_ASSERT(refusals > 0);
  CU_ASSERT(full > 0 && plus > 0);
}

/* ---- message surgery ---- */

static void replace(uint8_t **buf, size_t *len, const ProtobufCMessage *m) {
  free(*buf);
  *buf = NULL;
  CU_ASSERT_EQUAL_FATAL(pb_pack(m, buf, len), COHORT_OK);
}

/* A fresh copy of bytes (the drivers' messages are freed separately). */
static uint8_t *dup_bytes(const uint8_t *b, size_t len) {
  uint8_t *d = malloc(len ? len : 1);
  if (d && len)
    memcpy(d, b, len);
  return d;
}

/* ---- 2. wrong phases and bad messages ---- */

/* Every client call that is not the client's current phase. */
static void client_refuses_others(secagg_client *c, const uint64_t *input) {
  static const uint8_t empty[1] = {0};
  uint8_t *out = NULL;
  size_t len = 0;
  char err[ERRLEN];
  secagg_phase ph = secagg_client_phase(c);
  if (ph != SECAGG_ADVERTISE)
    CU_ASSERT_EQUAL(secagg_client_advertise(c, &out, &len, err, sizeof err),
                    COHORT_ESTATE);
  if (ph != SECAGG_SHARE)
    CU_ASSERT_EQUAL(
        secagg_client_share(c, empty, 0, &out, &len, err, sizeof err),
        COHORT_ESTATE);
  if (ph != SECAGG_MASKED)
    CU_ASSERT_EQUAL(
        secagg_client_mask(c, empty, 0, input, &out, &len, err, sizeof err),
        COHORT_ESTATE);
  if (ph != SECAGG_UNMASK)
    CU_ASSERT_EQUAL(
        secagg_client_unmask(c, empty, 0, &out, &len, err, sizeof err),
        COHORT_ESTATE);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(c), ph);
}

/* The coordinator refuses messages of every other phase. */
static void server_refuses_other_phases(secagg_server *srv, uint32_t from) {
  static const uint8_t empty[1] = {0};
  char err[ERRLEN];
  secagg_phase ph = secagg_server_phase(srv);
  for (int q = SECAGG_ADVERTISE; q <= SECAGG_ABORTED; q++)
    if (q != (int)ph)
      CU_ASSERT_EQUAL(secagg_server_receive(srv, from, (secagg_phase)q, empty,
                                            0, err, sizeof err),
                      COHORT_ESTATE);
  CU_ASSERT_EQUAL(secagg_server_phase(srv), ph);
}

static void test_secagg_wrong_phase_and_bad_messages(void) {
  secagg_params p = {
      .n = 5, .threshold = 3, .degree = 4, .ring_bits = 20, .dim = 7};
  memset(p.round_seed, 0x5a, sizeof p.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 77, 1), COHORT_OK);
  s.drop[4] = SECAGG_ADVERTISE; /* client 4 never advertises */
  secagg_server *srv = s.srv;
  char err[ERRLEN];
  uint8_t *msg = NULL, *bad = NULL;
  size_t len = 0, bad_len = 0;
  uint64_t sum[7];

  /* Before anything: nothing but advertise and ADVERTISE messages. */
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  server_refuses_other_phases(srv, 0);
  CU_ASSERT_EQUAL(secagg_server_message(srv, 0, &msg, &len, err, sizeof err),
                  COHORT_ESTATE);
  CU_ASSERT_EQUAL(secagg_server_sum(srv, sum, NULL), COHORT_ESTATE);

  /* ADVERTISE. */
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_ADVERTISE), COHORT_OK);
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  const uint8_t *keys0 = s.sent[SECAGG_ADVERTISE][0];
  size_t keys0_len = s.sent_len[SECAGG_ADVERTISE][0];
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_ADVERTISE, keys0,
                                        keys0_len, err, sizeof err),
                  COHORT_ESTATE); /* a second message */
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_ADVERTISE, keys0,
                                        keys0_len, err, sizeof err),
                  COHORT_EINVAL); /* index 0 sent as 4 */
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_ADVERTISE, keys0,
                                        keys0_len - 5, err, sizeof err),
                  COHORT_EINVAL); /* truncated */
  bad = dup_bytes(keys0, keys0_len);
  memset(bad, 0xff, keys0_len); /* garbled */
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_ADVERTISE, bad,
                                        keys0_len, err, sizeof err),
                  COHORT_EINVAL);
  free(bad);
  /* A small-order key (the all-zero point) is refused. */
  Cohort__V1__SecAggKeys *km =
      cohort__v1__sec_agg_keys__unpack(NULL, keys0_len, keys0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(km);
  km->index = 4;
  memset(km->mask_public.data, 0, km->mask_public.len);
  bad = NULL;
  replace(&bad, &bad_len, &km->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_ADVERTISE, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  km->mask_public.len = 31;
  replace(&bad, &bad_len, &km->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_ADVERTISE, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  free(bad);
  cohort__v1__sec_agg_keys__free_unpacked(km, NULL);
  server_refuses_other_phases(srv, 1);
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_ADVERTISE), 4);
  CU_ASSERT_FALSE(secagg_server_heard(srv, SECAGG_ADVERTISE, 4));
  CU_ASSERT_EQUAL(secagg_server_message(srv, 0, &msg, &len, err, sizeof err),
                  COHORT_ESTATE); /* ADVERTISE is not closed */
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_phase(srv), SECAGG_SHARE);

  /* SHARE: the client's checks of SecAggPeers. */
  CU_ASSERT_EQUAL(secagg_server_message(srv, 4, &msg, &len, err, sizeof err),
                  COHORT_ESTATE); /* 4 did not advertise */
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(srv, 0, &msg, &len, err, sizeof err), COHORT_OK);
  uint8_t *out = NULL;
  size_t out_len = 0;
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], msg, len - 3, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  Cohort__V1__SecAggPeers *pm =
      cohort__v1__sec_agg_peers__unpack(NULL, len, msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pm);
  CU_ASSERT_EQUAL_FATAL(pm->n_peers, 4);
  CU_ASSERT_EQUAL_FATAL(pm->peers[0]->index, 0);
  bad = NULL;
  pm->peers[0]->mask_public.data[3] ^= 1; /* its own key changed */
  replace(&bad, &bad_len, &pm->base);
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], bad, bad_len, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  pm->peers[0]->mask_public.data[3] ^= 1;
  pm->peers[1]->index = 0; /* itself twice */
  replace(&bad, &bad_len, &pm->base);
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], bad, bad_len, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  pm->peers[1]->index = 2; /* a repeated peer */
  replace(&bad, &bad_len, &pm->base);
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], bad, bad_len, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  pm->peers[1]->index = 9; /* not a client of the round */
  replace(&bad, &bad_len, &pm->base);
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], bad, bad_len, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  pm->peers[1]->index = 1;
  pm->n_peers = 2; /* 2 < t */
  replace(&bad, &bad_len, &pm->base);
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], bad, bad_len, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  pm->n_peers = 4;
  cohort__v1__sec_agg_peers__free_unpacked(pm, NULL);
  free(bad);
  free(msg);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[0]), SECAGG_SHARE);

  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_SHARE), COHORT_OK);
  /* Bad SecAggShares: resend client 0's (now a duplicate), and as fresh
   * ones from a client not yet heard: hold client 3's back first. */
  const uint8_t *sh0 = s.sent[SECAGG_SHARE][0];
  size_t sh0_len = s.sent_len[SECAGG_SHARE][0];
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_SHARE, sh0, sh0_len, err,
                                        sizeof err),
                  COHORT_ESTATE);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_SHARE, sh0, sh0_len, err,
                                        sizeof err),
                  COHORT_ESTATE); /* not heard in ADVERTISE */
  server_refuses_other_phases(srv, 1);
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_SHARE), 4);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);

  /* A second round of the same clients and keys is not possible, so the
   * coordinator-side checks of SecAggShares use a fresh server fed the
   * same ADVERTISE messages. */
  {
    secagg_server *v = NULL;
    CU_ASSERT_EQUAL_FATAL(secagg_server_new(&p, &v, err, sizeof err),
                          COHORT_OK);
    for (uint32_t i = 0; i < 4; i++)
      CU_ASSERT_EQUAL(secagg_server_receive(
                          v, i, SECAGG_ADVERTISE, s.sent[SECAGG_ADVERTISE][i],
                          s.sent_len[SECAGG_ADVERTISE][i], err, sizeof err),
                      COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(secagg_server_close_phase(v, err, sizeof err),
                          COHORT_OK);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, sh0, sh0_len / 2,
                                          err, sizeof err),
                    COHORT_EINVAL); /* truncated */
    Cohort__V1__SecAggShares *sm =
        cohort__v1__sec_agg_shares__unpack(NULL, sh0_len, sh0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sm);
    CU_ASSERT_EQUAL_FATAL(sm->n_shares, 3);
    bad = NULL;
    sm->shares[1]->to = 0; /* addressed to the sender itself */
    replace(&bad, &bad_len, &sm->base);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, bad, bad_len, err,
                                          sizeof err),
                    COHORT_EINVAL);
    sm->shares[1]->to = 4; /* to a client that did not advertise */
    replace(&bad, &bad_len, &sm->base);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, bad, bad_len, err,
                                          sizeof err),
                    COHORT_EINVAL);
    sm->shares[1]->to = sm->shares[0]->to; /* two to one neighbour */
    replace(&bad, &bad_len, &sm->base);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, bad, bad_len, err,
                                          sizeof err),
                    COHORT_EINVAL);
    sm->shares[1]->to = 2;
    sm->shares[1]->from = 3; /* from someone else */
    replace(&bad, &bad_len, &sm->base);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, bad, bad_len, err,
                                          sizeof err),
                    COHORT_EINVAL);
    sm->shares[1]->from = 0;
    sm->shares[1]->sealed.len--; /* a short seal */
    replace(&bad, &bad_len, &sm->base);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, bad, bad_len, err,
                                          sizeof err),
                    COHORT_EINVAL);
    sm->shares[1]->sealed.len++;
    sm->n_shares = 2; /* one neighbour left out */
    replace(&bad, &bad_len, &sm->base);
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, bad, bad_len, err,
                                          sizeof err),
                    COHORT_EINVAL);
    sm->n_shares = 3;
    cohort__v1__sec_agg_shares__free_unpacked(sm, NULL);
    free(bad);
    CU_ASSERT_EQUAL(secagg_server_count(v, SECAGG_SHARE), 0);
    /* And the genuine message still goes in after all that. */
    CU_ASSERT_EQUAL(secagg_server_receive(v, 0, SECAGG_SHARE, sh0, sh0_len, err,
                                          sizeof err),
                    COHORT_OK);
    secagg_server_free(v);
  }

  /* MASKED: the client's checks of SecAggShares and of its input. */
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(srv, 1, &msg, &len, err, sizeof err), COHORT_OK);
  Cohort__V1__SecAggShares *sm =
      cohort__v1__sec_agg_shares__unpack(NULL, len, msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sm);
  CU_ASSERT_EQUAL_FATAL(sm->n_shares, 3);
  bad = NULL;
  sm->shares[0]->to = 2; /* addressed to someone else */
  replace(&bad, &bad_len, &sm->base);
  CU_ASSERT_EQUAL(secagg_client_mask(s.cl[1], bad, bad_len, s.input + 7, &out,
                                     &out_len, err, sizeof err),
                  COHORT_EINVAL);
  sm->shares[0]->to = 1;
  sm->shares[1]->from = sm->shares[0]->from; /* one sender twice */
  replace(&bad, &bad_len, &sm->base);
  CU_ASSERT_EQUAL(secagg_client_mask(s.cl[1], bad, bad_len, s.input + 7, &out,
                                     &out_len, err, sizeof err),
                  COHORT_EINVAL);
  /* The shares from 0 and 3 relabelled as from each other: each was
   * sealed for its own pair. */
  sm->shares[1]->from = 2;
  sm->shares[0]->from = 3;
  sm->shares[2]->from = 0;
  replace(&bad, &bad_len, &sm->base);
  CU_ASSERT_EQUAL(secagg_client_mask(s.cl[1], bad, bad_len, s.input + 7, &out,
                                     &out_len, err, sizeof err),
                  COHORT_EINVAL);
  cohort__v1__sec_agg_shares__free_unpacked(sm, NULL);
  uint64_t big[7] = {0};
  big[6] = UINT64_C(1) << 20; /* does not fit in B = 20 bits */
  CU_ASSERT_EQUAL(secagg_client_mask(s.cl[1], msg, len, big, &out, &out_len,
                                     err, sizeof err),
                  COHORT_EINVAL);
  free(bad);
  free(msg);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[1]), SECAGG_MASKED);

  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_MASKED), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_MASKED), 4);
  /* (Bad masked inputs and reveals: test_secagg_bad_uploads.) */
  const uint8_t *mk0 = s.sent[SECAGG_MASKED][0];
  size_t mk0_len = s.sent_len[SECAGG_MASKED][0];
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_MASKED, mk0, mk0_len,
                                        err, sizeof err),
                  COHORT_ESTATE); /* duplicate */
  server_refuses_other_phases(srv, 2);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);

  /* UNMASK: the client's checks of SecAggSurvivors. */
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(srv, 2, &msg, &len, err, sizeof err), COHORT_OK);
  Cohort__V1__SecAggSurvivors *vm =
      cohort__v1__sec_agg_survivors__unpack(NULL, len, msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(vm);
  CU_ASSERT_EQUAL_FATAL(vm->n_indices, 4);
  CU_ASSERT_EQUAL_FATAL(vm->indices[2], 2);
  bad = NULL;
  vm->indices[2] = 3; /* itself missing, 3 twice */
  replace(&bad, &bad_len, &vm->base);
  CU_ASSERT_EQUAL(secagg_client_unmask(s.cl[2], bad, bad_len, &out, &out_len,
                                       err, sizeof err),
                  COHORT_EINVAL);
  vm->indices[2] = 2;
  vm->indices[0] = 4; /* a neighbour that never sent shares */
  replace(&bad, &bad_len, &vm->base);
  CU_ASSERT_EQUAL(secagg_client_unmask(s.cl[2], bad, bad_len, &out, &out_len,
                                       err, sizeof err),
                  COHORT_EINVAL);
  vm->indices[0] = 2;
  vm->indices[1] = 3;
  vm->n_indices = 2; /* below t */
  replace(&bad, &bad_len, &vm->base);
  CU_ASSERT_EQUAL(secagg_client_unmask(s.cl[2], bad, bad_len, &out, &out_len,
                                       err, sizeof err),
                  COHORT_EINVAL);
  vm->n_indices = 4;
  cohort__v1__sec_agg_survivors__free_unpacked(vm, NULL);
  CU_ASSERT_EQUAL(
      secagg_client_unmask(s.cl[2], msg, 2, &out, &out_len, err, sizeof err),
      COHORT_EINVAL); /* truncated */
  free(bad);
  free(msg);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[2]), SECAGG_UNMASK);

  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
  const uint8_t *um0 = s.sent[SECAGG_UNMASK][0];
  size_t um0_len = s.sent_len[SECAGG_UNMASK][0];
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_UNMASK, um0, um0_len,
                                        err, sizeof err),
                  COHORT_ESTATE); /* duplicate */
  server_refuses_other_phases(srv, 1);
  CU_ASSERT_EQUAL(secagg_server_sum(srv, sum, NULL), COHORT_ESTATE);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_phase(srv), SECAGG_DONE);
  CU_ASSERT(sum_matches(&s));

  /* DONE: everything is refused, the sum stays. */
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  server_refuses_other_phases(srv, 0);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_UNMASK, um0, um0_len,
                                        err, sizeof err),
                  COHORT_ESTATE);
  CU_ASSERT_EQUAL(secagg_server_close_phase(srv, err, sizeof err),
                  COHORT_ESTATE);
  CU_ASSERT_EQUAL(secagg_server_message(srv, 0, &msg, &len, err, sizeof err),
                  COHORT_ESTATE);
  CU_ASSERT(sum_matches(&s));
  sim_free(&s);
}

/* The coordinator's checks of SecAggMaskedInput and SecAggUnmask: replayed
 * bad uploads change nothing, and the round still sums right. */
static void test_secagg_bad_uploads(void) {
  secagg_params p = {.n = 4,
                     .threshold = 3,
                     .degree = 3,
                     .ring_bits = 20,
                     .dim = 7}; /* 140 bits: 18 bytes, 4 padding bits */
  memset(p.round_seed, 0x17, sizeof p.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 78, 1), COHORT_OK);
  s.drop[3] = SECAGG_MASKED; /* shares, then drops */
  secagg_server *srv = s.srv;
  char err[ERRLEN];
  uint8_t *bad = NULL;
  size_t bad_len = 0;
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_SHARE; ph++) {
    CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  }
  /* Hold client 2's upload back to replay mangled copies of it first. */
  s.drop[2] = SECAGG_MASKED;
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_MASKED), COHORT_OK);
  s.drop[2] = NEVER;
  uint8_t *in = NULL, *mk = NULL;
  size_t in_len, mk_len;
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(srv, 2, &in, &in_len, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(secagg_client_mask(s.cl[2], in, in_len, s.input + 2 * 7,
                                           &mk, &mk_len, err, sizeof err),
                        COHORT_OK);
  free(in);
  Cohort__V1__SecAggMaskedInput *mm =
      cohort__v1__sec_agg_masked_input__unpack(NULL, mk_len, mk);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mm);
  CU_ASSERT_EQUAL_FATAL(mm->packed.len, 18);
  mm->packed.len = 17; /* the wrong length */
  replace(&bad, &bad_len, &mm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 2, SECAGG_MASKED, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  mm->packed.len = 18;
  mm->packed.data[17] ^= 0x80; /* a padding bit set */
  replace(&bad, &bad_len, &mm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 2, SECAGG_MASKED, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  mm->packed.data[17] ^= 0x80;
  mm->index = 1; /* names another client */
  replace(&bad, &bad_len, &mm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 2, SECAGG_MASKED, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  mm->index = 2;
  cohort__v1__sec_agg_masked_input__free_unpacked(mm, NULL);
  CU_ASSERT_EQUAL(
      secagg_server_receive(srv, 2, SECAGG_MASKED, mk, 5, err, sizeof err),
      COHORT_EINVAL); /* truncated */
  CU_ASSERT_EQUAL(
      secagg_server_receive(srv, 3, SECAGG_MASKED, mk, mk_len, err, sizeof err),
      COHORT_EINVAL); /* 3 sending 2's */
  CU_ASSERT_EQUAL(
      secagg_server_receive(srv, 2, SECAGG_MASKED, mk, mk_len, err, sizeof err),
      COHORT_OK);
  free(mk);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);

  /* UNMASK: hold client 1 back, replay mangled copies of its reveals. */
  s.drop[1] = SECAGG_UNMASK;
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
  s.drop[1] = NEVER;
  uint8_t *um = NULL;
  size_t um_len;
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(srv, 1, &in, &in_len, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_unmask(s.cl[1], in, in_len, &um, &um_len, err, sizeof err),
      COHORT_OK);
  free(in);
  Cohort__V1__SecAggUnmask *rm =
      cohort__v1__sec_agg_unmask__unpack(NULL, um_len, um);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rm);
  CU_ASSERT_EQUAL_FATAL(rm->n_reveals, 4); /* itself, 0, 2 and dropped 3 */
  rm->index = 0;
  replace(&bad, &bad_len, &rm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 1, SECAGG_UNMASK, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  rm->index = 1;
  uint32_t owner1 = rm->reveals[1]->owner;
  rm->reveals[1]->owner = rm->reveals[0]->owner; /* an owner twice */
  replace(&bad, &bad_len, &rm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 1, SECAGG_UNMASK, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  rm->reveals[1]->owner = 9; /* not a client */
  replace(&bad, &bad_len, &rm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 1, SECAGG_UNMASK, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  rm->reveals[1]->owner = owner1;
  rm->reveals[2]->n_share = 4; /* a short share */
  replace(&bad, &bad_len, &rm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 1, SECAGG_UNMASK, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  rm->reveals[2]->n_share = 5;
  uint64_t keep = rm->reveals[2]->share[0];
  rm->reveals[2]->share[0] = SHAMIR_PRIME; /* outside the field */
  replace(&bad, &bad_len, &rm->base);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 1, SECAGG_UNMASK, bad, bad_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  rm->reveals[2]->share[0] = keep;
  cohort__v1__sec_agg_unmask__free_unpacked(rm, NULL);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 1, SECAGG_UNMASK, um, um_len / 2,
                                        err, sizeof err),
                  COHORT_EINVAL); /* truncated */
  CU_ASSERT_EQUAL(
      secagg_server_receive(srv, 3, SECAGG_UNMASK, um, um_len, err, sizeof err),
      COHORT_ESTATE); /* 3 sent no masked input */
  CU_ASSERT_EQUAL(
      secagg_server_receive(srv, 1, SECAGG_UNMASK, um, um_len, err, sizeof err),
      COHORT_OK);
  free(um);
  free(bad);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT(sum_matches(&s));
  sim_free(&s);
}

/* ---- 3. never both kinds of share of one client ---- */

static void test_secagg_never_both_shares(void) {
  secagg_params p = {
      .n = 6, .threshold = 4, .degree = 5, .ring_bits = 32, .dim = 9};
  memset(p.round_seed, 0x33, sizeof p.round_seed);
  sim s;
  char err[ERRLEN];
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 79, 1), COHORT_OK);
  secagg_server *srv = s.srv;
  s.drop[5] = SECAGG_MASKED; /* shares, then drops: its key is rebuilt */
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_MASKED; ph++) {
    CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  }
  /* A coordinator that tells client 0 that survivor 1 dropped: client 0
   * reveals 1's mask-key share (and so not its seed share), and the
   * coordinator refuses that reveal, so it never holds both. */
  uint8_t *msg = NULL, *bad = NULL, *out = NULL;
  size_t len, bad_len, out_len;
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(srv, 0, &msg, &len, err, sizeof err), COHORT_OK);
  Cohort__V1__SecAggSurvivors *vm =
      cohort__v1__sec_agg_survivors__unpack(NULL, len, msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(vm);
  CU_ASSERT_EQUAL_FATAL(vm->n_indices, 5);
  CU_ASSERT_EQUAL_FATAL(vm->indices[1], 1);
  vm->indices[1] = vm->indices[4];
  vm->n_indices = 4; /* 0, 4, 2, 3: 1 is missing */
  replace(&bad, &bad_len, &vm->base);
  cohort__v1__sec_agg_survivors__free_unpacked(vm, NULL);
  free(msg);
  CU_ASSERT_EQUAL_FATAL(secagg_client_unmask(s.cl[0], bad, bad_len, &out,
                                             &out_len, err, sizeof err),
                        COHORT_OK);
  free(bad);
  Cohort__V1__SecAggUnmask *um =
      cohort__v1__sec_agg_unmask__unpack(NULL, out_len, out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(um);
  int seen1 = 0;
  for (size_t r = 0; r < um->n_reveals; r++)
    if (um->reveals[r]->owner == 1) {
      seen1++;
      CU_ASSERT_TRUE(um->reveals[r]->mask_key);
    }
  CU_ASSERT_EQUAL(seen1, 1);
  cohort__v1__sec_agg_unmask__free_unpacked(um, NULL);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_UNMASK, out, out_len,
                                        err, sizeof err),
                  COHORT_EINVAL);
  free(out);
  CU_ASSERT_FALSE(secagg_server_heard(srv, SECAGG_UNMASK, 0));
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[0]), SECAGG_DONE);

  s.refused[0] = SECAGG_UNMASK; /* the driver leaves client 0 alone now */
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);

  /* Every honest client reveals each owner once, of the right kind. */
  for (uint32_t i = 1; i < 5; i++) {
    Cohort__V1__SecAggUnmask *u = cohort__v1__sec_agg_unmask__unpack(
        NULL, s.sent_len[SECAGG_UNMASK][i], s.sent[SECAGG_UNMASK][i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    int count[6] = {0};
    for (size_t r = 0; r < u->n_reveals; r++) {
      uint32_t o = u->reveals[r]->owner;
      CU_ASSERT_FATAL(o < 6);
      count[o]++;
      CU_ASSERT_EQUAL(u->reveals[r]->mask_key, o == 5);
    }
    for (int o = 0; o < 6; o++)
      CU_ASSERT_EQUAL(count[o], 1);
    cohort__v1__sec_agg_unmask__free_unpacked(u, NULL);
  }
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT(sum_matches(&s));
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_UNMASK), 4);
  sim_free(&s);
}

/* The coordinator refuses reveals of the wrong kind, from an otherwise
 * well-formed SecAggUnmask. */
static void test_secagg_server_refuses_wrong_kind(void) {
  secagg_params p = {
      .n = 5, .threshold = 3, .degree = 4, .ring_bits = 16, .dim = 3};
  memset(p.round_seed, 0x44, sizeof p.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 80, 1), COHORT_OK);
  s.drop[4] = SECAGG_MASKED;
  s.drop[1] = SECAGG_UNMASK; /* its reveals are replayed by hand */
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_MASKED; ph++) {
    CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  }
  char err[ERRLEN];
  uint8_t *in = NULL, *um = NULL, *bad = NULL;
  size_t in_len, um_len, bad_len;
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(s.srv, 1, &in, &in_len, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_unmask(s.cl[1], in, in_len, &um, &um_len, err, sizeof err),
      COHORT_OK);
  free(in);
  Cohort__V1__SecAggUnmask *m =
      cohort__v1__sec_agg_unmask__unpack(NULL, um_len, um);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  for (size_t r = 0; r < m->n_reveals; r++) {
    Cohort__V1__SecAggReveal *e = m->reveals[r];
    /* Flip the kind of this one reveal: a seed share of dropped 4, or a
     * key share of a survivor (1 itself included). */
    e->mask_key = !e->mask_key;
    replace(&bad, &bad_len, &m->base);
    CU_ASSERT_EQUAL(secagg_server_receive(s.srv, 1, SECAGG_UNMASK, bad, bad_len,
                                          err, sizeof err),
                    COHORT_EINVAL);
    e->mask_key = !e->mask_key;
  }
  cohort__v1__sec_agg_unmask__free_unpacked(m, NULL);
  free(bad);
  CU_ASSERT_EQUAL(secagg_server_receive(s.srv, 1, SECAGG_UNMASK, um, um_len,
                                        err, sizeof err),
                  COHORT_OK);
  free(um);
  s.refused[1] = SECAGG_UNMASK;
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT(sum_matches(&s));
  sim_free(&s);
}

/* ---- 4. below the threshold ---- */

static void test_secagg_below_threshold(void) {
  secagg_params p = {
      .n = 6, .threshold = 4, .degree = 5, .ring_bits = 32, .dim = 5};
  memset(p.round_seed, 0x21, sizeof p.round_seed);
  char err[ERRLEN] = "";
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_UNMASK; ph++) {
    sim s;
    CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 81, 0), COHORT_OK);
    /* t - 1 = 3 send in phase ph. */
    s.drop[0] = s.drop[2] = s.drop[5] = (secagg_phase)ph;
    CU_ASSERT_EQUAL(sim_run(&s), COHORT_EABORTED);
    CU_ASSERT_EQUAL(secagg_server_phase(s.srv), SECAGG_ABORTED);
    CU_ASSERT_EQUAL(secagg_server_count(s.srv, (secagg_phase)ph), 3);
    const char *why = secagg_server_abort_reason(s.srv);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, secagg_phase_name((secagg_phase)ph)));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "threshold 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s.err, why));
    uint64_t sum[5];
    uint8_t *out = NULL;
    size_t len;
    CU_ASSERT_EQUAL(secagg_server_sum(s.srv, sum, NULL), COHORT_EABORTED);
    CU_ASSERT_EQUAL(secagg_server_close_phase(s.srv, err, sizeof err),
                    COHORT_EABORTED);
    CU_ASSERT_EQUAL(
        secagg_server_message(s.srv, 1, &out, &len, err, sizeof err),
        COHORT_EABORTED);
    CU_ASSERT_EQUAL(secagg_server_receive(s.srv, 1, (secagg_phase)ph,
                                          (const uint8_t *)"", 0, err,
                                          sizeof err),
                    COHORT_EABORTED);
    sim_free(&s);
  }

  /* Enough senders in every phase, but a secret without t shares: in a
   * 2-regular graph on 6 nodes with t = 2, client u's seed has the holders
   * u and its two neighbours; when both neighbours send nothing in
   * UNMASK, only u's own share is revealed. */
  secagg_params q = {
      .n = 6, .threshold = 2, .degree = 2, .ring_bits = 8, .dim = 4};
  memset(q.round_seed, 0x22, sizeof q.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &q, 82, 0), COHORT_OK);
  secagg_graph *g = NULL;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&q, &g), COHORT_OK);
  const uint32_t *nb = secagg_graph_neighbours(g, 0);
  s.drop[nb[0]] = s.drop[nb[1]] = SECAGG_UNMASK;
  secagg_graph_free(g);
  CU_ASSERT_EQUAL(sim_run(&s), COHORT_EABORTED);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(secagg_server_abort_reason(s.srv), "self-mask seed"));
  uint64_t sum[4];
  CU_ASSERT_EQUAL(secagg_server_sum(s.srv, sum, NULL), COHORT_EABORTED);
  sim_free(&s);
}

/* ---- 5. masked uploads look uniform ---- */

/* Pearson's statistic of byte counts against the uniform distribution. */
static double chi_square_bytes(const uint8_t *b, size_t len) {
  size_t counts[256] = {0};
  for (size_t i = 0; i < len; i++)
    counts[b[i]]++;
  double expect = (double)len / 256.0, x = 0;
  for (int v = 0; v < 256; v++) {
    double d = (double)counts[v] - expect;
    x += d * d / expect;
  }
  return x;
}

static void test_secagg_masked_uploads_uniform(void) {
  secagg_params p = {
      .n = 3, .threshold = 2, .degree = 2, .ring_bits = 8, .dim = 100000};
  memset(p.round_seed, 0x55, sizeof p.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 83, 1), COHORT_OK);
  for (size_t i = 0; i < p.dim; i++) {
    s.input[i] = 0;            /* client 0: all zeros */
    s.input[p.dim + i] = 0xff; /* client 1: all 2^B - 1 */
  }
  CU_ASSERT_EQUAL_FATAL(sim_run(&s), COHORT_OK);
  CU_ASSERT(sum_matches(&s));
  /* chi-square with 255 degrees of freedom: 99.9% quantile 330.5
   * (Wilson-Hilferty). */
  for (uint32_t i = 0; i < 2; i++) {
    Cohort__V1__SecAggMaskedInput *m = cohort__v1__sec_agg_masked_input__unpack(
        NULL, s.sent_len[SECAGG_MASKED][i], s.sent[SECAGG_MASKED][i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(m->packed.len, p.dim);
    double x = chi_square_bytes(m->packed.data, m->packed.len);
    CU_ASSERT(x < 330.5);
    if (x >= 330.5)
      printf("\nclient %u: chi-square %.1f\n", i, x);
    cohort__v1__sec_agg_masked_input__free_unpacked(m, NULL);
  }
  sim_free(&s);
}

/* ---- 6. a tampered share ---- */

static void test_secagg_tampered_share(void) {
  secagg_params p = {
      .n = 4, .threshold = 3, .degree = 3, .ring_bits = 62, .dim = 11};
  memset(p.round_seed, 0x66, sizeof p.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 84, 0), COHORT_OK);
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_SHARE; ph++) {
    CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  }
  char err[ERRLEN] = "";
  uint8_t *msg = NULL, *bad = NULL, *out = NULL;
  size_t len, bad_len, out_len;
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(s.srv, 0, &msg, &len, err, sizeof err), COHORT_OK);
  Cohort__V1__SecAggShares *m =
      cohort__v1__sec_agg_shares__unpack(NULL, len, msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL_FATAL(m->n_shares, 3);
  /* Every bit position class: nonce, ciphertext, tag. */
  static const size_t where[] = {0, AEAD_NONCE_LEN + 5, SECAGG_SEALED_LEN - 1};
  for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
    m->shares[1]->sealed.data[where[w]] ^= 0x04;
    replace(&bad, &bad_len, &m->base);
    CU_ASSERT_EQUAL(secagg_client_mask(s.cl[0], bad, bad_len, s.input, &out,
                                       &out_len, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "authenticate"));
    m->shares[1]->sealed.data[where[w]] ^= 0x04;
  }
  cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
  free(bad);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[0]), SECAGG_MASKED);
  free(msg);
  /* The client is unharmed: the round completes. */
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_MASKED), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT(sum_matches(&s));
  sim_free(&s);
}

/* ---- packing ---- */

static void test_secagg_pack_round_trip(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 85), COHORT_OK);
  /* Up to 12 whole groups of eight elements (the unpacking fast path) and
   * every tail length. */
  uint64_t v[101], w[101], z[101];
  uint8_t buf[101 * 8];
  for (unsigned bits = 1; bits <= 62; bits++) {
    for (size_t dim = 1; dim <= 101; dim += 2) {
      for (size_t i = 0; i < dim; i++) {
        v[i] = prg_u64(&g) & ring_mask(bits);
        w[i] = prg_u64(&g) & ring_mask(bits);
        z[i] = (v[i] + w[i]) & ring_mask(bits);
      }
      size_t len = secagg_packed_len(dim, bits);
      CU_ASSERT_EQUAL_FATAL(len, (dim * bits + 7) / 8);
      memset(buf, 0xee, sizeof buf);
      secagg_pack(v, dim, bits, buf);
      CU_ASSERT(secagg_padding_zero(buf, dim, bits));
      secagg_unpack_add(buf, dim, bits, w);
      CU_ASSERT_EQUAL(memcmp(w, z, dim * sizeof *w), 0);
      /* Bit 0 of element 0 is bit 0 of byte 0. */
      CU_ASSERT_EQUAL(buf[0] & 1, v[0] & 1);
      if ((dim * bits) % 8) {
        buf[len - 1] |= 0x80;
        CU_ASSERT_FALSE(secagg_padding_zero(buf, dim, bits));
      }
    }
  }
  prg_free(&g);
}

/* ---- timing (COHORT_SECAGG_TIMING=1) ---- */

static void test_secagg_timing(void) {
  const char *env = getenv("COHORT_SECAGG_TIMING");
  if (!env)
    return;
  /* COHORT_SECAGG_TIMING=N for N clients (below 10: 100). */
  uint32_t n = (uint32_t)strtoul(env, NULL, 10);
  if (n < 10)
    n = 100;
  secagg_params p = {.n = n,
                     .threshold = n / 2 + 1,
                     .degree = n - 1,
                     .ring_bits = 32,
                     .dim = 100000};
  memset(p.round_seed, 0x77, sizeof p.round_seed);
  sim s;
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 86, 0), COHORT_OK);
  /* 30% drop after sharing, or in the phase COHORT_SECAGG_DROP (0..3). */
  secagg_phase when = SECAGG_MASKED;
  const char *drop = getenv("COHORT_SECAGG_DROP");
  if (drop && *drop >= '0' && *drop <= '3')
    when = (secagg_phase)(*drop - '0');
  for (uint32_t i = 0; i < n * 3 / 10; i++)
    s.drop[i * 3 + 1] = when;
  double w0 = clock_mono_s();
  CU_ASSERT_EQUAL_FATAL(sim_run(&s), COHORT_OK);
  double wall = clock_mono_s() - w0;
  CU_ASSERT(sum_matches(&s));
  printf("\nsecagg n %u dim %zu B %u t %u, 30%% dropped in %s: server "
         "%.3f s CPU, clients %.3f s CPU each (mean), wall %.2f s\n",
         p.n, p.dim, p.ring_bits, p.threshold, secagg_phase_name(when),
         s.server_s, s.client_s / p.n, wall);
  sim_free(&s);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"packing at 1..62 bits round-trips, padding zero",
       test_secagg_pack_round_trip},
      {"200 random rounds: sum of survivors bit for bit, or the predicted "
       "abort",
       test_secagg_property},
      {"out-of-order calls and bad messages are refused, state unchanged",
       test_secagg_wrong_phase_and_bad_messages},
      {"bad masked inputs and reveals are refused, state unchanged",
       test_secagg_bad_uploads},
      {"a client reveals one kind per owner; wrong survivors are caught",
       test_secagg_never_both_shares},
      {"the coordinator refuses reveals of the wrong kind",
       test_secagg_server_refuses_wrong_kind},
      {"below the threshold: a clean abort, no output",
       test_secagg_below_threshold},
      {"masked uploads of zeros and of ones are uniform bytes",
       test_secagg_masked_uploads_uniform},
      {"a tampered share is refused by its recipient",
       test_secagg_tampered_share},
      {"timing n=100 dim=100k (COHORT_SECAGG_TIMING)", test_secagg_timing},
  };
  return test_add_suite("secagg", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
