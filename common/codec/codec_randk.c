/* Random-k: the k coordinates every client of a round keeps, drawn from the
 * round seed so that none are sent and all clients agree. Floyd's algorithm
 * draws a uniform k-subset with k draws; the chosen are marked in a bitmap
 * of n bits, which a scan reads back in ascending order: O(n / 64 + k)
 * time, and n / 8 bytes, a thirty-second of the delta the caller holds. */
#include <stdlib.h>

#include "codec_internal.h"
#include "cohort_status.h"

int randk_indices(const uint8_t seed[PRG_SEED_LEN], size_t n, size_t k,
                  uint32_t *idx) {
  if (k > n || n > UINT32_MAX)
    return COHORT_EINVAL;
  if (k == 0)
    return COHORT_OK;
  uint8_t derived[PRG_SEED_LEN];
  prg g = {0};
  uint64_t *taken = calloc((n + 63) / 64, sizeof *taken);
  int rc = taken ? prg_derive(seed, "randk", derived) : COHORT_ENOMEM;
  if (!rc)
    rc = prg_init(&g, derived);
  if (rc)
    goto out;
  /* Floyd: for j = n - k .. n - 1 take t uniform in [0, j], or j itself
   * when t is already taken; every k-subset comes out equally likely. */
  for (size_t j = n - k; j < n; j++) {
    size_t t = (size_t)prg_below(&g, (uint64_t)j + 1);
    if (taken[t / 64] >> (t % 64) & 1)
      t = j;
    taken[t / 64] |= (uint64_t)1 << (t % 64);
  }
  size_t got = 0;
  for (size_t w = 0; got < k; w++)
    for (uint64_t bits = taken[w]; bits; bits &= bits - 1)
      idx[got++] = (uint32_t)(64 * w + (size_t)__builtin_ctzll(bits));
out:
  free(taken);
  prg_free(&g);
  return rc;
}
