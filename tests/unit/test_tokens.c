/* Enrollment tokens and sessions in the round engine and the store, played
 * by an adversary: a revoked, an expired and a used-up token admit nobody
 * and leave no client row; an expired and a revoked session are refused
 * with a detail that says which; a token revoked by another connection
 * (the admin CLI) counts at once; no token is ever in the database file in
 * clear. Driven through the engine directly (round_fixture), no network. */
#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "pb.h"
#include "round_fixture.h"
#include "store_offenders.h"
#include "store_tokens.h"

/* A stored enrollment token whose secret is `secret`; its id. */
static int64_t add_token(fixture *f, const char *secret, int64_t max_uses,
                         double expires_at) {
  char hash[CRYPTO_SHA256_HEX_LEN];
  int64_t id = 0;
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_hex(secret, hash), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(store_token_add(f->db, hash, "test", max_uses,
                                        expires_at, clock_wall_s(), &id),
                        COHORT_OK);
  return id;
}

/* A Register with token and identity n, proving it holds n's key. */
static round_verdict register_as(fixture *f, const char *token, int n,
                                 int64_t *id, char session[65]) {
  uint8_t pub[SIGN_PUBLIC_LEN], proof[SIGN_LEN];
  fx_identity(n, NULL, pub);
  round_registration r = fx_registration(token, pub);
  fx_prove(&r, n, proof);
  return round_register(f->e, &r, id, session);
}

/* The identity checks a Register pays for, counted: this program is
 * linked with -Wl,--wrap for both (tests/CMakeLists.txt). */
static int g_key_checks, g_proof_checks;
int __real_sign_public_check(const uint8_t pub[SIGN_PUBLIC_LEN],
                             const char **why);
int __real_sign_check_possession(const uint8_t pub[SIGN_PUBLIC_LEN],
                                 const char *enrollment_token, int64_t time_ms,
                                 const uint8_t sig[SIGN_LEN]);
int __wrap_sign_public_check(const uint8_t pub[SIGN_PUBLIC_LEN],
                             const char **why) {
  g_key_checks++;
  return __real_sign_public_check(pub, why);
}
int __wrap_sign_check_possession(const uint8_t pub[SIGN_PUBLIC_LEN],
                                 const char *enrollment_token, int64_t time_ms,
                                 const uint8_t sig[SIGN_LEN]) {
  g_proof_checks++;
  return __real_sign_check_possession(pub, enrollment_token, time_ms, sig);
}

/* Client id's state as `cohort clients list` shows it ("" if none). */
static const char *state_of(fixture *f, int64_t id) {
  static char state[8];
  store_client_info *rows = NULL;
  size_t n = 0;
  state[0] = '\0';
  CU_ASSERT_EQUAL_FATAL(store_client_list(f->db, &rows, &n), COHORT_OK);
  for (size_t i = 0; i < n; i++)
    if (rows[i].id == id)
      snprintf(state, sizeof state, "%s", rows[i].state);
  free(rows);
  return state;
}

static int64_t clients(fixture *f) {
  return count(f, "SELECT COUNT(*) FROM clients");
}

static void test_refused_tokens(void) {
  fixture f;
  FX_OPEN(f, 0);
  double now = clock_wall_s();
  int64_t revoked = add_token(&f, "tok-revoked", 0, 0);
  add_token(&f, "tok-expired", 0, now - 1);
  add_token(&f, "tok-once", 1, 0);
  CU_ASSERT_EQUAL(store_token_revoke(f.db, revoked, now), COHORT_OK);
  int64_t id = 0;
  char session[65];
  const struct {
    const char *token, *why;
  } bad[] = {{"tok-revoked", "is revoked"},
             {"tok-expired", "is expired"},
             {"tok-unknown", "unknown enrollment token"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    round_verdict v = register_as(&f, bad[i].token, 10 + (int)i, &id, session);
    CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
    CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, bad[i].why));
  }
  CU_ASSERT_EQUAL(clients(&f), 0);
  /* One use: the first registration takes it, the second is refused. */
  CU_ASSERT_EQUAL(register_as(&f, "tok-once", 20, &id, session).code, 0);
  round_verdict v = register_as(&f, "tok-once", 21, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "is used up"));
  CU_ASSERT_EQUAL(clients(&f), 1);
  CU_ASSERT_EQUAL(count(&f, "SELECT uses FROM enrollment_tokens"
                            " WHERE max_uses = 1"),
                  1);
  fx_close(&f);
}

/* A stranger's Registers (an unknown, a revoked and an expired token, with
 * a well-formed key and a valid proof of it) are refused before the key's
 * curve check and the proof's signature, about 140 us of CPU each that
 * anyone could otherwise make the coordinator spend; a valid token's
 * Register pays both. */
static void test_refused_token_costs_no_signature_check(void) {
  fixture f;
  FX_OPEN(f, 0);
  double now = clock_wall_s();
  int64_t revoked = add_token(&f, "tok-revoked", 0, 0);
  add_token(&f, "tok-expired", 0, now - 1);
  CU_ASSERT_EQUAL(store_token_revoke(f.db, revoked, now), COHORT_OK);
  int64_t id = 0;
  char session[65];
  g_key_checks = g_proof_checks = 0;
  const char *bad[] = {"tok-unknown", "tok-revoked", "tok-expired"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CU_ASSERT_EQUAL(register_as(&f, bad[i], 60, &id, session).code,
                    GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(g_key_checks, 0);
  CU_ASSERT_EQUAL(g_proof_checks, 0);
  CU_ASSERT_EQUAL(register_as(&f, ENROLL, 60, &id, session).code, 0);
  CU_ASSERT_EQUAL(g_key_checks, 1);
  CU_ASSERT_EQUAL(g_proof_checks, 1);
  fx_close(&f);
}

static void test_use_limit_counts(void) {
  fixture f;
  FX_OPEN(f, 0);
  int64_t tok = add_token(&f, "tok-three", 3, 0);
  int64_t id = 0;
  char session[65];
  int admitted = 0;
  for (int i = 0; i < 5; i++)
    admitted += register_as(&f, "tok-three", 30 + i, &id, session).code == 0;
  CU_ASSERT_EQUAL(admitted, 3);
  CU_ASSERT_EQUAL(count(&f, "SELECT uses FROM enrollment_tokens"), 3);
  char sql[128];
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM clients WHERE enrollment_token = %lld",
           (long long)tok);
  CU_ASSERT_EQUAL(count(&f, sql), 3);
  /* A --enroll-token (the fixture's ENROLL) has no row and no limit. */
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(register_as(&f, ENROLL, 40 + i, &id, session).code, 0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients"
                            " WHERE enrollment_token IS NULL"),
                  3);
  fx_close(&f);
}

static void test_revoked_elsewhere(void) {
  fixture f;
  FX_OPEN(f, 0);
  int64_t tok = add_token(&f, "tok-cli", 0, 0);
  int64_t id = 0;
  char session[65], err[256];
  CU_ASSERT_EQUAL(register_as(&f, "tok-cli", 50, &id, session).code, 0);
  /* `cohort tokens revoke` and `cohort clients revoke`: their own
   * connection to the file, while the engine keeps its own. */
  store *admin = NULL;
  CU_ASSERT_EQUAL_FATAL(store_open_admin(f.path, &admin, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(store_token_revoke(admin, tok, clock_wall_s()), COHORT_OK);
  CU_ASSERT_EQUAL(store_token_revoke(admin, tok, clock_wall_s()),
                  COHORT_ESTATE);
  CU_ASSERT_EQUAL(store_token_revoke(admin, tok + 100, clock_wall_s()),
                  COHORT_ENOTFOUND);
  round_verdict v = register_as(&f, "tok-cli", 51, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "revoked"));
  CU_ASSERT_EQUAL(clients(&f), 1);
  store_close(admin);
  fx_close(&f);
}

static void test_sessions(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.5;
  FX_START(f, 2);
  int64_t who = 0;
  CU_ASSERT_EQUAL(round_authenticate(f.e, f.token[0], &who).code, 0);
  CU_ASSERT_EQUAL(who, f.id[0]);
  char err[256];
  store *admin = NULL;
  CU_ASSERT_EQUAL_FATAL(store_open_admin(f.path, &admin, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(store_client_revoke(admin, f.id[1], clock_wall_s()),
                  COHORT_OK);
  store_close(admin);
  round_verdict v = round_authenticate(f.e, f.token[1], &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(strncmp(v.detail, PB_DETAIL_SESSION_REVOKED,
                          strlen(PB_DETAIL_SESSION_REVOKED)),
                  0);
  /* The revoked client's key cannot come back under a new session. */
  int64_t id = 0;
  char session[65];
  round_registration r = fx_registration(ENROLL, f.key[1]);
  v = round_register(f.e, &r, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "revoked"));
  CU_ASSERT_STRING_EQUAL(state_of(&f, f.id[0]), "active");
  CU_ASSERT_STRING_EQUAL(state_of(&f, f.id[1]), "revoked");
  sleep_s(0.6);
  v = round_authenticate(f.e, f.token[0], &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(strncmp(v.detail, PB_DETAIL_SESSION_EXPIRED,
                          strlen(PB_DETAIL_SESSION_EXPIRED)),
                  0);
  CU_ASSERT_STRING_EQUAL(state_of(&f, f.id[0]), "expired");
  /* The expired client registers again with its key: the same client, a
   * new session; the old token stays dead. */
  r = fx_registration(ENROLL, f.key[0]);
  uint8_t proof[SIGN_LEN];
  fx_prove(&r, 1, proof);
  CU_ASSERT_EQUAL(round_register(f.e, &r, &id, session).code, 0);
  CU_ASSERT_EQUAL(id, f.id[0]);
  CU_ASSERT_EQUAL(round_authenticate(f.e, session, &who).code, 0);
  CU_ASSERT_EQUAL(who, f.id[0]);
  CU_ASSERT_NOT_EQUAL(round_authenticate(f.e, f.token[0], &who).code, 0);
  CU_ASSERT_EQUAL(clients(&f), 2);
  fx_close(&f);
}

static void test_renew_with_used_token(void) {
  /* A persistent key enrolled with a one-use token: the use is its own, so
   * the token still renews its expired session, and takes no second use;
   * another key is refused, and so is the renewal of a client that another
   * token admitted. */
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.3;
  FX_START(f, 0);
  add_token(&f, "tok-device", 1, 0);
  int64_t id = 0, again = 0, who = 0;
  char session[65];
  CU_ASSERT_EQUAL_FATAL(register_as(&f, "tok-device", 70, &id, session).code,
                        0);
  sleep_s(0.002); /* a later proof, by the ms */
  CU_ASSERT_EQUAL(register_as(&f, "tok-device", 70, &again, session).code,
                  0); /* still active: the holder's newer proof renews it */
  CU_ASSERT_EQUAL(again, id);
  int64_t other = 0;
  CU_ASSERT_EQUAL_FATAL(register_as(&f, ENROLL, 72, &other, session).code, 0);
  sleep_s(0.4);
  CU_ASSERT_EQUAL(register_as(&f, "tok-device", 70, &again, session).code, 0);
  CU_ASSERT_EQUAL(again, id);
  CU_ASSERT_EQUAL(round_authenticate(f.e, session, &who).code, 0);
  round_verdict v = register_as(&f, "tok-device", 71, &again, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "used up"));
  /* Nor does it renew a client that another token admitted. */
  v = register_as(&f, "tok-device", 72, &again, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "used up"));
  CU_ASSERT_EQUAL(register_as(&f, ENROLL, 72, &again, session).code, 0);
  CU_ASSERT_EQUAL(again, other);
  CU_ASSERT_EQUAL(count(&f, "SELECT uses FROM enrollment_tokens"), 1);
  CU_ASSERT_EQUAL(clients(&f), 2);
  fx_close(&f);
}

/* The adversary holds a victim's public identity key (and its certificate:
 * every peer in secure aggregation sees both) and an enrollment token of
 * its own, and waits for the victim's session to expire. Without a proof of
 * possession, with one made by its own key, with the victim's proof for
 * another token, or with one of the wrong size, it gets no session and no
 * client; the victim, proving its key, renews its own. A first
 * registration still needs no proof (older clients send none). */
static void test_copied_key_renews_nothing(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.3;
  FX_START(f, 0);
  add_token(&f, "tok-attacker", 0, 0);
  int64_t victim = 0, id = 0, who = 0;
  char session[65];
  CU_ASSERT_EQUAL_FATAL(register_as(&f, ENROLL, 90, &victim, session).code, 0);
  sleep_s(0.4);
  uint8_t pub[SIGN_PUBLIC_LEN], own[SIGN_LEN], seen[SIGN_LEN];
  fx_identity(90, NULL, pub);
  round_registration r = fx_registration("tok-attacker", pub);
  round_verdict v = round_register(f.e, &r, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "proof of possession"));
  fx_prove(&r, 91, own);
  v = round_register(f.e, &r, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "proof of possession refused"));
  round_registration victims = fx_registration(ENROLL, pub);
  fx_prove(&victims, 90, seen);
  r.possession = seen;
  v = round_register(f.e, &r, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  r.possession_len = SIGN_LEN - 1;
  CU_ASSERT_EQUAL(round_register(f.e, &r, &id, session).code,
                  GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(clients(&f), 1);
  CU_ASSERT_EQUAL(register_as(&f, ENROLL, 90, &id, session).code, 0);
  CU_ASSERT_EQUAL(id, victim);
  CU_ASSERT_EQUAL(round_authenticate(f.e, session, &who).code, 0);
  CU_ASSERT_EQUAL(who, victim);
  uint8_t fresh[SIGN_PUBLIC_LEN];
  fx_identity(92, NULL, fresh);
  r = fx_registration("tok-attacker", fresh);
  CU_ASSERT_EQUAL(round_register(f.e, &r, &id, session).code, 0);
  CU_ASSERT_EQUAL(clients(&f), 2);
  fx_close(&f);
}

/* Without an enrollment authority a first registration needs no proof
 * (older clients send none). The adversary, with a valid token of its own,
 * copied a victim's persistent public key before the victim first
 * registered, and registers it first, with a certificate of junk (stored
 * unchecked without an authority) and a platform of its own, and gets the
 * client excluded. The victim's Register, proving the key with a one-use
 * token of its own, makes a new client with the victim's certificate and
 * platform, its token's use and a clean record, and retires the squatter's
 * (revoked; its session is no longer known). The squatter can register the key
 * again neither with nor without the victim's token; the victim's used-up
 * token still renews the victim's client. */
static void test_squatted_key_taken_back(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.3;
  FX_START(f, 0);
  add_token(&f, "tok-attacker", 0, 0);
  int64_t victims_token = add_token(&f, "tok-victim", 1, 0);
  uint8_t pub[SIGN_PUBLIC_LEN];
  fx_identity(97, NULL, pub);
  uint8_t junk[SIGN_CERT_LEN], cert[SIGN_CERT_LEN], stored[SIGN_CERT_LEN];
  uint8_t apub[SIGN_PUBLIC_LEN], got[SIGN_PUBLIC_LEN], proof[SIGN_LEN];
  sign_key *authority = NULL;
  fx_identity(90, &authority, apub);
  CU_ASSERT_EQUAL_FATAL(sign_certify(authority, pub, cert), COHORT_OK);
  sign_key_free(authority);
  memset(junk, 0xa5, sizeof junk);
  round_registration squat = fx_registration("tok-attacker", pub);
  squat.enrollment_cert = junk;
  squat.enrollment_cert_len = SIGN_CERT_LEN;
  squat.platform = "squatter";
  int64_t squatter = 0, id = 0, again_id = 0, who = 0;
  char taken[65], own[65], again[65];
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &squat, &squatter, taken).code, 0);
  CU_ASSERT_EQUAL(round_authenticate(f.e, taken, &who).code, 0);
  CU_ASSERT_EQUAL(store_client_exclude(f.db, squatter, clock_wall_s() + 600),
                  COHORT_OK);
  round_registration mine = fx_registration("tok-victim", pub);
  mine.enrollment_cert = cert;
  mine.enrollment_cert_len = SIGN_CERT_LEN;
  fx_prove(&mine, 97, proof);
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &mine, &id, own).code, 0);
  CU_ASSERT_NOT_EQUAL(id, squatter);
  int has_cert = 0;
  CU_ASSERT_EQUAL_FATAL(store_client_identity(f.db, id, got, stored, &has_cert),
                        COHORT_OK);
  CU_ASSERT_TRUE(has_cert && sign_check_cert(apub, pub, stored) == COHORT_OK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients WHERE platform ="
                            " 'squatter' AND revoked_at IS NULL"),
                  0);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients WHERE"
                            " identity_key IS NOT NULL"),
                  1);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients WHERE"
                            " excluded_until IS NOT NULL"
                            " AND revoked_at IS NULL"),
                  0);
  char uses[80];
  snprintf(uses, sizeof uses,
           "SELECT uses FROM enrollment_tokens WHERE id = %lld",
           (long long)victims_token);
  CU_ASSERT_EQUAL(count(&f, uses), 1);
  round_verdict v = round_authenticate(f.e, taken, &who);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(strncmp(v.detail, PB_DETAIL_SESSION_UNKNOWN,
                          strlen(PB_DETAIL_SESSION_UNKNOWN)),
                  0);
  CU_ASSERT_EQUAL(round_authenticate(f.e, own, &who).code, 0);
  CU_ASSERT_EQUAL(who, id);
  /* Listed as what it is: retired, not revoked by anyone. */
  CU_ASSERT_STRING_EQUAL(state_of(&f, squatter), "retired");
  CU_ASSERT_STRING_EQUAL(state_of(&f, id), "active");
  /* A check-in of the squatter's client held since before (long_poll.h)
   * hears at its selection what its token would: unknown, not revoked, so
   * that a device holding it registers again rather than stop. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  checkin_result held;
  v = round_checkin(f.e, squatter, 100, 0, NULL, NULL, &held);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(strncmp(v.detail, PB_DETAIL_SESSION_UNKNOWN,
                          strlen(PB_DETAIL_SESSION_UNKNOWN)),
                  0);
  v = round_register(f.e, &squat, &again_id, again);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "already bound"));
  squat.enrollment_token = "tok-victim";
  CU_ASSERT_EQUAL(round_register(f.e, &squat, &again_id, again).code,
                  GRPC_STATUS_INVALID_ARGUMENT);
  /* Its own token, used up by the take-back, renews the victim's client. */
  sleep_s(0.4);
  CU_ASSERT_EQUAL(register_as(&f, "tok-victim", 97, &again_id, again).code, 0);
  CU_ASSERT_EQUAL(again_id, id);
  CU_ASSERT_EQUAL(clients(&f), 2);
  fx_close(&f);
}

/* The adversary has a fresh proof of the victim's key that the coordinator
 * never accepted (a Register refused by a rate limit before it was read,
 * or lost, kept in a request log) and uses it within its 10 minutes, once
 * the victim's session expired: it buys one session of the victim's
 * client. The victim's next Register, with a newer proof, takes the client
 * back at once (the newest proof wins), and the adversary's session stops
 * working; replaying that proof again buys nothing. */
static void test_newest_proof_wins(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.3;
  FX_START(f, 0);
  uint8_t pub[SIGN_PUBLIC_LEN], first[SIGN_LEN], held[SIGN_LEN];
  fx_identity(94, NULL, pub);
  int64_t victim = 0, id = 0, who = 0;
  char mine[65], stolen[65], own[65];
  round_registration r1 = fx_registration(ENROLL, pub);
  fx_prove(&r1, 94, first);
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &r1, &victim, mine).code, 0);
  sleep_s(0.4);
  round_registration never_arrived = fx_registration(ENROLL, pub);
  fx_prove(&never_arrived, 94, held);
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &never_arrived, &id, stolen).code,
                        0);
  CU_ASSERT_EQUAL(id, victim);
  sleep_s(0.002);
  CU_ASSERT_EQUAL(register_as(&f, ENROLL, 94, &id, own).code, 0);
  CU_ASSERT_EQUAL(id, victim);
  CU_ASSERT_EQUAL(round_authenticate(f.e, stolen, &who).code,
                  GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(round_authenticate(f.e, own, &who).code, 0);
  CU_ASSERT_EQUAL(who, victim);
  round_verdict v = round_register(f.e, &never_arrived, &id, stolen);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "not newer than the last one"));
  CU_ASSERT_EQUAL(round_authenticate(f.e, own, &who).code, 0);
  CU_ASSERT_EQUAL(clients(&f), 1);
  fx_close(&f);
}

/* The adversary has copies of the victim's Registers (a request log kept
 * by a proxy that terminates TLS) and so the victim's enrollment token: it
 * replays each proof it saw once the session it bought expired, also after a
 * coordinator restart, and tries proofs the victim signed but that never
 * arrived, made 11 minutes before and after now. None renews the victim's
 * session or makes a client; the victim's own fresh proof does, and the one
 * after it again. */
static void test_replayed_proof_renews_nothing(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.3;
  FX_START(f, 0);
  uint8_t pub[SIGN_PUBLIC_LEN], first[SIGN_LEN], second[SIGN_LEN];
  uint8_t stale[SIGN_LEN];
  fx_identity(95, NULL, pub);
  round_registration seen1 = fx_registration(ENROLL, pub);
  fx_prove(&seen1, 95, first);
  int64_t victim = 0, id = 0, who = 0;
  char session[65];
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &seen1, &victim, session).code, 0);
  sleep_s(0.4);
  round_verdict v = round_register(f.e, &seen1, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "not newer than the last one"));
  /* The victim renews; its proof is seen too. */
  round_registration seen2 = fx_registration(ENROLL, pub);
  fx_prove(&seen2, 95, second);
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &seen2, &id, session).code, 0);
  CU_ASSERT_EQUAL(id, victim);
  sleep_s(0.4);
  restart_engine(&f);
  CU_ASSERT_EQUAL(round_register(f.e, &seen2, &id, session).code,
                  GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(round_register(f.e, &seen1, &id, session).code,
                  GRPC_STATUS_UNAUTHENTICATED);
  /* Signed by the key, but not now: held back, or a clock far off. */
  int64_t now_ms = (int64_t)(clock_wall_s() * 1000.0);
  const int64_t eleven_min = 11 * 60 * 1000;
  round_registration old = fx_registration(ENROLL, pub);
  fx_prove_at(&old, 95, now_ms - eleven_min, stale);
  v = round_register(f.e, &old, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "behind the coordinator's clock"));
  fx_prove_at(&old, 95, now_ms + eleven_min, stale);
  v = round_register(f.e, &old, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "ahead of the coordinator's clock"));
  /* A proof signed for one time does not pass for another. */
  old.possession_time_ms = now_ms;
  v = round_register(f.e, &old, &id, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "proof of possession refused"));
  CU_ASSERT_EQUAL(round_authenticate(f.e, session, &who).code,
                  GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(clients(&f), 1);
  /* The holder, signing now, renews its own client. */
  CU_ASSERT_EQUAL(register_as(&f, ENROLL, 95, &id, session).code, 0);
  CU_ASSERT_EQUAL(id, victim);
  CU_ASSERT_EQUAL(round_authenticate(f.e, session, &who).code, 0);
  CU_ASSERT_EQUAL(who, victim);
  CU_ASSERT_EQUAL(clients(&f), 1);
  fx_close(&f);
}

/* A device whose clock is two hours off still registers for the first time
 * without an authority, with its one-use token: its proof proves nothing
 * then, and the client is kept as unproven. It cannot renew until its
 * clock is set, and is told how far off it is; once set, its proof makes
 * it a client of its own (an unproven client may have been anyone's),
 * which takes over the token's one use, and the unproven one is retired. */
static void test_clock_off_registers_unproven(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.session_ttl_s = 0.3;
  FX_START(f, 0);
  int64_t one_use = add_token(&f, "tok-device", 1, 0);
  uint8_t pub[SIGN_PUBLIC_LEN], sig[SIGN_LEN];
  fx_identity(98, NULL, pub);
  int64_t off = (int64_t)(clock_wall_s() * 1000.0) - 2 * 3600 * 1000;
  round_registration r = fx_registration("tok-device", pub);
  fx_prove_at(&r, 98, off, sig);
  int64_t id = 0, again = 0;
  char session[65];
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &r, &id, session).code, 0);
  CU_ASSERT_EQUAL(count(&f, "SELECT possession_ms FROM clients"), 0);
  sleep_s(0.4);
  fx_prove_at(&r, 98, off + 1000, sig);
  round_verdict v = round_register(f.e, &r, &again, session);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "s behind the coordinator's clock"));
  char first[65];
  memcpy(first, session, sizeof first);
  CU_ASSERT_EQUAL(register_as(&f, "tok-device", 98, &again, session).code, 0);
  CU_ASSERT_NOT_EQUAL(again, id);
  /* The retired client's session, which a device that lost the reply still
   * holds, is not "revoked" (it would stop) but unknown: it registers
   * again with its key. */
  int64_t who = 0;
  v = round_authenticate(f.e, first, &who);
  CU_ASSERT_EQUAL(strncmp(v.detail, PB_DETAIL_SESSION_UNKNOWN,
                          strlen(PB_DETAIL_SESSION_UNKNOWN)),
                  0);
  char uses[80];
  snprintf(uses, sizeof uses,
           "SELECT uses FROM enrollment_tokens WHERE id = %lld",
           (long long)one_use);
  CU_ASSERT_EQUAL(count(&f, uses), 1);
  CU_ASSERT(count(&f, "SELECT possession_ms FROM clients WHERE"
                      " revoked_at IS NULL") > off + 1000);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM clients WHERE"
                            " revoked_at IS NULL"),
                  1);
  fx_close(&f);
}

/* Whether needle occurs in the file at path (missing file: no). */
static int file_contains(const char *path, const char *needle) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return 0;
  size_t n = strlen(needle), len = 0, cap = 1 << 20;
  char *buf = malloc(cap);
  int found = 0;
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
    len += got;
    if (len == cap) {
      char *grown = realloc(buf, cap *= 2);
      if (!grown)
        break;
      buf = grown;
    }
  }
  for (size_t i = 0; buf && i + n <= len && !found; i++)
    found = memcmp(buf + i, needle, n) == 0;
  free(buf);
  fclose(fp);
  return found;
}

static void test_no_token_in_clear(void) {
  fixture f;
  FX_OPEN(f, 2);
  char secret[CRYPTO_TOKEN_HEX_LEN], session[65];
  CU_ASSERT_EQUAL_FATAL(crypto_new_token(secret), COHORT_OK);
  add_token(&f, secret, 0, 0);
  int64_t id = 0;
  CU_ASSERT_EQUAL_FATAL(register_as(&f, secret, 60, &id, session).code, 0);
  char wal[300];
  snprintf(wal, sizeof wal, "%s-wal", f.path);
  const char *tokens[] = {secret, session, f.token[0], f.token[1], ENROLL};
  for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
    CU_ASSERT_FALSE(file_contains(f.path, tokens[i]));
    CU_ASSERT_FALSE(file_contains(wal, tokens[i]));
  }
  /* What is there is the hash, which the control finds. */
  char hash[CRYPTO_SHA256_HEX_LEN];
  crypto_sha256_hex(secret, hash);
  CU_ASSERT_TRUE(file_contains(f.path, hash) || file_contains(wal, hash));
  fx_close(&f);
}

static void test_v9_sessions_expire(void) {
  fixture f;
  FX_OPEN(f, 1);
  round_engine_free(f.e);
  f.e = NULL;
  store_close(f.db);
  f.db = NULL;
  /* Schema 9: no token table, no session columns (nor schema 11's record
   * of failed rounds, schema 12's time of the last proof or schema 13's
   * name of the kept updates' checksum). */
  const char *downgrade[] = {"ALTER TABLE updates RENAME COLUMN checksum TO "
                             "sha256",
                             "ALTER TABLE clients DROP COLUMN possession_ms",
                             "DROP TABLE client_failures",
                             "ALTER TABLE clients DROP COLUMN rounds_failed",
                             "ALTER TABLE clients DROP COLUMN excluded_until",
                             "DROP TABLE enrollment_tokens",
                             "ALTER TABLE clients DROP COLUMN enrollment_token",
                             "ALTER TABLE clients DROP COLUMN "
                             "session_expires_at",
                             "ALTER TABLE clients DROP COLUMN revoked_at",
                             "PRAGMA user_version = 9"};
  for (size_t i = 0; i < sizeof downgrade / sizeof downgrade[0]; i++)
    CU_ASSERT_EQUAL_FATAL(db_exec(f.path, downgrade[i], NULL, 0), 0);
  char err[256];
  CU_ASSERT_EQUAL_FATAL(store_open(f.path, &f.db, err, sizeof err), COHORT_OK);
  /* Upgraded: a session that never expired now has a day. */
  double left = (double)count(&f, "SELECT CAST(session_expires_at AS INTEGER)"
                                  " FROM clients") -
                clock_wall_s();
  CU_ASSERT(left > 86400 - 120 && left <= 86400 + 1);
  CU_ASSERT_EQUAL(count(&f, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
  fx_close(&f);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a revoked, an expired, an unknown and a used-up token are refused "
       "and create no client row",
       test_refused_tokens},
      {"a token admits registrations up to its limit; a flag token has none",
       test_use_limit_counts},
      {"a token revoked through another connection is refused at once",
       test_revoked_elsewhere},
      {"expired and revoked sessions are refused, named; an expired key "
       "renews, a revoked one cannot",
       test_sessions},
      {"a used-up token renews the expired session of the client it "
       "admitted, and admits no other",
       test_renew_with_used_token},
      {"a copied identity key renews no one's session; the key's holder "
       "does",
       test_copied_key_renews_nothing},
      {"a key squatted without a proof goes to its holder's proof, as a new "
       "client; the squatter's is retired",
       test_squatted_key_taken_back},
      {"a proof the coordinator never saw buys one session, until the "
       "holder's newer proof",
       test_newest_proof_wins},
      {"a device with its clock off registers unproven, proves its key once "
       "its clock is set",
       test_clock_off_registers_unproven},
      {"a proof of possession seen once, or signed 11 minutes off, renews "
       "nothing, also after a restart",
       test_replayed_proof_renews_nothing},
      {"a refused token costs no key or signature check",
       test_refused_token_costs_no_signature_check},
      {"no enrollment or session token is in the database in clear",
       test_no_token_in_clear},
      {"a schema 9 database's sessions get a day at the upgrade",
       test_v9_sessions_expire},
  };
  return test_add_suite("tokens", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
