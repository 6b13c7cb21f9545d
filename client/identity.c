/* The client's signing identity; see identity.h. Nothing here prints or
 * logs a private key: errors name files, never their contents. */
#include "identity.h"

#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"

/* A certificate and an authority both known: the one must certify the key
 * under the other, or every peer that trusts the authority refuses us. */
static int check_own_cert(const sign_key *key, const uint8_t *cert,
                          const uint8_t *authority, const char *what, char *err,
                          size_t errlen) {
  uint8_t pub[SIGN_PUBLIC_LEN];
  sign_key_public(key, pub);
  if (sign_check_cert(authority, pub, cert) != COHORT_OK)
    return errbuf_fail(err, errlen, COHORT_EAUTH, what,
                       "the certificate is not the enrollment authority's "
                       "certificate of this identity key");
  return COHORT_OK;
}

int client_identity_load(client_identity *id, const char *key_path,
                         const char *cert_path, char *err, size_t errlen) {
  sign_key *key = NULL;
  uint8_t cert[SIGN_CERT_LEN];
  int rc = sign_key_load(key_path, &key, err, errlen);
  if (!rc && cert_path)
    rc = crypto_unhex_file(cert_path, cert, sizeof cert, err, errlen);
  if (!rc && cert_path && id->has_authority)
    rc = check_own_cert(key, cert, id->authority, cert_path, err, errlen);
  if (rc) {
    sign_key_free(key);
    return rc;
  }
  sign_key_free(id->key);
  id->key = key;
  id->from_file = 1;
  id->has_cert = cert_path != NULL;
  if (cert_path)
    memcpy(id->cert, cert, sizeof cert);
  return COHORT_OK;
}

int client_identity_set_authority(client_identity *id, const char *path,
                                  char *err, size_t errlen) {
  uint8_t pub[SIGN_PUBLIC_LEN];
  int rc = crypto_unhex_file(path, pub, sizeof pub, err, errlen);
  if (!rc && sign_public_check(pub, NULL) != COHORT_OK)
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                     "not a usable Ed25519 public key");
  if (!rc && id->has_cert)
    rc = check_own_cert(id->key, id->cert, pub, path, err, errlen);
  if (rc)
    return rc;
  memcpy(id->authority, pub, sizeof pub);
  id->has_authority = 1;
  return COHORT_OK;
}

int client_identity_renew(client_identity *id) {
  if (id->from_file || id->saved)
    return COHORT_OK;
  sign_key *fresh = NULL;
  int rc = sign_key_generate(&fresh);
  if (rc)
    return rc;
  sign_key_free(id->key);
  id->key = fresh;
  return COHORT_OK;
}

int client_identity_adopt(client_identity *id,
                          const uint8_t seed[SIGN_SEED_LEN]) {
  if (id->from_file)
    return COHORT_OK;
  sign_key *key = NULL;
  int rc = sign_key_from_seed(seed, &key);
  if (rc)
    return rc;
  sign_key_free(id->key);
  id->key = key;
  id->saved = 1;
  return COHORT_OK;
}

void client_identity_clear(client_identity *id) {
  sign_key_free(id->key);
  memset(id, 0, sizeof *id);
}
