/* Secure aggregation's cost: runs the coordinator and all N clients of one
 * round in this process (common/secagg/secagg.h, the same state machines as the
 * real system), with a fraction of the clients dropping out after sharing
 * their keys (before their masked input: the case that costs the
 * coordinator most, as in Bonawitz et al.'s evaluation), and prints one
 * JSON line: the parameters, the coordinator's CPU seconds (and the part
 * spent unmasking, when UNMASK closes), the mean CPU seconds per client,
 * the mean bytes each client sent and received, and whether the result
 * equals the plain sum of the survivors' inputs.
 *
 *   bench_secagg --clients 500 --dim 100000 --dropout 0.3 --graph full
 *
 * Inputs are random b-bit integers (--bits, default 8, as from q8); the
 * ring has b + ceil(log2 N) bits, so the sum cannot wrap. CPU time is this
 * thread's (CLOCK_THREAD_CPUTIME_ID), measured around each call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort_status.h"
#include "flags.h"
#include "prg.h"
#include "secagg.h"

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
     "share of corrupt clients the threshold (and plus's degree) withstands"},
    {"adversary", FLAG_STRING, &g_opts.adversary, "semi-malicious", 0, 0,
     "semi-malicious|curious",
     "the coordinator the threshold withstands, as --secagg-adversary"},
    {"seed", FLAG_INT, &g_opts.seed, "1", 0, NUM(1e15), "S",
     "seed of the inputs, the clients' randomness and who drops out"},
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
  double close_s;  /* the last phase close alone */
  double up, down; /* bytes, all clients */
} tally;

typedef struct client_slot {
  secagg_client *c;
  prg rng;
  int drops; /* leaves after sharing its keys */
  int active;
  double cpu_s; /* in its own calls */
} client_slot;

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

static int step_unmask(client_slot *s, const uint8_t *in, size_t in_len,
                       uint8_t **out, size_t *out_len, char *err,
                       size_t errlen) {
  return secagg_client_unmask(s->c, in, in_len, out, out_len, err, errlen);
}

static int close_phase(secagg_server *srv, tally *t, char *err, size_t errlen) {
  double t0 = cpu_now();
  int rc = secagg_server_close_phase(srv, err, errlen);
  t->close_s = cpu_now() - t0;
  t->server_s += t->close_s;
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
    t->server_s += cpu_now() - t0;
    if (rc)
      return rc;
    t->down += (double)in_len;
    t0 = cpu_now();
    rc = step(s, in, in_len, &out, &out_len, err, errlen);
    s->cpu_s += cpu_now() - t0;
    free(in);
    if (rc)
      return rc;
    t->up += (double)out_len;
    t0 = cpu_now();
    rc = secagg_server_receive(srv, i, phase, out, out_len, err, errlen);
    t->server_s += cpu_now() - t0;
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
  char err[300] = "";
  secagg_params p;
  if (choose_params(&p, err, sizeof err)) {
    fprintf(stderr, "bench_secagg: %s\n", err);
    return 2;
  }
  uint32_t n = p.n;
  size_t dim = p.dim;
  client_slot *slots = calloc(n, sizeof *slots);
  uint64_t *expect = calloc(dim, sizeof *expect);
  uint64_t *sum = malloc(dim * sizeof *sum);
  g_input = malloc(dim * sizeof *g_input);
  if (!slots || !expect || !sum || !g_input) {
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
  uint64_t ring = (UINT64_C(1) << p.ring_bits) - 1;
  tally t = {0};
  secagg_server *srv = NULL;
  rc = secagg_server_new(&p, &srv, err, sizeof err);
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
    double t0 = cpu_now();
    rc = secagg_client_new(&p, i, &s->rng, &s->c, err, sizeof err);
    if (!rc)
      rc = secagg_client_advertise(s->c, &out, &len, err, sizeof err);
    s->cpu_s += cpu_now() - t0;
    t.up += (double)len;
    if (!rc) {
      t0 = cpu_now();
      rc = secagg_server_receive(srv, i, SECAGG_ADVERTISE, out, len, err,
                                 sizeof err);
      t.server_s += cpu_now() - t0;
    }
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
    rc = run_phase(srv, slots, n, SECAGG_UNMASK, step_unmask, &t, err,
                   sizeof err);
  /* Closing UNMASK is the unmasking: rebuilding secrets, the agreements
   * for dropped clients' pairwise masks, and expanding every mask. */
  double unmask_s = t.close_s;
  uint32_t inputs = 0;
  if (!rc) {
    double t0 = cpu_now();
    rc = secagg_server_sum(srv, sum, &inputs);
    t.server_s += cpu_now() - t0;
  }
  if (rc) {
    fprintf(stderr, "bench_secagg: %s (%s)\n", err[0] ? err : "failed",
            cohort_strerror(rc));
    return 1;
  }
  /* Per client that took part to the end, as Bonawitz et al. report it. */
  double client_s = 0;
  for (uint32_t i = 0; i < n; i++)
    client_s += slots[i].drops ? 0 : slots[i].cpu_s;
  client_s /= (double)(n - n_drop);
  int correct =
      inputs == n - n_drop && memcmp(sum, expect, dim * sizeof *sum) == 0;
  double packed = ceil((double)dim * p.ring_bits / 8.0);
  printf("{\"clients\": %u, \"dim\": %zu, \"dropout\": %.2f, \"graph\": "
         "\"%s\", \"adversary\": \"%s\", \"degree\": %u, \"threshold\": %u, "
         "\"input_bits\": %ld, "
         "\"ring_bits\": %u, \"server_cpu_s\": %.3f, \"unmask_cpu_s\": %.3f, "
         "\"client_cpu_s\": %.4f, \"bytes_up\": %.0f, \"bytes_down\": %.0f, "
         "\"masked_bytes\": %.0f, \"masked_vs_fp32\": %.4f, \"correct\": %s}\n",
         n, dim, g_opts.dropout, g_opts.graph, g_opts.adversary, p.degree,
         p.threshold, g_opts.bits, p.ring_bits, t.server_s, unmask_s, client_s,
         t.up / n, t.down / n, packed, packed / (4.0 * (double)dim),
         correct ? "true" : "false");
  for (uint32_t i = 0; i < n; i++) {
    secagg_client_free(slots[i].c);
    prg_free(&slots[i].rng);
  }
  secagg_server_free(srv);
  free(slots);
  free(expect);
  free(sum);
  free(g_input);
  return correct ? 0 : 1;
}
