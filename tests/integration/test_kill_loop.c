/* Crash consistency: the coordinator is killed with SIGKILL at random moments
 * (selection, training, uploads, aggregation, commit, its own recovery) at
 * least KILLS times during a federation whose clients keep running. After
 * every kill the database must be intact and keep every model committed so
 * far, and in the end the federation must finish by itself.
 * COHORT_KILL_SEED=S repeats a run's kill timings. */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define CLIENTS 3
#define ROUNDS 12 /* as --rounds in SERVER_FLAGS */
#define KILLS 24  /* the issue asks for at least 20 */
#define MAX_MODELS 64
#define SERVER_FLAGS                                                           \
  "--rounds 12 --clients-per-round 3 --min-clients 2 --round-timeout 20 "      \
  "--selection-timeout 2 --retry-ms 50 --linger 20 --eval-data " DATA_DIR      \
  " --enroll-token kill-token --retry-max-ms 200"

/* Where a kill landed, from the newest round's row once the server is down;
 * DB states only, so "training" also covers downloads and local training. */
enum {
  AT_STARTUP,   /* before the port file: opening the store, recovery */
  AT_NO_ROUND,  /* serving, no round open yet */
  AT_SELECTION, /* OPEN */
  AT_TRAINING,  /* TRAINING, no update stored yet */
  AT_UPLOADS,   /* TRAINING with some updates stored */
  AT_AGGREGATE, /* AGGREGATING */
  AT_IDLE,      /* newest round COMMITTED or FAILED */
  AT_COUNT
};
static const char *const at_names[AT_COUNT] = {
    "startup", "no round",    "selection",     "training",
    "uploads", "aggregating", "between rounds"};

typedef struct model_seen {
  int64_t version;
  char sha256[65];
} model_seen;

/* Everything observed durable so far: it must never go away. */
typedef struct history {
  model_seen models[MAX_MODELS];
  int n_models;
  int64_t committed[MAX_MODELS]; /* round id -> model version, -1: not yet */
} history;

/* Starts the coordinator as harness_start_server would but returns at once,
 * so that it can be killed while it opens the store and recovers. */
static pid_t spawn_server_now(const char *tag, int port, const char *db) {
  char listen[32], words[1024], out[64], err[64], port_file[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  snprintf(out, sizeof out, "%s.out", tag);
  snprintf(err, sizeof err, "%s.err", tag);
  snprintf(port_file, sizeof port_file, "%s.port", tag);
  snprintf(words, sizeof words, "%s", SERVER_FLAGS);
  char *argv[64];
  int n = 0;
  argv[n++] = COHORT_SERVER_BIN;
  argv[n++] = "--listen";
  argv[n++] = listen;
  argv[n++] = "--port-file";
  argv[n++] = (char *)harness_path(port_file);
  argv[n++] = "--db";
  argv[n++] = (char *)db;
  char *save = NULL;
  for (char *w = strtok_r(words, " ", &save); w && n < 63;
       w = strtok_r(NULL, " ", &save))
    argv[n++] = w;
  argv[n] = NULL;
  return harness_spawn(argv, harness_path(out), harness_path(err));
}

static void sha256_hex(const void *data, size_t len, char hex[65]) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(data, len, d);
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
    sprintf(hex + 2 * i, "%02x", d[i]);
}

/* The phase the newest round was in when the coordinator died, read on the
 * checker's read-only connection. */
static int kill_phase(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int phase = AT_NO_ROUND;
  if (sqlite3_prepare_v2(db,
                         "SELECT state, (SELECT COUNT(*) FROM participations p"
                         " WHERE p.round = r.id AND p.state = 'UPLOADED')"
                         " FROM rounds r ORDER BY id DESC LIMIT 1",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const char *state = (const char *)sqlite3_column_text(st, 0);
    state = state ? state : "";
    if (!strcmp(state, "OPEN"))
      phase = AT_SELECTION;
    else if (!strcmp(state, "TRAINING"))
      phase = sqlite3_column_int64(st, 1) > 0 ? AT_UPLOADS : AT_TRAINING;
    else if (!strcmp(state, "AGGREGATING"))
      phase = AT_AGGREGATE;
    else
      phase = AT_IDLE;
  }
  sqlite3_finalize(st);
  return phase;
}

/* Lets the coordinator run for up to ms, polling its database (read-only,
 * about every millisecond) and ending early once the newest round is in
 * phase want (if want >= 0), or once cap rounds are committed, so that no
 * window lets the federation finish. Returns the milliseconds it ran. */
static long run_window(const char *path, long ms, int want, int cap) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  double start = clock_mono_s(), end = start + ms / 1000.0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "SELECT COUNT(*) FROM rounds"
                         " WHERE state = 'COMMITTED'",
                         -1, &st, NULL) != SQLITE_OK) {
    clock_sleep_ms(ms);
    goto out;
  }
  sqlite3_busy_timeout(db, 100);
  while (clock_mono_s() < end) {
    int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_reset(st);
    if (n >= cap || (want >= 0 && kill_phase(db) == want))
      break;
    clock_sleep_ms(1);
  }
out:
  sqlite3_finalize(st);
  sqlite3_close(db);
  return (long)((clock_mono_s() - start) * 1000);
}

/* Checks the stopped coordinator's database against everything seen so far
 * and adds what is new to h. Returns the number of failed checks (each also
 * a CUnit failure, with the kill's number on stderr). The connection is
 * read-only so that the restarted coordinator, not the checker, finds and
 * recovers the crashed database. *phase (if not NULL) receives the phase of
 * the newest round. */
static int check_db(const char *path, history *h, int kill_no, int *phase) {
  int bad = 0;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    CU_ASSERT(cond);                                                           \
    if (!(cond)) {                                                             \
      fprintf(stderr, "kill %d: ", kill_no);                                   \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      bad++;                                                                   \
    }                                                                          \
  } while (0)
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
  CHECK(rc == SQLITE_OK, "cannot open %s: %s", path, sqlite3_errstr(rc));
  if (rc != SQLITE_OK)
    goto out;
  if (phase)
    *phase = kill_phase(db);

  rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
  CHECK(rc == SQLITE_OK, "integrity_check: %s", sqlite3_errmsg(db));
  if (rc == SQLITE_OK) {
    int rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *t = (const char *)sqlite3_column_text(st, 0);
      CHECK(t && !strcmp(t, "ok"), "integrity_check: %s", t ? t : "NULL");
      rows++;
    }
    CHECK(rows >= 1, "integrity_check gave no row");
  }
  sqlite3_finalize(st);
  st = NULL;

  /* Committed rounds name a stored model (the REFERENCES clauses too). */
  rc = sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL);
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    CHECK(0, "foreign_key_check: a row of %s breaks a reference",
          (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  st = NULL;

  /* Every stored model hashes to its digest; every model seen before is
   * still there with the same digest. */
  int seen_now[MAX_MODELS] = {0};
  rc = sqlite3_prepare_v2(db, "SELECT version, sha256, params FROM models", -1,
                          &st, NULL);
  CHECK(rc == SQLITE_OK, "reading models: %s", sqlite3_errmsg(db));
  while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    int64_t v = sqlite3_column_int64(st, 0);
    const char *sha = (const char *)sqlite3_column_text(st, 1);
    char hex[65];
    sha256_hex(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
               hex);
    CHECK(sha && !strcmp(hex, sha),
          "model %" PRId64 ": blob hashes to %s, row says %s", v, hex,
          sha ? sha : "NULL");
    int known = 0;
    for (int i = 0; i < h->n_models; i++) {
      if (h->models[i].version != v)
        continue;
      known = 1;
      seen_now[i] = 1;
      CHECK(sha && !strcmp(h->models[i].sha256, sha),
            "model %" PRId64 " was %s, now %s", v, h->models[i].sha256,
            sha ? sha : "NULL");
    }
    if (!known && sha && h->n_models < MAX_MODELS) {
      h->models[h->n_models].version = v;
      snprintf(h->models[h->n_models].sha256, 65, "%s", sha);
      seen_now[h->n_models++] = 1;
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  for (int i = 0; i < h->n_models; i++)
    CHECK(seen_now[i], "model %" PRId64 " (%s) is gone", h->models[i].version,
          h->models[i].sha256);

  /* A committed round stays committed, on the same stored model. */
  int64_t now_committed[MAX_MODELS];
  for (int i = 0; i < MAX_MODELS; i++)
    now_committed[i] = -1;
  rc = sqlite3_prepare_v2(db,
                          "SELECT r.id, r.model_version, m.version FROM rounds"
                          " r LEFT JOIN models m ON m.version = r.model_version"
                          " WHERE r.state = 'COMMITTED'",
                          -1, &st, NULL);
  CHECK(rc == SQLITE_OK, "reading rounds: %s", sqlite3_errmsg(db));
  while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    CHECK(sqlite3_column_type(st, 2) != SQLITE_NULL,
          "committed round %" PRId64 " names model %s, which is missing", id,
          (const char *)sqlite3_column_text(st, 1));
    if (id >= 0 && id < MAX_MODELS)
      now_committed[id] = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  st = NULL;
  for (int id = 0; id < MAX_MODELS; id++) {
    if (h->committed[id] < 0)
      continue;
    CHECK(now_committed[id] == h->committed[id],
          "round %d was COMMITTED with model %" PRId64 ", now %" PRId64, id,
          h->committed[id], now_committed[id]);
  }
  for (int id = 0; id < MAX_MODELS; id++)
    if (now_committed[id] >= 0)
      h->committed[id] = now_committed[id];
out:
  sqlite3_close(db);
  return bad;
#undef CHECK
}

static void test_sigkill_loop_keeps_every_commit(void) {
  double t0 = clock_mono_s();
  const char *env = getenv("COHORT_KILL_SEED");
  uint64_t seed = env && *env
                      ? strtoull(env, NULL, 0)
                      : ((uint64_t)time(NULL) << 16) ^ (uint64_t)getpid();
  harness_rng_seed(seed);
  fprintf(stderr,
          "\nkill loop: seed %" PRIu64 " (COHORT_KILL_SEED=%" PRIu64
          " repeats the timings)\n",
          seed, seed);

  history h = {.n_models = 0};
  for (int i = 0; i < MAX_MODELS; i++)
    h.committed[i] = -1;

  int port = 0;
  char db[512] = "";
  double t_start = clock_mono_s();
  pid_t server =
      harness_start_server("kill00", SERVER_FLAGS, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  /* How long a start takes here (sanitizers are slower): startup kills
   * fall within it. */
  long startup_ms = (long)((clock_mono_s() - t_start) * 1000);
  fprintf(stderr, "kill loop: the coordinator starts in %ld ms\n", startup_ms);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);

  pid_t clients[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    char shard[16], log[32];
    snprintf(shard, sizeof shard, "%d/%d", i, CLIENTS);
    snprintf(log, sizeof log, "kill-client%d.err", i);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "kill-token",
                    "--data",
                    DATA_DIR,
                    "--shard",
                    shard,
                    "--limit",
                    "400",
                    "--seed",
                    "7",
                    "--threads",
                    "1",
                    NULL};
    clients[i] = harness_spawn(argv, NULL, harness_path(log));
    CU_ASSERT_FATAL(clients[i] > 0);
  }

  int kills = 0, at[AT_COUNT] = {0}, finished_early = 0, committed = 0;
  for (int k = 0; k < KILLS; k++) {
    char tag[16];
    snprintf(tag, sizeof tag, "kill%02d", k);
    /* About one kill in five lands while the coordinator starts, one in
     * five as soon as a round is seen aggregating or receiving uploads
     * (windows of milliseconds that random delays seldom hit). The others
     * give it 50-900 ms, unless the federation runs ahead of the kills: to
     * spread them over all the rounds (and keep a few rounds for the end),
     * it then gets 20-200 ms, too short for a round. Whatever the window,
     * the kill comes before the last two rounds commit (startup kills
     * leave no time for a round). */
    long dice = k > 0 ? harness_rand_range(0, 9) : 9;
    int startup = dice < 2;
    int aim = dice == 2 ? AT_AGGREGATE : dice == 3 ? AT_UPLOADS : -1;
    int ahead = committed * KILLS >= (ROUNDS - 3) * k;
    long delay;
    if (startup) {
      server = spawn_server_now(tag, port, db);
      CU_ASSERT_FATAL(server > 0);
      delay = harness_rand_range(5, startup_ms + 20);
    } else {
      if (k > 0) {
        int again = port;
        server = harness_start_server(tag, SERVER_FLAGS, &again, db, sizeof db);
        if (server <= 0)
          fprintf(stderr, "kill loop: restart %d failed; see %s.err\n", k,
                  harness_path(tag));
        CU_ASSERT_FATAL(server > 0);
        CU_ASSERT_FATAL(again == port);
      }
      delay = ahead ? harness_rand_range(20, 200) : harness_rand_range(50, 900);
    }
    if (startup) {
      clock_sleep_ms(delay);
    } else if (aim >= 0) {
      delay = run_window(db, 3000, aim, ROUNDS - 2);
      long extra = harness_rand_range(0, 3);
      clock_sleep_ms(extra);
      delay += extra;
    } else {
      delay = run_window(db, delay, -1, ROUNDS - 2);
    }
    harness_signal(server, SIGKILL);
    int status = harness_wait(server, 10);
    if (status == 0) { /* it finished the federation before the kill */
      finished_early = 1;
      break;
    }
    CU_ASSERT_EQUAL(status, 128 + SIGKILL);
    kills++;
    int phase = AT_NO_ROUND;
    CU_ASSERT_EQUAL_FATAL(check_db(db, &h, k, &phase), 0);
    phase = startup ? AT_STARTUP : phase;
    at[phase]++;
    committed = 0;
    for (int i = 0; i < MAX_MODELS; i++)
      committed += h.committed[i] >= 0;
    fprintf(stderr, "kill %2d: after %3ld ms, at %s; %d rounds committed\n", k,
            delay, at_names[phase], committed);
  }
  CU_ASSERT(kills >= 20);
  CU_ASSERT(!finished_early);
  if (finished_early)
    fprintf(stderr,
            "kill loop: the federation finished after %d kills, "
            "before %d\n",
            kills, KILLS);

  /* Left alone, the federation finishes. */
  if (!finished_early) {
    int again = port;
    server = harness_start_server("final", SERVER_FLAGS, &again, db, sizeof db);
    CU_ASSERT_FATAL(server > 0);
    CU_ASSERT_EQUAL(harness_wait(server, 150), 0);
  }
  for (int i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 60), 0);
  CU_ASSERT_EQUAL(check_db(db, &h, kills + 1, NULL), 0);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  ROUNDS);
  /* One model per committed round plus the initial one: versions 0..ROUNDS,
   * each the child of the one before. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"), ROUNDS + 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT MIN(version) FROM models"), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT MAX(version) FROM models"), ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"
                                  " WHERE version > 0"
                                  " AND parent <> version - 1"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(DISTINCT r.model_version)"
                                  " FROM rounds r JOIN models m"
                                  " ON m.version = r.model_version"
                                  " AND m.round = r.id"
                                  " WHERE r.state = 'COMMITTED'"),
                  ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models m"
                                  " WHERE m.version > 0 AND NOT EXISTS"
                                  " (SELECT 1 FROM rounds r"
                                  " WHERE r.model_version = m.version"
                                  " AND r.state = 'COMMITTED')"),
                  0);
  /* Whatever did not commit failed, with the reason. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state"
                                  " NOT IN ('COMMITTED', 'FAILED')"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'FAILED'"
                                  " AND (reason IS NULL OR reason = '')"),
                  0);

  committed = (int)db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                   " WHERE state = 'COMMITTED'");
  int64_t failed = db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                   " WHERE state = 'FAILED'");
  fprintf(stderr, "kill loop: %d kills (", kills);
  for (int i = 0; i < AT_COUNT; i++)
    fprintf(stderr, "%s%s %d", i ? ", " : "", at_names[i], at[i]);
  fprintf(stderr,
          "), %d rounds committed, %" PRId64 " failed, %.1f s, seed %" PRIu64
          "\n",
          committed, failed, clock_mono_s() - t0, seed);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"SIGKILL at random moments loses nothing committed",
       test_sigkill_loop_keeps_every_commit},
  };
  return test_add_suite("kill loop", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
