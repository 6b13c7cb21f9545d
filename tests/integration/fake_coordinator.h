/* A scripted fake coordinator for the tests that stop a client in each
 * state (test_client_signals, test_client_stop): our rpc server in the
 * test process, whose handlers answer as the test sets them and can be
 * held (blocked) to keep the client in a call. (fault_coordinator.h is the
 * other fake: its replies carry faults.) */
#ifndef COHORT_FAKE_COORDINATOR_H
#define COHORT_FAKE_COORDINATOR_H

#include <stdatomic.h>
#include <stddef.h>

#define HOLD_MAX_S 20.0 /* a held handler lets go after this, whatever */

/* What the fake's CheckIn answers. */
typedef enum checkin_mode {
  CHECKIN_UNAVAILABLE, /* UNAVAILABLE, every time */
  CHECKIN_RETRY_LATER, /* RetryLater after retry_after_ms */
  CHECKIN_HOLD,        /* hold the call (a long poll with nothing to do) */
  CHECKIN_TASK,        /* a training task */
} checkin_mode;

/* The task the fake hands out. */
typedef enum fake_task {
  FAKE_TASK_LOGREG,        /* logreg, fp32 */
  FAKE_TASK_CNN,           /* the FedAvg CNN, fp32 */
  FAKE_TASK_LOGREG_SECAGG, /* logreg under secure aggregation (q8) */
} fake_task;

typedef struct fake_state {
  atomic_int checkin_mode;
  atomic_int task; /* fake_task */
  atomic_int retry_after_ms;
  atomic_int epochs; /* of the task */
  /* Handlers that block while their flag is set (and HOLD_MAX_S at most). */
  atomic_int hold_checkin, hold_get_model, hold_upload, hold_secagg;
  atomic_int held; /* handlers blocked right now */
  atomic_int busy; /* handlers not yet returned, held or not */
  /* What the fake has seen. */
  atomic_int checkins, checkins_answered, reports, uploads, secagg_calls;
  atomic_int models_served; /* downloads served to their last byte */
  atomic_llong model_bytes_served;
  atomic_int last_wait_ms;
  atomic_llong last_checkin_deadline_ms;
  atomic_int last_train_ms;
  atomic_llong report_ms, upload_ms;        /* when the first of each came */
  atomic_llong checkin_1_ms, checkin_21_ms; /* and the 1st and 21st check-in */
} fake_state;

extern fake_state g;

/* Starts the fake on a free port of 127.0.0.1; 0 or -1. */
int fake_start(void);
void fake_stop(void);
/* "127.0.0.1:PORT" of the fake. */
const char *fake_target(void);
/* Bytes of the model of the task the fake hands out now. */
size_t fake_model_bytes(void);

/* Lets every held handler go. */
void fake_release_all(void);
/* Forgets what the fake saw, once every handler has returned, then
 * sets the check-in mode (and the logreg task, one epoch). */
void fake_reset(checkin_mode mode);

/* A port that was free a moment ago: bind 127.0.0.1:0, read, close. */
int closed_port(void);

double mono_s(void);
void sleep_ms(long ms);

/* Polls until ready(arg) holds, for up to 30 s; whether it did. */
int wait_for(int (*ready)(void *), void *arg);

typedef struct count_goal {
  atomic_int *counter;
  int n;
} count_goal;

/* For wait_for: *counter has reached n. */
int reached(void *count_goal);

#endif
