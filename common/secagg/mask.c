/* Mask expansion into Z_{2^B}; see mask.h for the format. The unmasking
 * coordinator expands tens of thousands of masks per round, so the cost
 * that matters is per element: the keystream (AES-128-CTR through EVP,
 * B bits per element for narrow rings) and the extraction, eight elements
 * per SIMD shift. Masks are summed in batches, chunk by chunk, into a
 * 32-bit accumulator that stays in the L1 cache; the caller's uint64_t
 * vector is touched once per batch. */
#include "mask.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "wire.h"

#define LANES 8
#define ROWS 32
#define BLOCK (LANES * ROWS) /* elements per keystream block */
#define BATCH 64             /* seeds expanded together */
#define CHUNK 2048           /* elements per chunk: a multiple of BLOCK */
/* Keystream per chunk: CHUNK / BLOCK blocks of 32 B bytes (B <= 32), or
 * CHUNK 64-bit words. For narrow rings the chunk's keystream, the zeros it
 * is made from (up to 8 KiB each) and the accumulator (8 KiB) stay in L1;
 * larger chunks saved nothing measurable. */
#define KS_BYTES (CHUNK * 8)

_Static_assert(CHUNK % BLOCK == 0, "chunks hold whole blocks");

struct mask_sum {
  uint8_t ks[KS_BYTES]; /* first, so that it is as aligned as the struct */
  union {
    uint32_t narrow[CHUNK];
    uint64_t wide[CHUNK];
  } acc;
  uint8_t seed[BATCH][PRG_SEED_LEN];
  int sign[BATCH];
  EVP_CIPHER_CTX *ctx[BATCH]; /* created as batches first need them */
  uint64_t *v;                /* borrowed */
  size_t n;
  unsigned bits, pending;
};

/* The cipher's input: never written. Not const, so that it sits in .bss
 * rather than as a block of zeros in the library file (issue 22's size). */
static uint8_t zeros[KS_BYTES];

static inline uint64_t ring_mask(unsigned bits) {
  return (UINT64_C(1) << bits) - 1;
}

/* ---- narrow kernels ---- */

/* Eight lanes of 32 bits. Loads and stores go through an alias-anything,
 * byte-aligned type, so any buffer will do. */
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef u32x8 u32x8_any __attribute__((aligned(1), may_alias));

/* acc[0 .. 256 nblocks) += the elements of nblocks keystream blocks (words
 * in host order), modulo 2^32: each row m of eight elements is one shift
 * (and, when it straddles two words, a second shift and an or) of a row of
 * lane words. Bits above B are left in: mod 2^B they do not matter, and
 * the caller clears them when folding. */
/* A row that straddles words has sh_ >= 1 (bits <= 32), and its second
 * word j_ + 1 is still one of the block's bits words. */
#define ADD_ROW(acc, ks, bits, m)                                              \
  do {                                                                         \
    const unsigned p_ = (m) * (bits), j_ = p_ / 32, sh_ = p_ % 32;             \
    u32x8 x_ = *(const u32x8_any *)((ks) + 32 * j_) >> sh_;                    \
    if (sh_ + (bits) > 32)                                                     \
      x_ |= *(const u32x8_any *)((ks) + 32 * (j_ + 1)) << (32 - sh_);          \
    *(u32x8_any *)((acc) + LANES * (m)) += x_;                                 \
  } while (0)

/* The rows unrolled: where bits is a constant (the AVX2 bodies below) the
 * shifts are immediates and the branches vanish. */
static inline __attribute__((always_inline)) void
add_blocks(uint32_t *restrict acc, const uint8_t *restrict ks, size_t nblocks,
           unsigned bits) {
  for (size_t q = 0; q < nblocks; q++, ks += 32 * bits, acc += BLOCK) {
#pragma GCC unroll 32
    for (unsigned m = 0; m < ROWS; m++)
      ADD_ROW(acc, ks, bits, m);
  }
}

typedef void (*narrow_fn)(uint32_t *acc, const uint8_t *ks, size_t nblocks,
                          unsigned bits);

/* Any CPU: the same vectors, lowered to what the target has (two SSE2
 * operations per row on baseline x86-64, two NEON ones on arm64), with
 * the shifts computed at run time. */
static void add_portable(uint32_t *restrict acc, const uint8_t *restrict ks,
                         size_t nblocks, unsigned bits) {
  add_blocks(acc, ks, nblocks, bits);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define MASK_HAVE_AVX2 1
#define W(b)                                                                   \
  case b:                                                                      \
    add_blocks(acc, ks, nblocks, b);                                           \
    break;

/* One body per width, so that every shift is an immediate. */
__attribute__((target("avx2"))) static void
add_avx2(uint32_t *acc, const uint8_t *ks, size_t nblocks, unsigned bits) {
  /* clang-format off */
  switch (bits) {
    W(1) W(2) W(3) W(4) W(5) W(6) W(7) W(8) W(9) W(10) W(11) W(12) W(13)
    W(14) W(15) W(16) W(17) W(18) W(19) W(20) W(21) W(22) W(23) W(24) W(25)
    W(26) W(27) W(28) W(29) W(30) W(31) W(32)
  default:
    break;
  }
  /* clang-format on */
}
#undef W

/* cpuid and xgetbv rather than __builtin_cpu_supports, which links
 * libgcc's whole CPU table (4.5 KB of the engine-off library, whose size
 * has a target: docs/embedding.md). AVX2 needs the CPU's flag and the
 * operating system saving the YMM registers (XCR0 bits 1 and 2). */
static int cpu_has_avx2(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
    return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  if ((lo & 6) != 6)
    return 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
}
#else
#define MASK_HAVE_AVX2 0
#endif

static mask_kernel forced = MASK_KERNEL_AUTO;

int mask_use_kernel(mask_kernel k) {
  if (k == MASK_KERNEL_AVX2) {
#if MASK_HAVE_AVX2
    if (!cpu_has_avx2())
      return COHORT_EINVAL;
#else
    return COHORT_EINVAL;
#endif
  } else if (k != MASK_KERNEL_AUTO && k != MASK_KERNEL_PORTABLE) {
    return COHORT_EINVAL;
  }
  forced = k;
  return COHORT_OK;
}

static narrow_fn narrow_kernel(void) {
#if MASK_HAVE_AVX2
  if (forced == MASK_KERNEL_AVX2 ||
      (forced == MASK_KERNEL_AUTO && cpu_has_avx2()))
    return add_avx2;
#endif
  return add_portable;
}

/* The kernels load lane words in host order. */
static void words_to_host(uint8_t *ks, size_t bytes) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t w = wire_get_le32(ks + i);
    memcpy(ks + i, &w, 4);
  }
#else
  (void)ks;
  (void)bytes;
#endif
}

/* ---- batches ---- */

int mask_sum_new(unsigned bits, uint64_t *v, size_t n, mask_sum **out) {
  *out = NULL;
  if (bits < 1 || bits > MASK_MAX_BITS || (!v && n))
    return COHORT_EINVAL;
  /* aligned_alloc wants a multiple of the alignment. */
  size_t size = (sizeof(mask_sum) + 63) / 64 * 64;
  mask_sum *s = aligned_alloc(64, size);
  if (!s)
    return COHORT_ENOMEM;
  memset(s, 0, sizeof *s);
  s->bits = bits;
  s->v = v;
  s->n = n;
  *out = s;
  return COHORT_OK;
}

/* (Re)starts the keystream of seed in ctx slot g: AES-128-CTR keyed with
 * the seed's first 16 bytes, from the counter block in its last 16. */
static int start_stream(mask_sum *s, unsigned g) {
  if (!s->ctx[g]) {
    s->ctx[g] = EVP_CIPHER_CTX_new();
    if (!s->ctx[g] ||
        EVP_EncryptInit_ex(s->ctx[g], EVP_aes_128_ctr(), NULL, NULL, NULL) != 1)
      return COHORT_EIO;
  }
  /* A new key and IV on a set-up context restarts the counter without
   * fetching the cipher again. */
  const uint8_t *seed = s->seed[g];
  int ok = EVP_EncryptInit_ex(s->ctx[g], NULL, NULL, seed, seed + MASK_KEY_LEN);
  return ok == 1 ? COHORT_OK : COHORT_EIO;
}

static void negate(uint32_t *a32, uint64_t *a64, size_t k) {
  if (a32)
    for (size_t i = 0; i < k; i++)
      a32[i] = 0u - a32[i];
  else
    for (size_t i = 0; i < k; i++)
      a64[i] = 0u - a64[i];
}

/* Expands the queued seeds into v, chunk by chunk: each chunk's
 * accumulator gets the negative seeds' masks, is negated, gets the
 * positive ones, and is folded into v mod 2^B. */
static int run_batch(mask_sum *s) {
  const unsigned bits = s->bits, pending = s->pending;
  const int narrow = bits <= 32;
  const uint64_t m = ring_mask(bits);
  const narrow_fn add = narrow_kernel();
  unsigned order[BATCH], n_minus = 0;
  int rc = COHORT_OK;
  for (unsigned g = 0; g < pending; g++)
    if (s->sign[g] < 0)
      order[n_minus++] = g;
  for (unsigned g = 0, o = n_minus; g < pending; g++)
    if (s->sign[g] > 0)
      order[o++] = g;
  for (unsigned g = 0; g < pending && !rc; g++)
    rc = start_stream(s, g);
  for (size_t start = 0; start < s->n && !rc; start += CHUNK) {
    const size_t k = s->n - start < CHUNK ? s->n - start : CHUNK;
    const size_t nblocks = (k + BLOCK - 1) / BLOCK;
    const size_t words = narrow ? nblocks * BLOCK : k;
    const size_t bytes = narrow ? nblocks * 32 * bits : 8 * k;
    uint32_t *a32 = narrow ? s->acc.narrow : NULL;
    uint64_t *a64 = narrow ? NULL : s->acc.wide;
    memset(&s->acc, 0, words * (narrow ? 4 : 8));
    for (unsigned o = 0; o < pending; o++) {
      EVP_CIPHER_CTX *c = s->ctx[order[o]];
      int len = 0;
      if (EVP_EncryptUpdate(c, s->ks, &len, zeros, (int)bytes) != 1 ||
          len != (int)bytes) {
        rc = COHORT_EIO;
        break;
      }
      if (narrow) {
        words_to_host(s->ks, bytes);
        add(a32, s->ks, nblocks, bits);
      } else {
        for (size_t i = 0; i < k; i++)
          a64[i] += wire_get_le64(s->ks + 8 * i);
      }
      if (o + 1 == n_minus)
        negate(a32, a64, words);
    }
    if (rc)
      break;
    uint64_t *v = s->v + start;
    if (narrow)
      for (size_t i = 0; i < k; i++)
        v[i] = (v[i] + a32[i]) & m;
    else
      for (size_t i = 0; i < k; i++)
        v[i] = (v[i] + a64[i]) & m;
  }
  OPENSSL_cleanse(s->ks, sizeof s->ks);
  OPENSSL_cleanse(&s->acc, sizeof s->acc);
  OPENSSL_cleanse(s->seed, sizeof s->seed);
  s->pending = 0;
  return rc;
}

int mask_sum_add(mask_sum *s, const uint8_t seed[PRG_SEED_LEN], int sign) {
  if (!s || !seed || (sign != 1 && sign != -1))
    return COHORT_EINVAL;
  memcpy(s->seed[s->pending], seed, PRG_SEED_LEN);
  s->sign[s->pending] = sign;
  if (++s->pending == BATCH)
    return run_batch(s);
  return COHORT_OK;
}

int mask_sum_flush(mask_sum *s) {
  if (!s)
    return COHORT_EINVAL;
  return s->pending ? run_batch(s) : COHORT_OK;
}

void mask_sum_free(mask_sum *s) {
  if (!s)
    return;
  for (unsigned g = 0; g < BATCH; g++)
    EVP_CIPHER_CTX_free(s->ctx[g]); /* wipes the key schedule */
  OPENSSL_cleanse(s->seed, sizeof s->seed);
  free(s);
}

/* ---- one mask ---- */

int mask_apply(const uint8_t seed[PRG_SEED_LEN], unsigned bits, int sign,
               uint64_t *v, size_t n) {
  if (!seed || (sign != 1 && sign != -1))
    return COHORT_EINVAL;
  mask_sum *s;
  int rc = mask_sum_new(bits, v, n, &s);
  if (rc)
    return rc;
  rc = mask_sum_add(s, seed, sign);
  if (!rc)
    rc = mask_sum_flush(s);
  mask_sum_free(s);
  return rc;
}

int mask_expand(const uint8_t seed[PRG_SEED_LEN], unsigned bits, uint64_t *out,
                size_t n) {
  if (!seed || bits < 1 || bits > MASK_MAX_BITS || (!out && n))
    return COHORT_EINVAL;
  if (n)
    memset(out, 0, n * sizeof *out);
  return mask_apply(seed, bits, 1, out, n);
}

void ring_add(uint64_t *a, const uint64_t *b, size_t n, unsigned bits) {
  /* Out-of-range widths are a caller's bug; leave a untouched rather than
   * shift by 64 or more. */
  if (bits < 1 || bits > MASK_MAX_BITS || !a || !b)
    return;
  const uint64_t m = ring_mask(bits);
  for (size_t i = 0; i < n; i++)
    a[i] = (a[i] + b[i]) & m;
}
