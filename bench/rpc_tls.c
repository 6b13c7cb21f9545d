/* bench_rpc_tls: what TLS costs the gRPC port on a stream of 1 MiB chunks,
 * the shape of a GetModel download of a large model (one unary call per
 * chunk, by offset). Plaintext and TLS downloads of --mib chunks take
 * turns, --runs times each; each run prints MiB/s and the CPU time this
 * process spent per MiB, and the medians follow.
 *
 *   bench_rpc_tls --certs DIR [--mib 256] [--runs 5] [--only plain|tls] [--up]
 *       one process serves on 127.0.0.1 and downloads from itself (--up:
 *       uploads 1 MiB chunks instead, the shape of a large Upload); its
 *       client shares the server's pollers and GRPC_EXPERIMENTS, which is
 *       why bench/tls.sh runs the next two instead
 *   bench_rpc_tls --certs DIR --serve HOST:PORT [--serve-s 600]
 *       serves plaintext on PORT and TLS on PORT+1 until SIGINT/SIGTERM or
 *       --serve-s seconds; prints the CPU time it spent per MiB moved,
 *       by transport
 *   bench_rpc_tls --certs DIR --connect HOST:PORT [--mib] [--runs] [--only]
 *       downloads from a --serve process (across a link: bench/tls.sh
 *       LINK=1gbit)
 *
 * DIR is scripts/make-certs' output (ca.crt, server.crt, server.key); the
 * server certificate must name HOST: verification is never relaxed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <grpc/status.h>

#include "clock.h"
#include "cohort_status.h"
#include "flags.h"
#include "log.h"
#include "pb.h"
#include "rpc_client.h"
#include "rpc_server.h"

#define CHUNK_BYTES PB_MAX_CHUNK_BYTES
#define METHOD "/cohort.bench/Chunk"
#define MAX_RUNS 64

static struct {
  const char *certs, *only, *serve, *connect;
  long mib, runs, serve_s;
  int up;
} g_opt;

static const flag_def FLAGS[] = {
    {"certs", FLAG_STRING, &g_opt.certs, NULL, 0, 0, "DIR",
     "scripts/make-certs' folder: ca.crt, server.crt, server.key"},
    {"mib", FLAG_INT, &g_opt.mib, "256", 1, 1 << 20, "N",
     "chunks of 1 MiB downloaded per run"},
    {"runs", FLAG_INT, &g_opt.runs, "5", 1, MAX_RUNS, "R",
     "runs of each transport, interleaved"},
    {"only", FLAG_STRING, &g_opt.only, NULL, 0, 0, "plain|tls",
     "run one transport only (to profile it)"},
    {"serve", FLAG_STRING, &g_opt.serve, NULL, 0, 0, "HOST:PORT",
     "only serve: plaintext on PORT, TLS on PORT+1"},
    {"serve-s", FLAG_INT, &g_opt.serve_s, "600", 1, 86400, "S",
     "a --serve process stops by itself after S seconds"},
    {"up", FLAG_BOOL, &g_opt.up, NULL, 0, 0, NULL,
     "upload the chunks (1 MiB requests, 8-byte replies) instead"},
    {"connect", FLAG_STRING, &g_opt.connect, NULL, 0, 0, "HOST:PORT",
     "only download, from a --serve process at HOST:PORT"},
};

/* The serving process's CPU time by transport. The client never moves two
 * chunks at once, so the CPU used between one call and the next (sending
 * that call's reply, reading the next request) is charged to the first
 * call's transport. */
static struct {
  pthread_mutex_t mu;
  double last_cpu;
  int last; /* transport of the last call: 0 plaintext, 1 TLS, -1 none */
  double cpu[2];
  long chunks[2];
} g_served = {PTHREAD_MUTEX_INITIALIZER, 0, -1, {0, 0}, {0, 0}};

static const int TRANSPORT[2] = {0, 1}; /* server ctx: plaintext, TLS */

static double cpu_s(void);

/* Charges the CPU time since the last call to that call's transport and
 * makes the next call (transport -1: none) the last one. */
static void charge_cpu(int transport) {
  pthread_mutex_lock(&g_served.mu);
  double now = cpu_s();
  if (g_served.last >= 0)
    g_served.cpu[g_served.last] += now - g_served.last_cpu;
  g_served.last_cpu = now;
  g_served.last = transport;
  if (transport >= 0)
    g_served.chunks[transport]++;
  pthread_mutex_unlock(&g_served.mu);
}

/* Answers a call with one chunk of CHUNK_BYTES (a fresh buffer, as the
 * coordinator's GetModel hands the server one), or an uploaded chunk
 * (a request of CHUNK_BYTES) with its 8-byte offset. */
static void serve_chunk(void *ctx, const rpc_request *req, rpc_reply *rep) {
  charge_cpu(*(const int *)ctx);
  size_t n = req->body_len == CHUNK_BYTES ? sizeof(uint64_t) : CHUNK_BYTES;
  rep->body = malloc(n);
  if (!rep->body) {
    rep->code = GRPC_STATUS_RESOURCE_EXHAUSTED;
    return;
  }
  memset(rep->body, 0xa5, n);
  rep->body_len = n;
}

/* CPU seconds (user + system, all threads) this process has used. */
static double cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

typedef struct result {
  double mib_s;      /* download rate; -1 on an error */
  double cpu_ms_mib; /* this process's CPU ms per MiB moved */
} result;

/* One download (--up: upload) of g_opt.mib chunks from target. */
static result download(const char *target, const rpc_tls_config *tls) {
  rpc_channel_config cc = {.target = target,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                           .tls = tls};
  result res = {-1, 0};
  rpc_channel *ch = NULL;
  if (rpc_channel_new(&cc, &ch) != COHORT_OK)
    return res;
  uint8_t *chunk = g_opt.up ? malloc(CHUNK_BYTES) : NULL;
  if (g_opt.up) {
    if (!chunk)
      goto out;
    memset(chunk, 0x5a, CHUNK_BYTES);
  }
  size_t want = g_opt.up ? sizeof(uint64_t) : CHUNK_BYTES;
  double t0 = 0, c0 = 0;
  /* Chunk 0 connects (and shakes hands): not timed, as a client that
   * downloads a large model pays that once. */
  for (long i = 0; i <= g_opt.mib; i++) {
    if (i == 1) {
      t0 = clock_mono_s();
      c0 = cpu_s();
    }
    uint64_t offset = (uint64_t)i * CHUNK_BYTES;
    if (chunk)
      memcpy(chunk, &offset, sizeof offset);
    rpc_result r;
    if (rpc_call(ch, METHOD, NULL, chunk ? chunk : (const uint8_t *)&offset,
                 chunk ? CHUNK_BYTES : sizeof offset, NULL, &r) != COHORT_OK ||
        r.code != GRPC_STATUS_OK || r.body_len != want) {
      fprintf(stderr, "%s: chunk %ld failed: %d %s\n", target, i, r.code,
              r.detail);
      rpc_result_clear(&r);
      goto out;
    }
    rpc_result_clear(&r);
  }
  res.mib_s = (double)g_opt.mib / (clock_mono_s() - t0);
  res.cpu_ms_mib = 1000 * (cpu_s() - c0) / (double)g_opt.mib;
out:
  free(chunk);
  rpc_channel_free(ch);
  return res;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, long n) {
  double s[MAX_RUNS];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Starts a server with one chunk method on listen, plaintext or TLS, with
 * cohort-server's default HTTP/2 limits (16 streams, 64 KiB stream
 * window); rpc_server_start adds the rest of its arguments (4 KiB read
 * chunks at most). */
static rpc_server *serve(const char *listen, const rpc_tls_config *tls,
                         int *port) {
  const int *transport = &TRANSPORT[tls != NULL];
  static const rpc_method methods[] = {{METHOD, serve_chunk}};
  rpc_server_config sc = {
      .listen = listen,
      .workers = 2,
      .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
      .max_send_bytes = PB_MAX_MESSAGE_BYTES,
      .methods = methods,
      .n_methods = 1,
      .ctx = (void *)transport,
      .tls = tls,
      .limits = {.max_streams = 16, .stream_window_bytes = 65536}};
  rpc_server *srv = NULL;
  return rpc_server_start(&sc, &srv, port) == COHORT_OK ? srv : NULL;
}

/* Splits "HOST:PORT" (HOST may be "[v6]") into host and a port of 1 to
 * 65534 (PORT+1 must be one too). */
static int split_hostport(const char *hp, char *host, size_t hostlen,
                          int *port) {
  const char *colon = strrchr(hp, ':');
  if (!colon || colon == hp || (size_t)(colon - hp) >= hostlen)
    return -1;
  char *end;
  errno = 0;
  long p = strtol(colon + 1, &end, 10);
  if (errno || *end || p < 1 || p > 65534)
    return -1;
  memcpy(host, hp, (size_t)(colon - hp));
  host[colon - hp] = '\0';
  *port = (int)p;
  return 0;
}

/* --serve: both ports until a signal or --serve-s seconds. */
static int serve_only(const rpc_tls_config *server_tls) {
  char host[256], addr[300];
  int port;
  if (split_hostport(g_opt.serve, host, sizeof host, &port) != 0) {
    fprintf(stderr, "bench_rpc_tls: --serve %s: HOST:PORT expected\n",
            g_opt.serve);
    return 2;
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  /* Before gRPC starts its threads, so that only sigtimedwait takes them. */
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  int got_plain = 0, got_tls = 0, rc = 1;
  snprintf(addr, sizeof addr, "%s:%d", host, port);
  rpc_server *plain = serve(addr, NULL, &got_plain);
  snprintf(addr, sizeof addr, "%s:%d", host, port + 1);
  rpc_server *tls = plain ? serve(addr, server_tls, &got_tls) : NULL;
  if (plain && tls) {
    printf("serving plaintext on %s:%d, TLS on %s:%d\n", host, got_plain, host,
           got_tls);
    fflush(stdout);
    struct timespec limit = {.tv_sec = g_opt.serve_s};
    int sig = sigtimedwait(&sigs, NULL, &limit);
    charge_cpu(-1);
    printf("server: %s; CPU ms per MiB moved: plaintext %.2f (%ld chunks), "
           "TLS %.2f (%ld chunks)\n",
           sig > 0 ? "stopped" : "timed out",
           g_served.chunks[0] ? 1000 * g_served.cpu[0] / g_served.chunks[0] : 0,
           g_served.chunks[0],
           g_served.chunks[1] ? 1000 * g_served.cpu[1] / g_served.chunks[1] : 0,
           g_served.chunks[1]);
    rc = 0;
  }
  rpc_server_stop(tls, 1000);
  rpc_server_stop(plain, 1000);
  return rc;
}

/* Alternates plaintext and TLS downloads from the two targets and prints
 * each run and the medians. */
static int compare(const char *plain_target, const char *tls_target,
                   const rpc_tls_config *client_tls) {
  int do_plain = !g_opt.only || strcmp(g_opt.only, "plain") == 0;
  int do_tls = !g_opt.only || strcmp(g_opt.only, "tls") == 0;
  result p[MAX_RUNS] = {0}, t[MAX_RUNS] = {0};
  printf("run plaintext_MiB_s tls_MiB_s plaintext_cpu_ms_per_MiB "
         "tls_cpu_ms_per_MiB (%ld chunks of 1 MiB each, %s)\n",
         g_opt.mib, g_opt.up ? "uploaded" : "downloaded");
  for (long r = 0; r < g_opt.runs; r++) {
    if (do_plain && (p[r] = download(plain_target, NULL)).mib_s < 0)
      return 1;
    if (do_tls && (t[r] = download(tls_target, client_tls)).mib_s < 0)
      return 1;
    printf("%ld %.1f %.1f %.2f %.2f\n", r + 1, p[r].mib_s, t[r].mib_s,
           p[r].cpu_ms_mib, t[r].cpu_ms_mib);
    fflush(stdout);
  }
  double v[4][MAX_RUNS];
  for (long r = 0; r < g_opt.runs; r++) {
    v[0][r] = p[r].mib_s, v[1][r] = t[r].mib_s;
    v[2][r] = p[r].cpu_ms_mib, v[3][r] = t[r].cpu_ms_mib;
  }
  double mp = median(v[0], g_opt.runs), mt = median(v[1], g_opt.runs);
  double cp = median(v[2], g_opt.runs), ct = median(v[3], g_opt.runs);
  /* With --connect the server's CPU is the --serve process's to print. */
  const char *whose = g_opt.connect ? "client " : "";
  if (do_plain)
    printf("median plaintext %.1f MiB/s, %.2f %sCPU ms per MiB\n", mp, cp,
           whose);
  if (do_tls)
    printf("median TLS %.1f MiB/s, %.2f %sCPU ms per MiB\n", mt, ct, whose);
  if (do_plain && do_tls)
    printf("TLS: %+.1f%% MiB/s, %+.1f%% %sCPU per MiB\n", 100 * (mt - mp) / mp,
           100 * (ct - cp) / cp, whose);
  return 0;
}

int main(int argc, char **argv) {
  int rc = flags_main("bench_rpc_tls", "usage: bench_rpc_tls --certs DIR",
                      FLAGS, sizeof FLAGS / sizeof FLAGS[0], argc, argv);
  if (rc >= 0)
    return rc;
  if (!g_opt.certs) {
    fprintf(stderr, "bench_rpc_tls: give --certs DIR (scripts/make-certs)\n");
    return 2;
  }
  if (g_opt.only && strcmp(g_opt.only, "plain") != 0 &&
      strcmp(g_opt.only, "tls") != 0) {
    fprintf(stderr, "bench_rpc_tls: --only plain or --only tls\n");
    return 2;
  }
  if (g_opt.serve && g_opt.connect) {
    fprintf(stderr, "bench_rpc_tls: --serve or --connect, not both\n");
    return 2;
  }
  log_set_level(LOG_WARN);
  char ca[1024], crt[1024], key[1024];
  snprintf(ca, sizeof ca, "%s/ca.crt", g_opt.certs);
  snprintf(crt, sizeof crt, "%s/server.crt", g_opt.certs);
  snprintf(key, sizeof key, "%s/server.key", g_opt.certs);
  rpc_tls_config server_tls = {.enabled = 1, .cert_file = crt, .key_file = key};
  rpc_tls_config client_tls = {.enabled = 1, .ca_file = ca};
  if (g_opt.serve)
    return serve_only(&server_tls);

  char plain_target[300], tls_target[300];
  if (g_opt.connect) {
    char host[256];
    int port;
    if (split_hostport(g_opt.connect, host, sizeof host, &port) != 0) {
      fprintf(stderr, "bench_rpc_tls: --connect %s: HOST:PORT expected\n",
              g_opt.connect);
      return 2;
    }
    snprintf(plain_target, sizeof plain_target, "%s:%d", host, port);
    snprintf(tls_target, sizeof tls_target, "%s:%d", host, port + 1);
    return compare(plain_target, tls_target, &client_tls);
  }
  int plain_port = 0, tls_port = 0;
  rpc_server *plain = serve("127.0.0.1:0", NULL, &plain_port);
  rpc_server *tls = serve("127.0.0.1:0", &server_tls, &tls_port);
  rc = 1;
  if (plain && tls) {
    snprintf(plain_target, sizeof plain_target, "127.0.0.1:%d", plain_port);
    snprintf(tls_target, sizeof tls_target, "127.0.0.1:%d", tls_port);
    rc = compare(plain_target, tls_target, &client_tls);
  }
  rpc_server_stop(tls, 1000);
  rpc_server_stop(plain, 1000);
  return rc;
}
