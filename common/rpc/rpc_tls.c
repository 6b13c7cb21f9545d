/* Reading and checking the PEM files of the gRPC port's TLS (see
 * rpc_tls.h): bounded reads, OpenSSL parses each file once so that a wrong
 * file is named at start rather than failing every handshake later. */
#include "rpc_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "fd_io.h"
#include "log.h"

#define DEBIAN_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

const char *rpc_tls_system_roots(void) {
  const char *env = getenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH");
  return env && *env ? env : DEBIAN_CA_BUNDLE;
}

/* Reads the whole regular file path (at most RPC_TLS_MAX_FILE_BYTES) into
 * a NUL-terminated *out. what names the option in errors; a secret file
 * that others may read gets a warning. */
static int read_pem_file(const char *path, const char *what, int secret,
                         char **out, char *err, size_t errlen) {
  int rc = COHORT_OK;
  char *buf = NULL;
  struct stat st;
  /* A missing file, or a FIFO planted there (which must not hang the
   * caller), is a wrong setting: COHORT_EINVAL, as the API documents. */
  int fd = fd_open_regular(path, &st);
  if (fd < 0) {
    snprintf(err, errlen, "%s %s: %s", what, path, fd_open_strerror(errno));
    return COHORT_EINVAL;
  }
  if (st.st_size <= 0 ||
      (unsigned long long)st.st_size > RPC_TLS_MAX_FILE_BYTES) {
    snprintf(err, errlen,
             "%s %s: %lld bytes; a PEM file of 1 to %u bytes "
             "expected",
             what, path, (long long)st.st_size, RPC_TLS_MAX_FILE_BYTES);
    rc = COHORT_EINVAL;
    goto out;
  }
  if (secret && (st.st_mode & (S_IRWXG | S_IRWXO)))
    log_warn("%s %s: the private key is readable by group or others; "
             "chmod 600 it",
             what, path);
  size_t n = (size_t)st.st_size;
  buf = malloc(n + 1);
  if (!buf) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      snprintf(err, errlen, "%s %s: %s", what, path,
               r < 0 ? strerror(errno) : "shorter than its size");
      rc = COHORT_EIO;
      goto out;
    }
    got += (size_t)r;
  }
  buf[n] = '\0';
  *out = buf;
  buf = NULL;
out:
  if (buf) {
    OPENSSL_cleanse(buf, st.st_size > 0 ? (size_t)st.st_size : 0);
    free(buf);
  }
  close(fd);
  return rc;
}

/* Never prompt for a passphrase: an encrypted key is refused instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
  (void)buf, (void)size, (void)rwflag, (void)u;
  return -1;
}

/* The first certificate of pem, or NULL. */
static X509 *first_cert(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
  BIO_free(b);
  return x;
}

/* Checks that cert_pem starts with a certificate and key_pem holds the
 * private key of it. */
static int check_pair(const rpc_tls_config *cfg, const rpc_tls_pem *pem,
                      char *err, size_t errlen) {
  int rc = COHORT_EINVAL;
  X509 *cert = first_cert(pem->cert);
  EVP_PKEY *key = NULL;
  BIO *b = NULL;
  if (!cert) {
    snprintf(err, errlen, "--tls-cert %s: no PEM certificate in it",
             cfg->cert_file);
    goto out;
  }
  b = BIO_new_mem_buf(pem->key, -1);
  key = b ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL) : NULL;
  if (!key) {
    snprintf(err, errlen,
             "--tls-key %s: no unencrypted PEM private key in it "
             "(a key with a passphrase cannot be used)",
             cfg->key_file);
    goto out;
  }
  if (X509_check_private_key(cert, key) != 1) {
    snprintf(err, errlen, "--tls-key %s is not the key of --tls-cert %s",
             cfg->key_file, cfg->cert_file);
    goto out;
  }
  /* Outside its dates every peer refuses it at the handshake, where it
   * reads as a certificate from an unknown CA. */
  int expired = X509_cmp_current_time(X509_get0_notAfter(cert)) < 0;
  if (expired || X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    char when[64] = "";
    BIO *m = BIO_new(BIO_s_mem());
    if (m && ASN1_TIME_print(m, expired ? X509_get0_notAfter(cert)
                                        : X509_get0_notBefore(cert)) == 1)
      BIO_read(m, when, (int)sizeof when - 1);
    BIO_free(m);
    snprintf(err, errlen,
             "--tls-cert %s: the certificate %s %s; every peer would refuse "
             "it (%s)",
             cfg->cert_file, expired ? "expired on" : "is not valid before",
             when, expired ? "renew it" : "check this machine's clock");
    goto out;
  }
  rc = COHORT_OK;
out:
  EVP_PKEY_free(key);
  BIO_free(b);
  X509_free(cert);
  ERR_clear_error();
  return rc;
}

int rpc_tls_load(const rpc_tls_config *cfg, int is_server, rpc_tls_pem *out,
                 char *err, size_t errlen) {
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!cfg) {
    snprintf(err, errlen, "no TLS configuration");
    return COHORT_EINVAL;
  }
  int rc = COHORT_OK;
  if (!cfg->cert_file != !cfg->key_file) {
    snprintf(err, errlen, "--tls-cert and --tls-key go together: give both");
    rc = COHORT_EINVAL;
    goto out;
  }
  if (is_server && !cfg->cert_file) {
    snprintf(err, errlen, "TLS needs --tls-cert and --tls-key");
    rc = COHORT_EINVAL;
    goto out;
  }
  const char *ca = cfg->ca_file;
  const char *ca_what = is_server ? "--tls-client-ca" : "--tls-ca";
  if (!ca && !is_server) {
    ca = rpc_tls_system_roots();
    ca_what = "system trust store (install ca-certificates, or give "
              "--tls-ca)";
  }
  if (ca) {
    rc = read_pem_file(ca, ca_what, 0, &out->ca, err, errlen);
    if (rc)
      goto out;
    X509 *x = first_cert(out->ca);
    ERR_clear_error();
    if (!x) {
      snprintf(err, errlen, "%s %s: no PEM certificate in it", ca_what, ca);
      rc = COHORT_EINVAL;
      goto out;
    }
    X509_free(x);
  }
  if (cfg->cert_file) {
    rc =
        read_pem_file(cfg->cert_file, "--tls-cert", 0, &out->cert, err, errlen);
    if (!rc)
      rc = read_pem_file(cfg->key_file, "--tls-key", 1, &out->key, err, errlen);
    if (!rc)
      rc = check_pair(cfg, out, err, errlen);
  }
out:
  if (rc)
    rpc_tls_pem_clear(out);
  return rc;
}

void rpc_tls_pem_clear(rpc_tls_pem *pem) {
  if (!pem)
    return;
  if (pem->key)
    OPENSSL_cleanse(pem->key, strlen(pem->key));
  free(pem->key);
  free(pem->cert);
  free(pem->ca);
  memset(pem, 0, sizeof *pem);
}

/* The hint for detail, and whether the failure is also what a server
 * killed or restarting mid-handshake leaves (a connection closed or reset
 * with nothing more said). */
typedef struct tls_failure {
  int tls, ambiguous;
  const char *needle, *hint;
} tls_failure;

static const tls_failure *tls_failure_find(int tls, const char *detail) {
  static const char wrong_ca[] =
      "the coordinator's certificate is not signed by the CA this client "
      "trusts (--tls-ca, or the system store with --tls)";
  static const char not_tls[] = "the coordinator does not speak TLS on this "
                                "port (plaintext coordinator?)";
  static const char needs_cert[] =
      "the coordinator ended the TLS handshake: it requires a client "
      "certificate signed by its client CA (--tls-cert and --tls-key)";
  static const char serves_tls[] =
      "the coordinator closed the plaintext connection: it probably serves "
      "TLS (give --tls-ca FILE, or --tls for the system store)";
  static const tls_failure known[] = {
      {1, 0, "CERTIFICATE_VERIFY_FAILED", wrong_ca},
      {1, 0, "certificate verify failed", wrong_ca},
      {1, 0, "is not in peer certificate",
       "the coordinator's certificate does not name the host given in "
       "--server"},
      {1, 0, "WRONG_VERSION_NUMBER", not_tls},
      {1, 0, "wrong version number", not_tls},
      {1, 1, "Socket closed", needs_cert},
      {1, 1, "Connection reset by peer", needs_cert},
      /* Any other failed handshake, such as an alert about the client's
       * certificate ("Ssl handshake failed: ... alert ..."). */
      {1, 0, "andshake failed",
       "the TLS handshake with the coordinator failed: it may require a "
       "client certificate signed by its client CA (--tls-cert and "
       "--tls-key)"},
      {0, 1, "Socket closed", serves_tls},
      {0, 1, "Connection reset by peer", serves_tls},
  };
  if (!detail)
    return NULL;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (known[i].tls == (tls != 0) && strstr(detail, known[i].needle))
      return &known[i];
  return NULL;
}

const char *rpc_tls_failure_hint(int tls, const char *detail) {
  const tls_failure *f = tls_failure_find(tls, detail);
  return f ? f->hint : NULL;
}

int rpc_tls_failure_ambiguous(int tls, const char *detail) {
  const tls_failure *f = tls_failure_find(tls, detail);
  return f && f->ambiguous;
}
