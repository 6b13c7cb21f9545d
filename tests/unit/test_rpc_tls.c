/* The gRPC port's transport checks without a network: which listen
 * addresses count as loopback (plaintext is refused elsewhere), how PEM
 * files are read (bounded, named in every error, loose keys warned about)
 * and which handshake failures a client can explain. */
#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "rpc_addr.h"
#include "rpc_tls.h"

static char g_dir[512];

static int suite_init(void) {
  if (test_tmpdir_make(g_dir, sizeof g_dir, "rpc-tls") != 0)
    return -1;
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "'%s/scripts/make-certs' '%s/a' >/dev/null && "
           "'%s/scripts/make-certs' '%s/b' >/dev/null",
           COHORT_SOURCE_DIR, g_dir, COHORT_SOURCE_DIR, g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int suite_clean(void) {
  test_tmpdir_remove(g_dir);
  return 0;
}

static const char *path(const char *name) {
  static char bufs[32][700];
  static int next;
  char *b = bufs[next++ % 32];
  snprintf(b, sizeof bufs[0], "%s/%s", g_dir, name);
  return b;
}

static void test_loopback_addresses(void) {
  static const char *const loopback[] = {
      "127.0.0.1:50051", "127.9.8.7:0", "localhost:1",
      "LOCALHOST:1",     "[::1]:50051", "[::ffff:127.0.0.1]:7"};
  /* The gRPC URIs too: the coordinator does not serve them. */
  static const char *const network[] = {"0.0.0.0:50051",
                                        ":50051",
                                        "[::]:50051",
                                        "10.0.0.1:1",
                                        "128.0.0.1:1",
                                        "example.com:1",
                                        "localhost",
                                        "[::1]",
                                        "[::1:50051",
                                        "",
                                        "1.2.3.4.5:6",
                                        "[::ffff:10.0.0.1]:7",
                                        "ipv4:127.0.0.1:5",
                                        "ipv6:[::1]:5",
                                        "unix:/run/cohort.sock"};
  for (size_t i = 0; i < sizeof loopback / sizeof *loopback; i++) {
    if (!rpc_listen_is_loopback(loopback[i]))
      fprintf(stderr, "\nnot loopback: %s\n", loopback[i]);
    CU_ASSERT(rpc_listen_is_loopback(loopback[i]));
  }
  for (size_t i = 0; i < sizeof network / sizeof *network; i++) {
    if (rpc_listen_is_loopback(network[i]))
      fprintf(stderr, "\nloopback: %s\n", network[i]);
    CU_ASSERT(!rpc_listen_is_loopback(network[i]));
  }
  CU_ASSERT(!rpc_listen_is_loopback(NULL));
}

static void test_server_files_load(void) {
  rpc_tls_config cfg = {.cert_file = path("a/server.crt"),
                        .key_file = path("a/server.key"),
                        .ca_file = path("a/ca.crt")};
  rpc_tls_pem pem;
  char err[512] = "";
  CU_ASSERT_EQUAL(rpc_tls_load(&cfg, 1, &pem, err, sizeof err), COHORT_OK);
  CU_ASSERT(pem.ca && strstr(pem.ca, "BEGIN CERTIFICATE"));
  CU_ASSERT(pem.cert && pem.key && strstr(pem.key, "PRIVATE KEY"));
  rpc_tls_pem_clear(&pem);
  CU_ASSERT_PTR_NULL(pem.key);
  rpc_tls_pem_clear(NULL);
}

/* A self-signed P-256 certificate for localhost valid from from_days to
 * to_days from now, into name.crt, and its key into name.key (0600). */
static void write_cert(const char *name, long from_days, long to_days) {
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  CU_ASSERT_FATAL(k && x);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_time_adj_ex(X509_getm_notBefore(x), (int)from_days, 0, NULL);
  X509_time_adj_ex(X509_getm_notAfter(x), (int)to_days, 0, NULL);
  X509_set_pubkey(x, k);
  X509_NAME *n = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                             (const unsigned char *)"localhost", -1, -1, 0);
  X509_set_issuer_name(x, n);
  CU_ASSERT_FATAL(X509_sign(x, k, EVP_sha256()) > 0);
  char file[64];
  snprintf(file, sizeof file, "%s.crt", name);
  FILE *f = fopen(path(file), "w");
  CU_ASSERT_FATAL(f != NULL);
  PEM_write_X509(f, x);
  fclose(f);
  snprintf(file, sizeof file, "%s.key", name);
  f = fopen(path(file), "w");
  CU_ASSERT_FATAL(f != NULL);
  PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
  fclose(f);
  chmod(path(file), 0600);
  X509_free(x);
  EVP_PKEY_free(k);
}

/* Each wrong file is refused with a reason naming it. */
static void test_wrong_files_are_named(void) {
  FILE *f = fopen(path("junk.pem"), "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("not a certificate\n", f);
  fclose(f);
  f = fopen(path("huge.pem"), "w");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT(fseek(f, RPC_TLS_MAX_FILE_BYTES + 1, SEEK_SET) == 0);
  fputc('x', f);
  fclose(f);
  /* A FIFO would block a plain open until a writer came. */
  CU_ASSERT_FATAL(mkfifo(path("fifo.pem"), 0600) == 0);
  /* Outside their dates: named at start, not at every handshake as a
   * certificate of an unknown CA. */
  write_cert("expired", -30, -1);
  write_cert("future", 2, 30);
  const struct {
    rpc_tls_config cfg;
    int is_server;
    const char *says;
  } cases[] = {
      {{.cert_file = path("a/none.crt"), .key_file = path("a/server.key")},
       1,
       "none.crt"},
      {{.cert_file = path("junk.pem"), .key_file = path("a/server.key")},
       1,
       "junk.pem: no PEM certificate"},
      {{.cert_file = path("a/server.crt"), .key_file = path("b/server.key")},
       1,
       "is not the key of --tls-cert"},
      {{.cert_file = path("a/server.crt"), .key_file = path("junk.pem")},
       1,
       "junk.pem: no unencrypted PEM private key"},
      {{.cert_file = path("a/server.crt"),
        .key_file = path("a/server.key"),
        .ca_file = path("huge.pem")},
       1,
       "huge.pem"},
      {{.cert_file = path("a/server.crt")}, 0, "go together"},
      {{.key_file = path("a/server.key")}, 1, "go together"},
      {{.enabled = 1}, 1, "needs --tls-cert"},
      {{.enabled = 1, .ca_file = g_dir}, 0, "not a regular file"},
      {{.enabled = 1, .ca_file = path("fifo.pem")}, 0, "not a regular file"},
      {{.cert_file = path("a/server.crt"), .key_file = path("fifo.pem")},
       1,
       "fifo.pem: not a regular file"},
      {{.cert_file = path("expired.crt"), .key_file = path("expired.key")},
       1,
       "expired.crt: the certificate expired on"},
      {{.cert_file = path("expired.crt"), .key_file = path("expired.key")},
       0,
       "expired.crt: the certificate expired on"},
      {{.cert_file = path("future.crt"), .key_file = path("future.key")},
       1,
       "future.crt: the certificate is not valid before"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rpc_tls_pem pem;
    char err[512] = "";
    CU_ASSERT(rpc_tls_load(&cases[i].cfg, cases[i].is_server, &pem, err,
                           sizeof err) != COHORT_OK);
    CU_ASSERT_PTR_NULL(pem.key);
    if (!strstr(err, cases[i].says))
      fprintf(stderr, "\ncase %zu: \"%s\" lacks \"%s\"\n", i, err,
              cases[i].says);
    CU_ASSERT(strstr(err, cases[i].says) != NULL);
  }
}

/* A client with no CA file trusts the system store, which gRPC's own
 * variable can point elsewhere. */
static void test_client_system_store(void) {
  CU_ASSERT(setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", path("b/ca.crt"), 1) ==
            0);
  CU_ASSERT_STRING_EQUAL(rpc_tls_system_roots(), path("b/ca.crt"));
  rpc_tls_config cfg = {.enabled = 1};
  rpc_tls_pem pem;
  char err[512] = "";
  CU_ASSERT_EQUAL(rpc_tls_load(&cfg, 0, &pem, err, sizeof err), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(pem.ca);
  CU_ASSERT_PTR_NULL(pem.cert);
  rpc_tls_pem_clear(&pem);
  CU_ASSERT(setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", path("none.pem"), 1) ==
            0);
  CU_ASSERT(rpc_tls_load(&cfg, 0, &pem, err, sizeof err) != COHORT_OK);
  CU_ASSERT(strstr(err, "system trust store") && strstr(err, "--tls-ca"));
  unsetenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH");
  CU_ASSERT_STRING_EQUAL(rpc_tls_system_roots(),
                         "/etc/ssl/certs/ca-certificates.crt");
}

/* gRPC's details of each failure (GRPC_C_CORE.md section 8) get a hint;
 * a server that is merely down gets none, so the client keeps waiting. */
static int hint_says(int tls, const char *detail, const char *needle) {
  const char *hint = rpc_tls_failure_hint(tls, detail);
  return hint && strstr(hint, needle);
}

static void test_failure_hints(void) {
  CU_ASSERT(hint_says(1, "Ssl handshake failed: certificate verify failed",
                      "not signed"));
  CU_ASSERT(hint_says(1, "x: WRONG_VERSION_NUMBER", "does not speak TLS"));
  CU_ASSERT(
      hint_says(1, "ipv4:127.0.0.1:5: Socket closed", "client certificate"));
  CU_ASSERT(hint_says(0, "ipv4:127.0.0.1:5: Socket closed", "serves TLS"));
  CU_ASSERT(hint_says(0, "recvmsg:Connection reset by peer", "serves TLS"));
  CU_ASSERT(hint_says(1,
                      "Ssl handshake failed: SSL_ERROR_SSL: error:0A00045C:"
                      "SSL routines::tlsv13 alert certificate required",
                      "client certificate"));
  CU_ASSERT_PTR_NULL(rpc_tls_failure_hint(0, "Connection refused"));
  CU_ASSERT_PTR_NULL(rpc_tls_failure_hint(1, "Connection refused"));
  CU_ASSERT_PTR_NULL(rpc_tls_failure_hint(1, NULL));
  /* A closed or reset connection is also what a coordinator killed
   * mid-handshake leaves; a certificate or version error is not. */
  CU_ASSERT(rpc_tls_failure_ambiguous(0, "recvmsg:Connection reset by peer"));
  CU_ASSERT(rpc_tls_failure_ambiguous(1, "ipv4:127.0.0.1:5: Socket closed"));
  CU_ASSERT(!rpc_tls_failure_ambiguous(1, "x: WRONG_VERSION_NUMBER"));
  CU_ASSERT(!rpc_tls_failure_ambiguous(1, "Connection refused"));
  CU_ASSERT(!rpc_tls_failure_ambiguous(0, NULL));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"loopback and network listen addresses", test_loopback_addresses},
      {"a server's certificate, key and client CA load",
       test_server_files_load},
      {"missing, junk, huge and mismatched files are named",
       test_wrong_files_are_named},
      {"a client without a CA file uses the system store",
       test_client_system_store},
      {"handshake failures get a hint, a down server none", test_failure_hints},
  };
  return test_add_suite("rpc tls", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
