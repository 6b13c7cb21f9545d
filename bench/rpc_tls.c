/* bench_rpc_tls: what TLS costs the gRPC port on a stream of 1 MiB chunks,
 * the shape of a GetModel download of a large model (one unary call per
 * chunk, by offset). One process serves a method answering 1 MiB bodies
 * on 127.0.0.1 and downloads --mib of them, plaintext and over TLS in
 * turns, --runs times each; prints each run and the medians in MiB/s.
 *
 *   bench_rpc_tls --certs DIR [--mib 256] [--runs 5]
 *
 * DIR is scripts/make-certs' output (ca.crt, server.crt, server.key). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  const char *certs;
  long mib, runs;
} g_opt;

static const flag_def FLAGS[] = {
    {"certs", FLAG_STRING, &g_opt.certs, NULL, 0, 0, "DIR",
     "scripts/make-certs' folder: ca.crt, server.crt, server.key"},
    {"mib", FLAG_INT, &g_opt.mib, "256", 1, 1 << 20, "N",
     "chunks of 1 MiB downloaded per run"},
    {"runs", FLAG_INT, &g_opt.runs, "5", 1, MAX_RUNS, "R",
     "runs of each transport, interleaved"},
};

/* Answers every call with one chunk of CHUNK_BYTES (a fresh buffer, as the
 * coordinator's GetModel hands the server one). */
static void serve_chunk(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx, (void)req;
  rep->body = malloc(CHUNK_BYTES);
  if (!rep->body) {
    rep->code = GRPC_STATUS_RESOURCE_EXHAUSTED;
    return;
  }
  memset(rep->body, 0xa5, CHUNK_BYTES);
  rep->body_len = CHUNK_BYTES;
}

/* MiB/s of one download of g_opt.mib chunks, or -1 on an error. */
static double download(int port, const rpc_tls_config *tls) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  rpc_channel_config cc = {.target = target,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                           .tls = tls};
  rpc_channel *ch = NULL;
  if (rpc_channel_new(&cc, &ch) != COHORT_OK)
    return -1;
  double t0 = 0, mib_s = -1;
  /* Chunk 0 connects (and shakes hands): not timed, as a client that
   * downloads a large model pays that once. */
  for (long i = 0; i <= g_opt.mib; i++) {
    if (i == 1)
      t0 = clock_mono_s();
    uint64_t offset = (uint64_t)i * CHUNK_BYTES;
    rpc_result r;
    if (rpc_call(ch, METHOD, NULL, (const uint8_t *)&offset, sizeof offset,
                 NULL, &r) != COHORT_OK ||
        r.code != GRPC_STATUS_OK || r.body_len != CHUNK_BYTES) {
      fprintf(stderr, "chunk %ld failed: %d %s\n", i, r.code, r.detail);
      rpc_result_clear(&r);
      goto out;
    }
    rpc_result_clear(&r);
  }
  mib_s = (double)g_opt.mib / (clock_mono_s() - t0);
out:
  rpc_channel_free(ch);
  return mib_s;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, long n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Starts a server with one chunk method, plaintext or TLS. */
static rpc_server *serve(const rpc_tls_config *tls, int *port) {
  static const rpc_method methods[] = {{METHOD, serve_chunk}};
  rpc_server_config sc = {.listen = "127.0.0.1:0",
                          .workers = 2,
                          .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                          .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                          .methods = methods,
                          .n_methods = 1,
                          .tls = tls};
  rpc_server *srv = NULL;
  return rpc_server_start(&sc, &srv, port) == COHORT_OK ? srv : NULL;
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
  log_set_level(LOG_WARN);
  char ca[1024], crt[1024], key[1024];
  snprintf(ca, sizeof ca, "%s/ca.crt", g_opt.certs);
  snprintf(crt, sizeof crt, "%s/server.crt", g_opt.certs);
  snprintf(key, sizeof key, "%s/server.key", g_opt.certs);
  rpc_tls_config server_tls = {.enabled = 1, .cert_file = crt, .key_file = key};
  rpc_tls_config client_tls = {.enabled = 1, .ca_file = ca};

  int plain_port = 0, tls_port = 0;
  rpc_server *plain = serve(NULL, &plain_port);
  rpc_server *tls = serve(&server_tls, &tls_port);
  double p[MAX_RUNS], t[MAX_RUNS];
  rc = 1;
  if (!plain || !tls)
    goto out;
  printf("run plaintext_MiB_s tls_MiB_s (%ld chunks of 1 MiB each)\n",
         g_opt.mib);
  for (long r = 0; r < g_opt.runs; r++) {
    p[r] = download(plain_port, NULL);
    t[r] = download(tls_port, &client_tls);
    if (p[r] < 0 || t[r] < 0)
      goto out;
    printf("%ld %.1f %.1f\n", r + 1, p[r], t[r]);
    fflush(stdout);
  }
  double mp = median(p, g_opt.runs), mt = median(t, g_opt.runs);
  printf("median plaintext %.1f MiB/s, TLS %.1f MiB/s: TLS %+.1f%%\n", mp, mt,
         100 * (mt - mp) / mp);
  rc = 0;
out:
  rpc_server_stop(tls, 1000);
  rpc_server_stop(plain, 1000);
  return rc;
}
