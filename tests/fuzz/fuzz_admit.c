/* libFuzzer target: what the rpc server's admission makes of a call's
 * strings before its message is read (common/rpc/rpc_admit.c): the bearer
 * token of an "authorization" value, which anyone sends, and the address
 * of a peer name, and then the counts kept under both. Input: the peer
 * name, a NUL byte, the authorization value (bytes, as they arrive).
 * Oracles: a token is the value less "Bearer ", with no space, control
 * byte or DEL; an address fits, and is an IP peer's canonical address
 * (an IPv4 address or IPv6 /64, rpc_peer.h) that parses back to the same
 * key, or another peer name less a trailing ":digits"; a call counted under the
 * address and the caller is released by leaving, so the counts go back to zero.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_admit.h"
#include "rpc_peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_bearer(const uint8_t *value, size_t len) {
  char *t = rpc_admit_bearer(value, len);
  if (!t)
    return;
  size_t n = strlen(t);
  if (n == 0 || len != n + 7 || memcmp(value, "Bearer ", 7) != 0 ||
      memcmp(value + 7, t, n) != 0)
    __builtin_trap();
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
      __builtin_trap();
  free(t);
}

static void check_address(const char *peer) {
  char addr[RPC_ADMIT_ADDR_MAX];
  rpc_admit_address(peer, addr);
  size_t n = strlen(addr);
  if (n >= RPC_ADMIT_ADDR_MAX)
    __builtin_trap();
  rpc_peer_key key, again;
  if (rpc_peer_key_of_name(peer, &key) != 0) {
    if (strncmp(addr, peer, n) != 0)
      __builtin_trap();
    return;
  }
  /* An IP peer's address names its key: given a port again, it parses
   * back to the same key. */
  char name[RPC_ADMIT_ADDR_MAX + 8];
  if (strncmp(addr, "ipv4:", 5) == 0)
    snprintf(name, sizeof name, "%s:1", addr);
  else if (strncmp(addr, "ipv6:[", 6) == 0 && n > 9 &&
           strcmp(addr + n - 4, "]/64") == 0)
    snprintf(name, sizeof name, "%.*s]:1", (int)(n - 4), addr);
  else
    __builtin_trap();
  if (rpc_peer_key_of_name(name, &again) != 0 ||
      memcmp(key.b, again.b, sizeof key.b) != 0)
    __builtin_trap();
}

/* Two calls of peer with caller key caller (per-caller limit 1: the second
 * is refused), then both leave: nothing stays counted. */
static void check_counts(const char *peer, const char *caller) {
  rpc_admit_limits lim = {.per_address = 4, .per_caller = 1, .in_flight = 8};
  rpc_admit *a;
  if (rpc_admit_new(&lim, &a))
    __builtin_trap();
  rpc_admit_entry e[2];
  rpc_admit_verdict v0 =
      rpc_admit_arrive(a, &e[0], peer, caller, RPC_POOL_AUTHENTICATED, 0);
  rpc_admit_verdict v1 =
      rpc_admit_arrive(a, &e[1], peer, caller, RPC_POOL_AUTHENTICATED, 0);
  if (v0 != RPC_ADMIT_RECEIVE || (caller[0] && v1 != RPC_ADMIT_OVER_CALLER) ||
      (!caller[0] && v1 != RPC_ADMIT_RECEIVE))
    __builtin_trap();
  rpc_admit_leave(a, &e[0]);
  rpc_admit_leave(a, &e[1]);
  int from, waiting, receiving;
  rpc_admit_counts(a, peer, &from, &waiting, &receiving);
  if (from || waiting || receiving)
    __builtin_trap();
  rpc_admit_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t peer_len = nul ? (size_t)(nul - data) : size;
  char *peer = malloc(peer_len + 1);
  if (!peer)
    return 0;
  memcpy(peer, data, peer_len);
  peer[peer_len] = '\0';
  const uint8_t *value = nul ? nul + 1 : data + size;
  size_t value_len = nul ? size - peer_len - 1 : 0;
  check_bearer(value, value_len);
  check_address(peer);
  /* The caller key as the server makes it: a digest of the token, here
   * the token itself cut to the key's size (rpc_admit_arrive cuts too). */
  char caller[RPC_ADMIT_CALLER_MAX] = "";
  char *token = rpc_admit_bearer(value, value_len);
  if (token) {
    strncpy(caller, token, sizeof caller - 1);
    free(token);
  }
  check_counts(peer, caller);
  free(peer);
  return 0;
}
