/* The clients the coordinator has seen since it started, by id: found in
 * O(1) however large the fleet (a hash index over an array), and kept in
 * check-in order so the active population (clients that checked in within
 * a window) is counted in O(1) amortised instead of by a scan on every
 * check-in. Not thread-safe: the round engine holds its lock. */
#ifndef COHORT_SEEN_H
#define COHORT_SEEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct seen_client {
  int64_t id;
  int told_done;
  double touched_at;     /* monotonic time clients.last_seen was written */
  double checked_in_at;  /* monotonic time of its last check-in; 0: never */
  int64_t sampled_round; /* the DP round its sampling decision is for */
  int sampled;           /* that decision: Poisson's coin, or 1 for a
                            fixed-size round's candidate */
  int64_t open_round;    /* the last round it checked in while OPEN */
  int64_t cand_round;    /* the round it is a candidate of (round_select) */
  double worked_at;      /* monotonic time it last completed work; 0: never */
  int offences_known;    /* the next two were read from the store */
  int64_t failures;      /* its failed rounds among the last M */
  double excluded_until; /* wall time its exclusion ends; 0: none */
  int64_t part_round;    /* the round it is a participant of, and where */
  size_t part_index;     /* (round_find_participant checks both) */
  /* Check-in order, as indices + 1 (0: none); `listed` while in it. */
  size_t prev, next;
  int listed;
} seen_client;

typedef struct seen_set {
  seen_client *items; /* in order of first sight; never reordered */
  size_t n, cap;
  size_t *slots; /* open addressing: index + 1, 0 = empty */
  size_t n_slots;
  size_t head, tail; /* oldest and newest check-in, indices + 1 */
  size_t n_listed;
} seen_set;

/* The client with this id, added (never checked in) when new; NULL when
 * out of memory. The pointer is valid until the next seen_set_get. */
seen_client *seen_set_get(seen_set *s, int64_t id);
/* The client with this id, or NULL. */
seen_client *seen_set_find(const seen_set *s, int64_t id);
/* It checked in now: the newest in check-in order. */
void seen_set_checked_in(seen_set *s, seen_client *c, double now);
/* Clients that checked in within window_s of now. now must not go back. */
size_t seen_set_active(seen_set *s, double now, double window_s);
void seen_set_free(seen_set *s);

#endif
