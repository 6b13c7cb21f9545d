/* Per-address connection and reset limits at accept time (conn_guard.h).
 *
 * What is counted: each accepted connection of a guarded listener is
 * recorded by its descriptor, with the socket's inode. gRPC closes sockets
 * without telling us, so a record can outlive its socket; it leaves its
 * address's count when its descriptor number is accepted again, or when
 * the address reaches its limit and its records are checked (fstat: gone,
 * or another inode). A check costs a scan of the records, so an address
 * at its limit is checked at most every RECHECK_MS. */
#define _GNU_SOURCE
#include "conn_guard.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "log.h"
#include "rpc_peer.h"

#define BUCKETS 1024
#define RECHECK_MS 100
/* How often records that hold nothing are looked for and freed. */
#define SWEEP_MS 1000
/* Log lines about refusals, at most one a second. */
#define LOG_EVERY_MS 1000

typedef struct addr_rec {
  rpc_peer_key key;
  int open;
  int64_t ban_until_ms;
  double tokens; /* the reset budget */
  int64_t refilled_ms;
  int64_t checked_ms;
  struct addr_rec *next;
} addr_rec;

/* Which socket a descriptor is: numbers are reused, inodes are not
 * while the socket is open. */
typedef struct sock_id {
  dev_t dev;
  ino_t ino;
} sock_id;

typedef struct fd_rec {
  addr_rec *addr; /* NULL: not a counted connection */
  sock_id id;
} fd_rec;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_armed;
/* The listeners guarded: sockets listening on the port at start. */
#define MAX_LISTENERS 16
static sock_id g_listeners[MAX_LISTENERS];
static int g_n_listeners;
static conn_guard_limits g_lim;
static addr_rec *g_addrs[BUCKETS];
static fd_rec *g_fds;
static size_t g_n_fds;
static conn_guard_stats g_stats;
static int64_t g_logged_ms;
static long g_unlogged;
static int64_t g_swept_ms;

static int64_t now_ms(void) { return (int64_t)(clock_mono_s() * 1000.0); }

static int sock_id_of(int fd, sock_id *id) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return -1;
  *id = (sock_id){.dev = st.st_dev, .ino = st.st_ino};
  return 0;
}

static int sock_id_equal(const sock_id *a, const sock_id *b) {
  return a->dev == b->dev && a->ino == b->ino;
}

static size_t bucket_of(const rpc_peer_key *key) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (int i = 0; i < 16; i++)
    h = (h ^ key->b[i]) * 16777619u;
  return h % BUCKETS;
}

/* Under g_mu. create: add a record when there is none (NULL if out of
 * memory). */
static addr_rec *addr_find(const rpc_peer_key *key, int create) {
  addr_rec **head = &g_addrs[bucket_of(key)];
  for (addr_rec *a = *head; a; a = a->next)
    if (memcmp(a->key.b, key->b, sizeof key->b) == 0)
      return a;
  if (!create)
    return NULL;
  addr_rec *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  a->key = *key;
  a->tokens = g_lim.resets_per_second;
  a->refilled_ms = now_ms();
  a->next = *head;
  *head = a;
  g_stats.addresses++;
  return a;
}

/* Under g_mu: a's budget refilled to now. */
static void refill(addr_rec *a, int64_t now) {
  double burst = g_lim.resets_per_second;
  a->tokens += (double)(now - a->refilled_ms) * burst / 1000.0;
  if (a->tokens > burst)
    a->tokens = burst;
  a->refilled_ms = now;
}

/* Under g_mu: 1 when a holds nothing that a fresh record would not: no
 * connection, no ban, a full reset budget. Freeing a record whose budget
 * is spent would give its address a new one: closing its connection and
 * connecting again would reset as many calls as it likes. */
static int addr_idle(addr_rec *a, int64_t now) {
  if (a->open > 0 || a->ban_until_ms > now)
    return 0;
  refill(a, now);
  return a->tokens >= g_lim.resets_per_second;
}

static void addr_free(addr_rec **link) {
  addr_rec *a = *link;
  *link = a->next;
  free(a);
  g_stats.addresses--;
}

/* Under g_mu: frees a record that holds nothing (addr_idle). */
static void addr_maybe_drop(addr_rec *a, int64_t now) {
  if (!addr_idle(a, now))
    return;
  addr_rec **p = &g_addrs[bucket_of(&a->key)];
  while (*p != a)
    p = &(*p)->next;
  addr_free(p);
}

/* Under g_mu, at most every SWEEP_MS: frees the records that came to hold
 * nothing while no connection of theirs was looked at (a ban or a spent
 * budget that has run out since), so the table holds the addresses with
 * connections and those banned or resetting lately, not every address
 * ever seen. */
static void addr_sweep(int64_t now) {
  if (now - g_swept_ms < SWEEP_MS)
    return;
  g_swept_ms = now;
  for (size_t i = 0; i < BUCKETS; i++)
    for (addr_rec **p = &g_addrs[i]; *p;)
      if (addr_idle(*p, now))
        addr_free(p);
      else
        p = &(*p)->next;
}

/* Under g_mu: takes fd's record out of its address's count; the
 * address. */
static addr_rec *fd_unlink(size_t fd) {
  addr_rec *a = g_fds[fd].addr;
  g_fds[fd].addr = NULL;
  a->open--;
  g_stats.open--;
  return a;
}

static void fd_forget(int fd, int64_t now) {
  if (fd >= 0 && (size_t)fd < g_n_fds && g_fds[fd].addr)
    addr_maybe_drop(fd_unlink((size_t)fd), now);
}

/* 1 when fd is still the socket its record was made for. */
static int fd_current(int fd) {
  sock_id id;
  return sock_id_of(fd, &id) == 0 && sock_id_equal(&id, &g_fds[fd].id);
}

/* Under g_mu: drops a's records whose sockets are gone. */
static void addr_recheck(addr_rec *a, int64_t now) {
  a->checked_ms = now;
  for (size_t fd = 0; fd < g_n_fds; fd++)
    if (g_fds[fd].addr == a && !fd_current((int)fd))
      fd_unlink(fd);
}

static int fd_record(int fd, addr_rec *a) {
  if ((size_t)fd >= g_n_fds) {
    size_t n = g_n_fds ? g_n_fds : 1024;
    while (n <= (size_t)fd)
      n *= 2;
    fd_rec *grown = realloc(g_fds, n * sizeof *grown);
    if (!grown)
      return -1;
    memset(grown + g_n_fds, 0, (n - g_n_fds) * sizeof *grown);
    g_fds = grown;
    g_n_fds = n;
  }
  if (sock_id_of(fd, &g_fds[fd].id) != 0)
    return -1;
  g_fds[fd].addr = a;
  a->open++;
  g_stats.open++;
  return 0;
}

typedef enum verdict { ADMIT, OVER_LIMIT, BANNED } verdict;

/* Under g_mu: whether the connection fd from ss may stay, counting it if
 * so. Out of memory admits it uncounted: the guard never refuses honest
 * clients for its own lack of memory. */
static verdict admit(int fd, const struct sockaddr_storage *ss,
                     rpc_peer_key *key, int *open) {
  int64_t now = now_ms();
  fd_forget(fd, now); /* the number's last socket is closed */
  addr_sweep(now);
  if (rpc_peer_key_of_sockaddr((const struct sockaddr *)ss, key) != 0)
    return ADMIT;
  addr_rec *a = addr_find(key, 1);
  if (!a)
    return ADMIT;
  verdict v = ADMIT;
  if (a->ban_until_ms > now) {
    v = BANNED;
  } else if (g_lim.per_address && a->open >= g_lim.per_address) {
    if (now - a->checked_ms >= RECHECK_MS)
      addr_recheck(a, now);
    if (a->open >= g_lim.per_address)
      v = OVER_LIMIT;
  }
  *open = a->open;
  if (v == ADMIT && fd_record(fd, a) != 0)
    addr_maybe_drop(a, now);
  if (v == OVER_LIMIT)
    g_stats.refused_per_address++;
  else if (v == BANNED)
    g_stats.refused_banned++;
  return v;
}

static void log_refusal(verdict v, const rpc_peer_key *key, int open) {
  int64_t now = now_ms();
  pthread_mutex_lock(&g_mu);
  long before = g_unlogged;
  int due = now - g_logged_ms >= LOG_EVERY_MS;
  if (due) {
    g_logged_ms = now;
    g_unlogged = 0;
  } else {
    g_unlogged++;
  }
  int limit = g_lim.per_address;
  pthread_mutex_unlock(&g_mu);
  if (!due)
    return;
  char who[RPC_PEER_TEXT_MAX];
  rpc_peer_key_text(key, who, sizeof who);
  if (v == OVER_LIMIT)
    log_warn("refused a connection from %s: it has %d open, the limit per "
             "address (--max-connections-per-address %d); %ld more refused "
             "since the last such line",
             who, open, limit, before);
  else
    log_warn("refused a connection from %s: it is banned for resetting "
             "calls (--max-resets-per-address); %ld more refused since the "
             "last such line",
             who, before);
}

/* The port a socket is bound to, or -1. */
static int port_of(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
    return -1;
  if (ss.ss_family == AF_INET)
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  return -1;
}

/* Under g_mu: 1 when lfd is one of the guarded listeners. By the socket,
 * not its port: another listener on the same port number at another
 * address (the HTTP side port, say) is not gRPC's. */
static int guarded(int lfd) {
  sock_id id;
  if (sock_id_of(lfd, &id) != 0)
    return 0;
  for (int i = 0; i < g_n_listeners; i++)
    if (sock_id_equal(&g_listeners[i], &id))
      return 1;
  return 0;
}

/* Under g_mu: records the sockets listening on port now (gRPC's, bound
 * and listening once rpc_server_start has returned); how many. */
static int find_listeners(int port) {
  g_n_listeners = 0;
  struct rlimit rl;
  int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536
                ? (int)rl.rlim_cur
                : 65536;
  for (int fd = 0; fd < max && g_n_listeners < MAX_LISTENERS; fd++) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
        listening && port_of(fd) == port &&
        sock_id_of(fd, &g_listeners[g_n_listeners]) == 0)
      g_n_listeners++;
  }
  return g_n_listeners;
}

/* libc's accept4, as every library of the process calls it. A connection
 * the guard refuses is closed at once (its client sees the connection
 * reset, and retries) and the next one taken, so that the listener is left
 * drained as its caller expects. */
__attribute__((visibility("default"))) int
accept4(int lfd, struct sockaddr *addr, socklen_t *addr_len, int flags) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    int fd = (int)syscall(SYS_accept4, lfd, &ss, &len, flags);
    if (fd < 0)
      return -1;
    if (addr && addr_len) {
      memcpy(addr, &ss, *addr_len < len ? *addr_len : len);
      *addr_len = len;
    }
    if (!atomic_load(&g_armed))
      return fd;
    verdict v = ADMIT;
    rpc_peer_key key;
    int open = 0;
    pthread_mutex_lock(&g_mu);
    if (guarded(lfd))
      v = admit(fd, &ss, &key, &open);
    else
      fd_forget(fd, now_ms()); /* another listener's: not counted */
    pthread_mutex_unlock(&g_mu);
    if (v == ADMIT)
      return fd;
    syscall(SYS_close, fd);
    log_refusal(v, &key, open);
  }
}

/* Ends a connection under gRPC's feet, the descriptor staying gRPC's to
 * close. connect() to AF_UNSPEC disconnects a TCP socket at once: what the
 * client sent and gRPC has not read yet is dropped (shutdown() would leave
 * it to be read, a flood still queued in the socket), the client gets a
 * reset, and gRPC's next read fails. */
static int abort_socket(int fd) {
  struct sockaddr unspec;
  memset(&unspec, 0, sizeof unspec);
  unspec.sa_family = AF_UNSPEC;
  int ok = connect(fd, &unspec, sizeof unspec) == 0;
  return shutdown(fd, SHUT_RDWR) == 0 || ok;
}

/* Under g_mu: bans a and aborts its connections; how many. */
static int ban(addr_rec *a, int64_t now) {
  a->ban_until_ms = now + g_lim.ban_ms;
  a->tokens = g_lim.resets_per_second;
  g_stats.bans++;
  int closed = 0;
  /* A descriptor closed and given to another socket between the check
   * and the abort would cut that one instead: its client reconnects. */
  for (size_t fd = 0; fd < g_n_fds; fd++)
    if (g_fds[fd].addr == a && fd_current((int)fd) && abort_socket((int)fd))
      closed++;
  return closed;
}

void conn_guard_call(void *ctx, const char *peer, rpc_call_event ev) {
  (void)ctx;
  rpc_peer_key key;
  if (!atomic_load(&g_armed) || !g_lim.resets_per_second ||
      rpc_peer_key_of_name(peer, &key) != 0)
    return;
  int64_t now = now_ms();
  int closed = -1;
  pthread_mutex_lock(&g_mu);
  addr_rec *a = addr_find(&key, 0);
  if (a && a->ban_until_ms <= now) {
    /* A settled call gives back what it took, the refill capping the
     * budget: dropping the token when the refill since the call's headers
     * had given part of it back already would let honest calls drain it. */
    if (ev == RPC_CALL_SETTLED)
      a->tokens += 1;
    refill(a, now);
    if (ev == RPC_CALL_ARRIVED && (a->tokens -= 1) < 0)
      closed = ban(a, now);
  }
  pthread_mutex_unlock(&g_mu);
  if (closed < 0)
    return;
  char who[RPC_PEER_TEXT_MAX];
  rpc_peer_key_text(&key, who, sizeof who);
  log_warn("%s has more than %d calls without their request message "
           "(reset or left by the client; --max-resets-per-address): its %d "
           "connections are closed and it is refused new ones for %d ms",
           who, g_lim.resets_per_second, closed, g_lim.ban_ms);
}

int conn_guard_start(int port, const conn_guard_limits *lim, char *err,
                     size_t err_len) {
  if (port <= 0 || lim->per_address < 0 || lim->resets_per_second < 0 ||
      lim->ban_ms < 0) {
    snprintf(err, err_len, "connection guard: bad port or negative limit");
    return COHORT_EINVAL;
  }
  /* The definition above must be the one libgrpc reaches. */
  if (dlsym(RTLD_DEFAULT, "accept4") != (void *)accept4) {
    snprintf(err, err_len,
             "the per-address connection limits need this program's accept4 "
             "to come before libc's, and it does not (a static build?)");
    return COHORT_EINVAL;
  }
  pthread_mutex_lock(&g_mu);
  int found = find_listeners(port);
  g_lim = *lim;
  pthread_mutex_unlock(&g_mu);
  if (!found) {
    snprintf(err, err_len, "connection guard: no socket listens on port %d",
             port);
    return COHORT_EINVAL;
  }
  atomic_store(&g_armed, 1);
  return COHORT_OK;
}

void conn_guard_stop(void) {
  atomic_store(&g_armed, 0);
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < BUCKETS; i++) {
    addr_rec *a = g_addrs[i];
    while (a) {
      addr_rec *next = a->next;
      free(a);
      a = next;
    }
    g_addrs[i] = NULL;
  }
  free(g_fds);
  g_fds = NULL;
  g_n_fds = 0;
  g_n_listeners = 0;
  memset(&g_stats, 0, sizeof g_stats);
  pthread_mutex_unlock(&g_mu);
}

void conn_guard_stats_get(conn_guard_stats *out) {
  pthread_mutex_lock(&g_mu);
  *out = g_stats;
  pthread_mutex_unlock(&g_mu);
}
