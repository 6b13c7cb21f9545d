/* Tests of secure aggregation's state machines (common/secagg/secagg.h): an
 * in-process driver runs n clients and a coordinator through the five
 * phases (advertise, share, masked, consistency, unmask) with clients
 * dropping out at chosen phases, and checks the sum bit for bit against the
 * plain ring sum of the survivors' inputs (or a clean abort where a
 * set-arithmetic model of the protocol predicts one); every out-of-order or
 * malformed message, badly signed key, uncertified peer and survivor list
 * or attestation that does not hold up is refused without changing either
 * side; a coordinator that tells clients different survivor lists gets no
 * reveal from those short of t attestations; the coordinator never
 * collects both kinds of share of one client, and names and sets aside a
 * holder that reveals a wrong share; masked uploads look uniform; a
 * tampered share is refused. Fixed seeds and keys throughout, so a failure
 * reproduces. COHORT_SECAGG_TIMING=1 times n = 100, dim = 100k with 30%
 * dropping after SHARE (=N: N clients; COHORT_SECAGG_DROP=0..4: the phase
 * they drop in). */
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
#include "sign.h"

#define NEVER SECAGG_DONE /* the drop phase of a client that stays */
#define ERRLEN 256

/* ---- the in-process driver ---- */

typedef struct sim {
  secagg_params p;
  secagg_server *srv;
  secagg_client **cl;
  sign_key **id;             /* n: each client's identity */
  secagg_peer_identity *ids; /* n: as registered with the coordinator */
  uint8_t authority[SIGN_PUBLIC_LEN]; /* the clients', if has_authority */
  int has_authority;
  secagg_policy policy;  /* the clients' */
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
      sign_key_free(s->id[i]);
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
  free(s->id);
  free(s->ids);
  free(s->rng);
  free(s->input);
  free(s->drop);
  free(s->refused);
  memset(s, 0, sizeof *s);
}

/* A policy that accepts every threshold from 2 and every degree from 2:
 * these tests are about the protocol, not about which plans to accept. */
static secagg_policy lenient(void) {
  return (secagg_policy){
      .adversary = SECAGG_CURIOUS, .corrupt = 0, .security_bits = 40};
}

/* Client i's identity key is seeded with seed * 7919 + i. */
static int make_identity(uint64_t seed, uint32_t i, sign_key **out) {
  uint8_t raw[SIGN_SEED_LEN];
  prg g;
  int rc = prg_init_u64(&g, seed * 7919u + i);
  if (!rc) {
    prg_bytes(&g, raw, sizeof raw);
    prg_free(&g);
    rc = sign_key_from_seed(raw, out);
  }
  return rc;
}

/* Client i's rng is seeded with seed * 1000003 + i, the inputs with seed;
 * inputs are uniform below 2^B. The clients use policy (NULL: lenient).
 * With an authority, every identity is registered with its certificate
 * and every client demands one of its peers. */
static int sim_init_full(sim *s, const secagg_params *p, uint64_t seed,
                         int keep, const secagg_policy *policy,
                         const sign_key *authority) {
  memset(s, 0, sizeof *s);
  s->p = *p;
  s->keep = keep;
  s->policy = policy ? *policy : lenient();
  uint32_t n = p->n;
  s->cl = calloc(n, sizeof *s->cl);
  s->id = calloc(n, sizeof *s->id);
  s->ids = calloc(n, sizeof *s->ids);
  s->rng = calloc(n, sizeof *s->rng);
  s->input = malloc(n * p->dim * sizeof *s->input);
  s->drop = malloc(n * sizeof *s->drop);
  s->refused = malloc(n * sizeof *s->refused);
  for (int ph = 0; ph < SECAGG_DONE; ph++) {
    s->sent[ph] = calloc(n, sizeof *s->sent[ph]);
    s->sent_len[ph] = calloc(n, sizeof *s->sent_len[ph]);
  }
  if (!s->cl || !s->id || !s->ids || !s->rng || !s->input || !s->drop ||
      !s->refused)
    return COHORT_ENOMEM;
  prg g;
  if (prg_init_u64(&g, seed))
    return COHORT_EIO;
  for (size_t e = 0; e < n * p->dim; e++)
    s->input[e] = prg_u64(&g) & ring_mask(p->ring_bits);
  prg_free(&g);
  if (authority) {
    sign_key_public(authority, s->authority);
    s->has_authority = 1;
  }
  int rc = COHORT_OK;
  for (uint32_t i = 0; i < n && !rc; i++) {
    rc = make_identity(seed, i, &s->id[i]);
    if (!rc)
      sign_key_public(s->id[i], s->ids[i].pub);
    if (!rc && authority) {
      rc = sign_certify(authority, s->ids[i].pub, s->ids[i].cert);
      s->ids[i].has_cert = 1;
    }
  }
  if (!rc)
    rc = secagg_server_new(p, s->ids, &s->srv, s->err, sizeof s->err);
  for (uint32_t i = 0; i < n && !rc; i++) {
    s->drop[i] = NEVER;
    s->refused[i] = NEVER;
    rc = prg_init_u64(&s->rng[i], seed * 1000003u + i);
    secagg_identity id = {.key = s->id[i],
                          .authority = authority ? s->authority : NULL};
    if (!rc)
      rc = secagg_client_new(p, i, &id, &s->policy, &s->rng[i], &s->cl[i],
                             s->err, sizeof s->err);
  }
  return rc;
}

static int sim_init_policy(sim *s, const secagg_params *p, uint64_t seed,
                           int keep, const secagg_policy *policy) {
  return sim_init_full(s, p, seed, keep, policy, NULL);
}

static int sim_init(sim *s, const secagg_params *p, uint64_t seed, int keep) {
  return sim_init_policy(s, p, seed, keep, NULL);
}

/* Client c's call for phase ph: in is the coordinator's message of the
 * phase before, input the client's input (MASKED only). */
static int client_step(secagg_client *c, secagg_phase ph, const uint8_t *in,
                       size_t in_len, const uint64_t *input, uint8_t **out,
                       size_t *out_len, char *err, size_t errlen) {
  switch (ph) {
  case SECAGG_ADVERTISE:
    return secagg_client_advertise(c, out, out_len, err, errlen);
  case SECAGG_SHARE:
    return secagg_client_share(c, in, in_len, out, out_len, err, errlen);
  case SECAGG_MASKED:
    return secagg_client_mask(c, in, in_len, input, out, out_len, err, errlen);
  case SECAGG_CONSISTENCY:
    return secagg_client_attest(c, in, in_len, out, out_len, err, errlen);
  default:
    return secagg_client_unmask(c, in, in_len, out, out_len, err, errlen);
  }
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
    rc = client_step(s->cl[i], ph, in, in_len, s->input + i * s->p.dim, &out,
                     &out_len, s->err, sizeof s->err);
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

/* All five phases; the first failing close's status (EABORTED) or a
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
      /* The client's own checks on the coordinator's message: t
       * neighbours that advertised, t shares, t survivors in its
       * neighbourhood (itself included), t - 1 surviving neighbours that
       * attested. */
      int ok = ph == SECAGG_ADVERTISE ||
               (ph == SECAGG_SHARE && count_in(g, k, i, 0, in[0]) >= t) ||
               (ph == SECAGG_MASKED && count_in(g, k, i, 0, in[1]) >= t) ||
               (ph == SECAGG_CONSISTENCY && count_in(g, k, i, 1, in[2]) >= t) ||
               (ph == SECAGG_UNMASK && count_in(g, k, i, 0, in[3]) + 1 >= t);
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
  if (p->degree < 2) /* t needs 2 .. k */
    p->degree = 2;
  p->threshold = 2 + (uint32_t)prg_below(g, p->degree - 1); /* 2 .. k */
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
      s.drop[i] = (secagg_phase)prg_below(&g, 5);
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

/* The reason of the last refusal client_refuses or server_refuses saw. */
static char g_err[ERRLEN];

/* Packs m and hands it to client c as the coordinator's message for c's
 * current phase: the call must fail with want (and why, when not NULL, in
 * the reason), give no output and leave the phase as it was. */
static void client_refuses(secagg_client *c, const ProtobufCMessage *m,
                           const uint64_t *input, int want, const char *why) {
  uint8_t *buf = NULL, *out = NULL;
  size_t len = 0, out_len = 0;
  g_err[0] = 0;
  CU_ASSERT_EQUAL_FATAL(pb_pack(m, &buf, &len), COHORT_OK);
  secagg_phase ph = secagg_client_phase(c);
  int rc =
      client_step(c, ph, buf, len, input, &out, &out_len, g_err, sizeof g_err);
  int ok = rc == want && (!why || strstr(g_err, why));
  CU_ASSERT(ok);
  if (!ok)
    printf("\n  client in %s: status %d (%s), expected %d with '%s'\n",
           secagg_phase_name(ph), rc, g_err, want, why ? why : "");
  CU_ASSERT_PTR_NULL(out);
  free(out);
  CU_ASSERT_EQUAL(secagg_client_phase(c), ph);
  free(buf);
}

/* Packs m and gives it to the coordinator as client from's message of the
 * current phase: refused with want (and why in the reason), from still
 * unheard, the count and the phase unchanged. */
static void server_refuses(secagg_server *srv, uint32_t from,
                           const ProtobufCMessage *m, int want,
                           const char *why) {
  uint8_t *buf = NULL;
  size_t len = 0;
  g_err[0] = 0;
  CU_ASSERT_EQUAL_FATAL(pb_pack(m, &buf, &len), COHORT_OK);
  secagg_phase ph = secagg_server_phase(srv);
  uint32_t count = secagg_server_count(srv, ph);
  int rc = secagg_server_receive(srv, from, ph, buf, len, g_err, sizeof g_err);
  int ok = rc == want && (!why || strstr(g_err, why));
  CU_ASSERT(ok);
  if (!ok)
    printf("\n  coordinator in %s: status %d (%s), expected %d with '%s'\n",
           secagg_phase_name(ph), rc, g_err, want, why ? why : "");
  CU_ASSERT_EQUAL(secagg_server_count(srv, ph), count);
  CU_ASSERT_FALSE(secagg_server_heard(srv, ph, from));
  CU_ASSERT_EQUAL(secagg_server_phase(srv), ph);
  free(buf);
}

/* The coordinator's message for client `to` after the phase just closed. */
static uint8_t *server_msg(const sim *s, uint32_t to, size_t *len) {
  uint8_t *m = NULL;
  char err[ERRLEN];
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_message(s->srv, to, &m, len, err, sizeof err), COHORT_OK);
  return m;
}

/* Signs e's two public keys as client index's in the round of p with key,
 * in place: a signature that verifies, for what the caller chose. */
static void resign(Cohort__V1__SecAggKeys *e, const secagg_params *p,
                   uint32_t index, const sign_key *key) {
  uint8_t msg[SECAGG_KEYS_MSG_LEN];
  CU_ASSERT_FATAL(e->share_public.len == KEX_KEY_LEN &&
                  e->mask_public.len == KEX_KEY_LEN &&
                  e->signature.len == SIGN_LEN);
  secagg_keys_message(p, index, e->share_public.data, e->mask_public.data, msg);
  CU_ASSERT_EQUAL_FATAL(sign_message(key, msg, sizeof msg, e->signature.data),
                        COHORT_OK);
}

/* dst becomes a copy of the SecAggPeers entry src (same field lengths). */
static void copy_peer(Cohort__V1__SecAggKeys *dst,
                      const Cohort__V1__SecAggKeys *src) {
  dst->index = src->index;
  memcpy(dst->share_public.data, src->share_public.data, KEX_KEY_LEN);
  memcpy(dst->mask_public.data, src->mask_public.data, KEX_KEY_LEN);
  memcpy(dst->signature.data, src->signature.data, SIGN_LEN);
  memcpy(dst->identity_public.data, src->identity_public.data, SIGN_PUBLIC_LEN);
}

static Cohort__V1__SecAggPeers *peers_of(const uint8_t *b, size_t len) {
  Cohort__V1__SecAggPeers *m = cohort__v1__sec_agg_peers__unpack(NULL, len, b);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  return m;
}

static Cohort__V1__SecAggAttestations *tags_of(const uint8_t *b, size_t len) {
  Cohort__V1__SecAggAttestations *m =
      cohort__v1__sec_agg_attestations__unpack(NULL, len, b);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  return m;
}

/* A SecAggSurvivors of len bitmap bytes (borrowed). */
static Cohort__V1__SecAggSurvivors survivors_of(const uint8_t *bits,
                                                size_t len) {
  Cohort__V1__SecAggSurvivors m = COHORT__V1__SEC_AGG_SURVIVORS__INIT;
  m.bitmap.data = (uint8_t *)bits;
  m.bitmap.len = len;
  return m;
}

/* The neighbours a client's refusal in UNMASK names as attesting to
 * another list, as a bit set (indices below 64). */
static uint64_t named_in(const char *err) {
  static const char mark[] = "attest to a different list: ";
  const char *at = strstr(err, mark);
  uint64_t set = 0;
  if (!at)
    return 0;
  at += sizeof mark - 1;
  while (*at >= '0' && *at <= '9') {
    char *end;
    unsigned long v = strtoul(at, &end, 10);
    if (v < 64)
      set |= UINT64_C(1) << v;
    at = end;
    if (strncmp(at, ", ", 2) != 0)
      break;
    at += 2;
  }
  return set;
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
  if (ph != SECAGG_CONSISTENCY)
    CU_ASSERT_EQUAL(
        secagg_client_attest(c, empty, 0, &out, &len, err, sizeof err),
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
  s.drop[4] = SECAGG_ADVERTISE; /* client 4's keys never get in */
  secagg_server *srv = s.srv;
  char err[ERRLEN];
  uint8_t *msg = NULL, *bad = NULL, *out = NULL;
  size_t len = 0, bad_len = 0, out_len = 0;
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
  server_refuses(srv, 4, &km->base, COHORT_EINVAL, "small-order key");
  km->mask_public.len = 31;
  server_refuses(srv, 4, &km->base, COHORT_EINVAL, "must be 32 bytes");
  cohort__v1__sec_agg_keys__free_unpacked(km, NULL);

  /* Client 4's own keys, but not signed as the coordinator registered it
   * for this round (COHORT_EAUTH), or carrying an identity, which only the
   * coordinator adds (COHORT_EINVAL): each refused, nothing recorded. */
  uint8_t *k4 = NULL;
  size_t k4_len = 0;
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_advertise(s.cl[4], &k4, &k4_len, err, sizeof err),
      COHORT_OK);
  uint8_t id4[SIGN_PUBLIC_LEN], cert[SIGN_CERT_LEN];
  memcpy(id4, s.ids[4].pub, sizeof id4);
  memset(cert, 0x11, sizeof cert);
  for (int how = 0; how < 9; how++) {
    Cohort__V1__SecAggKeys *e =
        cohort__v1__sec_agg_keys__unpack(NULL, k4_len, k4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    secagg_params q = p;
    int want = COHORT_EAUTH;
    switch (how) {
    case 0: /* a broken signature */
      e->signature.data[17] ^= 0x20;
      break;
    case 1: /* no signature */
      e->signature.len = 0;
      break;
    case 2: /* signed for another round */
      q.round_seed[0] ^= 1;
      resign(e, &q, 4, s.id[4]);
      break;
    case 3: /* signed for another plan of this round */
      q.threshold = 2;
      resign(e, &q, 4, s.id[4]);
      break;
    case 4: /* signed as another index */
      resign(e, &p, 3, s.id[4]);
      break;
    case 5: /* signed by another client's identity key */
      resign(e, &p, 4, s.id[3]);
      break;
    case 6: /* a key changed under the signature */
      e->share_public.data[5] ^= 1;
      break;
    case 7: /* its (registered) identity key along */
      e->identity_public.data = id4;
      e->identity_public.len = sizeof id4;
      want = COHORT_EINVAL;
      break;
    default: /* a certificate along */
      e->identity_certificate.data = cert;
      e->identity_certificate.len = sizeof cert;
      want = COHORT_EINVAL;
      break;
    }
    server_refuses(srv, 4, &e->base, want,
                   want == COHORT_EAUTH
                       ? "is not signed by its registered identity key"
                       : "carries an identity");
    e->identity_public = (ProtobufCBinaryData){0, NULL};
    e->identity_certificate = (ProtobufCBinaryData){0, NULL};
    cohort__v1__sec_agg_keys__free_unpacked(e, NULL);
  }
  server_refuses_other_phases(srv, 1);
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_ADVERTISE), 4);
  CU_ASSERT_FALSE(secagg_server_heard(srv, SECAGG_ADVERTISE, 4));
  CU_ASSERT_EQUAL(secagg_server_message(srv, 0, &msg, &len, err, sizeof err),
                  COHORT_ESTATE); /* ADVERTISE is not closed */
  /* On a coordinator of its own, client 4's genuine keys still get in after
   * a refused copy, and are relayed with their signature and the identity
   * registered for client 4 (no certificate: none was registered). */
  {
    secagg_server *v = NULL;
    CU_ASSERT_EQUAL_FATAL(secagg_server_new(&p, s.ids, &v, err, sizeof err),
                          COHORT_OK);
    for (uint32_t i = 0; i < 4; i++)
      CU_ASSERT_EQUAL(secagg_server_receive(
                          v, i, SECAGG_ADVERTISE, s.sent[SECAGG_ADVERTISE][i],
                          s.sent_len[SECAGG_ADVERTISE][i], err, sizeof err),
                      COHORT_OK);
    Cohort__V1__SecAggKeys *g4 =
        cohort__v1__sec_agg_keys__unpack(NULL, k4_len, k4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g4);
    g4->mask_public.data[0] ^= 1;
    server_refuses(v, 4, &g4->base, COHORT_EAUTH, NULL);
    g4->mask_public.data[0] ^= 1;
    CU_ASSERT_EQUAL(secagg_server_receive(v, 4, SECAGG_ADVERTISE, k4, k4_len,
                                          err, sizeof err),
                    COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(secagg_server_close_phase(v, err, sizeof err),
                          COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        secagg_server_message(v, 0, &msg, &len, err, sizeof err), COHORT_OK);
    Cohort__V1__SecAggPeers *pm = peers_of(msg, len);
    CU_ASSERT_EQUAL_FATAL(pm->n_peers, 5);
    for (uint32_t i = 0; i < 5; i++) {
      const Cohort__V1__SecAggKeys *e = pm->peers[i];
      CU_ASSERT_EQUAL(e->index, i);
      CU_ASSERT(
          e->identity_public.len == SIGN_PUBLIC_LEN &&
          memcmp(e->identity_public.data, s.ids[i].pub, SIGN_PUBLIC_LEN) == 0);
      CU_ASSERT_EQUAL(e->identity_certificate.len, 0);
    }
    const Cohort__V1__SecAggKeys *e4 = pm->peers[4];
    CU_ASSERT(e4->mask_public.len == KEX_KEY_LEN &&
              memcmp(e4->mask_public.data, g4->mask_public.data, KEX_KEY_LEN) ==
                  0);
    CU_ASSERT(e4->signature.len == SIGN_LEN &&
              memcmp(e4->signature.data, g4->signature.data, SIGN_LEN) == 0);
    cohort__v1__sec_agg_peers__free_unpacked(pm, NULL);
    cohort__v1__sec_agg_keys__free_unpacked(g4, NULL);
    free(msg);
    msg = NULL;
    secagg_server_free(v);
  }
  free(k4);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_phase(srv), SECAGG_SHARE);

  /* SHARE: the client's checks of SecAggPeers (0 and its neighbours 1, 2,
   * 3), each on a fresh copy of the genuine message. */
  CU_ASSERT_EQUAL(secagg_server_message(srv, 4, &msg, &len, err, sizeof err),
                  COHORT_ESTATE); /* 4 did not advertise */
  msg = server_msg(&s, 0, &len);
  CU_ASSERT_EQUAL(secagg_client_share(s.cl[0], msg, len - 3, &out, &out_len,
                                      err, sizeof err),
                  COHORT_EINVAL);
  for (int how = 0; how < 11; how++) {
    Cohort__V1__SecAggPeers *pm = peers_of(msg, len);
    CU_ASSERT_EQUAL_FATAL(pm->n_peers, 4);
    Cohort__V1__SecAggKeys **e = pm->peers;
    for (uint32_t i = 0; i < 4; i++)
      CU_ASSERT_EQUAL_FATAL(e[i]->index, i);
    int want = COHORT_EINVAL;
    const char *why = NULL;
    switch (how) {
    case 0: /* a peer's signature broken */
      e[1]->signature.data[0] ^= 1;
      want = COHORT_EAUTH;
      why = "peer 1's keys are not signed by the identity key";
      break;
    case 1: /* a peer's identity key swapped for another client's */
      memcpy(e[1]->identity_public.data, e[2]->identity_public.data,
             SIGN_PUBLIC_LEN);
      want = COHORT_EAUTH;
      why = "peer 1's keys are not signed";
      break;
    case 2: /* a key of the coordinator's in a peer's place */
      e[3]->mask_public.data[7] ^= 1;
      want = COHORT_EAUTH;
      why = "peer 3's keys are not signed";
      break;
    case 3: /* one identity behind two peers, each signature valid */
      memcpy(e[2]->identity_public.data, e[1]->identity_public.data,
             SIGN_PUBLIC_LEN);
      resign(e[2], &p, 2, s.id[1]);
      why = "one identity key is listed for two of its peers";
      break;
    case 4: /* its own identity changed */
      memcpy(e[0]->identity_public.data, e[1]->identity_public.data,
             SIGN_PUBLIC_LEN);
      why = "its own keys or identity were changed";
      break;
    case 5: /* its own key changed */
      e[0]->mask_public.data[3] ^= 1;
      why = "its own keys or identity were changed";
      break;
    case 6: /* itself twice */
      copy_peer(e[1], e[0]);
      why = "listed twice among its peers";
      break;
    case 7: /* a repeated peer */
      copy_peer(e[1], e[2]);
      why = "peer 2 is listed twice";
      break;
    case 8: /* not a client of the round, its keys signed for that index */
      e[1]->index = 9;
      resign(e[1], &p, 9, s.id[1]);
      why = "peer 9 is not its neighbour";
      break;
    case 9: /* a short identity key */
      e[1]->identity_public.len = 31;
      why = "the identity key 32";
      break;
    default: /* t entries, itself included: one short of t + 1 */
      pm->n_peers = 3;
      why = "3 peers (itself included) is below the threshold 3 plus itself";
      break;
    }
    client_refuses(s.cl[0], &pm->base, NULL, want, why);
    pm->n_peers = 4;
    e[1]->identity_public.len = SIGN_PUBLIC_LEN;
    cohort__v1__sec_agg_peers__free_unpacked(pm, NULL);
  }
  free(msg);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[0]), SECAGG_SHARE);
  /* (A missing or forged certificate: test_secagg_enrollment_authority.) */

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
    CU_ASSERT_EQUAL_FATAL(secagg_server_new(&p, s.ids, &v, err, sizeof err),
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
  sm->n_shares = 2; /* t - 1: too few neighbours to mask with */
  replace(&bad, &bad_len, &sm->base);
  CU_ASSERT_EQUAL(secagg_client_mask(s.cl[1], bad, bad_len, s.input + 7, &out,
                                     &out_len, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(err, "2 shares from neighbours is below the threshold 3"));
  sm->n_shares = 3;
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
  CU_ASSERT_EQUAL(secagg_server_phase(srv), SECAGG_CONSISTENCY);

  /* CONSISTENCY: the client's checks of SecAggSurvivors (the survivors are
   * 0, 1, 2 and 3: bits 0..3 of one byte). */
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  msg = server_msg(&s, 2, &len);
  {
    Cohort__V1__SecAggSurvivors *vm =
        cohort__v1__sec_agg_survivors__unpack(NULL, len, msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(vm);
    CU_ASSERT_EQUAL_FATAL(vm->bitmap.len, 1);
    CU_ASSERT_EQUAL(vm->bitmap.data[0], 0x0f);
    cohort__v1__sec_agg_survivors__free_unpacked(vm, NULL);
  }
  static const struct {
    uint8_t bits[2];
    size_t len;
    const char *why;
  } lists[] = {
      {{0x0f, 0x00}, 2, "needs a bitmap of 1 bytes"}, /* the wrong length */
      {{0x00}, 0, "needs a bitmap of 1 bytes"},       /* none at all */
      {{0x8f}, 1, "no bit past client 4"},            /* a padding bit */
      {{0x0b}, 1, "does not list the client itself"},
      {{0x1f}, 1, "survivor 4 is not a neighbour that sent it shares"},
      {{0x0c},
       1, /* 2 and 3: t - 1 of its neighbourhood */
       "2 survivors in its neighbourhood (itself included) is below the "
       "threshold 3"},
  };
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    Cohort__V1__SecAggSurvivors vm = survivors_of(lists[i].bits, lists[i].len);
    client_refuses(s.cl[2], &vm.base, NULL, COHORT_EINVAL, lists[i].why);
  }
  CU_ASSERT_EQUAL(secagg_client_attest(s.cl[2], msg, len - 1, &out, &out_len,
                                       err, sizeof err),
                  COHORT_EINVAL); /* truncated */
  free(msg);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[2]), SECAGG_CONSISTENCY);

  /* The coordinator's checks of SecAggAttestations: hold client 3 back and
   * replay mangled copies of its tags (to 0, 1 and 2) first. */
  s.drop[3] = SECAGG_CONSISTENCY;
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_CONSISTENCY), COHORT_OK);
  s.drop[3] = NEVER;
  uint8_t *at3 = NULL;
  size_t at3_len = 0;
  msg = server_msg(&s, 3, &len);
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_attest(s.cl[3], msg, len, &at3, &at3_len, err, sizeof err),
      COHORT_OK);
  free(msg);
  for (int how = 0; how < 7; how++) {
    Cohort__V1__SecAggAttestations *am = tags_of(at3, at3_len);
    CU_ASSERT_EQUAL_FATAL(am->n_tags, 3);
    for (uint32_t j = 0; j < 3; j++)
      CU_ASSERT_FATAL(am->tags[j]->from == 3 && am->tags[j]->to == j &&
                      am->tags[j]->tag.len == SECAGG_TAG_LEN);
    const char *why = "is addressed to a client that is not a neighbour that "
                      "sent a masked input";
    switch (how) {
    case 0: /* the wrong sender */
      am->tags[0]->from = 1;
      why = "is from someone else";
      break;
    case 1: /* to a client that is not a survivor */
      am->tags[0]->to = 4;
      break;
    case 2: /* to a client that is not its neighbour: itself */
      am->tags[0]->to = 3;
      break;
    case 3: /* to a client outside the round */
      am->tags[0]->to = 9;
      break;
    case 4: /* one recipient twice */
      am->tags[1]->to = 0;
      why = "repeats a recipient";
      break;
    case 5: /* a short tag */
      am->tags[2]->tag.len = SECAGG_TAG_LEN - 1;
      why = "has the wrong length";
      break;
    default: /* one missing */
      am->n_tags = 2;
      why = "holds 2 tags, it has 3 neighbours that sent a masked input";
      break;
    }
    server_refuses(srv, 3, &am->base, COHORT_EINVAL, why);
    am->n_tags = 3;
    am->tags[2]->tag.len = SECAGG_TAG_LEN;
    cohort__v1__sec_agg_attestations__free_unpacked(am, NULL);
  }
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 3, SECAGG_CONSISTENCY, at3,
                                        at3_len / 2, err, sizeof err),
                  COHORT_EINVAL); /* truncated */
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 4, SECAGG_CONSISTENCY, at3,
                                        at3_len, err, sizeof err),
                  COHORT_ESTATE); /* 4 sent no masked input */
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_CONSISTENCY), 3);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 3, SECAGG_CONSISTENCY, at3,
                                        at3_len, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 3, SECAGG_CONSISTENCY, at3,
                                        at3_len, err, sizeof err),
                  COHORT_ESTATE); /* duplicate */
  free(at3);
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_CONSISTENCY), 4);
  server_refuses_other_phases(srv, 0);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_phase(srv), SECAGG_UNMASK);

  /* UNMASK: the client's checks of SecAggAttestations (client 2 gets tags
   * from 0, 1 and 3; with its own, t = 3 of them must verify). */
  for (uint32_t i = 0; i < p.n; i++)
    client_refuses_others(s.cl[i], s.input);
  msg = server_msg(&s, 2, &len);
  for (int how = 0; how < 7; how++) {
    Cohort__V1__SecAggAttestations *am = tags_of(msg, len);
    CU_ASSERT_EQUAL_FATAL(am->n_tags, 3);
    static const uint32_t from[3] = {0, 1, 3};
    for (uint32_t j = 0; j < 3; j++)
      CU_ASSERT_FATAL(am->tags[j]->from == from[j] && am->tags[j]->to == 2);
    const char *why = NULL;
    uint64_t names = 0; /* the neighbours the refusal must name */
    switch (how) {
    case 0: /* from itself: not a neighbour */
      am->tags[0]->from = 2;
      why = "not from a neighbour to this client";
      break;
    case 1: /* from a neighbour that is not on its survivor list */
      am->tags[0]->from = 4;
      why = "that neighbour is not on its survivor list";
      break;
    case 2: /* addressed to another client */
      am->tags[0]->to = 1;
      why = "not from a neighbour to this client";
      break;
    case 3: /* twice from one neighbour */
      am->tags[1]->from = 0;
      why = "a second one from that neighbour";
      break;
    case 4: /* two tags that do not verify: not counted, and named */
      am->tags[0]->tag.data[0] ^= 1;
      am->tags[1]->tag.data[31] ^= 0x80;
      why = "2 attestations to its survivor list (itself included) is below "
            "the threshold 3; it reveals nothing";
      names = 1u << 0 | 1u << 1;
      break;
    case 5: /* a short tag, a wrong one */
      am->tags[2]->tag.len = 16;
      am->tags[1]->tag.data[5] ^= 4;
      why = "2 attestations";
      names = 1u << 1 | 1u << 3;
      break;
    default: /* only one neighbour's tag: too few, nobody to name */
      am->n_tags = 1;
      why = "2 attestations to its survivor list";
      break;
    }
    client_refuses(s.cl[2], &am->base, NULL, COHORT_EINVAL, why);
    if (how >= 4)
      CU_ASSERT_EQUAL(named_in(g_err), names);
    if (how == 6)
      CU_ASSERT_PTR_NULL(strstr(g_err, "different list"));
    am->n_tags = 3;
    am->tags[2]->tag.len = SECAGG_TAG_LEN;
    cohort__v1__sec_agg_attestations__free_unpacked(am, NULL);
  }
  CU_ASSERT_EQUAL(secagg_client_unmask(s.cl[2], msg, len / 2, &out, &out_len,
                                       err, sizeof err),
                  COHORT_EINVAL); /* truncated */
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[2]), SECAGG_UNMASK);
  /* One tag that does not verify is not counted, but the other two and
   * its own still make t: client 2 reveals. */
  {
    Cohort__V1__SecAggAttestations *am = tags_of(msg, len);
    am->tags[1]->tag.data[3] ^= 1;
    bad = NULL;
    replace(&bad, &bad_len, &am->base);
    cohort__v1__sec_agg_attestations__free_unpacked(am, NULL);
    CU_ASSERT_EQUAL_FATAL(secagg_client_unmask(s.cl[2], bad, bad_len, &out,
                                               &out_len, err, sizeof err),
                          COHORT_OK);
    CU_ASSERT_EQUAL(secagg_server_receive(srv, 2, SECAGG_UNMASK, out, out_len,
                                          err, sizeof err),
                    COHORT_OK);
    free(out);
    free(bad);
    bad = NULL;
    s.drop[2] = SECAGG_UNMASK; /* the driver leaves client 2 alone now */
  }
  free(msg);

  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
  const uint8_t *um0 = s.sent[SECAGG_UNMASK][0];
  size_t um0_len = s.sent_len[SECAGG_UNMASK][0];
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_UNMASK, um0, um0_len,
                                        err, sizeof err),
                  COHORT_ESTATE); /* duplicate */
  server_refuses_other_phases(srv, 1);
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_UNMASK), 4);
  CU_ASSERT_EQUAL(secagg_server_sum(srv, sum, NULL), COHORT_ESTATE);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_phase(srv), SECAGG_DONE);
  CU_ASSERT(sum_matches(&s));
  CU_ASSERT_EQUAL(secagg_server_bad_holders(srv, NULL, 0), 0);

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
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_CONSISTENCY), COHORT_OK);
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
  /* A coordinator that tells client 0 alone that survivor 1 dropped, so
   * that client 0 would reveal 1's mask-key share while the others reveal
   * 1's seed share. Client 0 attests to that list (to 2, 3 and 4 only),
   * which the coordinator's own check refuses (a tag to survivor 1 is
   * missing); and the tags of its neighbours cover the true list, so
   * client 0 never holds t attestations to its list and reveals nothing. */
  static const uint8_t lie[1] = {0x1d}; /* 0, 2, 3, 4 */
  Cohort__V1__SecAggSurvivors vm = survivors_of(lie, sizeof lie);
  uint8_t *in = NULL, *at0 = NULL;
  size_t in_len = 0, at0_len = 0;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&vm.base, &in, &in_len), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(secagg_client_attest(s.cl[0], in, in_len, &at0,
                                             &at0_len, err, sizeof err),
                        COHORT_OK);
  free(in);
  Cohort__V1__SecAggAttestations *am = tags_of(at0, at0_len);
  CU_ASSERT_EQUAL(am->n_tags, 3);
  for (size_t j = 0; j < am->n_tags; j++)
    CU_ASSERT_NOT_EQUAL(am->tags[j]->to, 1);
  cohort__v1__sec_agg_attestations__free_unpacked(am, NULL);
  CU_ASSERT_EQUAL(secagg_server_receive(srv, 0, SECAGG_CONSISTENCY, at0,
                                        at0_len, err, sizeof err),
                  COHORT_EINVAL);
  free(at0);
  s.refused[0] = SECAGG_CONSISTENCY; /* the driver leaves client 0 alone */
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_CONSISTENCY), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_FALSE(secagg_server_heard(srv, SECAGG_CONSISTENCY, 0));
  CU_ASSERT_EQUAL(secagg_server_count(srv, SECAGG_CONSISTENCY), 4);

  /* What the coordinator could relay to client 0: its neighbours' tags to
   * it, all over the true list. */
  Cohort__V1__SecAggTag *tp[4];
  Cohort__V1__SecAggAttestations *from[4];
  size_t nt = 0;
  for (uint32_t j = 1; j <= 4; j++) {
    from[j - 1] = tags_of(s.sent[SECAGG_CONSISTENCY][j],
                          s.sent_len[SECAGG_CONSISTENCY][j]);
    for (size_t r = 0; r < from[j - 1]->n_tags; r++)
      if (from[j - 1]->tags[r]->to == 0)
        tp[nt++] = from[j - 1]->tags[r];
  }
  CU_ASSERT_EQUAL_FATAL(nt, 4);
  CU_ASSERT_EQUAL_FATAL(tp[0]->from, 1);
  Cohort__V1__SecAggAttestations relay = COHORT__V1__SEC_AGG_ATTESTATIONS__INIT;
  /* All four: the one from 1, which its list says dropped, is refused. */
  relay.n_tags = nt;
  relay.tags = tp;
  client_refuses(s.cl[0], &relay.base, NULL, COHORT_EINVAL,
                 "an attestation from 1 to 0: that neighbour is not on its "
                 "survivor list");
  /* Those of 2, 3 and 4, as a coordinator true to its lie would relay
   * them: none verifies, so nothing is revealed, and all three named. */
  relay.n_tags = nt - 1;
  relay.tags = tp + 1;
  client_refuses(s.cl[0], &relay.base, NULL, COHORT_EINVAL,
                 "1 attestations to its survivor list (itself included) is "
                 "below the threshold 4; it reveals nothing");
  CU_ASSERT_EQUAL(named_in(g_err), 1u << 2 | 1u << 3 | 1u << 4);
  for (uint32_t j = 0; j < 4; j++)
    cohort__v1__sec_agg_attestations__free_unpacked(from[j], NULL);

  /* 0 attested to nothing the coordinator took, so it is asked for
   * nothing; every honest client reveals each owner once, of the right
   * kind. */
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
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
  CU_ASSERT(one_kind_per_owner(&s));
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
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_CONSISTENCY; ph++) {
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
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_CONSISTENCY), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_UNMASK), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT(sum_matches(&s));
  sim_free(&s);
}

/* ---- 7. identities, the consistency round, wrong shares ---- */

/* With an enrollment authority, a client refuses every peer whose identity
 * key lacks the authority's certificate of it: a missing one, a forged
 * one, another client's, another authority's, and a peer the coordinator
 * made up (its keys properly signed by a key of its own). The same
 * made-up peer passes a client that names no authority, so it is the
 * certificate that stops it; and a round of certified clients completes. */
static void test_secagg_enrollment_authority(void) {
  secagg_params p = {
      .n = 5, .threshold = 3, .degree = 4, .ring_bits = 24, .dim = 6};
  memset(p.round_seed, 0x3c, sizeof p.round_seed);
  sign_key *auth = NULL, *rogue = NULL, *made_up = NULL;
  CU_ASSERT_EQUAL_FATAL(make_identity(424242, 0, &auth), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(make_identity(424242, 1, &rogue), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(make_identity(424242, 2, &made_up), COHORT_OK);
  sim s, plain;
  CU_ASSERT_EQUAL_FATAL(sim_init_full(&s, &p, 91, 0, NULL, auth), COHORT_OK);
  /* The same clients (same seed), naming no authority. */
  CU_ASSERT_EQUAL_FATAL(sim_init(&plain, &p, 91, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_ADVERTISE), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_send(&plain, SECAGG_ADVERTISE), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&plain), COHORT_OK);

  size_t len = 0;
  uint8_t *msg = server_msg(&s, 0, &len);
  Cohort__V1__SecAggPeers *pm = peers_of(msg, len);
  CU_ASSERT_EQUAL_FATAL(pm->n_peers, 5);
  for (size_t i = 0; i < pm->n_peers; i++) /* relayed with each peer */
    CU_ASSERT(pm->peers[i]->identity_certificate.len == SIGN_CERT_LEN &&
              sign_check_cert(s.authority, pm->peers[i]->identity_public.data,
                              pm->peers[i]->identity_certificate.data) ==
                  COHORT_OK);
  cohort__v1__sec_agg_peers__free_unpacked(pm, NULL);
  uint8_t made_pub[SIGN_PUBLIC_LEN], rogue_cert[SIGN_CERT_LEN],
      made_cert[SIGN_CERT_LEN];
  sign_key_public(made_up, made_pub);
  CU_ASSERT_EQUAL_FATAL(sign_certify(rogue, s.ids[1].pub, rogue_cert),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_certify(rogue, made_pub, made_cert), COHORT_OK);
  for (int how = 0; how < 6; how++) {
    pm = peers_of(msg, len);
    Cohort__V1__SecAggKeys *e = pm->peers[1];
    CU_ASSERT_EQUAL_FATAL(e->index, 1);
    CU_ASSERT_EQUAL_FATAL(e->identity_certificate.len, SIGN_CERT_LEN);
    switch (how) {
    case 0: /* missing */
      e->identity_certificate.len = 0;
      break;
    case 1: /* forged */
      e->identity_certificate.data[10] ^= 1;
      break;
    case 2: /* another client's */
      memcpy(e->identity_certificate.data,
             pm->peers[2]->identity_certificate.data, SIGN_CERT_LEN);
      break;
    case 3: /* another authority's */
      memcpy(e->identity_certificate.data, rogue_cert, SIGN_CERT_LEN);
      break;
    default: /* a peer the coordinator made up, uncertified or certified
              * by another authority */
      memcpy(e->identity_public.data, made_pub, SIGN_PUBLIC_LEN);
      resign(e, &p, 1, made_up);
      if (how == 4)
        e->identity_certificate.len = 0;
      else
        memcpy(e->identity_certificate.data, made_cert, SIGN_CERT_LEN);
      break;
    }
    client_refuses(s.cl[0], &pm->base, NULL, COHORT_EAUTH,
                   "peer 1's identity key has no valid certificate from the "
                   "enrollment authority");
    if (how == 4) {
      /* Without an authority, the made-up peer's keys verify. */
      uint8_t *b = NULL, *out = NULL;
      size_t b_len = 0, out_len = 0;
      char err[ERRLEN];
      CU_ASSERT_EQUAL_FATAL(pb_pack(&pm->base, &b, &b_len), COHORT_OK);
      CU_ASSERT_EQUAL(secagg_client_share(plain.cl[0], b, b_len, &out, &out_len,
                                          err, sizeof err),
                      COHORT_OK);
      free(b);
      free(out);
    }
    e->identity_certificate.len = SIGN_CERT_LEN;
    cohort__v1__sec_agg_peers__free_unpacked(pm, NULL);
  }
  free(msg);
  /* The genuine certificates pass: the round completes. */
  for (int ph = SECAGG_SHARE; ph <= SECAGG_UNMASK; ph++) {
    CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  }
  CU_ASSERT_EQUAL(secagg_server_count(s.srv, SECAGG_UNMASK), 5);
  CU_ASSERT(sum_matches(&s));
  sim_free(&s);
  sim_free(&plain);
  sign_key_free(auth);
  sign_key_free(rogue);
  sign_key_free(made_up);
}

/* A coordinator that tells some clients a different survivor list (one in
 * which a client outside their own neighbourhood dropped) can still relay
 * their tags, since they go to the same neighbours; but the tags cover
 * their list. Every client then reveals exactly when its own tag and those
 * of its neighbours given the identical list number t, and otherwise
 * refuses, naming exactly the neighbours given another list. */
static void test_secagg_consistency_catches_equivocation(void) {
  secagg_params p = {
      .n = 8, .threshold = 3, .degree = 4, .ring_bits = 16, .dim = 5};
  memset(p.round_seed, 0x4e, sizeof p.round_seed);
  sim s;
  char err[ERRLEN];
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 92, 0), COHORT_OK);
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_MASKED; ph++) {
    CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  }
  secagg_graph *g = NULL;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_new(&p, &g), COHORT_OK);
  /* The true list is everyone: 0xff. Three of client 0's four neighbours
   * are told that a client outside their neighbourhood dropped. */
  uint8_t list[8];
  memset(list, 0xff, sizeof list);
  const uint32_t *n0 = secagg_graph_neighbours(g, 0);
  for (uint32_t j = 0; j < 3; j++) {
    uint32_t w = n0[j], z = 0;
    while (z == w || secagg_graph_adjacent(g, w, z))
      z++;
    list[w] = (uint8_t)(0xff & ~(1u << z));
  }
  for (uint32_t i = 0; i < 8; i++) {
    uint8_t *in = NULL, *out = NULL;
    size_t in_len = 0, out_len = 0;
    if (list[i] == 0xff) {
      in = server_msg(&s, i, &in_len); /* the coordinator's own, honest */
      Cohort__V1__SecAggSurvivors *vm =
          cohort__v1__sec_agg_survivors__unpack(NULL, in_len, in);
      CU_ASSERT_PTR_NOT_NULL_FATAL(vm);
      CU_ASSERT(vm->bitmap.len == 1 && vm->bitmap.data[0] == 0xff);
      cohort__v1__sec_agg_survivors__free_unpacked(vm, NULL);
    } else {
      Cohort__V1__SecAggSurvivors vm = survivors_of(&list[i], 1);
      CU_ASSERT_EQUAL_FATAL(pb_pack(&vm.base, &in, &in_len), COHORT_OK);
    }
    CU_ASSERT_EQUAL_FATAL(secagg_client_attest(s.cl[i], in, in_len, &out,
                                               &out_len, err, sizeof err),
                          COHORT_OK);
    CU_ASSERT_EQUAL(secagg_server_receive(s.srv, i, SECAGG_CONSISTENCY, out,
                                          out_len, err, sizeof err),
                    COHORT_OK);
    free(in);
    free(out);
  }
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
  int refused0 = 0, tolerated = 0;
  for (uint32_t i = 0; i < 8; i++) {
    const uint32_t *nb = secagg_graph_neighbours(g, i);
    uint32_t same = 1;
    uint64_t other = 0;
    for (uint32_t j = 0; j < p.degree; j++) {
      if (list[nb[j]] == list[i])
        same++;
      else
        other |= UINT64_C(1) << nb[j];
    }
    size_t in_len = 0, out_len = 0;
    uint8_t *in = server_msg(&s, i, &in_len), *out = NULL;
    err[0] = 0;
    int rc = secagg_client_unmask(s.cl[i], in, in_len, &out, &out_len, err,
                                  sizeof err);
    free(in);
    if (same >= p.threshold) {
      CU_ASSERT_EQUAL(rc, COHORT_OK);
      tolerated += rc == COHORT_OK && other != 0;
      if (rc == COHORT_OK)
        CU_ASSERT_EQUAL(secagg_server_receive(s.srv, i, SECAGG_UNMASK, out,
                                              out_len, err, sizeof err),
                        COHORT_OK);
    } else {
      CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
      CU_ASSERT_PTR_NULL(out);
      CU_ASSERT_EQUAL(secagg_client_phase(s.cl[i]), SECAGG_UNMASK);
      CU_ASSERT_EQUAL(named_in(err), other);
      if (named_in(err) != other)
        printf("\n  client %u: '%s', expected neighbours %#llx\n", i, err,
               (unsigned long long)other);
      refused0 += i == 0;
    }
    free(out);
  }
  /* Client 0 has one neighbour on its list: it refuses. Some client with a
   * neighbour on another list still reveals. */
  CU_ASSERT_EQUAL(refused0, 1);
  CU_ASSERT(tolerated > 0);
  secagg_graph_free(g);
  sim_free(&s);
}

/* The shares of the SecAggShares messages out[0..n) addressed to `to`,
 * from the senders whose bit is set in `from` (a bit mask), packed as the
 * coordinator would relay them. */
static uint8_t *shares_for(uint8_t **out, const size_t *out_len, uint32_t n,
                           uint32_t to, uint64_t from, size_t *len) {
  Cohort__V1__SecAggShares *m[16] = {0};
  Cohort__V1__SecAggShare *pick[16 * 16];
  size_t np = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!(from >> i & 1) || !out[i])
      continue;
    m[i] = cohort__v1__sec_agg_shares__unpack(NULL, out_len[i], out[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m[i]);
    for (size_t j = 0; j < m[i]->n_shares; j++)
      if (m[i]->shares[j]->to == to)
        pick[np++] = m[i]->shares[j];
  }
  Cohort__V1__SecAggShares d = COHORT__V1__SEC_AGG_SHARES__INIT;
  d.n_shares = np;
  d.shares = pick;
  uint8_t *b = NULL;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&d.base, &b, len), COHORT_OK);
  for (uint32_t i = 0; i < n; i++)
    if (m[i])
      cohort__v1__sec_agg_shares__free_unpacked(m[i], NULL);
  return b;
}

/* A client counts an attestation only from a neighbour with whom it agreed
 * on a key. A coordinator that kept three neighbours (7, 8, 9) out of
 * client 0's SecAggPeers, then named them in its leave-out list and listed
 * them as survivors, had client 0 accept them: the attestation key with a
 * neighbour that never advertised to it is all zeros, which the coordinator
 * knows, so it forged their three tags. With the tags of clients 1 and 2,
 * told the same list, client 0 counted t = 6 and revealed the mask-key
 * shares of 3, 4, 5 and 6, which had uploaded: two real neighbours attested
 * to its list, not t - 1 = 5. It now refuses such a list. */
static void test_secagg_attest_needs_advertised_neighbours(void) {
  secagg_params p = {
      .n = 10, .threshold = 6, .degree = 9, .ring_bits = 16, .dim = 4};
  memset(p.round_seed, 0x5a, sizeof p.round_seed);
  const uint32_t n = p.n;
  const uint64_t kept_out = 0x380; /* 7, 8, 9: hidden from client 0 */
  sim s;
  char err[ERRLEN] = "";
  CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 97, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_send(&s, SECAGG_ADVERTISE), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);

  /* SHARE: client 0 is shown itself and 1..6 only; the others see all. */
  uint8_t *out[10] = {0};
  size_t out_len[10] = {0};
  for (uint32_t i = 0; i < n; i++) {
    size_t len = 0;
    uint8_t *in = server_msg(&s, i, &len);
    if (i == 0) {
      Cohort__V1__SecAggPeers *all = peers_of(in, len);
      Cohort__V1__SecAggKeys *keep[10];
      Cohort__V1__SecAggPeers some = COHORT__V1__SEC_AGG_PEERS__INIT;
      for (size_t j = 0; j < all->n_peers; j++)
        if (!(kept_out >> all->peers[j]->index & 1))
          keep[some.n_peers++] = all->peers[j];
      some.peers = keep;
      free(in);
      CU_ASSERT_EQUAL_FATAL(pb_pack(&some.base, &in, &len), COHORT_OK);
      cohort__v1__sec_agg_peers__free_unpacked(all, NULL);
    }
    CU_ASSERT_EQUAL_FATAL(secagg_client_share(s.cl[i], in, len, &out[i],
                                              &out_len[i], err, sizeof err),
                          COHORT_OK);
    free(in);
  }
  /* MASKED for clients 0, 1 and 2: client 0 gets the shares of 1..6 and is
   * told to leave out 7, 8 and 9. */
  Cohort__V1__SecAggComplaints lo = COHORT__V1__SEC_AGG_COMPLAINTS__INIT;
  uint32_t hidden[] = {7, 8, 9};
  for (uint32_t i = 0; i < 3; i++) {
    size_t len = 0, clen = 0, llen = 0, ylen = 0;
    uint8_t *in = shares_for(out, out_len, n, i,
                             i == 0 ? 0x7e : 0x3ff & ~(1u << i), &len);
    uint8_t *comp = NULL, *leave = NULL, *y = NULL;
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_check(s.cl[i], in, len, &comp, &clen, err, sizeof err),
        COHORT_OK);
    lo.n_senders = i == 0 ? 3 : 0;
    lo.senders = hidden;
    CU_ASSERT_EQUAL_FATAL(pb_pack(&lo.base, &leave, &llen), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(secagg_client_mask_checked(s.cl[i], leave, llen,
                                                     s.input + i * p.dim, &y,
                                                     &ylen, err, sizeof err),
                          COHORT_OK);
    free(in);
    free(comp);
    free(leave);
    free(y);
  }
  /* CONSISTENCY: 0, 1, 2 and the hidden 7, 8, 9 survive; 3..6 "dropped". */
  uint8_t bits[2] = {0x87, 0x03};
  Cohort__V1__SecAggSurvivors sv = survivors_of(bits, sizeof bits);
  uint8_t *list = NULL, *att[3] = {0};
  size_t list_len = 0, att_len[3] = {0};
  CU_ASSERT_EQUAL_FATAL(pb_pack(&sv.base, &list, &list_len), COHORT_OK);
  for (uint32_t i = 1; i < 3; i++)
    CU_ASSERT_EQUAL_FATAL(secagg_client_attest(s.cl[i], list, list_len, &att[i],
                                               &att_len[i], err, sizeof err),
                          COHORT_OK);
  err[0] = '\0';
  int rc = secagg_client_attest(s.cl[0], list, list_len, &att[0], &att_len[0],
                                err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "survivor 7"));
  CU_ASSERT_EQUAL(secagg_client_phase(s.cl[0]), SECAGG_CONSISTENCY);
  if (rc == COHORT_OK) {
    /* What the coordinator then did: 1's and 2's real tags to client 0,
     * and three tags under the all-zero key. */
    uint8_t digest[CRYPTO_SHA256_LEN], zero[KEX_KEY_LEN] = {0};
    uint8_t forged[3][SECAGG_TAG_LEN];
    CU_ASSERT_EQUAL_FATAL(
        secagg_survivors_digest(&p, bits, sizeof bits, digest), COHORT_OK);
    Cohort__V1__SecAggTag tg[5], *tgp[5];
    size_t nt = 0;
    Cohort__V1__SecAggAttestations *real[3] = {0};
    for (uint32_t i = 1; i < 3; i++) {
      real[i] = tags_of(att[i], att_len[i]);
      for (size_t j = 0; j < real[i]->n_tags; j++)
        if (real[i]->tags[j]->to == 0)
          tgp[nt++] = real[i]->tags[j];
    }
    for (uint32_t j = 0; j < 3; j++) {
      secagg_attest_tag(zero, hidden[j], 0, digest, forged[j]);
      cohort__v1__sec_agg_tag__init(&tg[j]);
      tg[j].from = hidden[j];
      tg[j].to = 0;
      tg[j].tag.data = forged[j];
      tg[j].tag.len = SECAGG_TAG_LEN;
      tgp[nt++] = &tg[j];
    }
    Cohort__V1__SecAggAttestations am = COHORT__V1__SEC_AGG_ATTESTATIONS__INIT;
    am.n_tags = nt;
    am.tags = tgp;
    uint8_t *ab = NULL, *rv = NULL;
    size_t ab_len = 0, rv_len = 0;
    CU_ASSERT_EQUAL_FATAL(pb_pack(&am.base, &ab, &ab_len), COHORT_OK);
    if (secagg_client_unmask(s.cl[0], ab, ab_len, &rv, &rv_len, err,
                             sizeof err) == COHORT_OK) {
      Cohort__V1__SecAggUnmask *um =
          cohort__v1__sec_agg_unmask__unpack(NULL, rv_len, rv);
      CU_ASSERT_PTR_NOT_NULL_FATAL(um);
      printf("\n  client 0 revealed, on 2 real attestations and 3 forged:");
      for (size_t j = 0; j < um->n_reveals; j++)
        if (um->reveals[j]->mask_key)
          printf(" the mask-key share of %u", um->reveals[j]->owner);
      printf("\n");
      cohort__v1__sec_agg_unmask__free_unpacked(um, NULL);
    }
    for (uint32_t i = 1; i < 3; i++)
      cohort__v1__sec_agg_attestations__free_unpacked(real[i], NULL);
    free(ab);
    free(rv);
  }
  for (uint32_t i = 0; i < 3; i++)
    free(att[i]);
  for (uint32_t i = 0; i < n; i++)
    free(out[i]);
  free(list);
  sim_free(&s);
}

/* One holder's reveals, edited on the way to the coordinator: left out, or
 * one field element of the share off by one. */
typedef struct reveal_edit {
  uint32_t holder, owner;
  int omit;
  size_t chunk;
} reveal_edit;

/* UNMASK by hand: every client heard in CONSISTENCY, in the order given
 * (NULL: by index), reveals, and its SecAggUnmask goes to the coordinator
 * with the edits applied; then UNMASK closes, whose status is returned. */
static int unmask_edited(sim *s, const uint32_t *order, const reveal_edit *ed,
                         size_t n_ed) {
  char err[ERRLEN];
  for (uint32_t r = 0; r < s->p.n; r++) {
    uint32_t i = order ? order[r] : r;
    if (!secagg_server_heard(s->srv, SECAGG_CONSISTENCY, i))
      continue;
    size_t in_len = 0, out_len = 0, b_len = 0;
    uint8_t *in = server_msg(s, i, &in_len), *out = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(secagg_client_unmask(s->cl[i], in, in_len, &out,
                                               &out_len, err, sizeof err),
                          COHORT_OK);
    free(in);
    Cohort__V1__SecAggUnmask *m =
        cohort__v1__sec_agg_unmask__unpack(NULL, out_len, out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    Cohort__V1__SecAggReveal **keep = calloc(m->n_reveals + 1, sizeof *keep);
    CU_ASSERT_PTR_NOT_NULL_FATAL(keep);
    size_t nk = 0;
    for (size_t v = 0; v < m->n_reveals; v++) {
      Cohort__V1__SecAggReveal *e = m->reveals[v];
      int omit = 0;
      for (size_t x = 0; x < n_ed; x++) {
        if (ed[x].holder != i || ed[x].owner != e->owner)
          continue;
        if (ed[x].omit) {
          omit = 1;
        } else {
          CU_ASSERT_FATAL(ed[x].chunk < e->n_share);
          e->share[ed[x].chunk] = (e->share[ed[x].chunk] + 1) % SHAMIR_PRIME;
        }
      }
      if (!omit)
        keep[nk++] = e;
    }
    Cohort__V1__SecAggUnmask edited = COHORT__V1__SEC_AGG_UNMASK__INIT;
    edited.index = m->index;
    edited.n_reveals = nk;
    edited.reveals = keep;
    CU_ASSERT_EQUAL_FATAL(pb_pack(&edited.base, &b, &b_len), COHORT_OK);
    CU_ASSERT_EQUAL(secagg_server_receive(s->srv, i, SECAGG_UNMASK, b, b_len,
                                          err, sizeof err),
                    COHORT_OK);
    free(keep);
    free(b);
    free(out);
    cohort__v1__sec_agg_unmask__free_unpacked(m, NULL);
  }
  return sim_close(s);
}

/* A holder that reveals a wrong share, where more than t holders reveal:
 * decoding finds it, the coordinator names it and sets all its shares
 * aside, and the sum is still exact; with more wrong shares of one secret
 * than decoding corrects, the round aborts naming that secret's client;
 * and a holder found out is set aside also where its share was among only
 * t (so never a sum over a wrong seed). Seven clients, the complete graph,
 * t = 3: every secret has seven shares, two errors are corrected. */
static void test_secagg_wrong_share_named(void) {
  secagg_params p = {
      .n = 7, .threshold = 3, .degree = 6, .ring_bits = 32, .dim = 9};
  memset(p.round_seed, 0x6b, sizeof p.round_seed);
  static const uint32_t first1[7] = {1, 0, 2, 3, 4, 5, 6};
  static const struct {
    const char *what;
    const uint32_t *order;
    reveal_edit ed[8];
    size_t n_ed;
    uint32_t bad[2], n_bad;
    const char *abort; /* NULL: completes */
  } cases[] = {
      {"none wrong", NULL, {{0, 0, 0, 0}}, 0, {0}, 0, NULL},
      {"one element of holder 4's share of 2's seed, revealed last",
       NULL,
       {{4, 2, 0, 3}},
       1,
       {4},
       1,
       NULL},
      {"holder 1's share of 5's seed, in the first t of every secret",
       first1,
       {{1, 5, 0, 0}},
       1,
       {1},
       1,
       NULL},
      {"holder 6's own seed share", NULL, {{6, 6, 0, 4}}, 1, {6}, 1, NULL},
      {"holders 1 and 4 on one secret: (7 - 3) / 2 errors",
       NULL,
       {{1, 2, 0, 4}, {4, 2, 0, 1}},
       2,
       {1, 4},
       2,
       NULL},
      {"every share of holder 3",
       NULL,
       {{3, 0, 0, 0},
        {3, 1, 0, 1},
        {3, 2, 0, 2},
        {3, 3, 0, 3},
        {3, 4, 0, 4},
        {3, 5, 0, 0},
        {3, 6, 0, 1}},
       7,
       {3},
       1,
       NULL},
      {"holders 0, 1 and 4 on 2's seed: more than decoding corrects",
       NULL,
       {{0, 2, 0, 0}, {1, 2, 0, 0}, {4, 2, 0, 0}},
       3,
       {0},
       0,
       "client 2: the 7 shares of its self-mask seed revealed do not lie on "
       "one polynomial"},
      {"0's seed revealed by t holders, holder 4 wrong there and on 5's",
       NULL,
       {{0, 0, 1, 0},
        {3, 0, 1, 0},
        {5, 0, 1, 0},
        {6, 0, 1, 0},
        {4, 0, 0, 2},
        {4, 5, 0, 2}},
       6,
       {4},
       1,
       "client 0: 2 consistent shares of its self-mask seed were revealed, 3 "
       "are needed"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    sim s;
    CU_ASSERT_EQUAL_FATAL(sim_init(&s, &p, 93, 0), COHORT_OK);
    for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_CONSISTENCY; ph++) {
      CU_ASSERT_EQUAL_FATAL(sim_send(&s, (secagg_phase)ph), COHORT_OK);
      CU_ASSERT_EQUAL_FATAL(sim_close(&s), COHORT_OK);
    }
    int rc = unmask_edited(&s, cases[c].order, cases[c].ed, cases[c].n_ed);
    uint32_t bad[8] = {0};
    uint32_t n_bad = secagg_server_bad_holders(s.srv, bad, 8);
    int ok;
    if (!cases[c].abort) {
      ok = rc == COHORT_OK && secagg_server_phase(s.srv) == SECAGG_DONE &&
           sum_matches(&s);
    } else {
      uint64_t sum[9];
      ok = rc == COHORT_EABORTED &&
           secagg_server_sum(s.srv, sum, NULL) == COHORT_EABORTED &&
           strstr(secagg_server_abort_reason(s.srv), cases[c].abort);
    }
    ok = ok && n_bad == cases[c].n_bad &&
         memcmp(bad, cases[c].bad, n_bad * sizeof *bad) == 0;
    CU_ASSERT(ok);
    if (!ok)
      printf("\n  %s: status %d, %u bad holders (first %u), reason '%s'%s\n",
             cases[c].what, rc, n_bad, bad[0],
             secagg_server_abort_reason(s.srv),
             rc == COHORT_OK && !sum_matches(&s) ? ", and a wrong sum" : "");
    sim_free(&s);
  }
}

/* A client checks the plan against its policy before anything: the
 * default one (semi-malicious, 5% corrupt, 40 bits) takes the threshold
 * secagg_policy_min_threshold gives and refuses one less, naming both; a
 * lenient policy takes that; a degree that leaves the honest clients
 * apart under bound (3) is refused; and an identity key is required. */
static void test_secagg_client_checks_plan(void) {
  secagg_params p = {.n = 100, .degree = 99, .ring_bits = 32, .dim = 4};
  memset(p.round_seed, 0x12, sizeof p.round_seed);
  secagg_policy dflt = secagg_policy_default(), easy = lenient();
  char err[ERRLEN] = "", want[ERRLEN];
  uint32_t t_min = 0;
  CU_ASSERT_EQUAL_FATAL(
      secagg_policy_min_threshold(&dflt, 100, 99, &t_min, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_FATAL(t_min > 51 && t_min <= 99);
  sign_key *key = NULL;
  CU_ASSERT_EQUAL_FATAL(make_identity(95, 0, &key), COHORT_OK);
  prg rng;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&rng, 95), COHORT_OK);
  secagg_identity id = {.key = key}, none = {0};
  static char sentinel;
  secagg_client *c = (secagg_client *)(void *)&sentinel; /* cleared */
  p.threshold = t_min - 1;
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, NULL, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(c);
  snprintf(want, sizeof want,
           "threshold %u is below the %u this client "
           "requires",
           t_min - 1, t_min);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, &dflt, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, &easy, &rng, &c, err, sizeof err),
      COHORT_OK);
  secagg_client_free(c);
  p.threshold = t_min;
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, NULL, &rng, &c, err, sizeof err),
      COHORT_OK);
  secagg_client_free(c);
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &none, NULL, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "no identity key"));
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, NULL, NULL, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 100, &id, NULL, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  /* t = 1: never one holder alone, whatever the policy. */
  p.threshold = 1;
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, &easy, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "threshold 1 must be in 2..99"));
  /* k = 4 of 100 at 5% corrupt: bound (3) is 100^2 0.05^4 = 2^-4. */
  p.degree = 4;
  p.threshold = 4;
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, NULL, &rng, &c, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "leaves the honest ones disconnected"));
  CU_ASSERT_EQUAL(
      secagg_client_new(&p, 0, &id, &easy, &rng, &c, err, sizeof err),
      COHORT_OK);
  secagg_client_free(c);
  prg_free(&rng);
  sign_key_free(key);
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

/* A measurement, not a check of the protocol: run when asked for. */
static const char *timing_off(void) {
  return getenv("COHORT_SECAGG_TIMING")
             ? NULL
             : "a timing run; COHORT_SECAGG_TIMING=N "
               "runs it with N clients";
}

static void test_secagg_timing(void) {
  const char *env = getenv("COHORT_SECAGG_TIMING");
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
  /* 30% drop after sharing, or in the phase COHORT_SECAGG_DROP (0..4). */
  secagg_phase when = SECAGG_MASKED;
  const char *drop = getenv("COHORT_SECAGG_DROP");
  if (drop && *drop >= '0' && *drop <= '4')
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
      {"a client told another survivor list reveals nothing; the others "
       "reveal one kind per owner",
       test_secagg_never_both_shares},
      {"the coordinator refuses reveals of the wrong kind",
       test_secagg_server_refuses_wrong_kind},
      {"below the threshold: a clean abort, no output",
       test_secagg_below_threshold},
      {"masked uploads of zeros and of ones are uniform bytes",
       test_secagg_masked_uploads_uniform},
      {"a tampered share is refused by its recipient",
       test_secagg_tampered_share},
      {"a client checks the plan against its policy",
       test_secagg_client_checks_plan},
      {"with an authority, uncertified or made-up peers are refused",
       test_secagg_enrollment_authority},
      {"tags over another survivor list are not counted, and named",
       test_secagg_consistency_catches_equivocation},
      {"a neighbour kept out of SecAggPeers, then left out and listed "
       "alive, cannot attest: tags under the all-zero key are not counted",
       test_secagg_attest_needs_advertised_neighbours},
      {"a wrong revealed share: holder named, sum exact, or a clean abort",
       test_secagg_wrong_share_named},
      {"timing n=100 dim=100k (COHORT_SECAGG_TIMING)", test_secagg_timing,
       timing_off},
  };
  return test_add_suite("secagg", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
