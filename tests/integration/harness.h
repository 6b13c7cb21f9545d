/* Helpers for integration tests that run real cohort-server and
 * cohort-client processes on 127.0.0.1: spawning with output to files,
 * waiting with timeouts, and killing everything still running at exit. */
#ifndef COHORT_HARNESS_H
#define COHORT_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sign.h"

/* A fresh temporary folder for this test program (created once; removed
 * at exit unless COHORT_KEEP_TEST_DIR is set). */
const char *harness_dir(void);

/* Starts argv[0] with stdout and stderr sent to the given files (NULL:
 * /dev/null). The process is remembered and killed at exit if still
 * running. Returns its pid, or -1. */
pid_t harness_spawn(char *const argv[], const char *out_path,
                    const char *err_path);

/* Waits up to seconds for pid to exit. Returns its exit status (0-255), 128
 * + signal if killed by one, or -1 on timeout (the process is then killed
 * with SIGKILL and reaped). */
int harness_wait(pid_t pid, double seconds);

/* Sends sig to pid (if it is still ours and running). */
void harness_signal(pid_t pid, int sig);

/* Stops pid as an operator would: SIGTERM, then harness_wait(pid, seconds).
 * Returns what harness_wait does (0 for a clean stop). */
int harness_stop(pid_t pid, double seconds);

/* Starts cohort-server with the space-separated flags, --port-file and
 * --db in harness_dir() named after tag, and waits for it to serve. *port
 * is the port to listen on (0: any free one) and receives the bound port;
 * db_path, when empty, receives "<dir>/<tag>.db", otherwise names the
 * database to reuse (a restart). Returns the pid, or -1. */
pid_t harness_start_server(const char *tag, const char *flags, int *port,
                           char *db_path, size_t db_len);

/* The port a server wrote to path (--port-file, --http-port-file), read
 * every 20 ms for up to seconds: the port, or 0 if none came. */
int harness_read_port(const char *path, double seconds);

/* Starts cohort-client with --server 127.0.0.1:port and then flags (a
 * NULL-terminated list, at most 60), its output as harness_spawn's.
 * Returns its pid, or -1. */
pid_t harness_spawn_client(int port, const char *const flags[],
                           const char *out_path, const char *err_path);

/* Starts cohort-server as harness_start_server does (the same files in
 * harness_dir(), port 0 for any free one, the database at db_path) but
 * returns at once, without waiting for it to serve: for a test that kills
 * it while it opens the store. Returns the pid, or -1. */
pid_t harness_spawn_server(const char *tag, const char *flags, int port,
                           const char *db_path);

/* Seeded pseudo-random choices for tests that vary timing (kill instants,
 * pauses): print the seed so that a failure reproduces. */
void harness_rng_seed(uint64_t seed);
long harness_rand_range(long lo, long hi); /* inclusive */

/* ---- identities (common/crypto/sign.h) for tests that register ---- */

/* A fresh identity public key, for a Register the test builds itself (the
 * private key is dropped: such tests sign nothing). 0 or -1. */
int harness_identity_key(uint8_t pub[SIGN_PUBLIC_LEN]);
/* A new identity key saved at key_path (PEM, 0600) and, when authority is
 * not NULL, its certificate by authority written to cert_path as hex (as
 * `cohort enroll` makes them); pub (may be NULL) gets the public key. 0 or
 * -1. */
int harness_identity_files(const sign_key *authority, const char *key_path,
                           const char *cert_path, uint8_t pub[SIGN_PUBLIC_LEN]);
/* len bytes as lower-case hex and a newline, into a new file. 0 or -1. */
int harness_write_hex(const char *path, const uint8_t *bytes, size_t len);

/* Reads a whole file into a malloc'd NUL-terminated string (NULL on error). */
char *harness_read_file(const char *path);

/* Path of a file in harness_dir(); returns a static buffer per call slot
 * (up to 8 live at once). */
const char *harness_path(const char *name);

#endif
