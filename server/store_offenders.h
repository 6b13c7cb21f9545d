/* Each client's record of failed rounds in the store (docs/rounds.md,
 * "Offenders"): the rounds it was selected for and did not complete, the
 * lifetime count, and the time until which it is kept out of selection.
 * Thread-safety: as the store (one connection, the caller's lock). */
#ifndef COHORT_STORE_OFFENDERS_H
#define COHORT_STORE_OFFENDERS_H

#include <stdint.h>

#include "store.h"

/* Records that client failed round (reason: a short constant text), keeps
 * only its failures of the last `window` rounds, and counts them into
 * *recent. One transaction. */
int store_client_failed(store *s, int64_t client, int64_t round,
                        const char *reason, int64_t window, double now,
                        int64_t *recent);
/* Keeps client out of selection until `until` (wall seconds). */
int store_client_exclude(store *s, int64_t client, double until);
/* The client completed work: its recent failures and any exclusion are
 * forgotten (the lifetime count stays). */
int store_client_recovered(store *s, int64_t client);
/* Its failures kept (*recent) and the end of its exclusion (0: none). */
int store_client_offences(store *s, int64_t client, int64_t *recent,
                          double *excluded_until);

/* The schema step from 10 to 11 (store.c runs it). */
extern const char *const STORE_MIGRATE_V11;

#endif
