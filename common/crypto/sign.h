/* Ed25519 signatures (RFC 8032) through OpenSSL EVP: the identity keys a
 * client registers with, signing its secure-aggregation keys, and the
 * enrollment authority that certifies identity keys. Pure apart from the
 * PEM files, which are written 0600. */
#ifndef COHORT_SIGN_H
#define COHORT_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define SIGN_PUBLIC_LEN 32 /* an Ed25519 public key */
#define SIGN_SEED_LEN 32   /* an Ed25519 private key (its seed) */
#define SIGN_LEN 64        /* a signature */

/* A private signing key. Thread-safe for signing (a context per call). */
typedef struct sign_key sign_key;

/* A fresh key from the CSPRNG. COHORT_OK, COHORT_EIO, COHORT_ENOMEM. */
int sign_key_generate(sign_key **out);
/* The key of a fixed seed: tests and seeded simulation, and a key read back
 * from where it was kept (libcohort's saved session). */
int sign_key_from_seed(const uint8_t seed[SIGN_SEED_LEN], sign_key **out);
/* Reads a PEM private key file; COHORT_EFORMAT (with the reason in err)
 * when it is not an Ed25519 key, COHORT_EIO when it cannot be read. */
int sign_key_load(const char *path, sign_key **out, char *err, size_t errlen);
/* Writes the key as PKCS#8 PEM to a new file of mode 0600; refuses to
 * replace an existing file (COHORT_EIO, reason in err). */
int sign_key_save(const sign_key *k, const char *path, char *err,
                  size_t errlen);
/* Wipes and frees; accepts NULL. */
void sign_key_free(sign_key *k);
/* The key's public key. */
void sign_key_public(const sign_key *k, uint8_t pub[SIGN_PUBLIC_LEN]);
/* The key's seed (its private key), for a caller that stores it as
 * securely as a key file (libcohort's saved session); the caller wipes
 * it. COHORT_OK or COHORT_EIO. */
int sign_key_seed(const sign_key *k, uint8_t seed[SIGN_SEED_LEN]);

/* Signs len bytes of msg. COHORT_OK or COHORT_EIO. */
int sign_message(const sign_key *k, const void *msg, size_t len,
                 uint8_t sig[SIGN_LEN]);

/* Whether pub is an identity key worth binding: the canonical encoding of
 * a curve point (RFC 8032 5.1.3: y < p and a square root for x exists)
 * outside the eight points of small order, under which one signature can
 * verify for many messages. COHORT_OK, or COHORT_EFORMAT with *why (may
 * be NULL) set to a static reason; COHORT_ENOMEM when OpenSSL fails. */
int sign_public_check(const uint8_t pub[SIGN_PUBLIC_LEN], const char **why);

/* Whether sig is pub's signature of msg: COHORT_OK, or COHORT_EAUTH for a
 * bad signature or a public key that is not a valid point (COHORT_EIO,
 * COHORT_ENOMEM when OpenSSL fails). */
int sign_verify(const uint8_t pub[SIGN_PUBLIC_LEN], const void *msg, size_t len,
                const uint8_t sig[SIGN_LEN]);

/* ---- the enrollment authority ----
 * An operator's key, kept apart from the coordinator, certifies client
 * identity keys: a certificate is the authority's signature over
 * "cohort enrollment v1" || the client's public key. A client that knows
 * the authority's public key can then tell certified peers from keys a
 * coordinator made up (docs/security.md). */
#define SIGN_CERT_LEN SIGN_LEN

int sign_certify(const sign_key *authority,
                 const uint8_t client_pub[SIGN_PUBLIC_LEN],
                 uint8_t cert[SIGN_CERT_LEN]);
/* COHORT_OK when cert certifies client_pub under authority_pub, else
 * COHORT_EAUTH. */
int sign_check_cert(const uint8_t authority_pub[SIGN_PUBLIC_LEN],
                    const uint8_t client_pub[SIGN_PUBLIC_LEN],
                    const uint8_t cert[SIGN_CERT_LEN]);

/* ---- proof of possession at registration ----
 * A client's signature, under its own identity key, of
 * "cohort registration v1" || the key || SHA-256(enrollment token) ||
 * time_ms (big-endian int64, the client's clock in ms since the epoch).
 * Peers see a client's public key and certificate, never its Register, so
 * this is what only the key's holder can show: the coordinator renews an
 * expired session bound to a key only for a Register that carries it, and
 * only with a time newer than the last proof it accepted for that client,
 * so a proof seen once renews nothing again (docs/security.md). */
int sign_possession(const sign_key *k, const char *enrollment_token,
                    int64_t time_ms, uint8_t sig[SIGN_LEN]);
/* COHORT_OK when sig is pub's proof for enrollment_token at time_ms, else
 * COHORT_EAUTH (COHORT_EIO, COHORT_ENOMEM when OpenSSL fails). */
int sign_check_possession(const uint8_t pub[SIGN_PUBLIC_LEN],
                          const char *enrollment_token, int64_t time_ms,
                          const uint8_t sig[SIGN_LEN]);

#endif
