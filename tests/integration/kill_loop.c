/* The SIGKILL machinery shared by the crash-consistency tests (see
 * kill_loop.h): the database checks after each kill and the loop that kills
 * the coordinator at random moments. */
#include "kill_loop.h"

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
#include "db_peek.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

static const char *const at_names[KILL_AT_COUNT] = {
    "startup", "no round",    "selection",     "training",
    "uploads", "aggregating", "between rounds"};

void kill_history_init(kill_history *h) {
  memset(h, 0, sizeof *h);
  for (int i = 0; i < KILL_MAX_ROUNDS; i++)
    h->committed[i] = -1;
}

int kill_history_committed(const kill_history *h) {
  int n = 0;
  for (int i = 0; i < KILL_MAX_ROUNDS; i++)
    n += h->committed[i] >= 0;
  return n;
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
  int phase = KILL_AT_NO_ROUND;
  if (sqlite3_prepare_v2(db,
                         "SELECT state, (SELECT COUNT(*) FROM participations p"
                         " WHERE p.round = r.id AND p.state = 'UPLOADED')"
                         " FROM rounds r ORDER BY id DESC LIMIT 1",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const char *state = (const char *)sqlite3_column_text(st, 0);
    state = state ? state : "";
    if (!strcmp(state, "OPEN"))
      phase = KILL_AT_SELECTION;
    else if (!strcmp(state, "TRAINING"))
      phase =
          sqlite3_column_int64(st, 1) > 0 ? KILL_AT_UPLOADS : KILL_AT_TRAINING;
    else if (!strcmp(state, "AGGREGATING"))
      phase = KILL_AT_AGGREGATE;
    else
      phase = KILL_AT_IDLE;
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
int kill_check_db(const char *path, kill_history *h, int kill_no, int ledger,
                  int *phase) {
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
  int seen_now[KILL_MAX_ROUNDS] = {0};
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
    if (!known && sha && h->n_models < KILL_MAX_ROUNDS) {
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
  int64_t now_committed[KILL_MAX_ROUNDS];
  for (int i = 0; i < KILL_MAX_ROUNDS; i++)
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
    if (id >= 0 && id < KILL_MAX_ROUNDS)
      now_committed[id] = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  st = NULL;
  for (int id = 0; id < KILL_MAX_ROUNDS; id++) {
    if (h->committed[id] < 0)
      continue;
    CHECK(now_committed[id] == h->committed[id],
          "round %d was COMMITTED with model %" PRId64 ", now %" PRId64, id,
          h->committed[id], now_committed[id]);
  }
  for (int id = 0; id < KILL_MAX_ROUNDS; id++)
    if (now_committed[id] >= 0)
      h->committed[id] = now_committed[id];

  /* The privacy ledger: a row, once written, never changes or goes away
   * (the epsilon spent is charged once); with a DP federation, every
   * committed training round has its row and every row is a committed
   * round's. */
  char now_ledger[KILL_MAX_ROUNDS][192];
  memset(now_ledger, 0, sizeof now_ledger);
  rc = sqlite3_prepare_v2(db,
                          "SELECT l.round, l.mode, l.noise_multiplier, l.clip,"
                          " l.sampling_rate, l.cohort_size, l.delta,"
                          " l.epsilon, r.state FROM privacy_ledger l"
                          " LEFT JOIN rounds r ON r.id = l.round",
                          -1, &st, NULL);
  CHECK(rc == SQLITE_OK, "reading the privacy ledger: %s", sqlite3_errmsg(db));
  while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    const char *state = (const char *)sqlite3_column_text(st, 8);
    CHECK(state && !strcmp(state, "COMMITTED"),
          "ledger row of round %" PRId64 ", which is %s", id,
          state ? state : "missing");
    if (id < 0 || id >= KILL_MAX_ROUNDS)
      continue;
    const char *mode = (const char *)sqlite3_column_text(st, 1);
    snprintf(now_ledger[id], sizeof now_ledger[id],
             "%s z=%.17g C=%.17g q=%.17g n=%lld delta=%.17g eps=%.17g",
             mode ? mode : "", sqlite3_column_double(st, 2),
             sqlite3_column_double(st, 3), sqlite3_column_double(st, 4),
             (long long)sqlite3_column_int64(st, 5),
             sqlite3_column_double(st, 6), sqlite3_column_double(st, 7));
  }
  sqlite3_finalize(st);
  st = NULL;
  for (int id = 0; id < KILL_MAX_ROUNDS; id++) {
    if (h->ledger[id][0])
      CHECK(!strcmp(h->ledger[id], now_ledger[id]),
            "round %d's ledger row was \"%s\", now \"%s\"", id, h->ledger[id],
            now_ledger[id][0] ? now_ledger[id] : "gone");
    if (ledger && now_committed[id] >= 0 && id > 0)
      CHECK(now_ledger[id][0], "committed round %d has no ledger row", id);
    if (now_ledger[id][0])
      memcpy(h->ledger[id], now_ledger[id], sizeof h->ledger[id]);
  }
out:
  sqlite3_close(db);
  return bad;
#undef CHECK
}

void kill_loop_run(const kill_loop_config *c) {
  double t0 = clock_mono_s();
  const char *env = getenv("COHORT_KILL_SEED");
  uint64_t seed = env && *env
                      ? strtoull(env, NULL, 0)
                      : ((uint64_t)time(NULL) << 16) ^ (uint64_t)getpid();
  harness_rng_seed(seed);
  fprintf(stderr,
          "\n%s: seed %" PRIu64 " (COHORT_KILL_SEED=%" PRIu64
          " repeats the timings)\n",
          c->tag, seed, seed);

  kill_history h;
  kill_history_init(&h);

  char tag0[32];
  snprintf(tag0, sizeof tag0, "%s00", c->tag);
  int port = 0;
  char db[512] = "";
  double t_start = clock_mono_s();
  pid_t server = harness_start_server(tag0, c->flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  /* How long a start takes here (sanitizers are slower): startup kills
   * fall within it. */
  long startup_ms = (long)((clock_mono_s() - t_start) * 1000);
  fprintf(stderr, "%s: the coordinator starts in %ld ms\n", c->tag, startup_ms);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);

  pid_t clients[16];
  CU_ASSERT_FATAL(c->clients <= 16);
  for (int i = 0; i < c->clients; i++) {
    char shard[16], log[64];
    snprintf(shard, sizeof shard, "%d/%d", i, c->clients);
    snprintf(log, sizeof log, "%s-client%d.err", c->tag, i);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    (char *)c->token,
                    "--data",
                    DATA_DIR,
                    "--shard",
                    shard,
                    "--limit",
                    (char *)c->limit,
                    "--seed",
                    "7",
                    "--threads",
                    "1",
                    NULL};
    clients[i] = harness_spawn(argv, NULL, harness_path(log));
    CU_ASSERT_FATAL(clients[i] > 0);
  }

  int kills = 0, at[KILL_AT_COUNT] = {0}, finished_early = 0, committed = 0;
  for (int k = 0; k < c->kills; k++) {
    char tag[32];
    snprintf(tag, sizeof tag, "%s%02d", c->tag, k);
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
    int aim = dice == 2 ? KILL_AT_AGGREGATE : dice == 3 ? KILL_AT_UPLOADS : -1;
    int ahead = committed * c->kills >= (c->rounds - 3) * k;
    long delay;
    if (startup) {
      server = harness_spawn_server(tag, c->flags, port, db);
      CU_ASSERT_FATAL(server > 0);
      delay = harness_rand_range(5, startup_ms + 20);
    } else {
      if (k > 0) {
        int again = port;
        server = harness_start_server(tag, c->flags, &again, db, sizeof db);
        if (server <= 0)
          fprintf(stderr, "%s: restart %d failed; see %s.err\n", c->tag, k,
                  harness_path(tag));
        CU_ASSERT_FATAL(server > 0);
        CU_ASSERT_FATAL(again == port);
      }
      delay = ahead ? harness_rand_range(20, 200) : harness_rand_range(50, 900);
    }
    if (startup) {
      clock_sleep_ms(delay);
    } else if (aim >= 0) {
      delay = run_window(db, 3000, aim, c->rounds - 2);
      long extra = harness_rand_range(0, 3);
      clock_sleep_ms(extra);
      delay += extra;
    } else {
      delay = run_window(db, delay, -1, c->rounds - 2);
    }
    harness_signal(server, SIGKILL);
    int status = harness_wait(server, 10);
    if (status == 0) { /* it finished the federation before the kill */
      finished_early = 1;
      break;
    }
    CU_ASSERT_EQUAL(status, 128 + SIGKILL);
    kills++;
    int phase = KILL_AT_NO_ROUND;
    CU_ASSERT_EQUAL_FATAL(kill_check_db(db, &h, k, c->ledger, &phase), 0);
    phase = startup ? KILL_AT_STARTUP : phase;
    at[phase]++;
    committed = kill_history_committed(&h);
    fprintf(stderr, "kill %2d: after %3ld ms, at %s; %d rounds committed\n", k,
            delay, at_names[phase], committed);
  }
  CU_ASSERT(kills == c->kills);
  CU_ASSERT(!finished_early);
  if (finished_early)
    fprintf(stderr,
            "%s: the federation finished after %d kills, "
            "before %d\n",
            c->tag, kills, c->kills);

  /* Left alone, the federation finishes. */
  if (!finished_early) {
    char final_tag[32];
    snprintf(final_tag, sizeof final_tag, "%s-final", c->tag);
    int again = port;
    server = harness_start_server(final_tag, c->flags, &again, db, sizeof db);
    CU_ASSERT_FATAL(server > 0);
    CU_ASSERT_EQUAL(harness_wait(server, 150), 0);
  }
  for (int i = 0; i < c->clients; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 60), 0);
  CU_ASSERT_EQUAL(kill_check_db(db, &h, kills + 1, c->ledger, NULL), 0);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'COMMITTED'"),
                  c->rounds);
  /* One model per committed round plus the initial one: versions 0 to
   * c->rounds, each the child of the one before. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"),
                  c->rounds + 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT MIN(version) FROM models"), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT MAX(version) FROM models"),
                  c->rounds);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models"
                                  " WHERE version > 0"
                                  " AND parent <> version - 1"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(DISTINCT r.model_version)"
                                  " FROM rounds r JOIN models m"
                                  " ON m.version = r.model_version"
                                  " AND m.round = r.id"
                                  " WHERE r.state = 'COMMITTED'"),
                  c->rounds);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM models m"
                                  " WHERE m.version > 0 AND NOT EXISTS"
                                  " (SELECT 1 FROM rounds r"
                                  " WHERE r.model_version = m.version"
                                  " AND r.state = 'COMMITTED')"),
                  0);
  /* A DP federation charged each committed round once, in its own row,
   * epsilon growing with every round. */
  if (c->ledger) {
    CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM privacy_ledger"),
                    c->rounds);
    CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM privacy_ledger a"
                                    " JOIN privacy_ledger b ON b.round >"
                                    " a.round AND b.epsilon <= a.epsilon"),
                    0);
  }
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
  fprintf(stderr, "%s: %d kills (", c->tag, kills);
  for (int i = 0; i < KILL_AT_COUNT; i++)
    fprintf(stderr, "%s%s %d", i ? ", " : "", at_names[i], at[i]);
  fprintf(stderr,
          "), %d rounds committed, %" PRId64 " failed, %.1f s, seed %" PRIu64
          "\n",
          committed, failed, clock_mono_s() - t0, seed);
}
