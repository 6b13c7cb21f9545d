/* Whether the coordinator's --listen address can be bound, asked before
 * anything is written to disk: a port already in use must not leave a new
 * database behind. */
#ifndef COHORT_LISTEN_PROBE_H
#define COHORT_LISTEN_PROBE_H

#include <stddef.h>

/* Whether listen has the form the coordinator serves, HOST:PORT over TCP.
 * gRPC also takes URIs (unix:, unix-abstract:, vsock:, ipv4:, ipv6:, dns:);
 * those are refused by name: the per-address limits, the port file and the
 * loopback rule are about IP addresses. COHORT_OK or COHORT_EINVAL with
 * err set. */
int listen_address_check(const char *listen, char *err, size_t errlen);

/* Binds, then closes, a TCP socket on every address HOST:PORT ("[::]:P"
 * for IPv6) resolves to, after listen_address_check, as gRPC will
 * (SO_REUSEADDR, no SO_REUSEPORT). Port 0 always succeeds. COHORT_OK,
 * COHORT_EINVAL for an address that does not parse or resolve, COHORT_EIO when
 * it is in use or not permitted. */
int listen_probe(const char *listen, char *err, size_t errlen);

#endif
