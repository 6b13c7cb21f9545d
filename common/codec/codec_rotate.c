/* Randomized Hadamard rotation (Suresh et al. 2017): x <- H D x / sqrt(n),
 * D random signs from the round seed, H the Walsh-Hadamard matrix applied
 * by the fast transform in O(n log n). It spreads a spiky vector's mass over
 * all coordinates, which shrinks the range, hence the error, of
 * quantization. H is symmetric and H H = n I, so the inverse is D H / sqrt(n).
 */
#include <math.h>

#include "codec_internal.h"
#include "cohort_status.h"

/* Sign bytes drawn per call: 8 signs each. */
#define SIGN_CHUNK 512

static int power_of_two(size_t n) { return n && (n & (n - 1)) == 0; }

/* The signs of D in order: bit i of the stream derived from the round seed
 * set means -1. Read sequentially, SIGN_CHUNK bytes at a time. */
typedef struct sign_reader {
  prg g;
  size_t n;
  uint8_t bits[SIGN_CHUNK];
} sign_reader;

static int signs_open(sign_reader *s, const uint8_t seed[PRG_SEED_LEN],
                      size_t n) {
  uint8_t derived[PRG_SEED_LEN];
  s->n = n;
  int rc = prg_derive(seed, "rotate", derived);
  return rc ? rc : prg_init(&s->g, derived);
}

/* i: 0, 1, ..., n - 1 in turn. */
static int sign_negative(sign_reader *s, size_t i) {
  size_t b = i % (8 * SIGN_CHUNK);
  if (b == 0) {
    size_t left = (s->n - i + 7) / 8;
    prg_bytes(&s->g, s->bits, left < SIGN_CHUNK ? left : SIGN_CHUNK);
  }
  return s->bits[b / 8] >> (b % 8) & 1;
}

static void hadamard_f(float *x, size_t n) {
  for (size_t h = 1; h < n; h <<= 1)
    for (size_t i = 0; i < n; i += 2 * h)
      for (size_t j = i; j < i + h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

static void hadamard_d(double *x, size_t n) {
  for (size_t h = 1; h < n; h <<= 1)
    for (size_t i = 0; i < n; i += 2 * h)
      for (size_t j = i; j < i + h; j++) {
        double a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

int rotate_forward(const uint8_t seed[PRG_SEED_LEN], float *x, size_t n) {
  if (!power_of_two(n))
    return COHORT_EINVAL;
  sign_reader s = {0};
  int rc = signs_open(&s, seed, n);
  if (rc == COHORT_OK) {
    /* 1/sqrt(n) goes in before the butterflies, so every intermediate stays
     * within the input's L2 norm and a large vector cannot overflow. */
    const float scale = (float)(1.0 / sqrt((double)n));
    for (size_t i = 0; i < n; i++)
      x[i] *= sign_negative(&s, i) ? -scale : scale;
    hadamard_f(x, n);
  }
  prg_free(&s.g);
  return rc;
}

int rotate_inverse(const uint8_t seed[PRG_SEED_LEN], double *x, size_t n) {
  if (!power_of_two(n))
    return COHORT_EINVAL;
  sign_reader s = {0};
  int rc = signs_open(&s, seed, n);
  if (rc == COHORT_OK) {
    const double scale = 1.0 / sqrt((double)n);
    for (size_t i = 0; i < n; i++)
      x[i] *= scale;
    hadamard_d(x, n);
    for (size_t i = 0; i < n; i++)
      if (sign_negative(&s, i))
        x[i] = -x[i];
  }
  prg_free(&s.g);
  return rc;
}
