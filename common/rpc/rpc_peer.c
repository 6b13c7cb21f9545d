/* Source addresses of gRPC peer names (rpc_peer.h). */
#include "rpc_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static void key_of_v4(const struct in_addr *a, rpc_peer_key *key) {
  memset(key->b, 0, 16);
  key->b[10] = key->b[11] = 0xff;
  memcpy(key->b + 12, a, 4);
}

/* RFC 6052's well-known prefix, 64:ff9b::/96: a NAT64 (or SIIT) in front
 * of an IPv6-only coordinator shows each IPv4 client as this prefix and
 * the client's IPv4 address. Its whole /64 is read that way (the last 32
 * bits), so that no /64 key is ever this one, whose text would read back
 * as an IPv4 client. */
static const unsigned char NAT64_PREFIX[8] = {0x00, 0x64, 0xff, 0x9b};

static void key_of_v6(const struct in6_addr *a, rpc_peer_key *key) {
  /* Through a NAT64, the IPv4 client behind it: as one /64 the whole IPv4
   * internet would be one address. */
  if (memcmp(a->s6_addr, NAT64_PREFIX, sizeof NAT64_PREFIX) == 0) {
    key_of_v4((const struct in_addr *)(const void *)(a->s6_addr + 12), key);
    return;
  }
  memcpy(key->b, a, 16);
  /* An IPv4 client of a dual-stack listener keeps its whole address. */
  if (!IN6_IS_ADDR_V4MAPPED(a))
    memset(key->b + 8, 0, 8);
}

int rpc_peer_key_of_sockaddr(const struct sockaddr *sa, rpc_peer_key *key) {
  if (sa->sa_family == AF_INET)
    key_of_v4(&((const struct sockaddr_in *)(const void *)sa)->sin_addr, key);
  else if (sa->sa_family == AF_INET6)
    key_of_v6(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, key);
  else
    return -1;
  return 0;
}

int rpc_peer_key_of_name(const char *peer, rpc_peer_key *key) {
  char host[INET6_ADDRSTRLEN + 1];
  const char *p, *end, *after;
  int v6;
  if (strncmp(peer, "ipv4:", 5) == 0) {
    p = peer + 5;
    end = after = strrchr(p, ':');
    v6 = 0;
  } else if (strncmp(peer, "ipv6:", 5) == 0) {
    p = peer + 5;
    if (*p == '[') {
      p++;
      end = strchr(p, ']');
      after = end ? end + 1 : NULL;
    } else if (strncmp(p, "%5B", 3) == 0 || strncmp(p, "%5b", 3) == 0) {
      p += 3;
      end = strstr(p, "%5D");
      if (!end)
        end = strstr(p, "%5d");
      after = end ? end + 3 : NULL;
    } else {
      return -1;
    }
    v6 = 1;
  } else {
    return -1;
  }
  if (!end || end <= p || (size_t)(end - p) >= sizeof host)
    return -1;
  /* Only a port may follow: "]:5678", "%5D:5678", or ":5678" for IPv4. */
  if (*after != ':' || !after[1] ||
      strspn(after + 1, "0123456789") != strlen(after + 1))
    return -1;
  memcpy(host, p, (size_t)(end - p));
  host[end - p] = '\0';
  /* A zone ("fe80::1%25eth0") does not change whose network it is. */
  char *zone = strchr(host, '%');
  if (zone)
    *zone = '\0';
  if (v6) {
    struct in6_addr a;
    if (inet_pton(AF_INET6, host, &a) != 1)
      return -1;
    key_of_v6(&a, key);
  } else {
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) != 1)
      return -1;
    key_of_v4(&a, key);
  }
  return 0;
}

void rpc_peer_key_text(const rpc_peer_key *key, char *out, size_t len) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
                                           0, 0, 0, 0, 0xff, 0xff};
  char a[INET6_ADDRSTRLEN];
  if (memcmp(key->b, mapped, 12) == 0) {
    inet_ntop(AF_INET, key->b + 12, a, sizeof a);
    snprintf(out, len, "ipv4:%s", a);
  } else {
    inet_ntop(AF_INET6, key->b, a, sizeof a);
    snprintf(out, len, "ipv6:[%s]/64", a);
  }
}
