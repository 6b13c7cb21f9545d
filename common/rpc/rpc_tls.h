/* TLS material for the gRPC port: the PEM files a server or a client was
 * given, read with care (bounded, checked with OpenSSL, a clear error that
 * names the file) before gRPC's credentials get their contents. */
#ifndef COHORT_RPC_TLS_H
#define COHORT_RPC_TLS_H

#include <stddef.h>

/* The files of one side of a connection. Borrowed strings; NULL = absent. */
typedef struct rpc_tls_config {
  /* Client: use TLS. Implied by ca_file; alone it verifies the server
   * against the system trust store (rpc_tls_system_roots). Ignored by the
   * server, which serves TLS when cert_file is set. */
  int enabled;
  /* Server: the CA that signs client certificates; set, every client must
   * present a certificate it signed (mTLS). Client: the CA the server's
   * certificate must chain to (NULL: the system trust store). */
  const char *ca_file;
  const char *cert_file; /* this side's certificate chain, PEM */
  const char *key_file;  /* its private key, PEM; warned about when group-
                            or world-readable */
} rpc_tls_config;

/* The PEM contents gRPC's credentials take, malloc'd and NUL-terminated. */
typedef struct rpc_tls_pem {
  char *ca;   /* NULL when there is no CA */
  char *cert; /* NULL when there is no certificate */
  char *key;  /* NULL when there is no key; wiped by rpc_tls_pem_clear */
} rpc_tls_pem;

/* Largest PEM file read: Debian's whole CA bundle is about 220 KB. */
#define RPC_TLS_MAX_FILE_BYTES (4u << 20)

/* The system trust store a client without ca_file verifies against:
 * $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH when set (the variable gRPC itself
 * honours), else Debian's ca-certificates bundle. */
const char *rpc_tls_system_roots(void);

/* Reads and checks the files of cfg for a server (is_server = 1: cert and
 * key required, ca optional) or a client (cert and key together or not at
 * all; ca from the file or rpc_tls_system_roots). Each certificate file
 * must hold at least one certificate, the key file a private key that
 * matches the first certificate. Returns COHORT_OK, or COHORT_EINVAL /
 * COHORT_EIO / COHORT_ENOMEM with a one-line reason naming the file and
 * the fix in err. out is cleared on failure. */
int rpc_tls_load(const rpc_tls_config *cfg, int is_server, rpc_tls_pem *out,
                 char *err, size_t errlen);

/* Frees the contents (wiping the key first). Accepts NULL. */
void rpc_tls_pem_clear(rpc_tls_pem *pem);

/* For a failed call on a channel with (tls = 1) or without TLS: a sentence
 * that explains a handshake failure which gRPC only reports as UNAVAILABLE
 * in detail (its status details or debug string), or NULL when detail is
 * no known handshake failure. */
const char *rpc_tls_failure_hint(int tls, const char *detail);
/* 1 when detail is a known handshake failure that a server killed or
 * restarting mid-handshake also leaves (a connection closed or reset with
 * nothing more said), so that one sighting proves little; else 0. */
int rpc_tls_failure_ambiguous(int tls, const char *detail);

#endif
