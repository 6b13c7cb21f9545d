/* See http_federation.h. */
#include "http_federation.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "harness.h"
#include "http_client.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

static void nap_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Reads an integer at a.b of /api/federation; -1 on any failure. */
static int federation_int(const http_federation *f, const char *a,
                          const char *b) {
  http_reply r;
  int v = -1;
  if (http_get(f->http_port, "/api/federation", HTTP_FED_TOKEN, &r) != 0)
    return -1;
  json_object *o = r.status == 200 ? json_tokener_parse(r.body) : NULL, *x, *y;
  if (o && json_object_object_get_ex(o, a, &x) &&
      json_object_object_get_ex(x, b, &y))
    v = json_object_get_int(y);
  json_object_put(o);
  http_reply_clear(&r);
  return v;
}

int http_federation_committed(const http_federation *f) {
  return federation_int(f, "committed", "training_rounds");
}

int http_federation_current(const http_federation *f) {
  return federation_int(f, "current_round", "id");
}

int http_federation_start(http_federation *f, const char *tag, int min_rounds,
                          int with_token) {
  return http_federation_start_with(f, tag, min_rounds, with_token, "");
}

int http_federation_start_with(http_federation *f, const char *tag,
                               int min_rounds, int with_token,
                               const char *extra_flags) {
  memset(f, 0, sizeof *f);
  char token_file[512], port_file[512], flags[2048], name[64];
  snprintf(name, sizeof name, "%s.token", tag);
  snprintf(token_file, sizeof token_file, "%s", harness_path(name));
  snprintf(name, sizeof name, "%s.http-port", tag);
  snprintf(port_file, sizeof port_file, "%s", harness_path(name));
  FILE *t = fopen(token_file, "w");
  if (!t)
    return -1;
  fprintf(t, "%s\n", HTTP_FED_TOKEN);
  fclose(t);
  chmod(token_file, 0600);
  /* Rounds that outlast every test: with nothing limiting them, two
   * clients commit about 80 a second. */
  snprintf(flags, sizeof flags,
           "--rounds 1000000 --clients-per-round 2 --min-clients 2 "
           "--eval-data " DATA_DIR " --eval-limit 1000 "
           "--enroll-token fed-token --retry-ms 100 --linger 1 "
           "--http 127.0.0.1:0 --http-port-file %s%s%s %s",
           port_file, with_token ? " --admin-token-file " : "",
           with_token ? token_file : "", extra_flags);
  f->server =
      harness_start_server(tag, flags, &f->grpc_port, f->db, sizeof f->db);
  if (f->server < 0)
    return -1;
  f->http_port = harness_read_port(port_file, 30);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", f->grpc_port);
  for (int i = 0; i < HTTP_FED_CLIENTS; i++) {
    char shard[16];
    snprintf(shard, sizeof shard, "%d/%d", i, HTTP_FED_CLIENTS);
    char *argv[] = {
        COHORT_CLIENT_BIN, "--server", target, "--token", "fed-token", "--data",
        DATA_DIR,          "--shard",  shard,  "--limit", "600",       NULL};
    f->clients[i] = harness_spawn(argv, NULL, NULL);
  }
  for (int i = 0; i < 600; i++) { /* up to 60 s */
    if (f->http_port > 0 && http_federation_committed(f) >= min_rounds)
      return 0;
    nap_ms(100);
  }
  http_federation_stop(f);
  return -1;
}

void http_federation_stop(http_federation *f) {
  for (int i = 0; i < HTTP_FED_CLIENTS; i++)
    if (f->clients[i] > 0) {
      harness_signal(f->clients[i], SIGKILL);
      harness_wait(f->clients[i], 10);
      f->clients[i] = 0;
    }
  if (f->server > 0) {
    harness_stop(f->server, 20);
    f->server = 0;
  }
}
