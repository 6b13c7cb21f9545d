/* Secure aggregation's cost: runs the coordinator and all N clients of one
 * round in this process (common/secagg/secagg.h, the same state machines as the
 * real system), with a fraction of the clients dropping out after sharing
 * their keys (before their masked input: the case that costs the
 * coordinator most, as in Bonawitz et al.'s evaluation), and prints one
 * JSON line: the parameters, the coordinator's CPU seconds (and the part
 * spent unmasking, when UNMASK closes), the mean CPU seconds per client,
 * the mean bytes each client sent and received, whether the result equals
 * the plain sum of the survivors' inputs, and what two parts of the
 * protocol cost on their own, on both sides: the consistency round and the
 * identity signatures.
 *
 *   bench_secagg --clients 500 --dim 100000 --dropout 0.3 --graph full
 *
 * Inputs are random b-bit integers (--bits, default 8, as from q8); the
 * ring has b + ceil(log2 N) bits, so the sum cannot wrap. CPU time is this
 * thread's (CLOCK_THREAD_CPUTIME_ID), measured around each call. Each
 * client has an Ed25519 identity key seeded from --seed and its index, and
 * holds the plan to --adversary and --corrupt (its policy); a plan that
 * policy refuses (a --threshold or --degree given by hand, or a fallback
 * that misses the bounds) is run under a lenient policy instead, with a
 * note, and "policy" in the output says which.
 *
 * The consistency round (consistency_*_cpu_s) is, for the coordinator,
 * taking the attestations, closing CONSISTENCY and relaying each client's
 * (serving the survivor list is not counted: the protocol had it before),
 * and for a client, attesting plus checking the tags it is given before
 * it reveals. Signature work (signature_*_cpu_s) is, for a client, signing
 * its keys in ADVERTISE and verifying each peer's in SHARE, and for the
 * coordinator, verifying every client's keys in ADVERTISE. Work that runs
 * inside a call with other work (the tag checks in unmask, every signature
 * and verification) cannot be timed apart from outside the library, so it
 * is timed on a replica: the same operations on the same messages (the
 * same bytes signed, with the same key: the signatures must come out
 * equal), run next to the call and not counted in the other fields. The
 * client figures are means over the clients that stayed to the end, like
 * client_cpu_s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "crypto.h"
#include "flags.h"
#include "prg.h"
#include "secagg.h"
#include "secagg_pack.h"
#include "sign.h"

typedef struct bench_opts {
  long clients, dim, bits, degree, threshold, seed;
  double dropout, corrupt;
  const char *graph, *adversary;
} bench_opts;

static bench_opts g_opts;

#define NUM(x) (double)(x)
static const flag_def FLAGS[] = {
    {"clients", FLAG_INT, &g_opts.clients, "100", 3, SECAGG_MAX_CLIENTS, "N",
     "clients in the round"},
    {"dim", FLAG_INT, &g_opts.dim, "100000", 1, NUM(100000000), "D",
     "elements of each input"},
    {"dropout", FLAG_DOUBLE, &g_opts.dropout, "0", 0, 0.95, "F",
     "fraction of clients that drop after sharing their keys"},
    {"graph", FLAG_STRING, &g_opts.graph, "full", 0, 0, "full|plus",
     "complete graph (SecAgg) or a k-regular one (SecAgg+)"},
    {"bits", FLAG_INT, &g_opts.bits, "8", 1, 32, "b",
     "bits of each input element"},
    {"degree", FLAG_INT, &g_opts.degree, "0", 0, SECAGG_MAX_CLIENTS, "K",
     "neighbours per client (0: n - 1 for full, the parameter finder's for "
     "plus)"},
    {"threshold", FLAG_INT, &g_opts.threshold, "0", 0, SECAGG_MAX_CLIENTS, "T",
     "shares that rebuild a secret (0: the smallest that withstands "
     "--adversary and --corrupt)"},
    {"corrupt", FLAG_DOUBLE, &g_opts.corrupt, "0.05", 0, 0.5, "F",
     "share of corrupt clients the threshold (and plus's degree) withstands, "
     "and the clients' policy assumes"},
    {"adversary", FLAG_STRING, &g_opts.adversary, "semi-malicious", 0, 0,
     "semi-malicious|curious",
     "the coordinator the threshold withstands (as --secagg-adversary) and "
     "the clients' policy assumes"},
    {"seed", FLAG_INT, &g_opts.seed, "1", 0, NUM(1e15), "S",
     "seed of the inputs, the clients' randomness and identity keys, and who "
     "drops out"},
};
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])
static const char USAGE[] =
    "usage: bench_secagg --clients N --dim D --dropout F --graph full|plus\n\n"
    "Runs one round of secure aggregation in this process and prints a "
    "JSON line.\n";

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What one run measures besides each client's CPU time. */
typedef struct tally {
  double server_s;
  double close_s;       /* the last phase close alone */
  double consistency_s; /* the coordinator's part of the consistency round */
  double signature_s;   /* its signature checks in ADVERTISE (replicas) */
  double up, down;      /* bytes, all clients */
} tally;

typedef struct client_slot {
  secagg_client *c;
  prg rng;
  sign_key *id;
  int drops; /* leaves after sharing its keys */
  int active;
  double cpu_s;         /* in its own calls */
  double consistency_s; /* attesting, and its tag checks (a replica) */
  double signature_s;   /* signing and verifying (replicas) */
} client_slot;

/* The round's plan and the identities the coordinator registered. */
static secagg_params g_plan;
static secagg_peer_identity *g_ids;

static int choose_params(secagg_params *p, char *err, size_t errlen) {
  uint32_t n = (uint32_t)g_opts.clients;
  int plus = strcmp(g_opts.graph, "plus") == 0;
  if (!plus && strcmp(g_opts.graph, "full") != 0) {
    snprintf(err, errlen, "--graph must be full or plus, not %s", g_opts.graph);
    return COHORT_EINVAL;
  }
  secagg_goal goal = {.n = n,
                      .dropout = g_opts.dropout,
                      .corrupt = g_opts.corrupt,
                      .security_bits = SECAGG_SECURITY_BITS,
                      .correctness_bits = SECAGG_CORRECTNESS_BITS};
  if (secagg_adversary_parse(g_opts.adversary, &goal.adversary)) {
    snprintf(err, errlen,
             "--adversary must be semi-malicious or curious, not %s",
             g_opts.adversary);
    return COHORT_EINVAL;
  }
  /* Like the coordinator: when the bounds cannot be met, the fallback, and
   * say so. */
  uint32_t k = 0, t = 0;
  if (secagg_choose_graph(&goal, plus, (uint32_t)g_opts.degree, &k, &t, err,
                          errlen))
    fprintf(stderr, "bench_secagg: %s; using k = %u, t = %u\n", err, k, t);
  if (g_opts.threshold)
    t = (uint32_t)g_opts.threshold;
  unsigned log2n = (unsigned)ceil(log2((double)n));
  *p = (secagg_params){.n = n,
                       .threshold = t,
                       .degree = k,
                       .ring_bits = (unsigned)g_opts.bits + log2n,
                       .dim = (size_t)g_opts.dim};
  memset(p->round_seed, 7, sizeof p->round_seed);
  return secagg_params_check(p, err, errlen);
}

/* The clients' policy: --adversary and --corrupt at the coordinator's
 * security goal, or, when that refuses the plan, one that takes every
 * valid plan (*lenient set, the reason on stderr). */
static secagg_policy choose_policy(const secagg_params *p, int *lenient) {
  secagg_policy pol = {.corrupt = g_opts.corrupt,
                       .security_bits = SECAGG_SECURITY_BITS};
  secagg_adversary_parse(g_opts.adversary, &pol.adversary);
  char err[512] = "";
  *lenient = secagg_policy_check(&pol, p, err, sizeof err) != COHORT_OK;
  if (*lenient) {
    fprintf(stderr,
            "bench_secagg: the clients' policy refuses this plan (%s); they "
            "take it under a lenient one\n",
            err);
    pol = (secagg_policy){.adversary = SECAGG_CURIOUS,
                          .corrupt = 0,
                          .security_bits = SECAGG_SECURITY_BITS};
  }
  return pol;
}

/* Client i's identity key, from --seed and i. */
static int make_identity(uint32_t i, sign_key **out) {
  uint8_t raw[SIGN_SEED_LEN];
  prg g;
  int rc = prg_init_u64(&g, ((uint64_t)g_opts.seed * 7919u + i) ^
                                UINT64_C(0x5eca66e17e1f1d5));
  if (rc)
    return rc;
  prg_bytes(&g, raw, sizeof raw);
  prg_free(&g);
  rc = sign_key_from_seed(raw, out);
  memset(raw, 0, sizeof raw);
  return rc;
}

/* ---- replicas of the work done inside calls ---- */

/* Client i signing its keys (SecAggKeys keys, as it sent them): the
 * signature must equal the one it sent. CPU seconds into *s. */
static int replica_sign(const sign_key *key, uint32_t i, const uint8_t *keys,
                        size_t len, double *s) {
  Cohort__V1__SecAggKeys *m = cohort__v1__sec_agg_keys__unpack(NULL, len, keys);
  if (!m || m->share_public.len != KEX_KEY_LEN ||
      m->mask_public.len != KEX_KEY_LEN || m->signature.len != SIGN_LEN) {
    cohort__v1__sec_agg_keys__free_unpacked(m, NULL);
    return COHORT_EFORMAT;
  }
  uint8_t msg[SECAGG_KEYS_MSG_LEN], sig[SIGN_LEN];
  double t0 = cpu_now();
  secagg_keys_message(&g_plan, i, m->share_public.data, m->mask_public.data,
                      msg);
  int rc = sign_message(key, msg, sizeof msg, sig);
  *s += cpu_now() - t0;
  if (!rc && memcmp(sig, m->signature.data, SIGN_LEN) != 0)
    rc = COHORT_EFORMAT; /* not the work the client did */
  cohort__v1__sec_agg_keys__free_unpacked(m, NULL);
  return rc;
}

/* Verifying one SecAggKeys' signature against pub (the coordinator's
 * check in ADVERTISE, and a client's of each peer). */
static int verify_keys(const Cohort__V1__SecAggKeys *e, const uint8_t *pub) {
  if (e->share_public.len != KEX_KEY_LEN || e->mask_public.len != KEX_KEY_LEN ||
      e->signature.len != SIGN_LEN)
    return COHORT_EFORMAT;
  uint8_t msg[SECAGG_KEYS_MSG_LEN];
  secagg_keys_message(&g_plan, e->index, e->share_public.data,
                      e->mask_public.data, msg);
  return sign_verify(pub, msg, sizeof msg, e->signature.data);
}

/* The coordinator's check of client i's SecAggKeys. */
static int replica_server_verify(uint32_t i, const uint8_t *keys, size_t len,
                                 double *s) {
  Cohort__V1__SecAggKeys *m = cohort__v1__sec_agg_keys__unpack(NULL, len, keys);
  if (!m)
    return COHORT_EFORMAT;
  double t0 = cpu_now();
  int rc = verify_keys(m, g_ids[i].pub);
  *s += cpu_now() - t0;
  cohort__v1__sec_agg_keys__free_unpacked(m, NULL);
  return rc;
}

/* Client i's checks of every peer's signature in SecAggPeers. */
static int replica_client_verify(uint32_t i, const uint8_t *peers, size_t len,
                                 double *s) {
  Cohort__V1__SecAggPeers *m =
      cohort__v1__sec_agg_peers__unpack(NULL, len, peers);
  if (!m)
    return COHORT_EFORMAT;
  int rc = COHORT_OK;
  double t0 = cpu_now();
  for (size_t j = 0; j < m->n_peers && !rc; j++) {
    const Cohort__V1__SecAggKeys *e = m->peers[j];
    if (e->index == i)
      continue;
    rc = e->identity_public.len == SIGN_PUBLIC_LEN
             ? verify_keys(e, e->identity_public.data)
             : COHORT_EFORMAT;
  }
  *s += cpu_now() - t0;
  cohort__v1__sec_agg_peers__free_unpacked(m, NULL);
  return rc;
}

/* Where the compares' results go, so that none is optimised away (a local
 * that is only written is one clang refuses under -Werror). */
static volatile int tags_equal;

/* A client's checks of the SecAggAttestations it is given: parsing them,
 * and per tag one HMAC-SHA256 (under a stand-in key: its cost does not
 * depend on the key) and a constant-time compare. */
static int replica_tag_checks(uint32_t i, const uint8_t *in, size_t len,
                              double *s) {
  static const uint8_t key[KEX_KEY_LEN] = {1};
  uint8_t digest[CRYPTO_SHA256_LEN] = {2}, want[SECAGG_TAG_LEN];
  int rc = COHORT_OK;
  double t0 = cpu_now();
  Cohort__V1__SecAggAttestations *m =
      cohort__v1__sec_agg_attestations__unpack(NULL, len, in);
  if (!m)
    rc = COHORT_EFORMAT;
  for (size_t j = 0; !rc && j < m->n_tags; j++) {
    rc = secagg_attest_tag(key, m->tags[j]->from, i, digest, want);
    if (!rc && m->tags[j]->tag.len == SECAGG_TAG_LEN)
      tags_equal += crypto_equal(want, m->tags[j]->tag.data, SECAGG_TAG_LEN);
  }
  cohort__v1__sec_agg_attestations__free_unpacked(m, NULL);
  *s += cpu_now() - t0;
  return rc;
}

/* ---- the phases ---- */

/* Hands the server's message for the phase just closed to every client
 * still active and collects their next message, timing both sides. */
typedef int (*client_step)(client_slot *s, const uint8_t *in, size_t in_len,
                           uint8_t **out, size_t *out_len, char *err,
                           size_t errlen);

static int step_share(client_slot *s, const uint8_t *in, size_t in_len,
                      uint8_t **out, size_t *out_len, char *err,
                      size_t errlen) {
  return secagg_client_share(s->c, in, in_len, out, out_len, err, errlen);
}

/* One client's input at a time: N inputs of D words would not fit in
 * memory at N = 1000, D = 1M. */
static uint64_t *g_input;

/* Client i's input into g_input: random b-bit integers from a seed of its
 * own, so that it can be drawn again when the client masks. */
static int draw_input(uint32_t i, size_t dim) {
  prg g;
  if (prg_init_u64(&g, ((uint64_t)g_opts.seed * 1000003u + i) ^
                           UINT64_C(0x9e3779b97f4a7c15)))
    return COHORT_EIO;
  uint64_t top = (UINT64_C(1) << g_opts.bits) - 1;
  for (size_t j = 0; j < dim; j++)
    g_input[j] = prg_u64(&g) & top;
  prg_free(&g);
  return COHORT_OK;
}

static int step_mask(client_slot *s, const uint8_t *in, size_t in_len,
                     uint8_t **out, size_t *out_len, char *err, size_t errlen) {
  return secagg_client_mask(s->c, in, in_len, g_input, out, out_len, err,
                            errlen);
}

static int step_attest(client_slot *s, const uint8_t *in, size_t in_len,
                       uint8_t **out, size_t *out_len, char *err,
                       size_t errlen) {
  return secagg_client_attest(s->c, in, in_len, out, out_len, err, errlen);
}

static int step_unmask(client_slot *s, const uint8_t *in, size_t in_len,
                       uint8_t **out, size_t *out_len, char *err,
                       size_t errlen) {
  return secagg_client_unmask(s->c, in, in_len, out, out_len, err, errlen);
}

static int close_phase(secagg_server *srv, tally *t, char *err, size_t errlen) {
  secagg_phase closing = secagg_server_phase(srv);
  double t0 = cpu_now();
  int rc = secagg_server_close_phase(srv, err, errlen);
  t->close_s = cpu_now() - t0;
  t->server_s += t->close_s;
  if (closing == SECAGG_CONSISTENCY)
    t->consistency_s += t->close_s;
  return rc;
}

static int run_phase(secagg_server *srv, client_slot *slots, uint32_t n,
                     secagg_phase phase, client_step step, tally *t, char *err,
                     size_t errlen) {
  for (uint32_t i = 0; i < n; i++) {
    client_slot *s = &slots[i];
    if (!s->active)
      continue;
    if (phase == SECAGG_MASKED && draw_input(i, g_opts.dim)) /* untimed */
      return COHORT_EIO;
    uint8_t *in = NULL, *out = NULL;
    size_t in_len = 0, out_len = 0;
    double t0 = cpu_now();
    int rc = secagg_server_message(srv, i, &in, &in_len, err, errlen);
    double dt = cpu_now() - t0;
    t->server_s += dt;
    if (phase == SECAGG_UNMASK) /* relaying the attestations */
      t->consistency_s += dt;
    if (rc)
      return rc;
    t->down += (double)in_len;
    /* The replicas, untimed in cpu_s. */
    if (phase == SECAGG_SHARE)
      rc = replica_client_verify(i, in, in_len, &s->signature_s);
    else if (phase == SECAGG_UNMASK)
      rc = replica_tag_checks(i, in, in_len, &s->consistency_s);
    if (rc) {
      snprintf(err, errlen, "client %u: the replica of its checks failed", i);
      free(in);
      return rc;
    }
    t0 = cpu_now();
    rc = step(s, in, in_len, &out, &out_len, err, errlen);
    dt = cpu_now() - t0;
    s->cpu_s += dt;
    if (phase == SECAGG_CONSISTENCY)
      s->consistency_s += dt;
    free(in);
    if (rc)
      return rc;
    t->up += (double)out_len;
    t0 = cpu_now();
    rc = secagg_server_receive(srv, i, phase, out, out_len, err, errlen);
    dt = cpu_now() - t0;
    t->server_s += dt;
    if (phase == SECAGG_CONSISTENCY)
      t->consistency_s += dt;
    free(out);
    if (rc)
      return rc;
  }
  return close_phase(srv, t, err, errlen);
}

int main(int argc, char **argv) {
  int rc = flags_main("bench_secagg", USAGE, FLAGS, N_FLAGS, argc, argv);
  if (rc >= 0)
    return rc;
  char err[512] = "";
  secagg_params p;
  if (choose_params(&p, err, sizeof err)) {
    fprintf(stderr, "bench_secagg: %s\n", err);
    return 2;
  }
  g_plan = p;
  int lenient = 0;
  secagg_policy policy = choose_policy(&p, &lenient);
  uint32_t n = p.n;
  size_t dim = p.dim;
  client_slot *slots = calloc(n, sizeof *slots);
  uint64_t *expect = calloc(dim, sizeof *expect);
  uint64_t *sum = malloc(dim * sizeof *sum);
  g_input = malloc(dim * sizeof *g_input);
  g_ids = calloc(n, sizeof *g_ids);
  if (!slots || !expect || !sum || !g_input || !g_ids) {
    fprintf(stderr, "bench_secagg: out of memory\n");
    return 1;
  }
  /* Who drops: a seeded choice of round(dropout * n) clients. */
  prg pick;
  prg_init_u64(&pick, (uint64_t)g_opts.seed);
  uint32_t n_drop = (uint32_t)lround(g_opts.dropout * n);
  for (uint32_t d = 0; d < n_drop;) {
    uint32_t i = (uint32_t)prg_below(&pick, n);
    if (!slots[i].drops) {
      slots[i].drops = 1;
      d++;
    }
  }
  prg_free(&pick);
  /* Registration, before the round (untimed): every identity key. */
  rc = COHORT_OK;
  for (uint32_t i = 0; !rc && i < n; i++) {
    rc = make_identity(i, &slots[i].id);
    if (!rc)
      sign_key_public(slots[i].id, g_ids[i].pub);
  }
  uint64_t ring = (UINT64_C(1) << p.ring_bits) - 1;
  tally t = {0};
  secagg_server *srv = NULL;
  if (!rc)
    rc = secagg_server_new(&p, g_ids, &srv, err, sizeof err);
  for (uint32_t i = 0; !rc && i < n; i++) {
    client_slot *s = &slots[i];
    prg_init_u64(&s->rng, (uint64_t)g_opts.seed * 1000003u + i);
    rc = draw_input(i, dim);
    if (rc)
      break;
    if (!s->drops)
      for (size_t j = 0; j < dim; j++)
        expect[j] = (expect[j] + g_input[j]) & ring;
    s->active = 1;
    uint8_t *out = NULL;
    size_t len = 0;
    secagg_identity id = {.key = s->id};
    double t0 = cpu_now();
    rc =
        secagg_client_new(&p, i, &id, &policy, &s->rng, &s->c, err, sizeof err);
    if (!rc)
      rc = secagg_client_advertise(s->c, &out, &len, err, sizeof err);
    s->cpu_s += cpu_now() - t0;
    t.up += (double)len;
    if (!rc && (rc = replica_sign(s->id, i, out, len, &s->signature_s)))
      snprintf(err, sizeof err,
               "client %u: the replica of its signature "
               "differs",
               i);
    if (!rc) {
      t0 = cpu_now();
      rc = secagg_server_receive(srv, i, SECAGG_ADVERTISE, out, len, err,
                                 sizeof err);
      t.server_s += cpu_now() - t0;
    }
    if (!rc && (rc = replica_server_verify(i, out, len, &t.signature_s)))
      snprintf(err, sizeof err,
               "client %u: the replica of the coordinator's "
               "check failed",
               i);
    free(out);
  }
  if (!rc)
    rc = close_phase(srv, &t, err, sizeof err);
  if (!rc)
    rc =
        run_phase(srv, slots, n, SECAGG_SHARE, step_share, &t, err, sizeof err);
  for (uint32_t i = 0; i < n; i++)
    if (slots[i].drops)
      slots[i].active = 0;
  if (!rc)
    rc =
        run_phase(srv, slots, n, SECAGG_MASKED, step_mask, &t, err, sizeof err);
  if (!rc)
    rc = run_phase(srv, slots, n, SECAGG_CONSISTENCY, step_attest, &t, err,
                   sizeof err);
  if (!rc)
    rc = run_phase(srv, slots, n, SECAGG_UNMASK, step_unmask, &t, err,
                   sizeof err);
  /* Closing UNMASK is the unmasking: checking and rebuilding secrets, the
   * agreements for dropped clients' pairwise masks, and expanding every
   * mask. */
  double unmask_s = t.close_s;
  uint32_t inputs = 0;
  if (!rc) {
    double t0 = cpu_now();
    rc = secagg_server_sum(srv, sum, &inputs);
    t.server_s += cpu_now() - t0;
  }
  int correct = 0;
  if (rc) {
    fprintf(stderr, "bench_secagg: %s (%s)\n", err[0] ? err : "failed",
            cohort_strerror(rc));
    goto out;
  }
  /* Per client that took part to the end, as Bonawitz et al. report it. */
  double client_s = 0, client_cons_s = 0, client_sig_s = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!slots[i].drops) {
      client_s += slots[i].cpu_s;
      client_cons_s += slots[i].consistency_s;
      client_sig_s += slots[i].signature_s;
    }
  client_s /= (double)(n - n_drop);
  client_cons_s /= (double)(n - n_drop);
  client_sig_s /= (double)(n - n_drop);
  correct = inputs == n - n_drop && memcmp(sum, expect, dim * sizeof *sum) == 0;
  double packed = ceil((double)dim * p.ring_bits / 8.0);
  printf("{\"clients\": %u, \"dim\": %zu, \"dropout\": %.2f, \"graph\": "
         "\"%s\", \"adversary\": \"%s\", \"degree\": %u, \"threshold\": %u, "
         "\"input_bits\": %ld, "
         "\"ring_bits\": %u, \"server_cpu_s\": %.3f, \"unmask_cpu_s\": %.3f, "
         "\"client_cpu_s\": %.4f, \"bytes_up\": %.0f, \"bytes_down\": %.0f, "
         "\"masked_bytes\": %.0f, \"masked_vs_fp32\": %.4f, "
         "\"policy\": \"%s\", \"consistency_server_cpu_s\": %.6f, "
         "\"consistency_client_cpu_s\": %.6f, "
         "\"signature_server_cpu_s\": %.6f, "
         "\"signature_client_cpu_s\": %.6f, \"correct\": %s}\n",
         n, dim, g_opts.dropout, g_opts.graph, g_opts.adversary, p.degree,
         p.threshold, g_opts.bits, p.ring_bits, t.server_s, unmask_s, client_s,
         t.up / n, t.down / n, packed, packed / (4.0 * (double)dim),
         lenient ? "lenient" : "given", t.consistency_s, client_cons_s,
         t.signature_s, client_sig_s, correct ? "true" : "false");
out:
  for (uint32_t i = 0; i < n; i++) {
    secagg_client_free(slots[i].c);
    prg_free(&slots[i].rng);
    sign_key_free(slots[i].id);
  }
  secagg_server_free(srv);
  free(slots);
  free(g_ids);
  free(expect);
  free(sum);
  free(g_input);
  return correct ? 0 : 1;
}
