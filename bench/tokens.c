/* bench_tokens: what identities cost the coordinator per call, one JSON
 * line per measurement, medians of --repeats runs:
 *   - a rate limit's take: one busy key, and a flood of distinct keys
 *     through the default 16384-slot table (eviction on every take);
 *   - a Register's store work: a client added with a flag token (one
 *     INSERT), and with a stored token (look-up, then use and INSERT in one
 *     transaction), on a database file in WAL mode;
 *   - an authenticated call's session look-up.
 *
 *   bench_tokens [--repeats 5] [--dir /tmp] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "median.h"
#include "ratelimit.h"
#include "store.h"
#include "store_tokens.h"

#define MAX_REPEATS 31
#define CLIENTS 2000

/* Nanoseconds per ratelimit_take over n takes, keys distinct or one. */
static double limiter_run(size_t n, int distinct) {
  ratelimit_config c = {.rate = 1e9, .burst = 1e9, .slots = 16384};
  ratelimit *r = NULL;
  if (ratelimit_new(&c, &r))
    return -1;
  char key[32] = "ipv4:192.0.2.1";
  double t0 = clock_mono_s();
  for (size_t i = 0; i < n; i++) {
    if (distinct)
      snprintf(key, sizeof key, "ipv4:10.%zu.%zu.%zu", (i >> 16) & 255,
               (i >> 8) & 255, i & 255);
    ratelimit_take(r, key, t0);
  }
  double ns = (clock_mono_s() - t0) * 1e9 / (double)n;
  ratelimit_free(r);
  return ns;
}

static void hex_token(char out[CRYPTO_SHA256_HEX_LEN]) {
  char t[CRYPTO_TOKEN_HEX_LEN];
  crypto_new_token(t);
  crypto_sha256_hex(t, out);
}

/* Microseconds per registration (and per session look-up after them) of
 * CLIENTS clients on a fresh database in dir. */
static int store_run(const char *dir, int stored, double *reg_us,
                     double *auth_us) {
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/bench_tokens_%d.db", dir, (int)getpid());
  store *s = NULL;
  if (store_open(path, &s, err, sizeof err)) {
    fprintf(stderr, "bench_tokens: %s\n", err);
    return -1;
  }
  char token[CRYPTO_SHA256_HEX_LEN];
  char(*sessions)[CRYPTO_SHA256_HEX_LEN] = malloc(CLIENTS * sizeof *sessions);
  int64_t token_id = 0, id;
  hex_token(token);
  int rc = sessions ? store_token_add(s, token, "bench", 0, 0, 1, &token_id)
                    : COHORT_ENOMEM;
  double t0 = clock_mono_s();
  for (int i = 0; i < CLIENTS && !rc; i++) {
    uint8_t key[SIGN_PUBLIC_LEN];
    crypto_random(key, sizeof key);
    hex_token(sessions[i]);
    store_enrollment e = {.session_sha256_hex = sessions[i],
                          .platform = "bench",
                          .identity = key,
                          .session_expires_at = 2e9,
                          .now = 1};
    store_enroll_token t;
    if (stored) {
      e.token_id = token_id;
      rc = store_token_find(s, token, &t);
      if (!rc)
        rc = store_client_enroll(s, &e, &id);
    } else {
      rc = store_client_add(s, sessions[i], "bench", key, NULL, 1, &id);
    }
  }
  *reg_us = (clock_mono_s() - t0) * 1e6 / CLIENTS;
  t0 = clock_mono_s();
  store_session ses;
  for (int i = 0; i < CLIENTS && !rc; i++)
    rc = store_session_find(s, sessions[i], &ses);
  *auth_us = (clock_mono_s() - t0) * 1e6 / CLIENTS;
  free(sessions);
  store_close(s);
  const char *suffix[] = {"", "-wal", "-shm"};
  for (int i = 0; i < 3; i++) {
    char p[600];
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
  char updates[600];
  snprintf(updates, sizeof updates, "%s.updates", path);
  rmdir(updates);
  return rc ? -1 : 0;
}

int main(int argc, char **argv) {
  int repeats = 5;
  const char *dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--repeats") == 0)
      repeats = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--dir") == 0)
      dir = argv[i + 1];
  }
  if (repeats < 1 || repeats > MAX_REPEATS) {
    fprintf(stderr, "bench_tokens: --repeats 1 to %d\n", MAX_REPEATS);
    return 2;
  }
  double a[MAX_REPEATS], b[MAX_REPEATS];
  for (int distinct = 0; distinct < 2; distinct++) {
    for (int r = 0; r < repeats; r++)
      a[r] = limiter_run(1000000, distinct);
    printf("{\"bench\":\"ratelimit_take\",\"keys\":\"%s\",\"ns\":%.1f}\n",
           distinct ? "1000000 distinct, 16384 slots" : "one",
           bench_median(a, repeats));
  }
  for (int stored = 0; stored < 2; stored++) {
    for (int r = 0; r < repeats; r++)
      if (store_run(dir, stored, &a[r], &b[r]))
        return 1;
    printf("{\"bench\":\"register_store\",\"token\":\"%s\",\"clients\":%d,"
           "\"us_per_register\":%.1f,\"us_per_session_lookup\":%.1f}\n",
           stored ? "stored" : "flag", CLIENTS, bench_median(a, repeats),
           bench_median(b, repeats));
  }
  return 0;
}
