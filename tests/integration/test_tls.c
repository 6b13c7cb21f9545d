/* TLS on the gRPC port, with real processes on 127.0.0.1 and certificates
 * made at test time by scripts/make-certs: federations over TLS and mTLS
 * commit their rounds; an attacker's client with the wrong CA, no client
 * certificate, a certificate of another CA, or plaintext against a TLS
 * port is refused with an error that says why and never registers; our
 * client refuses an impostor coordinator certified by another CA; a
 * plaintext coordinator refuses a network address unless --insecure. */
#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define ROUNDS 2
#define CLIENTS 2

/* Two CAs, each with a server and a client certificate: ours in certs/,
 * the attacker's in other/. Made once per test program. */
static char g_ours[512], g_other[512];

/* A small CSV training set (label, then 784 features): loading it takes
 * milliseconds where Fashion-MNIST takes seconds, and these tests are
 * about the transport, not the learning. */
static char g_data[512];

static int write_data(void) {
  snprintf(g_data, sizeof g_data, "%s/train.csv", harness_dir());
  FILE *f = fopen(g_data, "w");
  if (!f)
    return -1;
  for (int row = 0; row < 200; row++) {
    fprintf(f, "%d", row % 10);
    for (int k = 0; k < 784; k++)
      fprintf(f, ",%d", k % 10 == row % 10); /* a learnable label */
    fputc('\n', f);
  }
  return fclose(f) == 0 ? 0 : -1;
}

static int suite_init(void) {
  if (write_data() != 0)
    return -1;
  snprintf(g_ours, sizeof g_ours, "%s/certs", harness_dir());
  snprintf(g_other, sizeof g_other, "%s/other", harness_dir());
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "'%s/scripts/make-certs' '%s' >/dev/null && "
           "'%s/scripts/make-certs' '%s' >/dev/null",
           COHORT_SOURCE_DIR, g_ours, COHORT_SOURCE_DIR, g_other);
  return system(cmd) == 0 ? 0 : -1;
}

/* A file of one of the two certificate folders, in a static buffer per
 * slot (up to 16 live at once). */
static const char *cert(const char *folder, const char *name) {
  static char bufs[16][600];
  static int next;
  char *b = bufs[next++ % 16];
  snprintf(b, sizeof bufs[0], "%s/%s", folder, name);
  return b;
}

/* Starts a client of the federation at port with the extra TLS arguments
 * (NULL-terminated, at most 6), stderr to <tag>.err. */
static pid_t spawn_client(const char *tag, int port, int index,
                          const char *const *tls) {
  char target[64], shard[16], err[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  snprintf(shard, sizeof shard, "%d/%d", index, CLIENTS);
  snprintf(err, sizeof err, "%s.err", tag);
  char *argv[24] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "tls-token",
                    "--data",
                    g_data,
                    "--shard",
                    shard,
                    "--seed",
                    "5"};
  int n = 11;
  for (int i = 0; tls && tls[i] && i < 6; i++)
    argv[n++] = (char *)tls[i];
  argv[n] = NULL;
  return harness_spawn(argv, NULL, harness_path(err));
}

/* 1 when the file at path (in harness_dir) contains needle. */
static int file_has(const char *name, const char *needle) {
  char *text = harness_read_file(harness_path(name));
  int found = text && strstr(text, needle);
  free(text);
  return found;
}

static const char *server_flags(const char *transport) {
  static char flags[2048];
  snprintf(flags, sizeof flags,
           "--rounds %d --clients-per-round %d --min-clients %d "
           "--round-timeout 60 --enroll-token tls-token --retry-ms 200 "
           "--linger 10 %s",
           ROUNDS, CLIENTS, CLIENTS, transport);
  return flags;
}

/* A whole federation whose clients speak with tls; every process ends by
 * itself and the rounds are committed. */
static void run_federation(const char *tag, const char *transport,
                           const char *const *tls) {
  int port = 0;
  char db_path[512] = "";
  pid_t server = harness_start_server(tag, server_flags(transport), &port,
                                      db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  pid_t clients[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    char ctag[64];
    snprintf(ctag, sizeof ctag, "%s-client%d", tag, i);
    clients[i] = spawn_client(ctag, port, i, tls);
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  for (int i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(db_path,
                  "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM participations"
                                       " WHERE state = 'UPLOADED'"),
                  ROUNDS * CLIENTS);
}

static void test_federation_over_tls(void) {
  char transport[1200];
  snprintf(transport, sizeof transport, "--tls-cert %s --tls-key %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"));
  const char *tls[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  run_federation("tls", transport, tls);
  CU_ASSERT(file_has("tls.err", "(port") && file_has("tls.err", ", tls)"));
}

static void test_federation_over_mtls(void) {
  char transport[1800];
  snprintf(transport, sizeof transport,
           "--tls-cert %s --tls-key %s --tls-client-ca %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"),
           cert(g_ours, "ca.crt"));
  const char *tls[] = {"--tls-ca",   cert(g_ours, "ca.crt"),
                       "--tls-cert", cert(g_ours, "client.crt"),
                       "--tls-key",  cert(g_ours, "client.key"),
                       NULL};
  run_federation("mtls", transport, tls);
  CU_ASSERT(file_has("mtls.err", ", mtls)"));
}

/* Each attacker's client exits 1 on its own, quickly, and its error names
 * the cause; the coordinator registers none of them. */
static void test_attackers_are_refused(void) {
  char transport[1800];
  snprintf(transport, sizeof transport,
           "--tls-cert %s --tls-key %s --tls-client-ca %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"),
           cert(g_ours, "ca.crt"));
  int port = 0;
  char db_path[512] = "";
  pid_t server = harness_start_server("guarded", server_flags(transport), &port,
                                      db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);

  /* An impostor coordinator's CA: our client certificate, but it trusts
   * only the attacker's CA, so our coordinator fails verification. */
  const char *wrong_ca[] = {"--tls-ca",   cert(g_other, "ca.crt"),
                            "--tls-cert", cert(g_ours, "client.crt"),
                            "--tls-key",  cert(g_ours, "client.key"),
                            NULL};
  const char *no_cert[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  const char *other_cert[] = {"--tls-ca",   cert(g_ours, "ca.crt"),
                              "--tls-cert", cert(g_other, "client.crt"),
                              "--tls-key",  cert(g_other, "client.key"),
                              NULL};
  const struct {
    const char *tag;
    const char *const *tls;
    const char *says;
  } attackers[] = {
      {"wrong-ca", wrong_ca, "not signed by the CA this client trusts"},
      {"no-cert", no_cert, "requires a client certificate"},
      {"other-ca-cert", other_cert, "requires a client certificate"},
      {"plaintext", NULL, "it probably serves TLS"},
  };
  enum { N = sizeof attackers / sizeof attackers[0] };
  pid_t pids[N];
  for (int i = 0; i < N; i++) {
    pids[i] = spawn_client(attackers[i].tag, port, 0, attackers[i].tls);
    CU_ASSERT_FATAL(pids[i] > 0);
  }
  for (int i = 0; i < N; i++) {
    char err[64];
    snprintf(err, sizeof err, "%s.err", attackers[i].tag);
    /* Refused, not left waiting: the coordinator is up all along. */
    CU_ASSERT_EQUAL(harness_wait(pids[i], 60), 1);
    if (!file_has(err, attackers[i].says))
      fprintf(stderr, "\n%s: no \"%s\" in %s\n", attackers[i].tag,
              attackers[i].says, harness_path(err));
    CU_ASSERT(file_has(err, attackers[i].says));
  }
  harness_signal(server, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM clients"), 0);
}

/* The attacker runs a coordinator of its own, certified by its own CA: our
 * client refuses it before sending anything. */
static void test_impostor_coordinator_is_refused(void) {
  char transport[1200];
  snprintf(transport, sizeof transport, "--tls-cert %s --tls-key %s",
           cert(g_other, "server.crt"), cert(g_other, "server.key"));
  int port = 0;
  char db_path[512] = "";
  pid_t impostor = harness_start_server("impostor", server_flags(transport),
                                        &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(impostor > 0);
  const char *tls[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  pid_t c = spawn_client("to-impostor", port, 0, tls);
  CU_ASSERT_FATAL(c > 0);
  CU_ASSERT_EQUAL(harness_wait(c, 60), 1);
  CU_ASSERT(
      file_has("to-impostor.err", "not signed by the CA this client trusts"));
  harness_signal(impostor, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(impostor, 30), 0);
  /* The token never reached it: no client registered. */
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM clients"), 0);
}

/* Our client, TLS with our CA, against a coordinator serving plaintext. */
static void test_tls_client_against_plaintext(void) {
  int port = 0;
  char db_path[512] = "";
  pid_t server = harness_start_server("plain", server_flags(""), &port, db_path,
                                      sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  const char *tls[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  pid_t c = spawn_client("tls-to-plain", port, 0, tls);
  CU_ASSERT_FATAL(c > 0);
  CU_ASSERT_EQUAL(harness_wait(c, 60), 1);
  CU_ASSERT(file_has("tls-to-plain.err", "does not speak TLS"));
  harness_signal(server, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
}

/* Runs cohort-server on a network address with the extra flags; stderr to
 * <tag>.err. */
static pid_t spawn_network_server(const char *tag, const char *extra) {
  char err[64];
  snprintf(err, sizeof err, "%s.err", tag);
  char *argv[] = {COHORT_SERVER_BIN,
                  "--listen",
                  "0.0.0.0:0",
                  "--db",
                  (char *)harness_path("network.db"),
                  "--port-file",
                  (char *)harness_path("network.port"),
                  "--enroll-token",
                  "tls-token",
                  (char *)extra,
                  NULL};
  return harness_spawn(argv, NULL, harness_path(err));
}

static void test_network_address_needs_tls_or_insecure(void) {
  pid_t refused = spawn_network_server("refused", NULL);
  CU_ASSERT_FATAL(refused > 0);
  CU_ASSERT_EQUAL(harness_wait(refused, 30), 2);
  CU_ASSERT(file_has("refused.err", "is not a loopback address"));
  CU_ASSERT(file_has("refused.err", "--tls-cert"));
  CU_ASSERT(file_has("refused.err", "--insecure"));
  struct stat st;
  CU_ASSERT(stat(harness_path("network.db"), &st) != 0); /* nothing made */

  pid_t insecure = spawn_network_server("insecure", "--insecure");
  CU_ASSERT_FATAL(insecure > 0);
  int serving = 0;
  for (int i = 0; i < 500 && !serving; i++) { /* up to 10 s */
    serving = stat(harness_path("network.port"), &st) == 0;
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  CU_ASSERT(serving);
  harness_signal(insecure, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(insecure, 30), 0);
  CU_ASSERT(file_has("insecure.err", "INSECURE: serving plaintext"));
}

/* A key file others can read is served, with a warning naming it; a key
 * that is not the certificate's stops the start, naming both files. */
static void test_key_file_checks(void) {
  char flags[4096];
  const char *key = harness_path("loose.key");
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 644 '%s'",
           cert(g_ours, "server.key"), key, key);
  CU_ASSERT_FATAL(system(cmd) == 0);
  snprintf(flags, sizeof flags, "%s --tls-cert %s --tls-key %s",
           server_flags(""), cert(g_ours, "server.crt"), key);
  int port = 0;
  char db_path[512] = "";
  pid_t server =
      harness_start_server("loose", flags, &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  harness_signal(server, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT(file_has("loose.err", "readable by group or others"));

  snprintf(flags, sizeof flags, "%s --tls-cert %s --tls-key %s",
           server_flags(""), cert(g_ours, "server.crt"),
           cert(g_other, "server.key"));
  port = 0;
  db_path[0] = '\0';
  CU_ASSERT(harness_start_server("mismatch", flags, &port, db_path,
                                 sizeof db_path) < 0);
  CU_ASSERT(file_has("mismatch.err", "is not the key of --tls-cert"));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a federation over TLS commits its rounds", test_federation_over_tls},
      {"a federation over mTLS commits its rounds", test_federation_over_mtls},
      {"wrong CA, no or a foreign client certificate, plaintext: refused",
       test_attackers_are_refused},
      {"an impostor coordinator with another CA's certificate: refused",
       test_impostor_coordinator_is_refused},
      {"a TLS client against a plaintext port is told so",
       test_tls_client_against_plaintext},
      {"plaintext on a network address needs --insecure, which warns",
       test_network_address_needs_tls_or_insecure},
      {"key files: a loose mode warns, a foreign key stops the start",
       test_key_file_checks},
  };
  return test_add_suite("tls", suite_init, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
