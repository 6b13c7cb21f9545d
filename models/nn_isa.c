/* See nn_isa.h. */
#include "nn_isa.h"

#include <stdatomic.h>

static nn_isa detect(void) {
#ifdef NN_ISA_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return NN_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return NN_ISA_AVX2;
#endif
  return NN_ISA_BASE;
}

nn_isa nn_isa_best(void) {
  static atomic_int known = -1; /* detection is idempotent: races are fine */
  int isa = atomic_load_explicit(&known, memory_order_relaxed);
  if (isa < 0) {
    isa = (int)detect();
    atomic_store_explicit(&known, isa, memory_order_relaxed);
  }
  return (nn_isa)isa;
}
