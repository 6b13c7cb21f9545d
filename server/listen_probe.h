/* Whether the coordinator's --listen address can be bound, asked before
 * anything is written to disk: a port already in use must not leave a new
 * database behind. */
#ifndef COHORT_LISTEN_PROBE_H
#define COHORT_LISTEN_PROBE_H

#include <stddef.h>

/* Binds, then closes, a TCP socket on every address HOST:PORT ("[::]:P"
 * for IPv6) resolves to, as gRPC will (SO_REUSEADDR, no SO_REUSEPORT).
 * Port 0 always succeeds. COHORT_OK, COHORT_EINVAL for an address that does
 * not parse or resolve, COHORT_EIO when it is in use or not permitted. */
int listen_probe(const char *listen, char *err, size_t errlen);

#endif
