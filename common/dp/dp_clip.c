/* Client-level L2 clipping and the adaptive clip of Andrew et al. 2021
 * (dp_clip.h); docs/privacy.md has the formulas and their source. */
#include "dp_clip.h"

#include <math.h>

double dp_l2_norm(const float *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)x[i] * x[i];
  return sqrt(s);
}

double dp_clip_l2(float *x, size_t n, double clip) {
  double norm = dp_l2_norm(x, n);
  if (!isfinite(norm) || !(clip > 0)) {
    for (size_t i = 0; i < n; i++)
      x[i] = 0;
    return norm;
  }
  if (norm <= clip)
    return norm;
  /* Each float rounds to within a relative 2^-24 of x * f; f shrunk by
   * 2^-22 keeps the rounded vector's norm below clip, also counting the
   * rounding of the norm itself. */
  double f = clip / norm * (1 - 0x1p-22);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)(x[i] * f);
  return norm;
}

double dp_adaptive_noised_fraction(double noised_centred_sum,
                                   double expected_clients) {
  if (!(expected_clients > 0) || isnan(noised_centred_sum))
    return 0;
  double f = (noised_centred_sum + expected_clients / 2) / expected_clients;
  return f < 0 ? 0 : f > 1 ? 1 : f;
}

double dp_adaptive_clip_next(const dp_adaptive_clip *a, double clip,
                             double noised_fraction) {
  double f = noised_fraction;
  if (isnan(f))
    f = a->target_quantile; /* no information: keep the clip */
  f = f < 0 ? 0 : f > 1 ? 1 : f;
  return clip * exp(-a->learning_rate * (f - a->target_quantile));
}

double dp_adaptive_update_noise(double z, double count_stddev,
                                double expected_clients) {
  (void)expected_clients;
  if (!(z > 0) || !(count_stddev > 0))
    return 0;
  if (isinf(count_stddev))
    return z;
  double count_z = 2 * count_stddev;
  if (count_z <= z)
    return 0;
  double inv = 1 / (z * z) - 1 / (count_z * count_z);
  return inv > 0 ? 1 / sqrt(inv) : 0;
}
