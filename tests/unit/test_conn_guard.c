/* The connection guard (server/conn_guard.h) on real loopback sockets:
 * this program links it, so its accept4() is the one every call here
 * reaches, as gRPC's does in cohort-server. An address over its
 * connection limit has the extra connections closed as they are accepted,
 * others are not affected, a closed connection frees its place; an
 * address whose calls arrive and never settle (a rapid reset) is banned,
 * its open connection aborted and new ones refused until the ban ends;
 * honest calls, each settled, never spend the budget. */
#define _GNU_SOURCE
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cohort_status.h"
#include "conn_guard.h"
#include "cunit_main.h"

static void sleep_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* A listener on addr ("127.0.0.1") and *port (0: a free one, then set). */
static int listener_at(const char *addr, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(*port)};
  inet_pton(AF_INET, addr, &a.sin_addr);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(fd, 64) != 0 || getsockname(fd, (struct sockaddr *)&a, &len))
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

static int listener(int *port) {
  *port = 0;
  return listener_at("127.0.0.1", port);
}

/* A listener on 127.0.0.1 that the guard guards with lim. */
static int guarded_listener(const conn_guard_limits *lim, int *port) {
  int lfd = listener(port);
  char err[256];
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(conn_guard_start(*port, lim, err, sizeof err),
                        COHORT_OK);
  return lfd;
}

/* A client connection to dst:port from source address src
 * ("127.0.0.2"). */
static int dial_to(const char *src, const char *dst, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in s = {.sin_family = AF_INET};
  struct sockaddr_in d = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, src, &s.sin_addr);
  inet_pton(AF_INET, dst, &d.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr *)&s, sizeof s) != 0 ||
      connect(fd, (struct sockaddr *)&d, sizeof d) != 0)
    return -1;
  return fd;
}

static int dial(const char *src, int port) {
  return dial_to(src, "127.0.0.1", port);
}

/* What the listener's owner gets: the connections the guard admits, as
 * gRPC would take them (nonblocking, until EAGAIN). */
static int accept_all(int lfd, int *out, int max) {
  int n = 0;
  sleep_ms(50); /* the handshakes are done */
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK);
    if (fd < 0) {
      CU_ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
      return n;
    }
    CU_ASSERT(len == sizeof(struct sockaddr_in));
    if (n < max)
      out[n++] = fd;
    else
      close(fd);
  }
}

/* 1 when the client's connection was closed or reset by the other side
 * within ms. */
static int dropped_within(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) != 1)
    return 0;
  char b;
  return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

static int dropped(int fd) { return dropped_within(fd, 1000); }

static void peer_name(int client, char *out, size_t len) {
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  char ip[INET_ADDRSTRLEN];
  getsockname(client, (struct sockaddr *)&a, &alen);
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  snprintf(out, len, "ipv4:%s:%d", ip, ntohs(a.sin_port));
}

/* One connection from src to the guarded lfd: the client's end, the
 * server's in *s, and the peer name gRPC would give its calls in peer. */
static int connect_one(const char *src, int lfd, int port, int *s,
                       char peer[64]) {
  int c = dial(src, port);
  CU_ASSERT_EQUAL_FATAL(accept_all(lfd, s, 1), 1);
  peer_name(c, peer, 64);
  return c;
}

static void test_connection_limit(void) {
  int port, other_port;
  int other = listener(&other_port);
  CU_ASSERT_FATAL(other >= 0);
  conn_guard_limits lim = {.per_address = 2};
  int lfd = guarded_listener(&lim, &port);
  int c[4], s[8];
  for (int i = 0; i < 3; i++)
    c[i] = dial("127.0.0.2", port);
  c[3] = dial("127.0.0.3", port);
  CU_ASSERT_FATAL(c[0] >= 0 && c[1] >= 0 && c[2] >= 0 && c[3] >= 0);
  /* Two of 127.0.0.2's and 127.0.0.3's one; the third closed. */
  int n = accept_all(lfd, s, 8);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT(dropped(c[2]));
  CU_ASSERT_FALSE(dropped(c[0]));
  conn_guard_stats st;
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.refused_per_address, 1);
  CU_ASSERT_EQUAL(st.open, 3);
  /* Its connection closed, an address gets its place back, also while
   * the descriptor's number holds another file (the record is checked
   * against the socket's inode). */
  close(s[0]);
  FILE *hold = fopen("/dev/null", "r");
  close(c[0]);
  sleep_ms(150);
  int again = dial("127.0.0.2", port);
  int s2[2];
  CU_ASSERT_EQUAL(accept_all(lfd, s2, 2), 1);
  /* Another listener's connections are not counted: one on another port,
   * and one made after the start on the guarded port number at another
   * address (as the HTTP side port could be). */
  int same_port = port;
  int same = listener_at("127.0.0.7", &same_port);
  CU_ASSERT_FATAL(same >= 0);
  int ports[2] = {other_port, port}, lfds[2] = {other, same};
  for (int k = 0; k < 2; k++) {
    int o[3], so[3];
    for (int i = 0; i < 3; i++) {
      o[i] = dial_to("127.0.0.2", k ? "127.0.0.7" : "127.0.0.1", ports[k]);
      CU_ASSERT(o[i] >= 0);
    }
    CU_ASSERT_EQUAL(accept_all(lfds[k], so, 3), 3);
    for (int i = 0; i < 3; i++) {
      close(o[i]);
      close(so[i]);
    }
  }
  close(same);
  conn_guard_stop();
  if (hold)
    fclose(hold);
  close(again);
  close(s2[0]);
  for (int i = 1; i < 4; i++)
    close(c[i]);
  for (int i = 1; i < n; i++)
    close(s[i]);
  close(lfd);
  close(other);
}

static void test_reset_budget(void) {
  int port, s;
  conn_guard_limits lim = {.resets_per_second = 8, .ban_ms = 400};
  int lfd = guarded_listener(&lim, &port);
  char peer[64];
  int c = connect_one("127.0.0.4", lfd, port, &s, peer);
  /* Honest calls settle: a thousand of them spend nothing. */
  for (int i = 0; i < 1000; i++) {
    conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
    conn_guard_call(NULL, peer, RPC_CALL_SETTLED);
  }
  /* Also when the budget refills a little between a call's headers and
   * its message: the call gives back what it took (up to the budget). */
  for (int i = 0; i < 10; i++) {
    conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
    sleep_ms(3);
    conn_guard_call(NULL, peer, RPC_CALL_SETTLED);
  }
  /* As many unsettled as the budget are allowed, too. */
  for (int i = 0; i < 8; i++)
    conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
  conn_guard_stats st;
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.bans, 0);
  /* Not waiting long: the budget refills at 8 a second. */
  CU_ASSERT_FALSE(dropped_within(c, 20));
  /* One more: banned, its connection aborted, a new one refused. */
  conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.bans, 1);
  CU_ASSERT(dropped(c));
  char b;
  errno = 0;
  CU_ASSERT(recv(s, &b, 1, MSG_DONTWAIT) <= 0 && errno != EAGAIN);
  int c2 = dial("127.0.0.4", port), s2;
  CU_ASSERT_EQUAL(accept_all(lfd, &s2, 1), 0);
  CU_ASSERT(dropped(c2));
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.refused_banned, 1);
  /* Another address is not banned; the ban ends. */
  int c3 = dial("127.0.0.5", port), s3;
  CU_ASSERT_EQUAL(accept_all(lfd, &s3, 1), 1);
  sleep_ms(450);
  int c4 = dial("127.0.0.4", port), s4;
  CU_ASSERT_EQUAL(accept_all(lfd, &s4, 1), 1);
  conn_guard_stop();
  int fds[] = {c, s, c2, c3, s3, c4, s4, lfd};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    close(fds[i]);
}

/* Fills the free descriptor numbers below fd with /dev/null, so that the
 * next one to be freed and taken again is the lowest; how many (their
 * numbers in out). */
static int fill_below(int fd, int *out, int max) {
  int n = 0;
  for (int f; n < max && (f = open("/dev/null", O_RDONLY)) >= 0;) {
    if (f > fd) {
      close(f);
      break;
    }
    out[n++] = f;
  }
  return n;
}

/* A client that spent its address's budget, closed its connection and
 * connects again has spent it still: its new connection takes the old
 * one's descriptor number, where the guard forgets the old connection and
 * (before) the address with it, budget and all. */
static void test_budget_outlives_connections(void) {
  int port, s;
  conn_guard_limits lim = {.resets_per_second = 2, .ban_ms = 400};
  int lfd = guarded_listener(&lim, &port);
  char peer[64];
  int c = connect_one("127.0.0.6", lfd, port, &s, peer);
  for (int i = 0; i < 2; i++)
    conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
  close(c);
  int holes[64];
  int n_holes = fill_below(s, holes, 64);
  int c2 = dial("127.0.0.6", port), s2;
  close(s);
  CU_ASSERT_EQUAL_FATAL(accept_all(lfd, &s2, 1), 1);
  CU_ASSERT_EQUAL(s2, s); /* the old connection's number */
  conn_guard_stats st;
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.open, 1);
  CU_ASSERT_EQUAL(st.bans, 0);
  /* Well within the half second a token takes to come back. */
  peer_name(c2, peer, sizeof peer);
  conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.bans, 1);
  CU_ASSERT(dropped(c2));
  conn_guard_stop();
  for (int i = 0; i < n_holes; i++)
    close(holes[i]);
  close(c2);
  close(s2);
  close(lfd);
}

/* The guard keeps records of the addresses with connections, bans, or a
 * budget still refilling, and frees the rest, also those whose ban ended
 * after their connections were gone: an attacker with many addresses (an
 * IPv6 /48 has 65,536 /64s) cannot grow the table by getting each
 * banned. */
static void test_records_freed(void) {
  int port, s;
  conn_guard_limits lim = {.resets_per_second = 2, .ban_ms = 200};
  int lfd = guarded_listener(&lim, &port);
  char peer[64];
  int c = connect_one("127.0.0.7", lfd, port, &s, peer);
  for (int i = 0; i < 3; i++)
    conn_guard_call(NULL, peer, RPC_CALL_ARRIVED);
  conn_guard_stats st;
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.bans, 1);
  /* Its connection closed during the ban, its number taken again. */
  close(c);
  int holes[64];
  int n_holes = fill_below(s, holes, 64);
  int c2 = dial("127.0.0.8", port), s2;
  close(s);
  CU_ASSERT_EQUAL_FATAL(accept_all(lfd, &s2, 1), 1);
  CU_ASSERT_EQUAL(s2, s);
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.addresses, 2);
  sleep_ms(1100); /* the ban over, and a sweep due */
  int c3 = dial("127.0.0.9", port), s3;
  CU_ASSERT_EQUAL_FATAL(accept_all(lfd, &s3, 1), 1);
  conn_guard_stats_get(&st);
  CU_ASSERT_EQUAL(st.open, st.addresses);
  CU_ASSERT(st.addresses <= 2); /* 127.0.0.7's record freed */
  conn_guard_stop();
  for (int i = 0; i < n_holes; i++)
    close(holes[i]);
  int fds[] = {c2, s2, c3, s3, lfd};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    close(fds[i]);
}

static void test_bad_limits(void) {
  char err[256] = "";
  conn_guard_limits lim = {.per_address = -1};
  CU_ASSERT_EQUAL(conn_guard_start(1234, &lim, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT(strstr(err, "negative") != NULL);
  lim.per_address = 1;
  CU_ASSERT_EQUAL(conn_guard_start(0, &lim, err, sizeof err), COHORT_EINVAL);
  /* A port nothing listens on (one just closed). */
  int port;
  int lfd = listener(&port);
  close(lfd);
  CU_ASSERT_EQUAL(conn_guard_start(port, &lim, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT(strstr(err, "no socket listens") != NULL);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"connections over the per-address limit are closed as accepted; "
       "others and other listeners are not",
       test_connection_limit},
      {"calls that never settle ban the address and abort its connection; "
       "settled ones spend nothing",
       test_reset_budget},
      {"an address's spent budget outlives its connection: connecting "
       "again does not refill it",
       test_budget_outlives_connections},
      {"records of addresses that hold nothing, banned ones included once "
       "the ban ends, are freed",
       test_records_freed},
      {"a negative limit, no port or a port nothing listens on is refused",
       test_bad_limits},
  };
  return test_add_suite("conn_guard", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
