/* Client sampling for the accountant's model (dp_sample.h). */
#include "dp_sample.h"

int dp_sample_coin(prg *g, double q) {
  if (!(q > 0))
    return 0;
  if (q >= 1)
    return 1;
  /* q 2^64 is exact (a power-of-two scaling) and below 2^64; its floor
   * converts exactly. */
  uint64_t threshold = (uint64_t)(q * 0x1p64);
  return prg_u64(g) < threshold;
}

void dp_sample_draw(prg *g, int64_t *items, size_t m, size_t k) {
  for (size_t i = 0; i < k && i + 1 < m; i++) {
    size_t j = i + (size_t)prg_below(g, (uint64_t)(m - i));
    int64_t t = items[i];
    items[i] = items[j];
    items[j] = t;
  }
}
