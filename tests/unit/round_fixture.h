/* The round engine's test fixture, shared by test_round and
 * test_round_codec: a temporary store with a logreg engine and registered
 * clients, driven directly (no network); fp32 updates and their uploads;
 * rows read back through a second SQLite connection. A suite that uses it
 * passes suite_init and suite_cleanup to test_add_suite. Not thread-safe:
 * one test at a time, as CUnit runs them. */
#ifndef COHORT_ROUND_FIXTURE_H
#define COHORT_ROUND_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cunit_main.h"
#include "round.h"
#include "sign.h"
#include "store.h"

#define NP 7850 /* logreg 784 -> 10 */
#define MODEL_BYTES (NP * 4)
#define ENROLL "enroll-secret-for-tests"
#define MAX_CLIENTS 6
/* The example count checkin() declares: above what the tests upload and
 * report, which it caps (round_bound.c). */
#define FX_DECLARED 1000

/* CUnit suite set-up and clean-up: log off (refusals and failed rounds are
 * expected) and a scratch folder for the fixtures' databases. */
int suite_init(void);
int suite_cleanup(void);

/* Sleeps s seconds (deadlines are real time). */
void sleep_s(double s);

/* ---- the fixture: a store, an engine, registered clients ---- */

typedef struct fixture {
  char path[256]; /* the database file, in the suite's folder */
  store *db;
  store_options opt; /* what the store was opened with (fx_init_with) */
  round_engine *e;
  round_config cfg;
  FILE *lines; /* round lines go here (a tmpfile) */
  int64_t id[MAX_CLIENTS];
  char token[MAX_CLIENTS][65];
  uint8_t key[MAX_CLIENTS][SIGN_PUBLIC_LEN]; /* identity n + 1 (fx_identity) */
} fixture;

/* Small, fast rounds: K = 2, M = 1, short timeouts, two rounds; first come,
 * first served (no selection window) and no offender exclusions. */
round_config default_config(void);

/* Test identity n (n >= 1): the Ed25519 key of the seed n, n, ..., n, so
 * that every run registers the same keys. fx_start's clients use 1 to
 * MAX_CLIENTS. The private key, when key is not NULL (free it with
 * sign_key_free), and the public key. */
void fx_identity(int n, sign_key **key, uint8_t pub[SIGN_PUBLIC_LEN]);

/* A Register with enrollment token `token`, platform "test" and the public
 * key pub (borrowed, 32 bytes), without a certificate. */
round_registration fx_registration(const char *token, const uint8_t *pub);
/* Adds to r the proof that it holds identity n's key (fx_identity), signed
 * now, in sig, which must outlive r; fx_prove_at signs time_ms instead. */
void fx_prove(round_registration *r, int n, uint8_t sig[SIGN_LEN]);
void fx_prove_at(round_registration *r, int n, int64_t time_ms,
                 uint8_t sig[SIGN_LEN]);

/* Creates f->e from f->cfg on f->db and adds ENROLL; prints the engine's
 * reason to stderr when it refuses. Returns COHORT_OK or its error. */
int new_engine(fixture *f);

/* A fresh store and the default configuration; no engine yet, so a test
 * can change f->cfg first. 0 or -1. */
int fx_init(fixture *f);
/* fx_init with store options (a VFS, a busy timeout), kept in f->opt. */
int fx_init_with(fixture *f, const store_options *opt);
/* Starts the engine with f->cfg and registers n clients (f->id, f->token,
 * f->key: identities 1 to n). 0 or -1. */
int fx_start(fixture *f, int n);
/* fx_init then fx_start. */
int fx_open(fixture *f, int n);
/* Frees the engine and the store and removes the database files. */
void fx_close(fixture *f);

#define FX_OPEN(f, n) CU_ASSERT_EQUAL_FATAL(fx_open(&(f), (n)), 0)
#define FX_INIT(f) CU_ASSERT_EQUAL_FATAL(fx_init(&(f)), 0)
#define FX_START(f, n) CU_ASSERT_EQUAL_FATAL(fx_start(&(f), (n)), 0)

/* Frees the engine without committing anything, as a crash would leave the
 * store, and starts a new one with f->cfg on the same store, as a restarted
 * coordinator does (fatal assertion if it refuses). */
void restart_engine(fixture *f);
/* Frees the engine, closes the store and opens both again with the same
 * options: a coordinator that stopped (on a store it could not write) and
 * was started again. Fatal assertion if either refuses. */
void restart_coordinator(fixture *f);

/* rounds.state of round as stored, written into buf (len bytes); "<none>"
 * when there is no such round. Returns buf. */
const char *round_state_in_db(fixture *f, int64_t round, char *buf, size_t len);

#define ASSERT_ROUND_STATE(f, r, want)                                         \
  do {                                                                         \
    char st_[32];                                                              \
    CU_ASSERT_STRING_EQUAL(round_state_in_db(&(f), (r), st_, sizeof st_),      \
                           (want));                                            \
  } while (0)

/* The integer that sql (one value) gives on f's database. */
int64_t count(fixture *f, const char *sql);

/* A statement on the fixture's database through a second connection (to
 * tamper with it as a disk fault or an operator might); blob, when not
 * NULL, is bound to ?1. Returns 0 or the SQLite error. */
int db_exec(const char *path, const char *sql, const void *blob, size_t len);

/* Model `version` (-1: the latest) from the store: its NP floats, its
 * MODEL_BYTES bytes and its digest (each may be NULL). 0, a store error,
 * or -1 for a model of another size. */
int stored_model(fixture *f, int64_t version, float *out, uint8_t *blob,
                 int64_t *got_version, char sha_hex[65]);
/* The engine's latest model, from the store, as floats. */
int latest_model(fixture *f, float *out, int64_t *version, char sha_hex[65]);

/* Bitwise equality of float arrays (so -0 and +0 differ, and NaN would
 * not equal itself by value but does by bits). */
int same_bits(const float *a, const float *b, size_t n);

/* The median of three floats (what the median strategy takes of three
 * updates). */
float middle_of_3(float a, float b, float c);

/* Nothing of an upload is stored: with two clients selected in round 1,
 * both participation rows are still SELECTED with no digest, no update is
 * kept, nothing counts as late, and no model or round changed. */
void assert_nothing_stored(fixture *f);

/* ---- updates (fp32, the default codec) ---- */

typedef struct update {
  float delta[NP];
  uint8_t blob[MODEL_BYTES]; /* delta as little-endian float32 */
  uint8_t sha[32];           /* of blob */
} update;

/* Writes u->blob and u->sha from u->delta. */
void encode(update *u);
/* A malloc'd update with a small delta of pattern kind (0, 1, 2, ...);
 * the caller frees it. */
update *make_update(int kind);

/* One chunk [off, off + len) of u for client's upload to round (named
 * send_chunk, not send: a global send would interpose on libc's). */
round_verdict send_chunk(fixture *f, int64_t client, int64_t round,
                         const update *u, uint64_t off, size_t len,
                         uint64_t examples, uint64_t *next, int *complete);
/* The whole update in one chunk; asserts complete/next agree with the
 * verdict. */
round_verdict send_all(fixture *f, int64_t client, int64_t round,
                       const update *u, uint64_t examples);

/* A check-in of client i with 100 examples and no attributes. */
round_verdict checkin(fixture *f, int i, checkin_result *r);

/* Ticks round r open, checks clients 0 .. n-1 in (each gets a task) and
 * ticks it to TRAINING (n must fill the selection). */
void start_round_n(fixture *f, int64_t r, int n);
/* start_round_n with clients 0 and 1. */
void start_round(fixture *f, int64_t r);

#endif
