/* Token-bucket rate limits keyed by a short string (a client id, a source
 * address), in a table of fixed size: a flood of new keys evicts the
 * buckets idle longest instead of growing memory. Used on Register,
 * CheckIn and the sessions other calls present (service.c);
 * docs/security.md, "Rate limits". */
#ifndef COHORT_RATELIMIT_H
#define COHORT_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ratelimit ratelimit;

/* Keys longer than this are cut (an IPv6 address with its brackets fits). */
#define RATELIMIT_KEY_MAX 63

typedef struct ratelimit_config {
  double rate;  /* tokens added per second; > 0 */
  double burst; /* bucket size: calls allowed at once; >= 1 */
  size_t slots; /* keys tracked at once; rounded up to a power of two */
} ratelimit_config;

/* A limiter, or NULL with COHORT_EINVAL (a bad config) or COHORT_ENOMEM. */
int ratelimit_new(const ratelimit_config *cfg, ratelimit **out);
/* Accepts NULL. */
void ratelimit_free(ratelimit *r);

/* Takes one token from key's bucket at monotonic time now_s: 0 when the
 * call may go ahead, else the milliseconds until the bucket has a token
 * again (>= 1). A key not in the table starts with a full bucket, taking
 * the slot of the key idle longest among those it may use. A NULL limiter
 * always allows. Thread-safe. */
int64_t ratelimit_take(ratelimit *r, const char *key, double now_s);
/* Gives back a token ratelimit_take took for key at now_s: the call
 * turned out to be one the limit does not charge. The bucket stays within
 * its size; a key no longer in the table (evicted since) is left out. A
 * NULL limiter: nothing. Thread-safe. */
void ratelimit_refund(ratelimit *r, const char *key, double now_s);
/* What ratelimit_take would answer, taking nothing: 0 when key's bucket
 * holds a token (or key is not in the table), else the milliseconds until
 * it does. For a limit charged only by calls that fail. Thread-safe. */
int64_t ratelimit_wait(ratelimit *r, const char *key, double now_s);

#endif
