/* Admission bookkeeping of the rpc server (see rpc_admit.h): per-address
 * and per-caller counts in chained hash tables, and per pool a FIFO of
 * waiting calls and a list of receiving ones, all under one mutex. */
#include "rpc_admit.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "rpc_peer.h"

#define ADDR_BUCKETS 1024

/* A count per key: a source address, or a caller. */
typedef struct key_count {
  struct key_count *next;
  int count;
  char key[RPC_ADMIT_ADDR_MAX];
} key_count;

typedef key_count *count_table[ADDR_BUCKETS];

typedef struct entry_list {
  rpc_admit_entry *head, *tail;
  int n;
} entry_list;

struct rpc_admit {
  pthread_mutex_t mu;
  rpc_admit_limits lim;
  int closed;
  int in_flight; /* waiting + receiving, all pools */
  entry_list waiting[RPC_POOLS], receiving[RPC_POOLS];
  count_table addrs, callers;
};

void rpc_admit_address(const char *peer, char out[RPC_ADMIT_ADDR_MAX]) {
  rpc_peer_key key;
  if (rpc_peer_key_of_name(peer, &key) == 0) {
    rpc_peer_key_text(&key, out, RPC_ADMIT_ADDR_MAX);
    return;
  }
  size_t n = strlen(peer);
  const char *colon = strrchr(peer, ':');
  /* Only a trailing ":digits" is a port ("ipv4:" alone is not). */
  if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1))
    n = (size_t)(colon - peer);
  if (n >= RPC_ADMIT_ADDR_MAX)
    n = RPC_ADMIT_ADDR_MAX - 1;
  memcpy(out, peer, n);
  out[n] = '\0';
}

char *rpc_admit_bearer(const uint8_t *value, size_t len) {
  static const char prefix[] = "Bearer ";
  const size_t plen = sizeof prefix - 1;
  if (!value || len <= plen || memcmp(value, prefix, plen) != 0)
    return NULL;
  for (size_t k = plen; k < len; k++)
    if (value[k] <= 0x20 || value[k] == 0x7f)
      return NULL;
  char *t = malloc(len - plen + 1);
  if (!t)
    return NULL;
  memcpy(t, value + plen, len - plen);
  t[len - plen] = '\0';
  return t;
}

static uint32_t key_hash(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 16777619u;
  return h % ADDR_BUCKETS;
}

/* The count of key (shorter than RPC_ADMIT_ADDR_MAX), created at 0 when
 * create is set; NULL if absent or out of memory. */
static key_count *key_find(count_table t, const char *key, int create) {
  key_count **b = &t[key_hash(key)];
  for (key_count *c = *b; c; c = c->next)
    if (strcmp(c->key, key) == 0)
      return c;
  if (!create)
    return NULL;
  key_count *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  snprintf(c->key, sizeof c->key, "%s", key);
  c->next = *b;
  *b = c;
  return c;
}

/* One less for key; a count that reaches 0 is freed. */
static void key_release(count_table t, const char *key) {
  key_count **b = &t[key_hash(key)];
  for (key_count **p = b; *p; p = &(*p)->next) {
    if (strcmp((*p)->key, key) != 0)
      continue;
    if (--(*p)->count <= 0) {
      key_count *dead = *p;
      *p = dead->next;
      free(dead);
    }
    return;
  }
}

static void table_free(count_table t) {
  for (size_t i = 0; i < ADDR_BUCKETS; i++) {
    key_count *c = t[i];
    while (c) {
      key_count *next = c->next;
      free(c);
      c = next;
    }
  }
}

static void list_push(entry_list *l, rpc_admit_entry *e) {
  e->next = NULL;
  e->prev = l->tail;
  if (l->tail)
    l->tail->next = e;
  else
    l->head = e;
  l->tail = e;
  l->n++;
}

static void list_remove(entry_list *l, rpc_admit_entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    l->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    l->tail = e->prev;
  e->prev = e->next = NULL;
  l->n--;
}

static entry_list *list_of(rpc_admit *a, const rpc_admit_entry *e) {
  return e->state == RPC_ADMIT_WAITING ? &a->waiting[e->pool]
                                       : &a->receiving[e->pool];
}

/* Takes e out of its list and its counts; state NONE. Under mu. */
static void entry_drop(rpc_admit *a, rpc_admit_entry *e) {
  list_remove(list_of(a, e), e);
  key_release(a->addrs, e->addr);
  if (e->caller[0])
    key_release(a->callers, e->caller);
  a->in_flight--;
  e->state = RPC_ADMIT_NONE;
}

int rpc_admit_new(const rpc_admit_limits *limits, rpc_admit **out) {
  *out = NULL;
  if (limits->per_address < 0 || limits->per_caller < 0 ||
      limits->in_flight < 0 || limits->receive_s < 0)
    return COHORT_EINVAL;
  for (int p = 0; p < RPC_POOLS; p++)
    if (limits->receiving[p] < 0)
      return COHORT_EINVAL;
  rpc_admit *a = calloc(1, sizeof *a);
  if (!a)
    return COHORT_ENOMEM;
  if (pthread_mutex_init(&a->mu, NULL) != 0) {
    free(a);
    return COHORT_ENOMEM;
  }
  a->lim = *limits;
  *out = a;
  return COHORT_OK;
}

void rpc_admit_free(rpc_admit *a) {
  if (!a)
    return;
  table_free(a->addrs);
  table_free(a->callers);
  pthread_mutex_destroy(&a->mu);
  free(a);
}

rpc_admit_verdict rpc_admit_arrive(rpc_admit *a, rpc_admit_entry *e,
                                   const char *peer, const char *caller,
                                   int pool, double now) {
  memset(e, 0, sizeof *e);
  rpc_admit_address(peer, e->addr);
  if (caller)
    snprintf(e->caller, sizeof e->caller, "%s", caller);
  e->pool = pool;
  e->deadline = a->lim.receive_s > 0 ? now + a->lim.receive_s : 0;
  rpc_admit_verdict v = RPC_ADMIT_RECEIVE;
  pthread_mutex_lock(&a->mu);
  key_count *c = NULL, *cc = NULL;
  if (a->closed) {
    v = RPC_ADMIT_CLOSED;
  } else if (a->lim.in_flight && a->in_flight >= a->lim.in_flight) {
    v = RPC_ADMIT_OVER_IN_FLIGHT;
  } else {
    c = key_find(a->addrs, e->addr, 1);
    /* Out of memory for a new key refuses it as if over its limit. */
    if (!c || (a->lim.per_address && c->count >= a->lim.per_address))
      v = RPC_ADMIT_OVER_ADDRESS;
    else if (e->caller[0] &&
             (!(cc = key_find(a->callers, e->caller, 1)) ||
              (a->lim.per_caller && cc->count >= a->lim.per_caller)))
      v = RPC_ADMIT_OVER_CALLER;
  }
  if (v == RPC_ADMIT_RECEIVE) {
    c->count++;
    if (cc)
      cc->count++;
    a->in_flight++;
    int cap = a->lim.receiving[pool];
    e->state = cap && a->receiving[pool].n >= cap ? RPC_ADMIT_WAITING
                                                  : RPC_ADMIT_RECEIVING;
    list_push(list_of(a, e), e);
    if (e->state == RPC_ADMIT_WAITING)
      v = RPC_ADMIT_WAIT;
  } else {
    /* Counts created above for nothing. */
    if (c && c->count == 0)
      key_release(a->addrs, e->addr);
    if (cc && cc->count == 0)
      key_release(a->callers, e->caller);
  }
  pthread_mutex_unlock(&a->mu);
  return v;
}

rpc_admit_entry *rpc_admit_leave(rpc_admit *a, rpc_admit_entry *e) {
  rpc_admit_entry *next = NULL;
  pthread_mutex_lock(&a->mu);
  if (e->state != RPC_ADMIT_NONE) {
    int was_receiving = e->state == RPC_ADMIT_RECEIVING;
    entry_drop(a, e);
    next = was_receiving ? a->waiting[e->pool].head : NULL;
    if (next) {
      list_remove(&a->waiting[e->pool], next);
      next->state = RPC_ADMIT_RECEIVING;
      list_push(&a->receiving[e->pool], next);
    }
  }
  pthread_mutex_unlock(&a->mu);
  return next;
}

size_t rpc_admit_sweep(rpc_admit *a, double now, rpc_admit_visit_fn visit,
                       void *ctx) {
  size_t n = 0;
  pthread_mutex_lock(&a->mu);
  for (int p = 0; p < RPC_POOLS; p++) {
    /* Waiting lists are in arrival order, and all share one timeout. */
    rpc_admit_entry *e = a->waiting[p].head;
    while (e && e->deadline > 0 && e->deadline <= now) {
      rpc_admit_entry *next = e->next;
      entry_drop(a, e);
      visit(ctx, e);
      n++;
      e = next;
    }
    for (e = a->receiving[p].head; e; e = e->next) {
      if (e->expired || e->deadline <= 0 || e->deadline > now)
        continue;
      e->expired = 1;
      visit(ctx, e);
      n++;
    }
  }
  pthread_mutex_unlock(&a->mu);
  return n;
}

void rpc_admit_close(rpc_admit *a, rpc_admit_visit_fn visit, void *ctx) {
  pthread_mutex_lock(&a->mu);
  a->closed = 1;
  for (int p = 0; p < RPC_POOLS; p++) {
    while (a->waiting[p].head) {
      rpc_admit_entry *e = a->waiting[p].head;
      entry_drop(a, e);
      visit(ctx, e);
    }
  }
  pthread_mutex_unlock(&a->mu);
}

void rpc_admit_counts(rpc_admit *a, const char *peer, int *from_address,
                      int *waiting, int *receiving) {
  char addr[RPC_ADMIT_ADDR_MAX];
  rpc_admit_address(peer ? peer : "", addr);
  pthread_mutex_lock(&a->mu);
  key_count *c = key_find(a->addrs, addr, 0);
  if (from_address)
    *from_address = c ? c->count : 0;
  int w = 0, r = 0;
  for (int p = 0; p < RPC_POOLS; p++) {
    w += a->waiting[p].n;
    r += a->receiving[p].n;
  }
  if (waiting)
    *waiting = w;
  if (receiving)
    *receiving = r;
  pthread_mutex_unlock(&a->mu);
}
