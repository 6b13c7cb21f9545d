/* A fake coordinator whose replies carry the faults a test sets, for the
 * tests of what libcohort does with what a coordinator sends
 * (test_client_protocol, test_hostile_coordinator): our rpc server in the
 * test process, serving one logreg task. With every fault zero it is an
 * honest coordinator, so a refusal a test sees is the fault it put in.
 * (fake_coordinator.h is the other fake: it holds calls, to stop a client
 * in each state.) */
#ifndef COHORT_FAULT_COORDINATOR_H
#define COHORT_FAULT_COORDINATOR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cohort.h"
#include "pb.h"
#include "sign.h"

#define FAULT_N_PARAMS 7850 /* logreg on 28x28 images, 10 classes */
#define FAULT_MODEL_BYTES (FAULT_N_PARAMS * 4)

typedef struct fault_coordinator {
  pthread_mutex_t mu; /* the handlers hold it; the test sets faults between
                         calls */
  float model[FAULT_N_PARAMS];
  uint8_t sha[32];
  /* How an honest one serves: downloads in pieces of serve_chunk bytes (0:
   * the rest at once); uploads asked for in pieces of upload_chunk (0: the
   * task leaves it to the client), larger ones refused. */
  size_t serve_chunk, upload_chunk;
  /* Once an update came in whole with its digest, CheckIn says the
   * federation is over. */
  int done_after_upload;

  /* Register: answers with this session token, or client id 0; refuses the
   * next refuse_registers as a key bound to another client, the next
   * refuse_as_replay as a proof not newer than the last. */
  const char *session_token;
  int zero_id;
  int refuse_registers, refuse_as_replay;
  /* CheckIn: fails with FAILED_PRECONDITION and checkin_detail; answers
   * RetryLater with retry_reason; announces a digest the model does not
   * have; appends junk_fields unknown fields; edit changes the task and
   * its plan before they are packed. */
  const char *checkin_detail;
  const char *retry_reason;
  int corrupt_digest;
  size_t junk_fields;
  void (*edit)(Cohort__V1__Task *t, Cohort__V1__TrainingPlan *p);
  /* GetModel: the second chunk on (offset > 0) claims another offset (1),
   * is cut short in its data (2) or says the model is bigger (3); answers
   * the next download as a coordinator that no longer knows the session. */
  int bad_chunk;
  int session_unknown_once;
  /* Upload: answers the second call with offset 0, as if it had lost the
   * assembly. */
  int forget_once;

  /* What it saw. */
  int register_calls, checkins, get_model_calls, upload_calls;
  /* The first four Registers' keys, certificate lengths and proof times,
   * and the last certificate sent. */
  uint8_t keys[4][SIGN_PUBLIC_LEN];
  size_t key_len[4], cert_len[4];
  int64_t proof_ms[4];
  uint8_t cert[SIGN_CERT_LEN];
  /* The update as assembled, and whether it came in whole with its
   * digest. */
  uint8_t received[FAULT_MODEL_BYTES];
  uint64_t received_len;
  int complete;
} fault_coordinator;

extern fault_coordinator g_fake;

/* Starts it on a free port of 127.0.0.1 (as a CUnit suite's init: 0 or
 * -1); the model is i x 1e-4 for weight i. */
int fault_start(void);
int fault_stop(void);
/* "127.0.0.1:PORT". */
const char *fault_target(void);
/* The model, its first weight set to first, and its digest. */
void fault_set_model(float first);
/* Every fault zero, what it saw forgotten, the model back: an honest
 * coordinator with a round open (serve_chunk, upload_chunk and
 * done_after_upload are kept). */
void fault_reset(void);

/* What the tests' trainer saw: its calls and the last request, and the
 * first weights it was handed. */
typedef struct fault_seen {
  int calls;
  cohort_train_request req;
  float head[3];
} fault_seen;

/* The options of a client of the fake whose trainer adds (i % 7) x 0.5 to
 * weight i and reports 42 examples, counting in *s; and such a client. */
void fault_client_options(fault_seen *s, cohort_client_options *o);
cohort_client_t *fault_client(fault_seen *s);
/* Whether what the fake received is exactly that trainer's delta. */
int fault_received_the_delta(void);

#endif
