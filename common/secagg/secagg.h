/* Secure aggregation: the coordinator learns the sum of n clients' integer
 * vectors in Z_{2^B} and nothing else, even when clients drop out in any
 * phase (Bonawitz et al., CCS 2017), with each client's secrets shared only
 * among its neighbours in a k-regular graph (SecAgg+, Bell et al., CCS
 * 2020; k = n - 1 is the original protocol). The coordinator is curious
 * or semi-malicious (secagg_adversary: the one the threshold withstands).
 *
 * Two pure state machines (no sockets, threads or SQL): secagg_client and
 * secagg_server. Every message is the serialized protobuf of
 * common/proto/cohort_messages.proto (SecAgg*), so the same bytes travel in
 * tests, benchmarks and over gRPC.
 *
 *   phase          client sends                coordinator then sends it
 *   ADVERTISE      SecAggKeys                  SecAggPeers (its neighbours)
 *   SHARE          SecAggShares (sealed)       SecAggShares (addressed to it)
 *   MASKED         SecAggMaskedInput           SecAggSurvivors
 *   UNMASK         SecAggUnmask                -
 *
 * Client u holds two X25519 key pairs: share keys (AES-256-GCM keys with
 * each neighbour, kex_agree context "cohort secagg share") and mask keys
 * (pairwise mask seeds s_uv = kex_agree(mask, "cohort secagg mask"),
 * symmetric in u and v), and a self-mask seed b_u from its rng. It sends
 * y_u = x_u + PRG(b_u) + sum_{v > u} PRG(s_uv) - sum_{v < u} PRG(s_uv)
 * (mod 2^B) over its neighbours v that sent shares (mask.h expands
 * seeds). The coordinator sums the y_u it receives; for every survivor it
 * reconstructs b_u from t shares, for every neighbour that dropped after
 * sharing it reconstructs the mask private key and removes that client's
 * pairwise masks with the survivors. It never asks for both kinds of share
 * of one client, and a client refuses to reveal both.
 *
 * A phase ends when the caller says so (secagg_server_close_phase: all in,
 * or the deadline). With fewer than t senders, or a client whose secrets
 * cannot be rebuilt from t shares, the coordinator goes to ABORTED and
 * gives no output at all.
 *
 * Errors: COHORT_ESTATE for a message in the wrong phase (or from a client
 * that is not a survivor of the previous one, or a second message in one
 * phase), COHORT_EINVAL for a malformed or inconsistent message,
 * COHORT_EABORTED once aborted; the state is unchanged by a refused
 * message, and err says why. */
#ifndef COHORT_SECAGG_H
#define COHORT_SECAGG_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

typedef enum secagg_phase {
  SECAGG_ADVERTISE = 0,
  SECAGG_SHARE = 1,
  SECAGG_MASKED = 2,
  SECAGG_UNMASK = 3,
  SECAGG_DONE = 4,
  SECAGG_ABORTED = 5,
} secagg_phase;

const char *secagg_phase_name(secagg_phase p);

#define SECAGG_MAX_CLIENTS 65535

typedef struct secagg_params {
  uint32_t n;         /* clients, indexed 0 .. n - 1 */
  uint32_t threshold; /* t: shares that rebuild a secret, and the fewest
                         senders a phase may end with; 1 .. degree + 1 */
  uint32_t degree;    /* k: neighbours per client; n - 1 = complete */
  unsigned ring_bits; /* B, 1 .. 62 */
  size_t dim;         /* elements per input */
  uint8_t round_seed[PRG_SEED_LEN]; /* public: the neighbour graph */
} secagg_params;

/* COHORT_EINVAL with the reason when: n < 2 or > SECAGG_MAX_CLIENTS,
 * degree outside [1, n - 1] (or odd for odd n: no k-regular graph),
 * threshold outside [1, degree + 1], ring_bits outside 1..62, dim 0. A
 * client counts itself among the t share holders of its own secrets, so t
 * can reach k + 1. Whether t is safe depends on the threat model, which
 * only the coordinator's operator states (secagg_find_threshold). */
int secagg_params_check(const secagg_params *p, char *err, size_t errlen);

/* ---- the neighbour graph ---- */

/* k-regular on n nodes from the round seed: nodes are placed on a circle
 * in a random order (a permutation drawn from prg_derive(seed,
 * "secagg graph")) and each is joined to the k / 2 nearest on each side,
 * plus the opposite node when k is odd (a random Harary graph, as
 * google/federated-compute builds it). k = n - 1 is the complete graph. */
typedef struct secagg_graph secagg_graph;
int secagg_graph_new(const secagg_params *p, secagg_graph **out);
void secagg_graph_free(secagg_graph *g);
/* The k neighbours of node i (i itself excluded), ascending. */
const uint32_t *secagg_graph_neighbours(const secagg_graph *g, uint32_t i);
int secagg_graph_adjacent(const secagg_graph *g, uint32_t a, uint32_t b);

/* ---- choosing k and t ---- */

/* What the coordinator may do beyond pooling what it sees with the
 * corrupt clients' secrets (docs/secagg.md, "Choosing the degree and
 * threshold").
 * CURIOUS: it follows the protocol. SEMI_MALICIOUS: it may also tell
 * different clients different survivor lists, so that some holders of a
 * client's shares reveal its self-mask seed and others its mask key; t is
 * then raised until the corrupt holders plus half of the rest fall short
 * of 2 t. google/federated-compute calls these CURIOUS_SERVER and
 * SEMI_MALICIOUS_SERVER. Zero is the stricter. */
typedef enum secagg_adversary {
  SECAGG_SEMI_MALICIOUS = 0,
  SECAGG_CURIOUS = 1,
} secagg_adversary;

/* "semi-malicious" or "curious". */
const char *secagg_adversary_name(secagg_adversary a);
/* COHORT_EINVAL for any other name. */
int secagg_adversary_parse(const char *s, secagg_adversary *out);

/* The smallest degree k (and its threshold t) for n clients when each
 * drops out with probability `dropout` and is corrupt (colluding with the
 * coordinator) with probability `corrupt`, such that, by the union bounds
 * docs/secagg.md derives, the round fails to complete with probability at
 * most 2^-correctness_bits and the adversary learns more than the sum with
 * probability at most 2^-security_bits. k = n - 1 (full SecAgg) when no
 * smaller degree qualifies. COHORT_EINVAL (with the reason) when even the
 * complete graph does not meet the bounds. */
typedef struct secagg_goal {
  uint32_t n;
  double dropout;            /* [0, 1) */
  double corrupt;            /* [0, 1) */
  unsigned security_bits;    /* e.g. 40 */
  unsigned correctness_bits; /* e.g. 20 */
  secagg_adversary adversary;
} secagg_goal;
int secagg_find_params(const secagg_goal *goal, uint32_t *degree,
                       uint32_t *threshold, char *err, size_t errlen);

/* The goals the coordinator plans rounds with: the adversary learns more
 * than the sum with probability at most 2^-40, a round fails to complete
 * with at most 2^-20. */
#define SECAGG_SECURITY_BITS 40
#define SECAGG_CORRECTNESS_BITS 20

/* The smallest t for a given degree k (1 .. n - 1) that keeps the corrupt
 * clients, helped by the goal's adversary, from rebuilding an honest
 * client's secrets within 2^-security_bits. Correctness is not checked,
 * since the degree is given (the complete graph, or an operator's).
 * COHORT_EINVAL when even t = k + 1 does not suffice. */
int secagg_find_threshold(const secagg_goal *goal, uint32_t degree,
                          uint32_t *threshold, char *err, size_t errlen);

/* The smallest t with 2 t > k + 1: what a semi-malicious coordinator with
 * no corrupt clients needs. The fallback when the bounds cannot be met. */
uint32_t secagg_majority_threshold(uint32_t degree);

/* k and t for a round as the coordinator and bench_secagg choose them:
 * degree, when not 0, is k (at most n - 1); otherwise the finder's k when
 * sparse, the complete graph when not; t from secagg_find_threshold. When
 * the bounds cannot be met, k and t are still set, to the complete graph
 * (or the degree given) with the majority threshold, and the return is
 * COHORT_EINVAL with the reason, for the caller to warn. */
int secagg_choose_graph(const secagg_goal *goal, int sparse, uint32_t degree,
                        uint32_t *k, uint32_t *t, char *err, size_t errlen);

/* ---- client ---- */

typedef struct secagg_client secagg_client;

/* Client `index` of a round. rng: where its key pairs, self-mask seed,
 * Shamir coefficients and nonces come from: prg_init_random in
 * production, a seeded prg in tests and simulations. Borrowed for the
 * client's life. */
int secagg_client_new(const secagg_params *p, uint32_t index, prg *rng,
                      secagg_client **out, char *err, size_t errlen);
/* Wipes every secret it holds. Accepts NULL. */
void secagg_client_free(secagg_client *c);
secagg_phase secagg_client_phase(const secagg_client *c);

/* Each call takes the coordinator's message of the previous phase and
 * writes this phase's message into *out (malloc'd, *out_len bytes). */
int secagg_client_advertise(secagg_client *c, uint8_t **out, size_t *out_len,
                            char *err, size_t errlen);
/* peers: SecAggPeers. Refuses fewer than t peers (itself included), keys
 * of non-neighbours, repeated peers, or its own keys changed. */
int secagg_client_share(secagg_client *c, const uint8_t *peers,
                        size_t peers_len, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen);
/* shares: SecAggShares addressed to it (each from a neighbour that
 * advertised; fewer than t - 1 is refused). input: dim elements < 2^B. */
int secagg_client_mask(secagg_client *c, const uint8_t *shares,
                       size_t shares_len, const uint64_t *input, uint8_t **out,
                       size_t *out_len, char *err, size_t errlen);
/* survivors: SecAggSurvivors (must include itself, at least t, only
 * neighbours that sent it shares, or itself). */
int secagg_client_unmask(secagg_client *c, const uint8_t *survivors,
                         size_t survivors_len, uint8_t **out, size_t *out_len,
                         char *err, size_t errlen);

/* ---- coordinator ---- */

typedef struct secagg_server secagg_server;

/* Memory: O(dim) for the running sum plus O(n k) for keys and sealed
 * shares in flight. */
int secagg_server_new(const secagg_params *p, secagg_server **out, char *err,
                      size_t errlen);
void secagg_server_free(secagg_server *s);
secagg_phase secagg_server_phase(const secagg_server *s);

/* Takes client `from`'s message of `phase` (which must be the current
 * phase). A masked input is added to the running sum at once. */
int secagg_server_receive(secagg_server *s, uint32_t from, secagg_phase phase,
                          const uint8_t *msg, size_t len, char *err,
                          size_t errlen);

/* Ends the current phase with the clients heard so far. Ending UNMASK
 * rebuilds the secrets and removes the masks: DONE, or ABORTED. Returns
 * COHORT_OK, or COHORT_EABORTED (reason in err and in
 * secagg_server_abort_reason). */
int secagg_server_close_phase(secagg_server *s, char *err, size_t errlen);

/* Whether client i sent its message in `phase`. */
int secagg_server_heard(const secagg_server *s, secagg_phase phase, uint32_t i);
/* How many clients sent their message in `phase`. */
uint32_t secagg_server_count(const secagg_server *s, secagg_phase phase);

/* The message for client `to` after the phase just closed: SecAggPeers
 * after ADVERTISE, SecAggShares after SHARE, SecAggSurvivors after MASKED.
 * COHORT_ESTATE when `to` did not send in that phase. */
int secagg_server_message(const secagg_server *s, uint32_t to, uint8_t **out,
                          size_t *out_len, char *err, size_t errlen);

/* DONE: the sum of the survivors' inputs, dim elements mod 2^B, and how
 * many inputs it holds. */
int secagg_server_sum(const secagg_server *s, uint64_t *sum,
                      uint32_t *n_inputs);
const char *secagg_server_abort_reason(const secagg_server *s);

#endif
