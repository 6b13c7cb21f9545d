/* rpc_admit, the rpc server's admission bookkeeping, without gRPC: the
 * per-address, per-caller and global limits, the receive pools' FIFO, the sweep
 * of overdue calls and the close at stop. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "rpc_admit.h"
#include "rpc_peer.h"

typedef struct visited {
  rpc_admit_entry *e[16];
  int n;
} visited;

static void visit(void *ctx, rpc_admit_entry *e) {
  visited *v = ctx;
  if (v->n < 16)
    v->e[v->n++] = e;
}

static void test_per_address_and_global_limits(void) {
  rpc_admit_limits lim = {.per_address = 2, .in_flight = 3};
  rpc_admit *a;
  CU_ASSERT_EQUAL_FATAL(rpc_admit_new(&lim, &a), COHORT_OK);
  rpc_admit_entry e[5];
  /* Ports differ, the address is the same. */
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[0], "ipv4:10.0.0.1:1000", NULL, 0, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[1], "ipv4:10.0.0.1:1001", NULL, 0, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[2], "ipv4:10.0.0.1:1002", NULL, 0, 0),
                  RPC_ADMIT_OVER_ADDRESS);
  CU_ASSERT_EQUAL(e[2].state, RPC_ADMIT_NONE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[3], "ipv6:[::1]:9", NULL, 1, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[4], "ipv4:10.0.0.2:5", NULL, 1, 0),
                  RPC_ADMIT_OVER_IN_FLIGHT);
  int from = 0, waiting = -1, receiving = 0;
  rpc_admit_counts(a, "ipv4:10.0.0.1:7", &from, &waiting, &receiving);
  CU_ASSERT_EQUAL(from, 2);
  CU_ASSERT_EQUAL(waiting, 0);
  CU_ASSERT_EQUAL(receiving, 3);
  CU_ASSERT_PTR_NULL(rpc_admit_leave(a, &e[0]));
  CU_ASSERT_PTR_NULL(rpc_admit_leave(a, &e[0])); /* twice is harmless */
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[2], "ipv4:10.0.0.1:1002", NULL, 0, 0),
                  RPC_ADMIT_RECEIVE);
  rpc_admit_leave(a, &e[1]);
  rpc_admit_leave(a, &e[2]);
  rpc_admit_leave(a, &e[3]);
  rpc_admit_counts(a, "ipv4:10.0.0.1:7", &from, &waiting, &receiving);
  CU_ASSERT_EQUAL(from + waiting + receiving, 0);
  rpc_admit_free(a);
}

static void test_pool_is_fifo_and_pools_apart(void) {
  rpc_admit_limits lim = {.receiving = {1, 1}};
  rpc_admit *a;
  CU_ASSERT_EQUAL_FATAL(rpc_admit_new(&lim, &a), COHORT_OK);
  rpc_admit_entry r, w1, w2, open;
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &r, "ipv4:1.1.1.1:1", NULL, 0, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &w1, "ipv4:1.1.1.2:1", NULL, 0, 0),
                  RPC_ADMIT_WAIT);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &w2, "ipv4:1.1.1.3:1", NULL, 0, 0),
                  RPC_ADMIT_WAIT);
  /* The open pool has its own slot. */
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &open, "ipv4:1.1.1.4:1", NULL, 1, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_PTR_EQUAL(rpc_admit_leave(a, &r), &w1);
  CU_ASSERT_EQUAL(w1.state, RPC_ADMIT_RECEIVING);
  CU_ASSERT_PTR_NULL(rpc_admit_leave(a, &open));
  CU_ASSERT_PTR_EQUAL(rpc_admit_leave(a, &w1), &w2);
  CU_ASSERT_PTR_NULL(rpc_admit_leave(a, &w2));
  rpc_admit_free(a);
}

static void test_sweep_marks_receiving_and_removes_waiting(void) {
  rpc_admit_limits lim = {.receiving = {1, 1}, .receive_s = 2};
  rpc_admit *a;
  CU_ASSERT_EQUAL_FATAL(rpc_admit_new(&lim, &a), COHORT_OK);
  rpc_admit_entry r, w, late;
  rpc_admit_arrive(a, &r, "ipv4:1.1.1.1:1", NULL, 0, 10.0);
  rpc_admit_arrive(a, &w, "ipv4:1.1.1.1:2", NULL, 0, 10.5);
  rpc_admit_arrive(a, &late, "ipv4:1.1.1.1:3", NULL, 0, 11.5);
  visited v = {0};
  CU_ASSERT_EQUAL(rpc_admit_sweep(a, 11.9, visit, &v), 0);
  CU_ASSERT_EQUAL(rpc_admit_sweep(a, 12.6, visit, &v), 2);
  CU_ASSERT_EQUAL(r.state, RPC_ADMIT_RECEIVING);
  CU_ASSERT_EQUAL(r.expired, 1);
  CU_ASSERT_EQUAL(w.state, RPC_ADMIT_NONE);
  CU_ASSERT_EQUAL(late.state, RPC_ADMIT_WAITING);
  /* A receiving entry is visited once. */
  v.n = 0;
  CU_ASSERT_EQUAL(rpc_admit_sweep(a, 12.7, visit, &v), 0);
  CU_ASSERT_PTR_EQUAL(rpc_admit_leave(a, &r), &late);
  int from = 0;
  rpc_admit_counts(a, "ipv4:1.1.1.1:9", &from, NULL, NULL);
  CU_ASSERT_EQUAL(from, 1);
  rpc_admit_leave(a, &late);
  rpc_admit_free(a);
}

static void test_close_drains_waiting_and_refuses(void) {
  rpc_admit_limits lim = {.receiving = {1, 1}};
  rpc_admit *a;
  CU_ASSERT_EQUAL_FATAL(rpc_admit_new(&lim, &a), COHORT_OK);
  rpc_admit_entry r, w, after;
  rpc_admit_arrive(a, &r, "ipv4:1.1.1.1:1", NULL, 0, 0);
  rpc_admit_arrive(a, &w, "ipv4:1.1.1.1:2", NULL, 0, 0);
  visited v = {0};
  rpc_admit_close(a, visit, &v);
  CU_ASSERT_EQUAL(v.n, 1);
  CU_ASSERT_PTR_EQUAL(v.e[0], &w);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &after, "ipv4:1.1.1.1:3", NULL, 0, 0),
                  RPC_ADMIT_CLOSED);
  CU_ASSERT_PTR_NULL(rpc_admit_leave(a, &r));
  rpc_admit_free(a);
}

/* One caller (a session) holds at most per_caller calls whatever address
 * they come from; other callers, and calls without one, are not held
 * back by it; a call that leaves gives its place back. */
static void test_per_caller_limit(void) {
  rpc_admit_limits lim = {.per_caller = 2, .receiving = {16, 4}};
  rpc_admit *a;
  CU_ASSERT_EQUAL_FATAL(rpc_admit_new(&lim, &a), COHORT_OK);
  rpc_admit_entry e[6];
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[0], "ipv4:10.0.0.1:1", "attacker",
                                   RPC_POOL_AUTHENTICATED, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[1], "ipv4:10.0.0.2:1", "attacker",
                                   RPC_POOL_AUTHENTICATED, 0),
                  RPC_ADMIT_RECEIVE);
  /* From a third address: still the same session. */
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[2], "ipv4:10.0.0.3:1", "attacker",
                                   RPC_POOL_AUTHENTICATED, 0),
                  RPC_ADMIT_OVER_CALLER);
  CU_ASSERT_EQUAL(e[2].state, RPC_ADMIT_NONE);
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[3], "ipv4:10.0.0.1:2", "honest",
                                   RPC_POOL_AUTHENTICATED, 0),
                  RPC_ADMIT_RECEIVE);
  CU_ASSERT_EQUAL(
      rpc_admit_arrive(a, &e[4], "ipv4:10.0.0.1:3", NULL, RPC_POOL_OPEN, 0),
      RPC_ADMIT_RECEIVE);
  int from, waiting, receiving;
  rpc_admit_counts(a, "ipv4:10.0.0.1:9", &from, &waiting, &receiving);
  CU_ASSERT_EQUAL(from, 3);
  CU_ASSERT_EQUAL(receiving, 4);
  /* The refused call counted nothing: one leaving lets the next in. */
  CU_ASSERT_PTR_NULL(rpc_admit_leave(a, &e[0]));
  CU_ASSERT_EQUAL(rpc_admit_arrive(a, &e[5], "ipv4:10.0.0.3:1", "attacker",
                                   RPC_POOL_AUTHENTICATED, 0),
                  RPC_ADMIT_RECEIVE);
  rpc_admit_leave(a, &e[1]);
  rpc_admit_leave(a, &e[3]);
  rpc_admit_leave(a, &e[4]);
  rpc_admit_leave(a, &e[5]);
  rpc_admit_counts(a, "ipv4:10.0.0.3:1", &from, &waiting, &receiving);
  CU_ASSERT_EQUAL(from + waiting + receiving, 0);
  /* A negative limit is refused. */
  rpc_admit *bad = NULL;
  lim.per_caller = -1;
  CU_ASSERT_EQUAL(rpc_admit_new(&lim, &bad), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(bad);
  rpc_admit_free(a);
}

static void test_address_of_peer_names(void) {
  char out[RPC_ADMIT_ADDR_MAX];
  rpc_admit_address("ipv4:10.0.0.7:4031", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv4:10.0.0.7");
  rpc_admit_address("ipv6:[::1]:80", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv6:[::]/64");
  /* One /64 is one address, however gRPC spells it; the next /64 is
   * another; an IPv4 client of a dual-stack listener is its IPv4 address;
   * a zone does not change the network. */
  rpc_admit_address("ipv6:[2001:db8:0:1::1]:1", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv6:[2001:db8:0:1::]/64");
  rpc_admit_address("ipv6:%5B2001:db8:0:1:ffff::9%5D:2", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv6:[2001:db8:0:1::]/64");
  rpc_admit_address("ipv6:[2001:db8:0:2::1]:1", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv6:[2001:db8:0:2::]/64");
  rpc_admit_address("ipv6:[::ffff:10.0.0.7]:99", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv4:10.0.0.7");
  /* Through a NAT64, each IPv4 client is its own address, not one /64
   * for all of them (the /64 is read by its last 32 bits throughout);
   * the next /64 is an IPv6 network as any. */
  rpc_admit_address("ipv6:[64:ff9b::10.0.0.7]:99", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv4:10.0.0.7");
  rpc_admit_address("ipv6:[64:ff9b::a00:8]:99", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv4:10.0.0.8");
  rpc_admit_address("ipv6:[64:ff9b:0:0:1::7]:99", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv4:0.0.0.7");
  rpc_admit_address("ipv6:[64:ff9b:0:1::7]:99", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv6:[64:ff9b:0:1::]/64");
  /* An accepted socket's address (the connection guard's) the same way. */
  struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6};
  CU_ASSERT_EQUAL(inet_pton(AF_INET6, "64:ff9b::10.0.0.7", &sa6.sin6_addr), 1);
  rpc_peer_key from_socket, from_name;
  CU_ASSERT_EQUAL(
      rpc_peer_key_of_sockaddr((struct sockaddr *)&sa6, &from_socket), 0);
  CU_ASSERT_EQUAL(rpc_peer_key_of_name("ipv4:10.0.0.7:1", &from_name), 0);
  CU_ASSERT_EQUAL(memcmp(from_socket.b, from_name.b, sizeof from_name.b), 0);
  rpc_admit_address("ipv6:[fe80::1%25eth0]:3", out);
  CU_ASSERT_STRING_EQUAL(out, "ipv6:[fe80::]/64");
  rpc_admit_address("unix:/tmp/sock", out);
  CU_ASSERT_STRING_EQUAL(out, "unix:/tmp/sock");
  /* Names that are not an IP address and port keep the old rule: the
   * name less a trailing ":digits". */
  static const char *other[][2] = {{"ipv4:", "ipv4:"},
                                   {"ipv4:1.2.3:4", "ipv4:1.2.3"},
                                   {"ipv6:::1:5", "ipv6:::1"},
                                   {"ipv6:[::1", "ipv6:[:"},
                                   {"ipv4:1.2.3.4", "ipv4:1.2.3.4"},
                                   {"ipv6:[]:1", "ipv6:[]"},
                                   {"ipv4:999.1.1.1:1", "ipv4:999.1.1.1"},
                                   {"ipv6:[::1]x:5", "ipv6:[::1]x"},
                                   {"", ""}};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    rpc_admit_address(other[i][0], out);
    CU_ASSERT_STRING_EQUAL(out, other[i][1]);
  }
  rpc_peer_key k;
  CU_ASSERT_EQUAL(rpc_peer_key_of_name("ipv6:[::1]x:5", &k), -1);
  CU_ASSERT_EQUAL(rpc_peer_key_of_name("ipv4:1.2.3.4:5a", &k), -1);
  CU_ASSERT_EQUAL(rpc_peer_key_of_name("ipv4:1.2.3.4:", &k), -1);
  char long_peer[200];
  memset(long_peer, 'a', sizeof long_peer - 1);
  long_peer[sizeof long_peer - 1] = '\0';
  rpc_admit_address(long_peer, out);
  CU_ASSERT_EQUAL(strlen(out), RPC_ADMIT_ADDR_MAX - 1);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"per-address and global limits; the port does not count",
       test_per_address_and_global_limits},
      {"one caller holds at most per_caller calls, from any address",
       test_per_caller_limit},
      {"a pool's waiting calls go in arrival order; pools are apart",
       test_pool_is_fifo_and_pools_apart},
      {"the sweep marks overdue receiving calls and removes waiting ones",
       test_sweep_marks_receiving_and_removes_waiting},
      {"close hands back waiting calls and refuses later ones",
       test_close_drains_waiting_and_refuses},
      {"the address of gRPC peer names", test_address_of_peer_names},
  };
  return test_add_suite("rpc_admit", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
