/* libcohort's saved session (internal): what makes a restarted client the
 * same client to the coordinator (its address, the client id, the session
 * token and the Ed25519 identity key), as a small checksummed text record,
 * kept in a file (session_file.h) or through the app's callbacks. Nothing
 * here logs the token or the key; errors name the store, never its
 * contents. */
#ifndef COHORT_CLIENT_SESSION_H
#define COHORT_CLIENT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "cohort.h"
#include "identity.h"
#include "sign.h"

typedef struct session_record {
  char server[256]; /* the coordinator the session belongs to */
  uint64_t client_id;
  char token[65];
  uint8_t seed[SIGN_SEED_LEN]; /* the identity key */
} session_record;

/* Where the session is kept: a file (path set) or the app's callbacks. */
typedef struct session_store {
  char *path; /* owned */
  cohort_session_load_cb load;
  cohort_session_save_cb save;
  void *user;
} session_store;

/* Whether s is 1 to max printable ASCII characters without a space: what
 * a server address or a session token must be to go in a gRPC header and
 * a word of the session file. */
int session_is_word(const char *s, size_t max);

/* r as the record's text into out (cap bytes); *len its length. COHORT_OK,
 * or COHORT_EINVAL for fields the format cannot hold. */
int session_encode(const session_record *r, uint8_t *out, size_t cap,
                   size_t *len);

/* Parses len bytes of a record into r. COHORT_OK, or COHORT_EFORMAT with
 * the reason (truncated, checksum, which line) in why. */
int session_decode(const uint8_t *buf, size_t len, session_record *r, char *why,
                   size_t whylen);

/* Loads the saved session: COHORT_OK with *found 0 when nothing is saved
 * yet; otherwise the statuses of cohort_client_set_session_file, with
 * "<store>: <reason>" in err. */
int session_store_load(const session_store *s, session_record *r, int *found,
                       char *err, size_t errlen);

/* Saves r, replacing what was saved. COHORT_OK or COHORT_EIO with the
 * reason in err. */
int session_store_save(const session_store *s, const session_record *r,
                       char *err, size_t errlen);

/* Frees the path; s is zeroed. */
void session_store_clear(session_store *s);

/* Wipes the token and the key. */
void session_record_wipe(session_record *r);

/* ---- a client's saved session ---- */

typedef struct client_session {
  session_store store;   /* nowhere while neither path nor load is set */
  session_record record; /* loaded, until the first registration */
  int loaded;
} client_session;

/* Uses store (taking over its path; freed on failure too) and loads what
 * it holds. On failure s is as it was, err says why. */
int client_session_open(client_session *s, session_store *store, char *err,
                        size_t errlen);

/* When a session was loaded for server and for this identity (the app's
 * key file, when it gave one, must be the key it was saved with): sets the
 * client's id, token and key from it and returns 1. Otherwise 0, and the
 * client registers. Either way the loaded record is wiped. */
int client_session_take(client_session *s, const char *server,
                        client_identity *id, uint64_t *client_id,
                        char token[65]);

/* After a registration: saves the session, when there is a store, and
 * marks the key saved. COHORT_OK, or COHORT_EIO with the reason in err. */
int client_session_save(client_session *s, const char *server,
                        client_identity *id, uint64_t client_id,
                        const char *token, char *err, size_t errlen);

void client_session_close(client_session *s);

#endif
