/* Limits per source address on the coordinator's gRPC connections, which
 * the C core of gRPC 1.51 has no setting or hook for: how many connections
 * one address holds open, and how many of its calls it may reset (or
 * abandon) before their answer, the rapid reset of CVE-2023-44487. Over
 * the reset budget, the address's connections are shut down and it is
 * refused new ones for a while (docs/reliability.md, "The limits, layer
 * by layer", "Mind NAT" and "Rapid reset").
 *
 * An address is an IPv4 address, or an IPv6 /64 (common/rpc/rpc_peer.h).
 * Unix-socket connections are not counted.
 *
 * How: gRPC's listener accepts connections with accept4() from libc, and
 * this module defines accept4() itself. Linked into an executable, that
 * definition comes first in the dynamic linker's search, so libgrpc's calls
 * reach it; it passes every other listener's connections through.
 * conn_guard_start checks that the interposition is in effect and fails if
 * it is not (a static libgrpc, say). */
#ifndef COHORT_CONN_GUARD_H
#define COHORT_CONN_GUARD_H

#include <stddef.h>

#include "rpc_server.h"

typedef struct conn_guard_limits {
  int per_address;       /* open connections per address; 0: no limit */
  int resets_per_second; /* calls of an address that arrive and do not
                            settle, per second, with a burst as large (at
                            least twice the calls per address awaiting
                            their message); 0: no limit */
  int ban_ms;            /* how long an address over that is refused */
} conn_guard_limits;

typedef struct conn_guard_stats {
  long open; /* connections counted (closed ones leave the
                count when next looked at) */
  long refused_per_address;
  long refused_banned;
  long bans;
  long addresses; /* addresses with a record: connections, a ban, or a
                     budget not yet refilled */
} conn_guard_stats;

/* Guards the sockets listening on port now (gRPC's: call it once
 * rpc_server_start has returned), from now on: connections accepted
 * before are not counted, nor those of listeners made later, on another
 * address, with the same port number. One guard per process. COHORT_OK,
 * or COHORT_EINVAL with err set when accept4 is not interposed, nothing
 * listens on port or a limit is negative. */
int conn_guard_start(int port, const conn_guard_limits *lim, char *err,
                     size_t err_len);
/* Stops guarding and forgets every address. */
void conn_guard_stop(void);

/* The rpc server's on_call (rpc_server.h): every call of an address takes
 * one from its budget when it arrives and gives it back when it settles,
 * and the budget refills at resets_per_second. So calls reset before
 * their message spend it, as soon as they arrive, before gRPC has read the
 * rest of a burst; honest calls, each settled within milliseconds of
 * arriving (or refused at once), do not. Over it: the address is banned
 * and its connections aborted. ctx is unused. */
void conn_guard_call(void *ctx, const char *peer, rpc_call_event ev);

void conn_guard_stats_get(conn_guard_stats *out);

#endif
