/* Secure aggregation: the coordinator learns the sum of n clients' integer
 * vectors in Z_{2^B} and nothing else, even when clients drop out in any
 * phase (Bonawitz et al., CCS 2017), with each client's secrets shared only
 * among its neighbours in a k-regular graph (SecAgg+, Bell et al., CCS
 * 2020; k = n - 1 is the original protocol). The coordinator is curious
 * or semi-malicious (secagg_adversary: the one the threshold withstands);
 * a consistency round keeps a semi-malicious one from telling clients
 * different survivor lists undetected (docs/security.md).
 *
 * Two pure state machines (no sockets, threads or SQL): secagg_client and
 * secagg_server. Every message is the serialized protobuf of
 * common/proto/cohort_messages.proto (SecAgg*), so the same bytes travel in
 * tests, benchmarks and over gRPC.
 *
 *   phase          client sends                coordinator then sends it
 *   ADVERTISE      SecAggKeys (signed)         SecAggPeers (its neighbours)
 *   SHARE          SecAggShares (sealed)       SecAggShares (addressed to it)
 *   MASKED         SecAggMaskedInput           SecAggSurvivors (all of them)
 *   CONSISTENCY    SecAggAttestations          SecAggAttestations (to it)
 *   UNMASK         SecAggUnmask                -
 *
 * Client u holds an Ed25519 identity key (registered with the coordinator)
 * and, for one round, two X25519 key pairs: share keys (AES-256-GCM keys
 * with each neighbour, kex_agree context "cohort secagg share", and from
 * them the keys of the consistency attestations) and mask keys (pairwise
 * mask seeds s_uv = kex_agree(mask, "cohort secagg mask"), symmetric in u
 * and v), and a self-mask seed b_u from its rng. It signs its two public
 * keys with its identity key and checks every neighbour's signature (and,
 * where an enrollment authority is named, certificate) before it shares a
 * secret. It sends
 * y_u = x_u + PRG(b_u) + sum_{v > u} PRG(s_uv) - sum_{v < u} PRG(s_uv)
 * (mod 2^B) over its neighbours v that sent shares (at least t of them;
 * mask.h expands seeds). After MASKED every survivor attests to the
 * survivor list it was given to each surviving neighbour, and reveals
 * shares only when t members of its neighbourhood (itself included)
 * attest to the identical list. The coordinator sums the y_u it receives;
 * for every survivor it reconstructs b_u from the revealed shares, for
 * every neighbour that dropped after sharing it reconstructs the mask
 * private key and removes that client's pairwise masks with the
 * survivors. Every share revealed is checked against the others of its
 * secret; a holder whose share is not on the secret's polynomial is named
 * and all its shares are set aside. It never asks for both kinds of share
 * of one client, and a client refuses to reveal both.
 *
 * A phase ends when the caller says so (secagg_server_close_phase: all in,
 * or the deadline). With fewer than t senders, or a client whose secrets
 * cannot be rebuilt from t consistent shares, the coordinator goes to
 * ABORTED and gives no output at all.
 *
 * Errors: COHORT_ESTATE for a message in the wrong phase (or from a client
 * that is not a survivor of the previous one, or a second message in one
 * phase), COHORT_EINVAL for a malformed or inconsistent message or a plan
 * a client's policy refuses, COHORT_EAUTH for a signature or certificate
 * that does not verify, COHORT_EABORTED once aborted; the state is
 * unchanged by a refused message, and err says why. */
#ifndef COHORT_SECAGG_H
#define COHORT_SECAGG_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"
#include "sign.h"

typedef enum secagg_phase {
  SECAGG_ADVERTISE = 0,
  SECAGG_SHARE = 1,
  SECAGG_MASKED = 2,
  SECAGG_CONSISTENCY = 3,
  SECAGG_UNMASK = 4,
  SECAGG_DONE = 5,
  SECAGG_ABORTED = 6,
} secagg_phase;

const char *secagg_phase_name(secagg_phase p);

#define SECAGG_MAX_CLIENTS 65535

typedef struct secagg_params {
  uint32_t n;         /* clients, indexed 0 .. n - 1 */
  uint32_t threshold; /* t: shares that rebuild a secret, the fewest
                         senders a phase may end with, the fewest shares a
                         client masks with and the fewest attestations
                         (its own included) it reveals on; 2 .. degree */
  uint32_t degree;    /* k: neighbours per client; n - 1 = complete */
  unsigned ring_bits; /* B, 1 .. 62 */
  size_t dim;         /* elements per input */
  uint8_t round_seed[PRG_SEED_LEN]; /* public: the neighbour graph */
} secagg_params;

/* COHORT_EINVAL with the reason when: n < 2 or > SECAGG_MAX_CLIENTS,
 * degree outside [1, n - 1] (or odd for odd n: no k-regular graph),
 * threshold outside [2, degree] (one holder alone must never hold a
 * secret, and a client masks with at least t neighbours), ring_bits
 * outside 1..62, dim 0. Whether t is safe depends on the threat model:
 * each client checks it against its own (secagg_policy_check). */
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
/* Row i alone (k entries into row, ascending), in O(n) time and memory
 * instead of the whole graph's O(n k): what a client needs. */
int secagg_graph_row(const secagg_params *p, uint32_t i, uint32_t *row);

/* ---- choosing k and t ---- */

/* What the coordinator may do beyond pooling what it sees with the
 * corrupt clients' secrets (docs/secagg.md, "Choosing the degree and
 * threshold").
 * CURIOUS: it follows the protocol. SEMI_MALICIOUS: it may also tell
 * different clients different survivor lists (and withhold shares). The
 * consistency round makes each revealing client hold attestations to its
 * own list from t members of its neighbourhood, so some holders of a
 * client's shares can reveal its self-mask seed while others reveal its
 * mask key only when the corrupt holders plus the honest ones split
 * between two lists reach 2 t: t is raised until they fall short
 * (docs/security.md derives why the consistency round does not let the
 * threshold fall to the curious one's). google/federated-compute calls
 * these CURIOUS_SERVER and SEMI_MALICIOUS_SERVER. Zero is the stricter. */
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
  double corrupt;            /* [0, 1): each client, independently of its
                                place in the graph */
  unsigned security_bits;    /* e.g. 40 */
  unsigned correctness_bits; /* e.g. 20 */
  secagg_adversary adversary;
  uint32_t colluders; /* clients colluding with the coordinator that it may
                         place anywhere (it chooses the cohort, the indices
                         and the round seed): t then needs more than this
                         many corrupt holders, whatever the odds; 0: none */
} secagg_goal;
int secagg_find_params(const secagg_goal *goal, uint32_t *degree,
                       uint32_t *threshold, char *err, size_t errlen);

/* The dropout a round's plan must withstand when it selects 1 + over_select
 * times the clients it needs and ends MASKED once it has enough: those it
 * then does not wait for are dropouts too, so a client survives with
 * probability (1 - dropout) / (1 + over_select) at best. */
double secagg_effective_dropout(double dropout, double over_select);

/* The goals the coordinator plans rounds with: the adversary learns more
 * than the sum with probability at most 2^-40, a round fails to complete
 * with at most 2^-20. */
#define SECAGG_SECURITY_BITS 40
#define SECAGG_CORRECTNESS_BITS 20

/* The smallest t for a given degree k (1 .. n - 1) that keeps the corrupt
 * clients, helped by the goal's adversary, from rebuilding an honest
 * client's secrets within 2^-security_bits. Correctness is not checked,
 * since the degree is given (the complete graph, or an operator's).
 * COHORT_EINVAL when no t up to k suffices. */
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

/* ---- what a client accepts ---- */

/* The goal a client holds a plan to, whatever the coordinator says: the
 * coordinator it defends against, the fraction of corrupt clients it
 * assumes, the colluders it assumes the coordinator can place around it,
 * and the security goal. secagg_policy_default is semi-malicious, 5%
 * corrupt, no colluders, SECAGG_SECURITY_BITS: the coordinator's
 * defaults, so a default federation's plans pass. An app may demand more
 * (a higher fraction, more bits); a curious adversary is a weaker demand
 * that only an app which trusts its coordinator should make. */
typedef struct secagg_policy {
  secagg_adversary adversary;
  double corrupt;         /* [0, 1) */
  unsigned security_bits; /* 1 .. 128 */
  uint32_t colluders;     /* as secagg_goal's; default 0 */
} secagg_policy;

secagg_policy secagg_policy_default(void);

/* The fewest shares a plan with degree k among n clients may ask for
 * under the policy: the t bound (2) needs (secagg_find_threshold), or,
 * when no t meets the goal at this n and k, the adversary's floor with
 * one corrupt holder (the majority threshold against a semi-malicious
 * coordinator, 2 against a curious one), which is what the coordinator
 * falls back to. COHORT_EINVAL for an invalid policy. */
int secagg_policy_min_threshold(const secagg_policy *policy, uint32_t n,
                                uint32_t k, uint32_t *t_min, char *err,
                                size_t errlen);

/* Whether a client under `policy` takes part in a round with params p:
 * secagg_params_check, then t at least secagg_policy_min_threshold, and a
 * degree that keeps the honest clients connected under bound (3) with
 * nobody dropping. COHORT_EINVAL with the reason ("threshold 3 is below
 * the 36 this client requires of degree 70 against a semi-malicious
 * coordinator with 5% corrupt clients") otherwise. */
int secagg_policy_check(const secagg_policy *policy, const secagg_params *p,
                        char *err, size_t errlen);

/* ---- client ---- */

/* A client's identity in a round: its registered Ed25519 key (signs its
 * round keys), and optionally the enrollment authority whose certificate
 * every peer's identity key must carry (then peers the coordinator made
 * up are refused; docs/security.md). Borrowed for the client's life. */
typedef struct secagg_identity {
  const sign_key *key;
  const uint8_t *authority; /* SIGN_PUBLIC_LEN bytes, or NULL: none */
} secagg_identity;

typedef struct secagg_client secagg_client;

/* Client `index` of a round. id: its identity (key required). policy:
 * what it accepts (NULL: secagg_policy_default); a plan it refuses is
 * COHORT_EINVAL with the reason. rng: where its key pairs, self-mask seed,
 * Shamir coefficients and nonces come from: prg_init_random in
 * production, a seeded prg in tests and simulations. Borrowed for the
 * client's life. Memory: O(n) while the graph row is computed, O(k) after. */
int secagg_client_new(const secagg_params *p, uint32_t index,
                      const secagg_identity *id, const secagg_policy *policy,
                      prg *rng, secagg_client **out, char *err, size_t errlen);
/* Wipes every secret it holds. Accepts NULL. */
void secagg_client_free(secagg_client *c);
secagg_phase secagg_client_phase(const secagg_client *c);

/* Each call takes the coordinator's message of the previous phase and
 * writes this phase's message into *out (malloc'd, *out_len bytes). */
int secagg_client_advertise(secagg_client *c, uint8_t **out, size_t *out_len,
                            char *err, size_t errlen);
/* peers: SecAggPeers. Refuses fewer than t peers (itself included), keys
 * of non-neighbours, repeated peers or identity keys, its own keys or
 * identity changed, a signature that does not verify (COHORT_EAUTH), and
 * with an authority, a peer without a valid certificate (COHORT_EAUTH). */
int secagg_client_share(secagg_client *c, const uint8_t *peers,
                        size_t peers_len, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen);
/* shares: SecAggShares addressed to it, each from a neighbour that
 * advertised; fewer than t (not counting its own) is refused, since a
 * client that masks with fewer neighbours than the threshold can be
 * unmasked by a coordinator that then claims they dropped. input: dim
 * elements < 2^B. */
int secagg_client_mask(secagg_client *c, const uint8_t *shares,
                       size_t shares_len, const uint64_t *input, uint8_t **out,
                       size_t *out_len, char *err, size_t errlen);
/* The insider-tolerant way through MASKED (docs/secagg.md, "A malicious
 * insider"): check the shares right after SHARE, send the complaints, and
 * mask once the coordinator says whom to leave out.
 *
 * secagg_client_check takes shares (SecAggShares addressed to it) as
 * secagg_client_mask does, except that a share that does not open (its
 * AEAD tag does not verify under the key with its sender, it names another
 * sender, receiver or round, or holds a value outside the field) is not
 * refused: its sender is left out of the masks and of every reveal, and
 * named in *out, a SecAggComplaints for the coordinator. What only the
 * coordinator decides (a share addressed to another client, from a client
 * that is not a neighbour that advertised, two from one) is still refused
 * (EINVAL), the state unchanged. */
int secagg_client_check(secagg_client *c, const uint8_t *shares,
                        size_t shares_len, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen);
/* After secagg_client_check: leave_out is the coordinator's
 * SecAggComplaints naming the neighbours to leave out besides those whose
 * shares did not open (pairs with a complaint either way, clients it
 * dropped). Masks with the rest, at least t of them (EINVAL otherwise, as
 * secagg_client_mask); out: SecAggMaskedInput. */
int secagg_client_mask_checked(secagg_client *c, const uint8_t *leave_out,
                               size_t leave_out_len, const uint64_t *input,
                               uint8_t **out, size_t *out_len, char *err,
                               size_t errlen);
/* survivors: SecAggSurvivors (must list itself, at least t of its
 * neighbourhood, and of its neighbours only those that sent it shares or
 * that it left out). Neighbours it left out get attestations, never a
 * reveal.
 * out: SecAggAttestations to each surviving neighbour. */
int secagg_client_attest(secagg_client *c, const uint8_t *survivors,
                         size_t survivors_len, uint8_t **out, size_t *out_len,
                         char *err, size_t errlen);
/* attestations: SecAggAttestations addressed to it. Reveals (SecAggUnmask)
 * only when valid attestations to its own survivor list from surviving
 * neighbours, with its own, number at least t; attestations that do not
 * verify are not counted, and the refusal names them. */
int secagg_client_unmask(secagg_client *c, const uint8_t *attestations,
                         size_t attestations_len, uint8_t **out,
                         size_t *out_len, char *err, size_t errlen);

/* ---- coordinator ---- */

typedef struct secagg_server secagg_server;

/* Client i's identity as registered: its Ed25519 public key and, where
 * it has one, the enrollment authority's certificate of it. */
typedef struct secagg_peer_identity {
  uint8_t pub[SIGN_PUBLIC_LEN];
  uint8_t cert[SIGN_CERT_LEN];
  int has_cert;
} secagg_peer_identity;

/* ids: the n clients' identities, copied. Memory: O(dim) for the running
 * sum plus O(n k) for keys, sealed shares, attestations and revealed
 * shares in flight. */
int secagg_server_new(const secagg_params *p, const secagg_peer_identity *ids,
                      secagg_server **out, char *err, size_t errlen);
void secagg_server_free(secagg_server *s);
secagg_phase secagg_server_phase(const secagg_server *s);

/* Takes client `from`'s message of `phase` (which must be the current
 * phase). A masked input is added to the running sum at once. SecAggKeys
 * whose signature does not verify against the client's identity key is
 * COHORT_EAUTH. */
int secagg_server_receive(secagg_server *s, uint32_t from, secagg_phase phase,
                          const uint8_t *msg, size_t len, char *err,
                          size_t errlen);

/* Complaints (docs/secagg.md, "A malicious insider"): a client whose
 * sealed shares do not open at a neighbour is left out of that
 * neighbour's masks, and dropped when too few holders are left for its
 * secrets. The caller opens them as MASKED begins (right after closing
 * SHARE); until it closes them, no masked input is taken, so that no
 * complaint can come after its sender's input is in the sum.
 *
 * secagg_server_complain takes client `from`'s SecAggComplaints (len 0:
 * none), once: each sender named must be a neighbour that sent shares,
 * named once. The pair is then left out of both clients' masks and
 * reveals. After the close only an empty one is taken (the client then
 * masks with every neighbour it is not told to leave out). COHORT_ESTATE
 * outside the window, a second time, or from a client that sent no
 * shares or was dropped; COHORT_EINVAL for a malformed one.
 *
 * secagg_server_close_complaints drops every client that sent shares but
 * has fewer than t neighbours left to mask with (those that sent shares
 * and were not dropped, less the pairs left out), until none has: it would
 * refuse to mask, and when its shares opened nowhere its secrets could
 * never be rebuilt. *n_dropped
 * (may be NULL): how many. A masked input is then refused from a dropped
 * client, and from one that must leave someone out but sent no
 * complaints (so it never asked whom).
 *
 * secagg_server_leave_out: once closed, the SecAggComplaints for client
 * `to`: its neighbours that sent shares and were dropped or whose pair
 * with it was left out. COHORT_ESTATE before the close, or for a client
 * that was dropped or sent no shares. */
int secagg_server_open_complaints(secagg_server *s, char *err, size_t errlen);
int secagg_server_complain(secagg_server *s, uint32_t from, const uint8_t *msg,
                           size_t len, char *err, size_t errlen);
int secagg_server_close_complaints(secagg_server *s, uint32_t *n_dropped,
                                   char *err, size_t errlen);
int secagg_server_complaints_open(const secagg_server *s);
uint32_t secagg_server_complaint_count(const secagg_server *s);
int secagg_server_complained(const secagg_server *s, uint32_t i);
int secagg_server_dropped(const secagg_server *s, uint32_t i);
int secagg_server_leave_out(const secagg_server *s, uint32_t to, uint8_t **out,
                            size_t *out_len, char *err, size_t errlen);

/* Ends the current phase with the clients heard so far. Ending UNMASK
 * checks every revealed share, rebuilds the secrets and removes the
 * masks: DONE, or ABORTED. Returns COHORT_OK, or COHORT_EABORTED (reason
 * in err and in secagg_server_abort_reason). */
int secagg_server_close_phase(secagg_server *s, char *err, size_t errlen);

/* Whether client i sent its message in `phase`. */
int secagg_server_heard(const secagg_server *s, secagg_phase phase, uint32_t i);
/* How many clients sent their message in `phase`. */
uint32_t secagg_server_count(const secagg_server *s, secagg_phase phase);

/* The message for client `to` after the phase just closed: SecAggPeers
 * after ADVERTISE, SecAggShares after SHARE, SecAggSurvivors after MASKED,
 * SecAggAttestations after CONSISTENCY. COHORT_ESTATE when `to` did not
 * send in that phase. */
int secagg_server_message(const secagg_server *s, uint32_t to, uint8_t **out,
                          size_t *out_len, char *err, size_t errlen);

/* DONE: the sum of the survivors' inputs, dim elements mod 2^B, and how
 * many inputs it holds. */
int secagg_server_sum(const secagg_server *s, uint64_t *sum,
                      uint32_t *n_inputs);
const char *secagg_server_abort_reason(const secagg_server *s);
/* Holders whose revealed shares were found off their secrets' polynomials
 * (and set aside) when UNMASK closed: up to max indices into out; the
 * number found. */
uint32_t secagg_server_bad_holders(const secagg_server *s, uint32_t *out,
                                   uint32_t max);

#endif
