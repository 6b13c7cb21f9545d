/* Bit packing of the codecs' integer payloads (quantization levels, sparse
 * indices): value i takes bits [i * bits, (i + 1) * bits) of a stream whose
 * bit j is bit j % 8 of byte j / 8, so the format is the same on every host. */
#include <assert.h>

#include "codec_internal.h"
#include "cohort_status.h"

size_t bits_packed_bytes(size_t count, unsigned bits) {
  return (count * bits + 7) / 8;
}

void bits_pack(const uint32_t *v, size_t count, unsigned bits, uint8_t *out) {
  assert(bits >= 1 && bits <= 32);
  /* At most 7 pending bits plus one 32-bit value: 64 bits suffice. */
  uint64_t acc = 0;
  unsigned pending = 0;
  for (size_t i = 0; i < count; i++) {
    assert(bits == 32 || v[i] >> bits == 0);
    acc |= (uint64_t)v[i] << pending;
    pending += bits;
    while (pending >= 8) {
      *out++ = (uint8_t)acc;
      acc >>= 8;
      pending -= 8;
    }
  }
  if (pending)
    *out = (uint8_t)acc;
}

int bits_unpack(const uint8_t *in, size_t count, unsigned bits, uint32_t *v) {
  assert(bits >= 1 && bits <= 32);
  const uint64_t mask = ((uint64_t)1 << bits) - 1;
  uint64_t acc = 0;
  unsigned avail = 0;
  for (size_t i = 0; i < count; i++) {
    while (avail < bits) {
      acc |= (uint64_t)*in++ << avail;
      avail += 8;
    }
    v[i] = (uint32_t)(acc & mask);
    acc >>= bits;
    avail -= bits;
  }
  /* What is left of the last byte is padding; one valid form per payload. */
  return acc ? COHORT_EINVAL : COHORT_OK;
}
