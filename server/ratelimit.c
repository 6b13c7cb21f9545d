/* Fixed-size token-bucket table; see ratelimit.h. Open addressing with a
 * short probe window: a key lives in one of PROBE slots after its hash, so
 * a lookup is bounded, and when all of them are taken the one idle longest
 * is reused. The hash is keyed from the CSPRNG, so that a client cannot
 * choose addresses that all land in one window and evict a victim's
 * bucket on purpose. */
#include "ratelimit.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"

#define PROBE 8

typedef struct bucket {
  char key[RATELIMIT_KEY_MAX + 1]; /* "" when free */
  double tokens;
  double last; /* monotonic seconds of the last take */
} bucket;

struct ratelimit {
  pthread_mutex_t mu;
  ratelimit_config cfg;
  size_t mask;
  uint64_t seed;
  bucket *slots;
};

int ratelimit_new(const ratelimit_config *cfg, ratelimit **out) {
  *out = NULL;
  if (!(cfg->rate > 0) || !(cfg->burst >= 1) || cfg->slots == 0 ||
      cfg->slots > ((size_t)1 << 24))
    return COHORT_EINVAL;
  ratelimit *r = calloc(1, sizeof *r);
  size_t n = PROBE;
  while (n < cfg->slots)
    n <<= 1;
  if (r)
    r->slots = calloc(n, sizeof *r->slots);
  if (!r || !r->slots || crypto_random(&r->seed, sizeof r->seed)) {
    ratelimit_free(r);
    return COHORT_ENOMEM;
  }
  pthread_mutex_init(&r->mu, NULL);
  r->cfg = *cfg;
  r->mask = n - 1;
  *out = r;
  return COHORT_OK;
}

void ratelimit_free(ratelimit *r) {
  if (!r)
    return;
  if (r->slots)
    pthread_mutex_destroy(&r->mu);
  free(r->slots);
  free(r);
}

/* FNV-1a over the seed and the key, then a final mix. */
static uint64_t hash(uint64_t seed, const char *key) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (; *key; key++)
    h = (h ^ (unsigned char)*key) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

/* key's bucket, or the slot to give it (free, else idle longest). */
static bucket *find(ratelimit *r, const char *key, int *found) {
  size_t at = (size_t)hash(r->seed, key);
  bucket *oldest = NULL;
  for (size_t i = 0; i < PROBE; i++) {
    bucket *b = &r->slots[(at + i) & r->mask];
    if (strcmp(b->key, key) == 0) {
      *found = 1;
      return b;
    }
    if (!oldest || (oldest->key[0] && (!b->key[0] || b->last < oldest->last)))
      oldest = b;
  }
  *found = 0;
  return oldest;
}

/* ratelimit_take when take is 1, ratelimit_wait when 0, ratelimit_refund
 * when -1: the wait for key's bucket at now_s, after taking a token from
 * it, or giving one back. */
static int64_t bucket_wait(ratelimit *r, const char *key, double now_s,
                           int take) {
  if (!r)
    return 0;
  char k[RATELIMIT_KEY_MAX + 1];
  size_t len = strlen(key);
  if (len > RATELIMIT_KEY_MAX)
    len = RATELIMIT_KEY_MAX;
  memcpy(k, key, len);
  k[len] = '\0';
  pthread_mutex_lock(&r->mu);
  int found;
  bucket *b = find(r, k, &found);
  if (!found && take != 1) {
    pthread_mutex_unlock(&r->mu); /* a full bucket, not stored */
    return 0;
  }
  if (!found) {
    memcpy(b->key, k, len + 1);
    b->tokens = r->cfg.burst;
    b->last = now_s;
  } else if (now_s > b->last) {
    b->tokens += (now_s - b->last) * r->cfg.rate;
    if (b->tokens > r->cfg.burst)
      b->tokens = r->cfg.burst;
    b->last = now_s;
  }
  /* A refused call still counts as use, so a flooding key stays in the
   * table rather than being evicted into a fresh, full bucket. */
  int64_t wait_ms = 0;
  if (take < 0) {
    b->tokens = b->tokens + 1 < r->cfg.burst ? b->tokens + 1 : r->cfg.burst;
  } else if (b->tokens >= 1) {
    if (take)
      b->tokens -= 1;
  } else {
    wait_ms = (int64_t)ceil((1 - b->tokens) / r->cfg.rate * 1000);
    if (wait_ms < 1)
      wait_ms = 1;
  }
  pthread_mutex_unlock(&r->mu);
  return wait_ms;
}

int64_t ratelimit_take(ratelimit *r, const char *key, double now_s) {
  return bucket_wait(r, key, now_s, 1);
}

int64_t ratelimit_wait(ratelimit *r, const char *key, double now_s) {
  return bucket_wait(r, key, now_s, 0);
}

void ratelimit_refund(ratelimit *r, const char *key, double now_s) {
  bucket_wait(r, key, now_s, -1);
}
