/* What a gRPC listen address reaches: the coordinator serves plaintext only
 * where no network attacker can be on the path. */
#ifndef COHORT_RPC_ADDR_H
#define COHORT_RPC_ADDR_H

/* 1 when listen ("HOST:PORT" or "[V6]:PORT", the forms the coordinator
 * serves) binds only this machine: 127.0.0.0/8, ::1 (also as
 * ::ffff:127.x) or localhost. 0 for anything else, also an empty host
 * (every interface), a gRPC URI such as unix: (not served) or an address
 * that does not parse. */
int rpc_listen_is_loopback(const char *listen);

#endif
