/* See seen.h. */
#include "seen.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(int64_t id, size_t n_slots) {
  /* A 64-bit mix (splitmix64's finaliser): client ids are sequential. */
  uint64_t x = (uint64_t)id;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return (size_t)(x & (n_slots - 1));
}

static void index_put(size_t *slots, size_t n_slots, int64_t id, size_t idx) {
  size_t i = slot_of(id, n_slots);
  while (slots[i])
    i = (i + 1) & (n_slots - 1);
  slots[i] = idx + 1;
}

seen_client *seen_set_find(const seen_set *s, int64_t id) {
  if (!s->n_slots)
    return NULL;
  for (size_t i = slot_of(id, s->n_slots); s->slots[i];
       i = (i + 1) & (s->n_slots - 1))
    if (s->items[s->slots[i] - 1].id == id)
      return &s->items[s->slots[i] - 1];
  return NULL;
}

/* Room for one more: the array doubles, and the index stays at most half
 * full so probes stay short. */
static int grow(seen_set *s) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    seen_client *items = realloc(s->items, cap * sizeof *items);
    if (!items)
      return -1;
    s->items = items;
    s->cap = cap;
  }
  if (2 * (s->n + 1) > s->n_slots) {
    size_t n_slots = s->n_slots ? 2 * s->n_slots : 32;
    size_t *slots = calloc(n_slots, sizeof *slots);
    if (!slots)
      return -1;
    for (size_t i = 0; i < s->n; i++)
      index_put(slots, n_slots, s->items[i].id, i);
    free(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
  }
  return 0;
}

seen_client *seen_set_get(seen_set *s, int64_t id) {
  seen_client *c = seen_set_find(s, id);
  if (c)
    return c;
  if (grow(s))
    return NULL;
  c = &s->items[s->n];
  memset(c, 0, sizeof *c);
  c->id = id;
  c->part_round = -1;
  index_put(s->slots, s->n_slots, id, s->n);
  s->n++;
  return c;
}

static void unlink_client(seen_set *s, seen_client *c) {
  if (c->prev)
    s->items[c->prev - 1].next = c->next;
  else
    s->head = c->next;
  if (c->next)
    s->items[c->next - 1].prev = c->prev;
  else
    s->tail = c->prev;
  c->prev = c->next = 0;
  c->listed = 0;
  s->n_listed--;
}

void seen_set_checked_in(seen_set *s, seen_client *c, double now) {
  c->checked_in_at = now;
  if (c->listed)
    unlink_client(s, c);
  size_t idx = (size_t)(c - s->items) + 1;
  c->prev = s->tail;
  c->next = 0;
  if (s->tail)
    s->items[s->tail - 1].next = idx;
  else
    s->head = idx;
  s->tail = idx;
  c->listed = 1;
  s->n_listed++;
}

size_t seen_set_active(seen_set *s, double now, double window_s) {
  /* The oldest check-ins leave first; a client that checks in again is
   * listed again. */
  while (s->head && now - s->items[s->head - 1].checked_in_at > window_s)
    unlink_client(s, &s->items[s->head - 1]);
  return s->n_listed;
}

void seen_set_free(seen_set *s) {
  free(s->items);
  free(s->slots);
  memset(s, 0, sizeof *s);
}
