/* Integration-test process helpers; see harness.h. Every process spawned is
 * recorded, and an atexit handler kills the ones still running, so a failed
 * assertion never leaves a server behind. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"

#define MAX_PROCS 64

static pid_t g_procs[MAX_PROCS];
static int g_nprocs;
static char g_dir[256];

static void kill_all(void) {
  for (int i = 0; i < g_nprocs; i++) {
    if (g_procs[i] > 0) {
      kill(g_procs[i], SIGKILL);
      waitpid(g_procs[i], NULL, 0);
      g_procs[i] = 0;
    }
  }
}

/* Removes the test folder (flat: databases, logs, port files) unless
 * COHORT_KEEP_TEST_DIR is set, for looking at logs after a failure. */
static void remove_dir(void) {
  if (getenv("COHORT_KEEP_TEST_DIR")) {
    fprintf(stderr, "test files kept in %s\n", g_dir);
    return;
  }
  /* Recursive: a coordinator keeps its round files in <db>.updates/. */
  test_tmpdir_remove(g_dir);
}

static void at_exit(void) {
  kill_all();
  remove_dir();
}

static void forget(pid_t pid) {
  for (int i = 0; i < g_nprocs; i++)
    if (g_procs[i] == pid)
      g_procs[i] = 0;
}

const char *harness_dir(void) {
  if (!g_dir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/cohort-it-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
      perror("mkdtemp");
      exit(2);
    }
    atexit(at_exit);
  }
  return g_dir;
}

const char *harness_path(const char *name) {
  static char slots[8][512];
  static int next;
  char *p = slots[next++ % 8];
  snprintf(p, sizeof slots[0], "%s/%s", harness_dir(), name);
  return p;
}

static void redirect(const char *path, int fd) {
  int f = open(path ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (f >= 0) {
    dup2(f, fd);
    close(f);
  }
}

pid_t harness_spawn(char *const argv[], const char *out_path,
                    const char *err_path) {
  harness_dir();
  if (g_nprocs == MAX_PROCS)
    return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    /* If the test itself dies (a crash skips its exit handler), its
     * servers and clients must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    redirect(out_path, STDOUT_FILENO);
    redirect(err_path, STDERR_FILENO);
    execv(argv[0], argv);
    _exit(127);
  }
  g_procs[g_nprocs++] = pid;
  return pid;
}

int harness_wait(pid_t pid, double seconds) {
  double end = clock_mono_s() + seconds;
  for (;;) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      forget(pid);
      if (WIFEXITED(status))
        return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (r < 0)
      return -1;
    if (clock_mono_s() >= end) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      forget(pid);
      return -1;
    }
    struct timespec nap = {0, 20 * 1000000L};
    nanosleep(&nap, NULL);
  }
}

void harness_signal(pid_t pid, int sig) {
  for (int i = 0; i < g_nprocs; i++)
    if (g_procs[i] == pid)
      kill(pid, sig);
}

int harness_stop(pid_t pid, double seconds) {
  harness_signal(pid, SIGTERM);
  return harness_wait(pid, seconds);
}

int harness_identity_key(uint8_t pub[SIGN_PUBLIC_LEN]) {
  sign_key *k = NULL;
  if (sign_key_generate(&k) != COHORT_OK)
    return -1;
  sign_key_public(k, pub);
  sign_key_free(k);
  return 0;
}

int harness_write_hex(const char *path, const uint8_t *bytes, size_t len) {
  char hex[2 * 256 + 1];
  if (len > 256)
    return -1;
  crypto_hex(bytes, len, hex);
  FILE *f = fopen(path, "wx");
  if (!f)
    return -1;
  int ok = fprintf(f, "%s\n", hex) > 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

int harness_identity_files(const sign_key *authority, const char *key_path,
                           const char *cert_path,
                           uint8_t pub[SIGN_PUBLIC_LEN]) {
  sign_key *k = NULL;
  uint8_t mine[SIGN_PUBLIC_LEN], cert[SIGN_CERT_LEN];
  char err[256];
  int rc = sign_key_generate(&k) == COHORT_OK &&
                   sign_key_save(k, key_path, err, sizeof err) == COHORT_OK
               ? 0
               : -1;
  if (!rc) {
    sign_key_public(k, mine);
    if (pub)
      memcpy(pub, mine, sizeof mine);
  }
  if (!rc && authority)
    rc = sign_certify(authority, mine, cert) == COHORT_OK
             ? harness_write_hex(cert_path, cert, sizeof cert)
             : -1;
  sign_key_free(k);
  return rc;
}

char *harness_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len - 1 == 0) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf)
    buf[len] = '\0';
  return buf;
}

pid_t harness_spawn_server(const char *tag, const char *flags, int port,
                           const char *db_path) {
  char port_file[512], out[512], err[512], listen[32], words[1024];
  snprintf(port_file, sizeof port_file, "%s/%s.port", harness_dir(), tag);
  snprintf(out, sizeof out, "%s/%s.out", harness_dir(), tag);
  snprintf(err, sizeof err, "%s/%s.err", harness_dir(), tag);
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  char *argv[64];
  int n = 0;
  argv[n++] = COHORT_SERVER_BIN;
  argv[n++] = "--listen";
  argv[n++] = listen;
  argv[n++] = "--port-file";
  argv[n++] = port_file;
  argv[n++] = "--db";
  argv[n++] = (char *)db_path;
  snprintf(words, sizeof words, "%s", flags ? flags : "");
  char *save = NULL;
  for (char *w = strtok_r(words, " ", &save); w && n < 63;
       w = strtok_r(NULL, " ", &save))
    argv[n++] = w;
  argv[n] = NULL;
  return harness_spawn(argv, out, err);
}

int harness_read_port(const char *path, double seconds) {
  double end = clock_mono_s() + seconds;
  for (;;) {
    char *text = harness_read_file(path);
    int port = text ? atoi(text) : 0;
    free(text);
    if (port > 0 || clock_mono_s() >= end)
      return port > 0 ? port : 0;
    struct timespec nap = {0, 20 * 1000000L};
    nanosleep(&nap, NULL);
  }
}

pid_t harness_start_server(const char *tag, const char *flags, int *port,
                           char *db_path, size_t db_len) {
  char port_file[512];
  if (!db_path[0])
    snprintf(db_path, db_len, "%s/%s.db", harness_dir(), tag);
  snprintf(port_file, sizeof port_file, "%s/%s.port", harness_dir(), tag);
  unlink(port_file);
  pid_t pid = harness_spawn_server(tag, flags, *port, db_path);
  if (pid < 0)
    return -1;
  for (int i = 0; i < 500; i++) { /* up to 10 s */
    char *text = harness_read_file(port_file);
    if (text) {
      *port = atoi(text);
      free(text);
      if (*port > 0)
        return pid;
    }
    if (waitpid(pid, NULL, WNOHANG) == pid) {
      forget(pid);
      return -1;
    }
    struct timespec nap = {0, 20 * 1000000L};
    nanosleep(&nap, NULL);
  }
  harness_signal(pid, SIGKILL);
  harness_wait(pid, 5);
  return -1;
}

pid_t harness_spawn_client(int port, const char *const flags[],
                           const char *out_path, const char *err_path) {
  char target[32];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  char *argv[64];
  int n = 0;
  argv[n++] = COHORT_CLIENT_BIN;
  argv[n++] = "--server";
  argv[n++] = target;
  for (; *flags; flags++) {
    if (n == 63)
      return -1;
    argv[n++] = (char *)*flags;
  }
  argv[n] = NULL;
  return harness_spawn(argv, out_path, err_path);
}

static uint64_t g_rng;

void harness_rng_seed(uint64_t seed) { g_rng = seed; }

long harness_rand_range(long lo, long hi) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull); /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return lo + (long)(z % (uint64_t)(hi - lo + 1));
}
