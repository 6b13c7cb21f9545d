/* cohort-client: the reference client. Loads its share of a dataset,
 * then takes part in rounds through libcohort's public API until the
 * federation is over. Exit status 0 when it ended normally or was stopped
 * by SIGTERM or SIGINT (within about a second, whatever it was doing), 3
 * when it left secure aggregation as --exit-at-secagg asked (with --hang, it
 * waits to be killed there instead). */
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cohort.h"
#include "cohort_testing.h"
#include "fd_io.h"
#include "flags.h"
#include "log.h"

static struct {
  const char *server, *token, *data, *shard, *partition, *log_level;
  const char *exit_at_secagg, *identity_key, *identity_cert, *authority;
  const char *secagg_adversary, *token_file, *log_format, *log_file;
  const char *tls_ca, *tls_cert, *tls_key, *session_file;
  int tls;
  long limit, seed, threads, secagg_security_bits, secagg_colluders;
  long long_poll_ms;
  double holdout, secagg_corrupt, dp_max_epsilon;
  int summary, hang, secagg_insider;
  flag_list attributes;
} g_opts;

static const flag_def FLAGS[] = {
    {"server", FLAG_STRING, &g_opts.server, "127.0.0.1:50051", 0, 0,
     "HOST:PORT", "coordinator address"},
    {"tls", FLAG_BOOL, &g_opts.tls, NULL, 0, 0, NULL,
     "connect with TLS and verify the coordinator against the system trust "
     "store (/etc/ssl/certs/ca-certificates.crt)"},
    {"tls-ca", FLAG_STRING, &g_opts.tls_ca, NULL, 0, 0, "PATH",
     "connect with TLS and verify the coordinator against this CA "
     "certificate (PEM) instead of the system store"},
    {"tls-cert", FLAG_STRING, &g_opts.tls_cert, NULL, 0, 0, "PATH",
     "this client's certificate (PEM), for a coordinator that requires one "
     "(mTLS; with --tls-key and --tls or --tls-ca)"},
    {"tls-key", FLAG_STRING, &g_opts.tls_key, NULL, 0, 0, "PATH",
     "the private key of --tls-cert (PEM, mode 0600)"},
    {"token", FLAG_STRING | FLAG_SECRET, &g_opts.token, NULL, 0, 0, "T",
     "enrollment token (or set COHORT_ENROLL_TOKEN, or give --token-file, "
     "which keep it out of the process list)"},
    {"token-file", FLAG_STRING, &g_opts.token_file, NULL, 0, 0, "PATH",
     "file whose first line is the enrollment token (keep it 0600)"},
    {"data", FLAG_STRING, &g_opts.data, "/usr/share/datasets/fashion-mnist", 0,
     0, "PATH",
     "training data: a folder with train-images-idx3-ubyte[.gz] and "
     "train-labels-idx1-ubyte[.gz], or a CSV file (label first)"},
    {"shard", FLAG_STRING, &g_opts.shard, "0/1", 0, 0, "I/N",
     "this client is client I of the N sharing the data (0-based)"},
    {"partition", FLAG_STRING, &g_opts.partition, "iid", 0, 0, "SPEC",
     "how the data is split over the N clients: iid, shards:S (sorted by "
     "label, S shards each), labels:C (C labels each, NIID-Bench's #C=k), "
     "labelsets:L+L,L+L,... (each client's labels, in client order), "
     "dirichlet:ALPHA (label skew), quantity:ALPHA (size skew); every "
     "client of a federation gives the same SPEC and --seed"},
    {"limit", FLAG_INT, &g_opts.limit, "0", 0, 1e9, "N",
     "use only the first N examples of this client's share (0: all)"},
    {"seed", FLAG_INT, &g_opts.seed, "0", 0, 9007199254740991.0, "S",
     "seed of the partition and, mixed with I, of the local shuffling"},
    {"holdout", FLAG_DOUBLE, &g_opts.holdout, "0.1", 0, 0.9, "F",
     "fraction of this client's share kept out of training, for evaluating "
     "the global model (federated evaluation)"},
    {"attribute", FLAG_STRING_LIST, &g_opts.attributes, NULL, 0, 0,
     "NAME=VALUE",
     "a condition reported at check-in for the coordinator's --eligible "
     "rules, e.g. charging=1 (repeatable)"},
    {"identity-key", FLAG_STRING, &g_opts.identity_key, NULL, 0, 0, "PATH",
     "this client's Ed25519 identity key, a PEM file (`cohort enroll "
     "keygen`); without it a fresh key is made at each registration"},
    {"identity-cert", FLAG_STRING, &g_opts.identity_cert, NULL, 0, 0, "PATH",
     "the enrollment authority's certificate of --identity-key, as hex "
     "(`cohort enroll certify`); a coordinator with --enroll-authority "
     "needs it"},
    {"session-file", FLAG_STRING, &g_opts.session_file, NULL, 0, 0, "PATH",
     "keep this client's session (client id, session token, identity key) "
     "in PATH, created mode 0600, so that a restart is the same client "
     "instead of a new one; a file others may read is refused "
     "(docs/tokens.md)"},
    {"enroll-authority", FLAG_STRING, &g_opts.authority, NULL, 0, 0, "PATH",
     "the enrollment authority's public key, as hex: peers in secure "
     "aggregation must be certified by it (docs/security.md)"},
    {"threads", FLAG_INT, &g_opts.threads, "0", 0, 1024, "N",
     "training threads (0: all cores)"},
    {"long-poll-ms", FLAG_INT, &g_opts.long_poll_ms, "0", -1e9, 1e9, "MS",
     "the longest a check-in asks the coordinator to hold the call while "
     "it has no task for this client (0: 30000; negative: no long poll, "
     "the coordinator answers at once)"},
    {"partition-summary", FLAG_BOOL, &g_opts.summary, NULL, 0, 0, NULL,
     "print the examples and labels of each of the N clients, then exit"},
    LOG_FLAG_ROWS(&g_opts.log_level, &g_opts.log_format, &g_opts.log_file),
    {"secagg-adversary", FLAG_STRING, &g_opts.secagg_adversary,
     "semi-malicious", 0, 0, "semi-malicious|curious",
     "the coordinator this client defends against in secure aggregation: it "
     "refuses a round whose threshold is below what that adversary needs "
     "(curious only for a coordinator you trust to follow the protocol)"},
    {"secagg-corrupt", FLAG_DOUBLE, &g_opts.secagg_corrupt, "0.05", 0, 0.99,
     "F",
     "fraction of clients this client assumes corrupt when it checks a "
     "secure-aggregation round's threshold"},
    {"secagg-colluders", FLAG_INT, &g_opts.secagg_colluders, "0", 0, 65535, "C",
     "colluding clients this client assumes a coordinator could place "
     "around it; it refuses a threshold that C corrupt holders could "
     "reach (docs/security.md)"},
    {"dp-max-epsilon", FLAG_DOUBLE, &g_opts.dp_max_epsilon, "0", 0, 1e6, "E",
     "distributed DP: refuse a round whose plan spends more than epsilon E "
     "at delta 1e-5 (0: any whose noise buys what it publishes)"},
    {"secagg-security-bits", FLAG_INT, &g_opts.secagg_security_bits, "40", 1,
     128, "S",
     "the security goal (2^-S) it checks a secure-aggregation round's "
     "threshold and degree against"},
    {"exit-at-secagg", FLAG_STRING, &g_opts.exit_at_secagg, NULL, 0, 0, "STEP",
     "testing aid: in the first secure-aggregation round, exit with status "
     "3 right before sending this step's message (setup, advertise, share, "
     "masked: before uploading the masked input, consistency, unmask), as "
     "a client that drops out there would"},
    {"secagg-insider", FLAG_BOOL, &g_opts.secagg_insider, NULL, 0, 0, NULL,
     "testing aid: in every secure-aggregation round, send random bytes "
     "in place of its sealed shares, as a malicious insider would; the "
     "coordinator drops it (docs/secagg.md)"},
    {"hang", FLAG_BOOL, &g_opts.hang, NULL, 0, 0, NULL,
     "testing aid: with --exit-at-secagg, do not exit at the step but print "
     "'waiting to be killed' and keep the connection open until a signal "
     "(at most 300 s), so a test can SIGKILL it there"},
};
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const char USAGE[] =
    "usage: cohort-client --server HOST:PORT --token T [options]\n\n"
    "Takes part in a Cohort federation: checks in, downloads the global\n"
    "model, trains it on its own shard of the data, uploads only the delta,\n"
    "and exits with status 0 when the coordinator says the federation is\n"
    "over. SIGTERM or SIGINT stops it within about a second, whatever it is\n"
    "doing (connecting, waiting, downloading, training, uploading), also\n"
    "with status 0. It exits with 1 on an error and 2 on a bad flag.";

/* The exit status when the client left secure aggregation as asked. */
#define EXIT_LEFT_SECAGG 3

static cohort_client_t *g_client;
static volatile sig_atomic_t g_signalled;

static void on_signal(int sig) {
  (void)sig;
  g_signalled = 1;
  cohort_client_stop(g_client);
}

/* sigaction, not signal(): the handler stays installed for a second signal
 * (signal() under strict C11 resets it after the first). */
static int install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
    perror("cohort-client: sigaction");
    return -1;
  }
  return 0;
}

static int parse_secagg_step(const char *s, cohort_secagg_step *out) {
  static const char *const names[] = {"setup",  "advertise", "share",
                                      "masked", "unmask",    "consistency"};
  *out = COHORT_SECAGG_NEVER;
  if (!s)
    return 0;
  for (int i = 0; i < 6; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (cohort_secagg_step)(COHORT_SECAGG_SETUP + i);
      return 0;
    }
  return -1;
}

static int parse_shard(const char *s, int *index, int *count) {
  char tail;
  if (sscanf(s, "%d/%d%c", index, count, &tail) != 2 || *count < 1 ||
      *index < 0 || *index >= *count)
    return -1;
  return 0;
}

/* --attribute NAME=VALUE into attrs (names copied into names). */
static int parse_attributes(cohort_attribute *attrs, char (*names)[40]) {
  for (size_t i = 0; i < g_opts.attributes.count; i++) {
    const char *text = g_opts.attributes.items[i];
    const char *eq = strchr(text, '=');
    char *end = NULL;
    double v = eq ? strtod(eq + 1, &end) : 0;
    size_t len = eq ? (size_t)(eq - text) : 0;
    if (!eq || len == 0 || len >= sizeof names[i] || end == eq + 1 || *end) {
      fprintf(stderr, "cohort-client: --attribute '%s': expected NAME=NUMBER\n",
              text);
      return -1;
    }
    memcpy(names[i], text, len);
    names[i][len] = '\0';
    attrs[i] = (cohort_attribute){.name = names[i], .value = v};
  }
  return 0;
}

/* The first line of --token-file into buf. 0, or -1 with a message. */
static int read_token_file(const char *path, char *buf, size_t size) {
  FILE *f = fd_fopen_regular(path, NULL);
  if (!f) {
    log_error("--token-file %s: %s", path, fd_open_strerror(errno));
    return -1;
  }
  int got = fd_read_line(f, buf, size);
  fclose(f);
  if (got < 0) {
    buf[0] = '\0';
    log_error("--token-file %s: the token on its first line is longer than "
              "%zu characters",
              path, size - 2);
    return -1;
  }
  if (!buf[0]) {
    log_error("--token-file %s: no token on its first line", path);
    return -1;
  }
  return 0;
}

/* SIGHUP asks for the log file to be reopened. The handler only writes a
 * byte to this pipe (async-signal-safe); a thread reads it and reopens the
 * file in normal context. A mask that every thread blocks would not do:
 * OpenBLAS starts its threads before main. */
static int g_hup_pipe[2] = {-1, -1};

static void on_hup(int sig) {
  (void)sig;
  int saved = errno;
  ssize_t unused = write(g_hup_pipe[1], "h", 1); /* full: one is pending */
  (void)unused;
  errno = saved;
}

static void *reopen_main(void *arg) {
  (void)arg;
  for (;;) {
    char byte;
    ssize_t n = read(g_hup_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n != 1)
      return NULL;
    log_reopen_on_sighup();
  }
}

/* The pipe, the thread that reads it and the SIGHUP handler. 0 or -1. */
static int start_reopen_thread(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_hup;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  pthread_t t;
  if (pipe(g_hup_pipe) != 0 || fcntl(g_hup_pipe[1], F_SETFL, O_NONBLOCK) != 0 ||
      fcntl(g_hup_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(g_hup_pipe[1], F_SETFD, FD_CLOEXEC) != 0 ||
      pthread_create(&t, NULL, reopen_main, NULL) != 0) {
    log_error("cannot start the log reopening thread: %s", strerror(errno));
    return -1;
  }
  pthread_detach(t);
  if (sigaction(SIGHUP, &sa, NULL) != 0) {
    log_error("sigaction SIGHUP: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* The enrollment authority first, so that a certificate that does not
 * verify under it is refused here, before the coordinator refuses it; the
 * saved session after the key, which it must match. */
static int set_identity(cohort_client_t *c) {
  int rc = COHORT_OK;
  if (g_opts.authority)
    rc = cohort_client_set_enroll_authority(c, g_opts.authority);
  if (rc == COHORT_OK && g_opts.identity_key)
    rc = cohort_client_set_identity(c, g_opts.identity_key,
                                    g_opts.identity_cert);
  if (rc == COHORT_OK && g_opts.session_file)
    rc = cohort_client_set_session_file(c, g_opts.session_file);
  if (rc != COHORT_OK)
    fprintf(stderr, "cohort-client: %s\n", cohort_client_last_error(c));
  return rc == COHORT_OK ? 0 : -1;
}

/* glibc raises its mmap threshold to the size of each large block freed
 * (up to 32 MB), so that after the first round's model copies and the
 * evaluation's work are freed, the next ones come from the heap, which it
 * keeps, and the heap's holes add up: a fixed threshold gives every large
 * block back when it is freed (bench/client_footprint: about 1 MB of
 * mlp:200,200's peak; docs/benchmarks.md). The blocks are per round, not
 * per batch, so the extra mmap calls cost nothing measurable. The library
 * leaves this to its app. */
static void malloc_return_large_blocks(void) {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

int main(int argc, char **argv) {
  malloc_return_large_blocks();
  cohort_testing_enable_kill_points(); /* COHORT_TEST_KILL_AT, for tests */
  int rc = flags_main("cohort-client", USAGE, FLAGS, N_FLAGS, argc, argv);
  if (rc >= 0)
    return rc;
  /* This program's logger is set here, the shared library's (a copy of
   * its own) through the public API; both write to standard error, where
   * --log-file puts the file. */
  char err[512];
  if (log_configure(g_opts.log_level, g_opts.log_format, g_opts.log_file, err,
                    sizeof err) != 0) {
    fprintf(stderr, "cohort-client: %s\n", err);
    return 2;
  }
  if (cohort_isa_check(err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "cohort-client: %s\n", err);
    return 2;
  }
  log_level level;
  log_format format;
  log_parse_level(g_opts.log_level, &level);
  log_parse_format(g_opts.log_format, &format);
  log_set_tag("cohort-client");
  cohort_set_log_level((int)level);
  cohort_set_log_format((int)format);
  if (start_reopen_thread() != 0)
    return 1;
  int index, count;
  if (parse_shard(g_opts.shard, &index, &count) != 0) {
    fprintf(stderr,
            "cohort-client: --shard '%s': expected I/N with 0 <= I < N\n",
            g_opts.shard);
    return 2;
  }

  if (!g_opts.tls_cert != !g_opts.tls_key) {
    fprintf(stderr, "cohort-client: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (g_opts.tls_cert && !g_opts.tls && !g_opts.tls_ca) {
    fprintf(stderr, "cohort-client: --tls-cert needs TLS: add --tls-ca FILE "
                    "(or --tls for the system trust store)\n");
    return 2;
  }
  if (g_opts.identity_cert && !g_opts.identity_key) {
    fprintf(stderr, "cohort-client: --identity-cert needs the --identity-key "
                    "it certifies\n");
    return 2;
  }
  cohort_secagg_step leave;
  if (parse_secagg_step(g_opts.exit_at_secagg, &leave) != 0) {
    fprintf(stderr,
            "cohort-client: --exit-at-secagg '%s': expected setup, "
            "advertise, share, masked, consistency or unmask\n",
            g_opts.exit_at_secagg);
    return 2;
  }

  if (strcmp(g_opts.secagg_adversary, "semi-malicious") != 0 &&
      strcmp(g_opts.secagg_adversary, "curious") != 0) {
    fprintf(stderr,
            "cohort-client: --secagg-adversary '%s': expected semi-malicious "
            "or curious\n",
            g_opts.secagg_adversary);
    return 2;
  }

  cohort_dataset_options dopt;
  cohort_dataset_options_init(&dopt);
  dopt.path = g_opts.data;
  dopt.partition = g_opts.partition;
  dopt.client_index = index;
  dopt.client_count = count;
  dopt.seed = (uint64_t)g_opts.seed;
  dopt.limit = (size_t)g_opts.limit;
  dopt.holdout = g_opts.holdout;
  cohort_attribute attrs[FLAG_LIST_MAX];
  char names[FLAG_LIST_MAX][40];
  if (parse_attributes(attrs, names) != 0)
    return 2;
  if (g_opts.summary) {
    rc = cohort_dataset_partition_summary(&dopt, stdout, err, sizeof err);
    if (rc != COHORT_OK)
      fprintf(stderr, "cohort-client: %s\n", err);
    return rc == COHORT_OK ? 0 : 1;
  }
  char token_buf[512];
  if (g_opts.token_file &&
      read_token_file(g_opts.token_file, token_buf, sizeof token_buf) != 0)
    return 2;
  const char *token = g_opts.token_file ? token_buf
                      : g_opts.token    ? g_opts.token
                                        : getenv("COHORT_ENROLL_TOKEN");
  if (!token || !*token) {
    fprintf(stderr, "cohort-client: give --token-file, --token or "
                    "COHORT_ENROLL_TOKEN\n");
    return 2;
  }
  cohort_dataset_t *ds = NULL;
  rc = cohort_dataset_load(&dopt, &ds, err, sizeof err);
  if (rc != COHORT_OK) {
    fprintf(stderr, "cohort-client: %s\n", err);
    return 1;
  }
  log_info("client %d/%d of %s (%s): %zu examples", index, count, g_opts.data,
           g_opts.partition, cohort_dataset_size(ds));

  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = g_opts.server;
  o.enrollment_token = token;
  o.dataset = ds;
  o.seed = (uint64_t)g_opts.seed;
  o.threads = (int)g_opts.threads;
  o.attributes = attrs;
  o.n_attributes = g_opts.attributes.count;
  o.leave_before_secagg = leave;
  o.secagg_adversary = g_opts.secagg_adversary;
  o.secagg_corrupt = g_opts.secagg_corrupt;
  o.secagg_security_bits = (unsigned)g_opts.secagg_security_bits;
  o.secagg_colluders = (unsigned)g_opts.secagg_colluders;
  o.dp_max_epsilon = g_opts.dp_max_epsilon;
  o.long_poll_ms = (int)g_opts.long_poll_ms;
  o.tls = g_opts.tls;
  o.tls_ca_file = g_opts.tls_ca;
  o.tls_cert_file = g_opts.tls_cert;
  o.tls_key_file = g_opts.tls_key;
  rc = cohort_client_new(&o, &g_client);
  memset(token_buf, 0, sizeof token_buf); /* the client keeps its copy */
  if (rc != COHORT_OK) {
    fprintf(stderr, "cohort-client: %s: %s\n", cohort_strerror(rc),
            cohort_last_error());
    cohort_dataset_free(ds);
    return 1;
  }
  cohort_testing_set_secagg_insider(g_client, g_opts.secagg_insider);
  if (set_identity(g_client) != 0) {
    cohort_client_free(g_client);
    cohort_dataset_free(ds);
    return 1;
  }
  if (install_handlers() != 0) {
    cohort_client_free(g_client);
    cohort_dataset_free(ds);
    return 1;
  }
  rc = cohort_client_run(g_client);
  /* Stopped by a signal: a clean stop, asked for. */
  int stopped = rc == COHORT_ECANCELED && g_signalled;
  if (stopped)
    log_info("stopped by a signal");
  else if (rc != COHORT_OK)
    log_error("%s: %s", cohort_strerror(rc),
              cohort_client_last_error(g_client));
  /* Cancelled without a signal: only the testing aid does that. */
  int left =
      rc == COHORT_ECANCELED && !g_signalled && leave != COHORT_SECAGG_NEVER;
  if (left && g_opts.hang) {
    /* The channel stays open, as a process killed mid-protocol leaves it. */
    fprintf(stderr,
            "cohort-client: stopped before secagg %s; waiting to be killed\n",
            g_opts.exit_at_secagg);
    for (int i = 0; i < 3000 && !g_signalled; i++)
      nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
  }
  cohort_client_free(g_client);
  cohort_dataset_free(ds);
  if (left)
    return EXIT_LEFT_SECAGG;
  return rc == COHORT_OK || stopped ? 0 : 1;
}
