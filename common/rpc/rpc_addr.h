/* What a gRPC listen address reaches: the coordinator serves plaintext only
 * where no network attacker can be on the path. */
#ifndef COHORT_RPC_ADDR_H
#define COHORT_RPC_ADDR_H

/* 1 when listen ("HOST:PORT", "[V6]:PORT", "ipv4:", "ipv6:" or "unix:"
 * forms) binds only this machine: 127.0.0.0/8, ::1, localhost or a Unix
 * socket. 0 for anything else, also an empty host (every interface) or
 * an address that does not parse. */
int rpc_listen_is_loopback(const char *listen);

#endif
