/* A client of the cohort.v1 protocol written by hand, for integration
 * tests that play a client no honest cohort-client would be: calls of
 * packed messages with their reply unpacked, registration, check-ins,
 * uploads of a given update, reports, and a poisoner that uploads an
 * update of random signs times 2^20 with 2^29 - 1 examples in every round
 * it is selected for (test_poisoning, test_attack_limits). */
#ifndef COHORT_TEST_FL_CLIENT_H
#define COHORT_TEST_FL_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pb.h"
#include "rpc_client.h"
#include "sign.h"

#define FL_POISON_EXAMPLES ((UINT64_C(1) << 29) - 1)

typedef struct fl_reply {
  int code; /* grpc_status_code; -1: the call failed */
  char detail[256];
  ProtobufCMessage *msg; /* unpacked with the descriptor asked for */
} fl_reply;

void fl_nap_ms(long ms);

/* A channel to 127.0.0.1:port, or NULL. */
rpc_channel *fl_connect(int port);

/* One call of raw bytes (5 s deadline); the reply unpacked with desc
 * when OK (desc NULL: not unpacked). */
fl_reply fl_call_raw(rpc_channel *ch, const char *method, const char *bearer,
                     const uint8_t *body, size_t len,
                     const ProtobufCMessageDescriptor *desc);
/* The same with m packed. */
fl_reply fl_call(rpc_channel *ch, const char *method, const char *bearer,
                 const ProtobufCMessage *m,
                 const ProtobufCMessageDescriptor *desc);
void fl_reply_free(fl_reply *r);

/* Registers identity key with the enrollment token and platform; the
 * session token into session. Returns the status. */
int fl_register(rpc_channel *ch, const char *token, const char *platform,
                const uint8_t key[SIGN_PUBLIC_LEN], char session[65]);

/* A check-in declaring examples: the task's round (and in *evaluate its
 * kind), 0 for a RetryLater or a rate-limited call, -1 when the federation
 * is over or the call failed otherwise. */
int64_t fl_check_in(rpc_channel *ch, const char *session, uint64_t examples,
                    int *evaluate);
/* Checks in until a task comes (at most 30 s, or until *stop is set when
 * stop is not NULL); its round, or -1. */
int64_t fl_wait_task(rpc_channel *ch, const char *session, uint64_t examples,
                     int *evaluate, atomic_int *stop);

/* Uploads n float32 values as the update of round, with examples. */
fl_reply fl_upload(rpc_channel *ch, const char *session, uint64_t round,
                   const float *delta, size_t n, uint64_t examples);
fl_reply fl_report(rpc_channel *ch, const char *session, uint64_t round,
                   uint64_t examples, size_t n, const char *const *names,
                   const double *values);

typedef struct fl_poisoner {
  int port;
  const char *token;
  uint8_t key[SIGN_PUBLIC_LEN]; /* its identity */
  size_t n_params;              /* the model's */
  atomic_int stop;              /* set to end it before the federation */
  atomic_int registered;        /* 1 once registered, -1 if that failed */
  int rounds_poisoned;          /* uploads accepted */
  char detail[256];             /* the last accepted upload's answer */
} fl_poisoner;

/* Thread body (arg: fl_poisoner): registers, then every round checks in
 * declaring FL_POISON_EXAMPLES and uploads random signs times 2^20 with
 * as many examples (again after a wait when rate limited), until the
 * federation is over or stop is set. */
void *fl_poison_rounds(void *arg);

#endif
