/* Admission of the rpc server's calls before their request message is read:
 * calls in flight per source address, per caller and in all, how many
 * messages are received at once per pool (later calls wait, reading nothing
 * beyond their stream window), and the time by which a call's message must
 * have arrived.
 * Bookkeeping only, under one mutex: it never touches gRPC, so the server
 * decides what to do with what it returns. */
#ifndef COHORT_RPC_ADMIT_H
#define COHORT_RPC_ADMIT_H

#include <stddef.h>
#include <stdint.h>

/* Pools of receive slots: calls whose caller proved who it is before its
 * message is read (the method has an admit hook), and the rest. */
enum { RPC_POOL_AUTHENTICATED = 0, RPC_POOL_OPEN = 1, RPC_POOLS = 2 };

/* Longest address kept ("ipv6:[...]" without its port). */
#define RPC_ADMIT_ADDR_MAX 64
/* Longest caller key kept (rpc_admit_arrive). */
#define RPC_ADMIT_CALLER_MAX 32

typedef enum rpc_admit_state {
  RPC_ADMIT_NONE = 0,  /* not admitted, or left */
  RPC_ADMIT_WAITING,   /* admitted, its message not read yet */
  RPC_ADMIT_RECEIVING, /* its message is being read */
} rpc_admit_state;

/* Embedded in the caller's per-call state; owned by the admit table while
 * state != NONE. */
typedef struct rpc_admit_entry {
  struct rpc_admit_entry *prev, *next; /* in its pool's list for its state */
  double deadline; /* monotonic seconds by which the message must be in */
  int pool;
  rpc_admit_state state;
  int expired; /* the sweep found it receiving past its deadline */
  char addr[RPC_ADMIT_ADDR_MAX];
  char caller[RPC_ADMIT_CALLER_MAX]; /* "": not counted per caller */
} rpc_admit_entry;

typedef struct rpc_admit_limits {
  int per_address;          /* calls not yet received from one address;
                               0: no limit */
  int per_caller;           /* calls not yet received of one caller (one
                               session); 0: no limit */
  int in_flight;            /* calls not yet received in all; 0: no limit */
  int receiving[RPC_POOLS]; /* messages read at once per pool; 0: no limit */
  double receive_s;         /* time a call's message may take; 0: none */
} rpc_admit_limits;

typedef struct rpc_admit rpc_admit;

/* COHORT_OK, COHORT_EINVAL (a negative limit) or COHORT_ENOMEM. The limits
 * are copied. */
int rpc_admit_new(const rpc_admit_limits *limits, rpc_admit **out);
/* Accepts NULL; every entry must have left or been drained. */
void rpc_admit_free(rpc_admit *a);

typedef enum rpc_admit_verdict {
  RPC_ADMIT_RECEIVE = 0,    /* read its message now */
  RPC_ADMIT_WAIT,           /* a later rpc_admit_leave hands it back */
  RPC_ADMIT_OVER_ADDRESS,   /* refused: per_address calls already in flight */
  RPC_ADMIT_OVER_CALLER,    /* refused: per_caller calls already in flight */
  RPC_ADMIT_OVER_IN_FLIGHT, /* refused: in_flight calls already in flight */
  RPC_ADMIT_CLOSED,         /* refused: rpc_admit_close was called */
} rpc_admit_verdict;

/* A call from addr (gRPC's peer name; the port is ignored) arrived at now
 * (monotonic seconds): counts it and files e, unless a limit refuses it
 * (e is then left alone, state NONE). caller (NULL or "": none) names who
 * made it, e.g. a digest of its session token, so that one caller's calls
 * are counted together whatever address they come from; keys longer than
 * RPC_ADMIT_CALLER_MAX - 1 are cut. */
rpc_admit_verdict rpc_admit_arrive(rpc_admit *a, rpc_admit_entry *e,
                                   const char *peer, const char *caller,
                                   int pool, double now);

/* e's message arrived, or its call ended: releases what it counted. Returns
 * a waiting entry of the same pool that may now read its message (already
 * RECEIVING), or NULL. */
rpc_admit_entry *rpc_admit_leave(rpc_admit *a, rpc_admit_entry *e);

/* Called under the table's lock for each entry handed out by
 * rpc_admit_sweep or rpc_admit_drain, so the caller can take a reference
 * before another thread could end the call. */
typedef void (*rpc_admit_visit_fn)(void *ctx, rpc_admit_entry *e);

/* Entries whose deadline passed by now: a receiving one is marked expired
 * and stays (its read ends once the caller cancels the call, and it then
 * leaves as usual); a waiting one is removed, its counts released, and left
 * in state NONE. Returns how many were visited. */
size_t rpc_admit_sweep(rpc_admit *a, double now, rpc_admit_visit_fn visit,
                       void *ctx);

/* Refuses every later arrival (RPC_ADMIT_CLOSED) and removes every waiting
 * entry, visiting each (state NONE); receiving ones stay. */
void rpc_admit_close(rpc_admit *a, rpc_admit_visit_fn visit, void *ctx);

/* For tests and metrics: calls not yet received from addr's address, and
 * in each state in all. */
void rpc_admit_counts(rpc_admit *a, const char *peer, int *from_address,
                      int *waiting, int *receiving);

/* The token of an "authorization" metadata value (len bytes, not
 * NUL-terminated): "Bearer <token>" with a non-empty token free of spaces,
 * control bytes and DEL gives a malloc'd copy of the token; anything else
 * (or no memory) gives NULL. */
char *rpc_admit_bearer(const uint8_t *value, size_t len);

/* The source address of a gRPC peer name as the per-address limits count
 * it (rpc_peer.h): "ipv4:10.0.0.7:4031" -> "ipv4:10.0.0.7",
 * "ipv6:[2001:db8:0:1::7]:80" -> "ipv6:[2001:db8:0:1::]/64",
 * "ipv6:[::ffff:10.0.0.7]:80" -> "ipv4:10.0.0.7"; another name less a
 * trailing ":digits", truncated to fit. */
void rpc_admit_address(const char *peer, char out[RPC_ADMIT_ADDR_MAX]);

#endif
