/* The client's side of a secure-aggregation round over the SecAgg call
 * (docs/secagg.md, "Secure aggregation on the client"): SETUP until the
 * plan arrives, ADVERTISE and SHARE before training; after it the delta,
 * weighted and encoded into the ring, goes up masked by Upload, then
 * MASKED, CONSISTENCY and UNMASK. Drives common/secagg's client state machine;
 * the transport is the caller's (secagg_flow_io), so this file holds no
 * sockets. */
#ifndef COHORT_CLIENT_SECAGG_FLOW_H
#define COHORT_CLIENT_SECAGG_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "dp_ddp.h"
#include "pb.h"
#include "prg.h"
#include "secagg.h"

/* What the flow needs from the client. Each function records the reason
 * of a failure in the err buffer given to secagg_flow_begin. */
typedef struct secagg_flow_io {
  void *ctx;
  /* One SecAgg call: COHORT_OK and *resp (the caller of call frees it with
   * protobuf_c_message_free_unpacked), or a status (COHORT_EREJECTED when
   * the coordinator refused, e.g. an aborted round). Counts the bytes. */
  int (*call)(void *ctx, const Cohort__V1__SecAggRequest *req,
              Cohort__V1__SecAggResponse **resp);
  /* Uploads the masked input (chunked, idempotent) with the real example
   * count. */
  int (*upload)(void *ctx, const uint8_t *bytes, size_t len, uint64_t examples);
  /* Waits ms; COHORT_ECANCELED once the client is told to stop. */
  int (*nap)(void *ctx, long ms);
  /* How long the coordinator may hold a poll until its step closes
   * (SecAggRequest.wait_ms; call's deadline must leave room for it); 0:
   * it answers Wait at once and the flow polls. */
  uint32_t wait_ms;
  /* How long past a step's announced deadline the flow still waits for
   * the coordinator to close it; 0: 30 s. */
  double step_slack_s;
} secagg_flow_io;

/* Where a test makes the client leave: it stops right before sending this
 * step's message (SECAGG_FLOW_MASKED: before uploading its masked input).
 * Values are 1 + SecAggStep, so 0 (a zeroed option) is "never". */
typedef enum secagg_flow_stop {
  SECAGG_FLOW_NEVER = 0,
  SECAGG_FLOW_SETUP = 1,
  SECAGG_FLOW_ADVERTISE = 2,
  SECAGG_FLOW_SHARE = 3,
  SECAGG_FLOW_MASKED = 4,
  SECAGG_FLOW_UNMASK = 5,
  SECAGG_FLOW_CONSISTENCY = 6,
} secagg_flow_stop;

/* What the client brings to every secure-aggregation round: its identity
 * (the key it registered, and the enrollment authority its peers must be
 * certified by, if any) and the policy it holds plans to. Borrowed. */
typedef struct secagg_flow_trust {
  secagg_identity id;
  secagg_policy policy;
  double dp_max_epsilon; /* the most epsilon a DP plan may publish; 0: any */
  int spoil_shares; /* testing aid: random bytes for its sealed shares, as a
                       malicious insider sends (never in production) */
} secagg_flow_trust;

typedef struct secagg_flow {
  secagg_flow_io io;
  uint64_t round;
  double give_up_at; /* clock_mono_s(); pushed back by replies' deadlines */
  secagg_flow_stop stop_before;
  char *err; /* borrowed: the client's last-error buffer */
  size_t errlen;

  codec *codec;          /* the task's codec (summable) */
  codec_params cp;       /* its params: model size, round seed, clip */
  size_t ring_dim;       /* m = codec_linear_dim: ring elements per input */
  uint64_t max_examples; /* the plan's weight cap W */
  int dp;                /* distributed DP: ddp encodes, not the codec */
  ddp_params ddp;        /* from the plan */
  secagg_params params;  /* from the plan */
  const secagg_flow_trust *trust; /* borrowed */
  prg rng;             /* CSPRNG of the secagg client; lives with it */
  int rng_live;        /* rng needs prg_free */
  secagg_client *sc;   /* secrets: key pairs, self-mask seed */
  uint8_t *complaints; /* SecAggComplaints we sent (MASKED, before training) */
  size_t complaints_len;
  int checked; /* the shares addressed to us were taken */
} secagg_flow;

/* Joins the secure aggregation of task t (t->secagg set) for a model of
 * n_params floats: SETUP (polled until the plan comes, or give_up_at),
 * checks the plan against the task's codec and trust->policy, creates the
 * secagg client from the CSPRNG and trust->id, then ADVERTISE and SHARE,
 * and sends its complaints of the shares that did not open (MASKED). err
 * (errlen bytes) receives the reason of any failure. Returns COHORT_OK;
 * COHORT_EREJECTED (refused or aborted by the coordinator); COHORT_EABORTED (a
 * plan or message this client cannot follow); COHORT_ETIMEDOUT;
 * COHORT_ECANCELED (stopped, or stop_before reached); COHORT_ENOMEM. Call
 * secagg_flow_end on every path, successful or not. */
int secagg_flow_begin(secagg_flow *f, const secagg_flow_io *io,
                      const secagg_flow_trust *trust, const Cohort__V1__Task *t,
                      size_t n_params, double give_up_at,
                      secagg_flow_stop stop_before, char *err, size_t errlen);

/* After training: scales delta (n_params floats, finite) by
 * min(examples, W) / W, encodes it into the ring, waits for whom to leave
 * out of its masks, masks it, uploads it with the real example count, and
 * completes MASKED, CONSISTENCY and UNMASK. Same returns as
 * secagg_flow_begin; COHORT_EREJECTED too when the coordinator dropped this
 * client (its round is over). */
int secagg_flow_submit(secagg_flow *f, const float *delta, uint64_t examples);

/* Wipes and frees the secagg client's secrets and everything else the flow
 * holds. Safe on a zeroed, failed or finished flow, and twice. */
void secagg_flow_end(secagg_flow *f);

/* "setup", "advertise", "share", "masked", "unmask" or "consistency";
 * "never" for SECAGG_FLOW_NEVER or an unknown value. */
const char *secagg_flow_stop_name(secagg_flow_stop s);

#endif
