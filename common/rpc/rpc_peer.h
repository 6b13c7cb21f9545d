/* The source address of a gRPC peer name, as the coordinator's
 * per-address limits count it: an IPv4 address, or an IPv6 /64, one
 * subscriber's network (a host holding a /64 holds 2^64 addresses). An
 * IPv4 client of a dual-stack listener ("ipv6:[::ffff:a.b.c.d]"), or one
 * seen through a NAT64's well-known prefix ("ipv6:[64:ff9b::a.b.c.d]"), is
 * its IPv4 address. */
#ifndef COHORT_RPC_PEER_H
#define COHORT_RPC_PEER_H

#include <stddef.h>
#include <sys/socket.h>

/* 16 bytes: an IPv4 address as ::ffff:a.b.c.d, an IPv6 one cut to its
 * /64. */
typedef struct rpc_peer_key {
  unsigned char b[16];
} rpc_peer_key;

/* From gRPC's peer name ("ipv4:1.2.3.4:5678", "ipv6:[::1]:5678", or
 * percent-encoded, "ipv6:%5B::1%5D:5678"): 0, or -1 for a name that is not
 * an IP address and port. */
int rpc_peer_key_of_name(const char *peer, rpc_peer_key *key);
/* From an accepted socket's address: 0, or -1 for a family other than
 * AF_INET and AF_INET6. */
int rpc_peer_key_of_sockaddr(const struct sockaddr *sa, rpc_peer_key *key);
/* As gRPC names it, less the port: "ipv4:10.0.0.7", or
 * "ipv6:[2001:db8:0:1::]/64"; it fits in RPC_PEER_TEXT_MAX bytes. */
#define RPC_PEER_TEXT_MAX 32
void rpc_peer_key_text(const rpc_peer_key *key, char *out, size_t len);

#endif
