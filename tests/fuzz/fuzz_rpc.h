/* The input format of fuzz_rpc (shared with the seed generator): byte 0
 * picks the method (bits 0-2, the index into service_methods) and the
 * caller's bearer token (bits 3-4, FUZZ_BEARER_*); the rest is the request
 * body. The engine behind it serves a logreg model of FUZZ_RPC_PARAMS
 * floats (2x2 inputs, 2 classes), so a whole fp32 update fits in one
 * input, and round 1 is TRAINING with clients 1 and 2 selected. */
#ifndef COHORT_FUZZ_RPC_H
#define COHORT_FUZZ_RPC_H

#define FUZZ_RPC_ENROLL "fuzz-enrollment-token"
#define FUZZ_RPC_PARAMS 10 /* 4 x 2 weights + 2 biases */

enum {
  FUZZ_BEARER_CLIENT1 = 0, /* client 1's valid session token */
  FUZZ_BEARER_CLIENT2 = 1, /* client 2's */
  FUZZ_BEARER_NONE = 2,    /* no authorization metadata */
  FUZZ_BEARER_FORGED = 3,  /* a well-formed token nobody was given */
};

#define FUZZ_RPC_HEADER(method, bearer)                                        \
  ((unsigned char)((method) | (bearer) << 3))

#endif
