/* Secure aggregation against malicious insiders (docs/secagg.md, "A
 * malicious insider"): selected clients that send random sealed blobs in
 * SHARE, or that complain falsely of honest neighbours. An in-process
 * driver runs the real client and coordinator state machines through the
 * complaint path of MASKED; the tests assert that the round completes with
 * exactly the honest clients' ring sum, that the insiders are dropped and
 * their masked inputs refused, that no honest survivor has a share of its
 * mask key revealed (so the coordinator never holds both of its secrets),
 * and that false complaints drop an honest client only past the documented
 * bound. Fixed seeds and keys, so a failure reproduces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "pb.h"
#include "prg.h"
#include "secagg.h"
#include "sign.h"

#define ERRLEN 256
#define MAX_N 16

/* How a client misbehaves. */
typedef struct role {
  uint32_t garbage_to; /* sealed blobs replaced by random bytes: a bitmask of
                          recipients (all ones: every neighbour) */
  uint32_t accuses;    /* complains of these (bitmask), whatever it got */
} role;

typedef struct run {
  secagg_params p;
  secagg_server *srv;
  secagg_client *cl[MAX_N];
  sign_key *id[MAX_N];
  prg rng[MAX_N];
  secagg_peer_identity ids[MAX_N];
  role who[MAX_N];
  uint64_t *input; /* n * dim */
  int masked[MAX_N];
  /* For each owner: how many reveals of its seed and of its mask key. */
  uint32_t seed_reveals[MAX_N], key_reveals[MAX_N];
  char err[ERRLEN];
} run;

static void run_free(run *r) {
  for (uint32_t i = 0; i < r->p.n; i++) {
    secagg_client_free(r->cl[i]);
    prg_free(&r->rng[i]);
    sign_key_free(r->id[i]);
  }
  secagg_server_free(r->srv);
  free(r->input);
}

static void run_init(run *r, uint32_t n, uint32_t k, uint32_t t) {
  memset(r, 0, sizeof *r);
  r->p = (secagg_params){
      .n = n, .degree = k, .threshold = t, .ring_bits = 20, .dim = 33};
  memset(r->p.round_seed, 0x5a, sizeof r->p.round_seed);
  secagg_policy lenient = {
      .adversary = SECAGG_CURIOUS, .corrupt = 0, .security_bits = 40};
  r->input = malloc(n * r->p.dim * sizeof *r->input);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->input);
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 2112), COHORT_OK);
  for (size_t e = 0; e < n * r->p.dim; e++)
    r->input[e] = prg_u64(&g) & ((UINT64_C(1) << r->p.ring_bits) - 1);
  for (uint32_t i = 0; i < n; i++) {
    uint8_t raw[SIGN_SEED_LEN];
    prg_bytes(&g, raw, sizeof raw);
    CU_ASSERT_EQUAL_FATAL(sign_key_from_seed(raw, &r->id[i]), COHORT_OK);
    sign_key_public(r->id[i], r->ids[i].pub);
  }
  prg_free(&g);
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_new(&r->p, r->ids, &r->srv, r->err, ERRLEN), COHORT_OK);
  for (uint32_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL_FATAL(prg_init_u64(&r->rng[i], 7000 + i), COHORT_OK);
    secagg_identity id = {.key = r->id[i]};
    CU_ASSERT_EQUAL_FATAL(secagg_client_new(&r->p, i, &id, &lenient, &r->rng[i],
                                            &r->cl[i], r->err, ERRLEN),
                          COHORT_OK);
  }
}

static void close_phase(run *r) {
  int rc = secagg_server_close_phase(r->srv, r->err, ERRLEN);
  if (rc)
    fprintf(stderr, "close: %s\n", r->err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
}

/* Replaces the sealed blobs i addresses to its garbage_to with random
 * bytes of the same length, as the hostile client of the review did. */
static void spoil(run *r, uint32_t i, uint8_t **msg, size_t *len) {
  Cohort__V1__SecAggShares *m =
      cohort__v1__sec_agg_shares__unpack(NULL, *len, *msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 99 + i), COHORT_OK);
  for (size_t j = 0; j < m->n_shares; j++)
    if (r->who[i].garbage_to >> m->shares[j]->to & 1)
      prg_bytes(&g, m->shares[j]->sealed.data, m->shares[j]->sealed.len);
  prg_free(&g);
  free(*msg);
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m->base, msg, len), COHORT_OK);
  cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
}

/* Its complaints: what secagg_client_check found, or, for a false
 * accuser, its accusation list of neighbours that sent shares. */
static void complain(run *r, uint32_t i, const uint8_t *shares,
                     size_t shares_len) {
  uint8_t *out = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_client_check(r->cl[i], shares, shares_len, &out,
                                            &len, r->err, ERRLEN),
                        COHORT_OK);
  if (r->who[i].accuses) {
    free(out);
    uint32_t named[MAX_N];
    Cohort__V1__SecAggComplaints m = COHORT__V1__SEC_AGG_COMPLAINTS__INIT;
    m.senders = named;
    for (uint32_t v = 0; v < r->p.n; v++)
      if (r->who[i].accuses >> v & 1)
        named[m.n_senders++] = v;
    CU_ASSERT_EQUAL_FATAL(pb_pack(&m.base, &out, &len), COHORT_OK);
  }
  CU_ASSERT_EQUAL(secagg_server_complain(r->srv, i, out, len, r->err, ERRLEN),
                  COHORT_OK);
  free(out);
}

/* Runs the whole round; the insiders follow the protocol except for what
 * their role says. Returns the close of UNMASK. */
static int run_round(run *r) {
  const uint32_t n = r->p.n;
  uint8_t *out = NULL, *in = NULL;
  size_t len = 0, in_len = 0;
  for (uint32_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_advertise(r->cl[i], &out, &len, r->err, ERRLEN),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(secagg_server_receive(r->srv, i, SECAGG_ADVERTISE,
                                                out, len, r->err, ERRLEN),
                          COHORT_OK);
    free(out);
  }
  close_phase(r);
  for (uint32_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL_FATAL(
        secagg_server_message(r->srv, i, &in, &in_len, r->err, ERRLEN),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_share(r->cl[i], in, in_len, &out, &len, r->err, ERRLEN),
        COHORT_OK);
    free(in);
    if (r->who[i].garbage_to)
      spoil(r, i, &out, &len);
    /* The coordinator cannot open a sealed share: it takes them. */
    CU_ASSERT_EQUAL_FATAL(secagg_server_receive(r->srv, i, SECAGG_SHARE, out,
                                                len, r->err, ERRLEN),
                          COHORT_OK);
    free(out);
  }
  close_phase(r);
  CU_ASSERT_EQUAL_FATAL(secagg_server_open_complaints(r->srv, r->err, ERRLEN),
                        COHORT_OK);
  for (uint32_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL_FATAL(
        secagg_server_message(r->srv, i, &in, &in_len, r->err, ERRLEN),
        COHORT_OK);
    complain(r, i, in, in_len);
    free(in);
  }
  /* While complaints are open, no masked input is taken. */
  CU_ASSERT_EQUAL(
      secagg_server_receive(r->srv, 0, SECAGG_MASKED, NULL, 0, r->err, ERRLEN),
      COHORT_ESTATE);
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_close_complaints(r->srv, NULL, r->err, ERRLEN), COHORT_OK);
  for (uint32_t i = 0; i < n; i++) {
    const uint64_t *x = r->input + (size_t)i * r->p.dim;
    if (secagg_server_dropped(r->srv, i)) {
      /* A dropped client is told nothing and its input is refused, however
       * it masks it. */
      CU_ASSERT_EQUAL(
          secagg_server_leave_out(r->srv, i, &in, &in_len, r->err, ERRLEN),
          COHORT_ESTATE);
      CU_ASSERT_EQUAL_FATAL(secagg_client_mask_checked(r->cl[i], NULL, 0, x,
                                                       &out, &len, r->err,
                                                       ERRLEN),
                            COHORT_OK);
      CU_ASSERT_EQUAL(secagg_server_receive(r->srv, i, SECAGG_MASKED, out, len,
                                            r->err, ERRLEN),
                      COHORT_ESTATE);
      free(out);
      continue;
    }
    CU_ASSERT_EQUAL_FATAL(
        secagg_server_leave_out(r->srv, i, &in, &in_len, r->err, ERRLEN),
        COHORT_OK);
    int rc = secagg_client_mask_checked(r->cl[i], in, in_len, x, &out, &len,
                                        r->err, ERRLEN);
    free(in);
    if (rc)
      continue; /* too few neighbours left to mask with: a dropout */
    CU_ASSERT_EQUAL_FATAL(secagg_server_receive(r->srv, i, SECAGG_MASKED, out,
                                                len, r->err, ERRLEN),
                          COHORT_OK);
    r->masked[i] = 1;
    free(out);
  }
  close_phase(r);
  for (secagg_phase ph = SECAGG_CONSISTENCY; ph <= SECAGG_UNMASK; ph++) {
    for (uint32_t i = 0; i < n; i++) {
      if (!r->masked[i])
        continue;
      CU_ASSERT_EQUAL_FATAL(
          secagg_server_message(r->srv, i, &in, &in_len, r->err, ERRLEN),
          COHORT_OK);
      int rc = ph == SECAGG_CONSISTENCY
                   ? secagg_client_attest(r->cl[i], in, in_len, &out, &len,
                                          r->err, ERRLEN)
                   : secagg_client_unmask(r->cl[i], in, in_len, &out, &len,
                                          r->err, ERRLEN);
      free(in);
      if (rc)
        fprintf(stderr, "client %u: %s\n", i, r->err);
      CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
      if (ph == SECAGG_UNMASK) {
        Cohort__V1__SecAggUnmask *m =
            cohort__v1__sec_agg_unmask__unpack(NULL, len, out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        for (size_t j = 0; j < m->n_reveals; j++) {
          uint32_t o = m->reveals[j]->owner;
          if (m->reveals[j]->mask_key)
            r->key_reveals[o]++;
          else
            r->seed_reveals[o]++;
        }
        cohort__v1__sec_agg_unmask__free_unpacked(m, NULL);
      }
      CU_ASSERT_EQUAL_FATAL(
          secagg_server_receive(r->srv, i, ph, out, len, r->err, ERRLEN),
          COHORT_OK);
      free(out);
    }
    if (ph == SECAGG_CONSISTENCY)
      close_phase(r);
  }
  int rc = secagg_server_close_phase(r->srv, r->err, ERRLEN);
  if (rc)
    fprintf(stderr, "unmask: %s\n", r->err);
  return rc;
}

/* The sum is exactly the ring sum of the clients that masked, and they are
 * the ones expected; no honest survivor had a mask-key share revealed, and
 * nothing at all was revealed of a dropped client. */
static void check_outcome(run *r, uint32_t expect_in_sum) {
  const size_t dim = r->p.dim;
  uint64_t *sum = calloc(dim, sizeof *sum), *want = calloc(dim, sizeof *want);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  uint32_t inputs = 0, expected = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_server_sum(r->srv, sum, &inputs), COHORT_OK);
  for (uint32_t i = 0; i < r->p.n; i++) {
    CU_ASSERT_EQUAL(r->masked[i], (int)(expect_in_sum >> i & 1));
    if (!(expect_in_sum >> i & 1))
      continue;
    expected++;
    for (size_t e = 0; e < dim; e++)
      want[e] = (want[e] + r->input[i * dim + e]) &
                ((UINT64_C(1) << r->p.ring_bits) - 1);
  }
  CU_ASSERT_EQUAL(inputs, expected);
  CU_ASSERT_EQUAL(memcmp(sum, want, dim * sizeof *sum), 0);
  for (uint32_t i = 0; i < r->p.n; i++) {
    if (r->masked[i])
      CU_ASSERT_EQUAL(r->key_reveals[i], 0);
    if (secagg_server_dropped(r->srv, i))
      CU_ASSERT_EQUAL(r->key_reveals[i] + r->seed_reveals[i], 0);
  }
  free(sum);
  free(want);
}

static uint32_t all_but(uint32_t n, uint32_t bad) {
  return ((UINT32_C(1) << n) - 1) & ~bad;
}

/* One client sends random sealed blobs to every neighbour: every honest
 * client complains, the insider is dropped and its masked input refused,
 * and the round sums the nine honest inputs exactly. */
static void test_one_lying_insider(void) {
  run r;
  run_init(&r, 10, 9, 6);
  r.who[3].garbage_to = ~UINT32_C(0);
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  CU_ASSERT_TRUE(secagg_server_dropped(r.srv, 3));
  for (uint32_t i = 0; i < 10; i++)
    if (i != 3)
      CU_ASSERT_FALSE(secagg_server_dropped(r.srv, i));
  check_outcome(&r, all_but(10, 1u << 3));
  run_free(&r);
}

/* Two insiders in a SecAgg+ graph (k = 8 of n = 12), one of them also a
 * false accuser of two honest neighbours: both insiders are dropped, every
 * honest client stays, and the sum is the ten honest inputs. */
static void test_two_lying_insiders(void) {
  run r;
  run_init(&r, 12, 8, 5);
  r.who[2].garbage_to = ~UINT32_C(0);
  r.who[9].garbage_to = ~UINT32_C(0);
  /* Client 9 also accuses two of its neighbours that are honest. */
  uint32_t nb[8], named = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_row(&r.p, 9, nb), COHORT_OK);
  for (uint32_t j = 0; j < 8 && __builtin_popcount(named) < 2; j++)
    if (nb[j] != 2)
      named |= 1u << nb[j];
  r.who[9].accuses = named;
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  CU_ASSERT_TRUE(secagg_server_dropped(r.srv, 2));
  CU_ASSERT_TRUE(secagg_server_dropped(r.srv, 9));
  check_outcome(&r, all_but(12, (1u << 2) | (1u << 9)));
  run_free(&r);
}

/* An insider that spoils the shares to only two neighbours loses only
 * those two pairs: it stays in the round, and so does everyone else. */
static void test_partial_insider_loses_pairs(void) {
  run r;
  run_init(&r, 10, 9, 6);
  r.who[5].garbage_to = (1u << 1) | (1u << 8);
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  for (uint32_t i = 0; i < 10; i++)
    CU_ASSERT_FALSE(secagg_server_dropped(r.srv, i));
  /* The pair's members reveal nothing of each other. */
  check_outcome(&r, all_but(10, 0));
  CU_ASSERT_EQUAL(r.seed_reveals[5], 8u); /* itself and 7 of 9 neighbours */
  run_free(&r);
}

/* False accusers (docs/secagg.md): each complaint leaves one pair out.
 * Three liars accusing client 0 (k - t = 3 with k = 9, t = 6) cannot get it
 * dropped: it masks with the six others and its input is summed. A fourth
 * liar can, exactly as four dropouts around it could; the round still
 * commits the rest. A liar that accuses every neighbour only drops
 * itself. */
static void test_false_accusers_bounded(void) {
  run r;
  run_init(&r, 10, 9, 6);
  for (uint32_t l = 1; l <= 3; l++)
    r.who[l].accuses = 1u << 0;
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  for (uint32_t i = 0; i < 10; i++)
    CU_ASSERT_FALSE(secagg_server_dropped(r.srv, i));
  check_outcome(&r, all_but(10, 0));
  run_free(&r);

  run_init(&r, 10, 9, 6);
  for (uint32_t l = 1; l <= 4; l++)
    r.who[l].accuses = 1u << 0;
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  CU_ASSERT_TRUE(secagg_server_dropped(r.srv, 0));
  check_outcome(&r, all_but(10, 1u << 0));
  run_free(&r);

  run_init(&r, 10, 9, 6);
  r.who[7].accuses = all_but(10, 1u << 7);
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  for (uint32_t i = 0; i < 10; i++)
    CU_ASSERT_EQUAL(secagg_server_dropped(r.srv, i), i == 7);
  check_outcome(&r, all_but(10, 1u << 7));
  run_free(&r);
}

/* A drop can leave a neighbour with too few partners: client 0, accused
 * by three liars (k - t = 3: it would stay), also loses the insider 5,
 * which is dropped, and so has five neighbours to mask with, below t = 6.
 * It is dropped too, rather than refuse to mask by itself and leave masks
 * with it that fewer than t holders could remove; the round commits the
 * other seven. */
static void test_drops_cascade(void) {
  run r;
  run_init(&r, 10, 9, 6);
  for (uint32_t l = 1; l <= 3; l++)
    r.who[l].accuses = 1u << 0;
  r.who[5].garbage_to = ~UINT32_C(0);
  CU_ASSERT_EQUAL_FATAL(run_round(&r), COHORT_OK);
  CU_ASSERT_TRUE(secagg_server_dropped(r.srv, 0));
  CU_ASSERT_TRUE(secagg_server_dropped(r.srv, 5));
  check_outcome(&r, all_but(10, (1u << 0) | (1u << 5)));
  run_free(&r);
}

/* Complaints the coordinator refuses, each leaving its state unchanged: a
 * second one, one naming a non-neighbour or a client twice, a non-empty
 * one after the close, and a complaint outside MASKED. */
static void test_complaints_refused(void) {
  run r;
  run_init(&r, 6, 2, 2);
  uint8_t *out = NULL, *in = NULL;
  size_t len = 0, in_len = 0;
  for (uint32_t i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_advertise(r.cl[i], &out, &len, r.err, ERRLEN), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(secagg_server_receive(r.srv, i, SECAGG_ADVERTISE, out,
                                                len, r.err, ERRLEN),
                          COHORT_OK);
    free(out);
  }
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, NULL, 0, r.err, ERRLEN),
                  COHORT_ESTATE);
  close_phase(&r);
  for (uint32_t i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL_FATAL(
        secagg_server_message(r.srv, i, &in, &in_len, r.err, ERRLEN),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_share(r.cl[i], in, in_len, &out, &len, r.err, ERRLEN),
        COHORT_OK);
    free(in);
    CU_ASSERT_EQUAL_FATAL(
        secagg_server_receive(r.srv, i, SECAGG_SHARE, out, len, r.err, ERRLEN),
        COHORT_OK);
    free(out);
  }
  close_phase(&r);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, NULL, 0, r.err, ERRLEN),
                  COHORT_ESTATE); /* not opened */
  CU_ASSERT_EQUAL_FATAL(secagg_server_open_complaints(r.srv, r.err, ERRLEN),
                        COHORT_OK);
  uint32_t nb[2], other = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_graph_row(&r.p, 0, nb), COHORT_OK);
  while (other == 0 || other == nb[0] || other == nb[1])
    other++;
  uint32_t twice[2] = {nb[0], nb[0]};
  Cohort__V1__SecAggComplaints m = COHORT__V1__SEC_AGG_COMPLAINTS__INIT;
  m.senders = &other;
  m.n_senders = 1;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m.base, &out, &len), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, out, len, r.err, ERRLEN),
                  COHORT_EINVAL);
  free(out);
  m.senders = twice;
  m.n_senders = 2;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m.base, &out, &len), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, out, len, r.err, ERRLEN),
                  COHORT_EINVAL);
  free(out);
  uint32_t many[3] = {nb[0], nb[1], other};
  m.senders = many;
  m.n_senders = 3; /* more than its k = 2 neighbours */
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m.base, &out, &len), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, out, len, r.err, ERRLEN),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "3 senders"));
  free(out);
  CU_ASSERT_EQUAL(secagg_server_complaint_count(r.srv), 0u);
  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  CU_ASSERT_EQUAL(
      secagg_server_complain(r.srv, 0, junk, sizeof junk, r.err, ERRLEN),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, NULL, 0, r.err, ERRLEN),
                  COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 0, NULL, 0, r.err, ERRLEN),
                  COHORT_ESTATE); /* a second one */
  CU_ASSERT_EQUAL_FATAL(
      secagg_server_close_complaints(r.srv, NULL, r.err, ERRLEN), COHORT_OK);
  m.senders = nb;
  m.n_senders = 1;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m.base, &out, &len), COHORT_OK);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 1, out, len, r.err, ERRLEN),
                  COHORT_ESTATE); /* too late to name anyone */
  free(out);
  CU_ASSERT_EQUAL(secagg_server_complain(r.srv, 1, NULL, 0, r.err, ERRLEN),
                  COHORT_OK); /* a late empty one is fine */
  CU_ASSERT_EQUAL(secagg_server_complaint_count(r.srv), 2u);
  run_free(&r);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"one insider sending random sealed shares: dropped, the honest sum "
       "exactly",
       test_one_lying_insider},
      {"two insiders, one also a false accuser, in a SecAgg+ graph: both "
       "dropped, the honest sum exactly",
       test_two_lying_insiders},
      {"an insider that spoils two shares loses only those pairs",
       test_partial_insider_loses_pairs},
      {"false accusers cost one pair each: k - t of them keep their target "
       "in the sum, one more drops it; accusing all drops the accuser",
       test_false_accusers_bounded},
      {"a client a drop leaves with fewer than t partners is dropped too; "
       "the round commits the rest",
       test_drops_cascade},
      {"complaints outside the window, repeated, malformed or late are "
       "refused",
       test_complaints_refused},
  };
  return test_add_suite("secagg insider", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
