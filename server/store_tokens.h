/* The store's enrollment tokens and client sessions (schema 10): tokens
 * that the operator creates, lists and revokes with `cohort tokens`, kept
 * as SHA-256 hashes with a label, an optional use limit and expiry; and
 * each client's session expiry and revocation (`cohort clients`). Like the
 * rest of the store, not thread-safe; the admin CLI writes the same file
 * from another process, which SQLite's locking (WAL) makes safe, and the
 * coordinator reads these rows on every Register and call, so a change is
 * seen at once. */
#ifndef COHORT_STORE_TOKENS_H
#define COHORT_STORE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "sign.h"
#include "store.h"

#define STORE_LABEL_MAX 64 /* bytes of a token's label */

typedef struct store_enroll_token {
  int64_t id;
  char label[STORE_LABEL_MAX + 1];
  int64_t max_uses;  /* 0: no limit */
  int64_t uses;      /* registrations it admitted */
  double expires_at; /* wall-clock seconds; 0: never */
  double revoked_at; /* 0: not revoked */
  double created_at;
} store_enroll_token;

/* Whether len bytes (a NUL inside counted: the length a JSON string had)
 * may be a token's label: 1 to STORE_LABEL_MAX bytes of text that
 * sanitize_refusal passes, since labels are listed by the API and the CLI
 * and logged. COHORT_OK, or COHORT_EINVAL with err naming the problem and
 * its byte offset, never quoting the label. */
int store_label_check(const char *label, size_t len, char *err, size_t errlen);

/* A new token with the hash of its secret (64 hex digits); label is
 * required and must pass store_label_check (else COHORT_EINVAL, with
 * store_errmsg saying why). */
int store_token_add(store *s, const char *token_sha256_hex, const char *label,
                    int64_t max_uses, double expires_at, double now,
                    int64_t *id);
/* The token with that hash; COHORT_ENOTFOUND when none. */
int store_token_find(store *s, const char *token_sha256_hex,
                     store_enroll_token *out);
/* Why the token admits no registration at wall time now ("revoked",
 * "expired", "used up"), or NULL when it does. */
const char *store_token_refusal(const store_enroll_token *t, double now);
/* Every token, oldest first, in a malloc'd array (free it). */
int store_token_list(store *s, store_enroll_token **out, size_t *n);
/* Marks a token revoked: COHORT_ENOTFOUND for an unknown id, COHORT_ESTATE
 * when it already is. */
int store_token_revoke(store *s, int64_t id, double now);

/* A registration's new client (store_client_enroll), or the new session of
 * a client bound to the same key (store_session_renew). */
typedef struct store_enrollment {
  const char *session_sha256_hex; /* hash of its session token */
  const char *platform;           /* NULL: "" */
  const uint8_t *identity;        /* SIGN_PUBLIC_LEN bytes */
  const uint8_t *cert;            /* SIGN_CERT_LEN bytes, or NULL */
  int64_t token_id; /* the stored token it enrolls with; 0: a token the
                       coordinator was given by flag, which has no row */
  double session_expires_at;
  int64_t possession_ms; /* signed time of its proof of possession; 0: none */
  /* The client bound to the same key by a Register without a proof, which
   * the new one replaces (revoked, its key released); 0: none. */
  int64_t retire;
  int use_of_retired; /* token_id admitted retire: its use passes on, and
                         no new one is taken */
  double now;
} store_enrollment;

/* In one transaction: takes one use of the token (when token_id is not 0),
 * retires e->retire and adds the client. COHORT_EAUTH, with nothing
 * written, when the token is revoked, expired or used up by then, or the
 * client to retire was revoked or proven (a concurrent registration,
 * `cohort tokens revoke` or `cohort clients revoke` won the race). */
int store_client_enroll(store *s, const store_enrollment *e, int64_t *id);

/* A client's session: its id, expiry and revocation (0: none). */
typedef struct store_session {
  int64_t client;
  double expires_at; /* 0: never (a client made before sessions expired) */
  double revoked_at;
  int64_t token_id;      /* the stored enrollment token that admitted it; 0: a
                            flag token, or none recorded */
  int64_t possession_ms; /* signed time of the newest proof of possession
                            accepted for it (ms since the epoch); 0: none */
  int retired; /* retired by the coordinator, not revoked by the operator:
                  its key's proven holder is another client now */
} store_session;

/* The session with that token hash; COHORT_ENOTFOUND when none. */
int store_session_find(store *s, const char *session_sha256_hex,
                       store_session *out);
/* The session of client id; COHORT_ENOTFOUND when there is no such client. */
int store_session_of(store *s, int64_t id, store_session *out);
/* A new session for client id, on a proof of possession of its key: the
 * session token's hash, expiry, proof time, certificate and platform of e
 * (its identity and token_id are not used) replace the client's. */
int store_session_renew(store *s, int64_t id, const store_enrollment *e);

/* A client's session state as SQL over the clients table, one of:
 * "retired" (its key went to the key's proven holder as a new client:
 * docs/security.md, "A squatter"), "revoked" (by the operator), "expired",
 * "active". One definition for `cohort clients list` and /api/clients. */
#define STORE_CLIENT_STATE_SQL                                                 \
  "CASE WHEN token_sha256 LIKE 'retired %' THEN 'retired'"                     \
  " WHEN revoked_at IS NOT NULL THEN 'revoked'"                                \
  " WHEN session_expires_at IS NOT NULL AND session_expires_at <="             \
  " (julianday('now') - 2440587.5) * 86400.0 THEN 'expired'"                   \
  " ELSE 'active' END"

typedef struct store_client_info {
  int64_t id;
  char state[8];     /* STORE_CLIENT_STATE_SQL's, when listed */
  char platform[65]; /* as the client sent it: sanitize before showing */
  double registered_at, last_seen;
  double session_expires_at, revoked_at; /* 0: none */
  int64_t token_id;                      /* 0: a --enroll-token */
  int has_identity, has_cert;
  int64_t rounds_failed; /* selected and not completed, in all */
  double excluded_until; /* out of selection until then; 0: never was */
} store_client_info;

/* Every client, by id, in a malloc'd array (free it). */
int store_client_list(store *s, store_client_info **out, size_t *n);
/* Revokes client id's session for good: its calls are refused and its
 * identity key cannot register again. COHORT_ENOTFOUND, COHORT_ESTATE
 * (already revoked). */
int store_client_revoke(store *s, int64_t id, double now);

/* For `cohort tokens` and `cohort clients` beside a running coordinator:
 * opens an existing database of this build's schema for reading and
 * writing, waiting up to 5 s for the coordinator's write lock; never
 * creates or upgrades one (err says to start the coordinator on it). */
int store_open_admin(const char *path, store **out, char *err, size_t errlen);

/* The schema steps from 9 to 10 and from 11 to 12 (store.c runs them). */
extern const char *const STORE_MIGRATE_V10;
extern const char *const STORE_MIGRATE_V12;

#endif
