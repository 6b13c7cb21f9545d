/* libcohort's signing identity (internal): the client's Ed25519 key, from a
 * key file, from the saved session (session.h) or fresh from the CSPRNG at
 * each registration, the enrollment authority's certificate of it, and the
 * authority the client's peers must be certified by (docs/security.md).
 * The secure-aggregation flow takes it to sign the client's keys and to
 * check its peers'. */
#ifndef COHORT_CLIENT_IDENTITY_H
#define COHORT_CLIENT_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "sign.h"

typedef struct client_identity {
  sign_key *key;               /* NULL until loaded or registered */
  int from_file;               /* a persistent key: never replaced */
  int saved;                   /* in the saved session: reused until the
                                  coordinator refuses it (session.h) */
  int has_cert;                /* cert certifies key */
  uint8_t cert[SIGN_CERT_LEN]; /* as the coordinator gets it */
  int has_authority;           /* peers must be certified by authority */
  uint8_t authority[SIGN_PUBLIC_LEN];
} client_identity;

/* Loads a persistent key (a PEM private key file) and, when cert_path is
 * not NULL, its certificate (a hex file); with an authority set, the
 * certificate must certify the key under it. On failure id is unchanged
 * and err says which file and why: COHORT_EIO, COHORT_EFORMAT, or
 * COHORT_EAUTH for a certificate of another key or authority. */
int client_identity_load(client_identity *id, const char *key_path,
                         const char *cert_path, char *err, size_t errlen);

/* The authority's public key from a hex file; a certificate already loaded
 * must verify under it. Same statuses as client_identity_load. */
int client_identity_set_authority(client_identity *id, const char *path,
                                  char *err, size_t errlen);

/* Before a registration: a fresh key from the CSPRNG, unless the key came
 * from a file or is the saved session's. A client that registers anew is a
 * new client to the coordinator, and its old key may still be bound there;
 * one that registers again with its saved key gets a new session for the
 * same client when the old one expired. */
int client_identity_renew(client_identity *id);

/* Takes the saved session's key (unless the key came from a file, which
 * stays) and marks it saved. COHORT_OK or COHORT_EIO. */
int client_identity_adopt(client_identity *id,
                          const uint8_t seed[SIGN_SEED_LEN]);

/* Wipes the key (OpenSSL clears it) and the rest; id is zeroed. */
void client_identity_clear(client_identity *id);

#endif
