/* libFuzzer target: the coordinator's RPC handlers (service_methods), the
 * real ones, behind a round engine on a temporary SQLite store. Each input
 * is one call (fuzz_rpc.h): unpacking, validation before and after
 * authentication, and the engine's checks of what reaches it. The round
 * engine is ticked after each call, so complete uploads are aggregated
 * and rounds move on. The store is rebuilt every RESET_EVERY calls: fresh
 * enough that rounds stay reachable, rare enough to stay fast. */
#include <grpc/status.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_rpc.h"
#include "fuzz_support.h"
#include "service.h"
#include "sign.h"
#include "store.h"

#define RESET_EVERY 500

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
  char template[FUZZ_PATH_MAX];
  char path[FUZZ_PATH_MAX];
  store *db;
  round_engine *engine;
  service svc;
  char token[2][65];
  unsigned calls;
} g;

static void fail(const char *what, const char *why) {
  fprintf(stderr, "fuzz_rpc: %s: %s\n", what, why);
  abort();
}

static void remove_store(void) {
  round_engine_free(g.engine);
  store_close(g.db);
  g.engine = NULL;
  g.db = NULL;
  const char *suffix[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    char p[FUZZ_PATH_MAX + 8];
    snprintf(p, sizeof p, "%s%s", g.path, suffix[i]);
    unlink(p);
  }
}

static void copy_file(const char *from, const char *to) {
  char buf[1 << 16];
  size_t n;
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  if (!in || !out)
    fail("copying the empty store", from);
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n)
      fail("copying the empty store", to);
  if (ferror(in) || fclose(out) != 0)
    fail("copying the empty store", to);
  fclose(in);
}

/* A new store and engine; clients 1 and 2 registered and selected for
 * round 1, which is TRAINING. */
static void reset(void) {
  char err[256];
  remove_store();
  if (!g.template[0]) {
    /* The schema is made once; each reset copies that empty store, which
     * costs a fraction of migrating a new one. */
    snprintf(g.template, sizeof g.template, "%s/template.sqlite",
             fuzz_scratch_dir());
    snprintf(g.path, sizeof g.path, "%s/coordinator.sqlite",
             fuzz_scratch_dir());
    if (store_open(g.template, &g.db, err, sizeof err))
      fail("store_open", err);
    store_close(g.db);
  }
  copy_file(g.template, g.path);
  if (store_open(g.path, &g.db, err, sizeof err))
    fail("store_open", err);
  round_config cfg;
  round_config_init(&cfg);
  cfg.rounds = 3;
  cfg.clients_per_round = 2;
  cfg.min_clients = 1;
  cfg.round_timeout_s = 3600; /* nothing times out during a run */
  cfg.selection_timeout_s = 3600;
  cfg.epochs = 1;
  cfg.batch_size = 8;
  cfg.learning_rate = 0.1;
  cfg.seed = 1;
  cfg.input = (nn_shape){.c = 1, .h = 2, .w = 2};
  cfg.classes = 2;
  cfg.round_lines = NULL;
  if (round_engine_new(&cfg, g.db, &g.engine, err, sizeof err) ||
      round_add_enrollment_token(g.engine, FUZZ_RPC_ENROLL))
    fail("round_engine_new", err);
  if (round_tick(g.engine))
    fail("round_tick", "opening round 1");
  for (int i = 0; i < 2; i++) {
    uint8_t seed[SIGN_SEED_LEN], pub[SIGN_PUBLIC_LEN];
    memset(seed, i + 1, sizeof seed);
    sign_key *k = NULL;
    if (sign_key_from_seed(seed, &k))
      fail("identity", "sign_key_from_seed");
    sign_key_public(k, pub);
    sign_key_free(k);
    round_registration r = {.enrollment_token = FUZZ_RPC_ENROLL,
                            .platform = "fuzz",
                            .identity_key = pub,
                            .identity_key_len = sizeof pub};
    int64_t id;
    checkin_result res;
    round_verdict v = round_register(g.engine, &r, &id, g.token[i]);
    if (!v.code)
      v = round_checkin(g.engine, id, 100, 0, NULL, NULL, &res);
    if (v.code || res.kind != CHECKIN_TASK)
      fail("selecting a client", v.detail);
  }
  if (round_tick(g.engine))
    fail("round_tick", "closing the selection");
  g.svc = (service){.engine = g.engine};
  g.calls = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char forged[] = "0123456789abcdef0123456789abcdef"
                               "0123456789abcdef0123456789abcdef";
  if (size < 1)
    return 0;
  if (!g.engine || g.calls++ >= RESET_EVERY) {
    fuzz_quiet();
    reset();
  }
  size_t n_methods;
  const rpc_method *methods = service_methods(&n_methods);
  const rpc_method *m = &methods[(data[0] & 7) % n_methods];
  unsigned bearer = (data[0] >> 3) & 3;
  rpc_request req = {.method = m->path,
                     .body = data + 1,
                     .body_len = size - 1,
                     .bearer = bearer == FUZZ_BEARER_NONE     ? NULL
                               : bearer == FUZZ_BEARER_FORGED ? forged
                                                              : g.token[bearer],
                     .deadline_ms = 30000,
                     .peer = "ipv4:127.0.0.1:40000"};
  rpc_reply rep = {.code = GRPC_STATUS_OK};
  m->handler(&g.svc, &req, &rep);
  /* Every refusal names its reason. */
  if (rep.code != GRPC_STATUS_OK && !rep.detail[0])
    __builtin_trap();
  rpc_reply_clear(&rep); /* a GetModel reply holds the model */
  (void)round_tick(g.engine);
  return 0;
}
