/* What the engine's hand-vectorised kernels share (nn_gemm_builtin.c,
 * nn_gemm_small.c, nn_conv_gray.c, nn_winograd.c): with GCC on x86-64
 * each kernel is compiled three times, for AVX-512, AVX2 with FMA and
 * baseline x86-64, and the best the CPU runs is picked once at run time;
 * elsewhere there is one portable build. Internal to models/. */
#ifndef COHORT_NN_ISA_H
#define COHORT_NN_ISA_H

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define NN_ISA_X86 1
#define NN_TARGET_AVX512                                                       \
  __attribute__((target("avx512f,prefer-vector-width=512")))
#define NN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

#ifdef __GNUC__
#define NN_INLINE inline __attribute__((always_inline))
#else
#define NN_INLINE inline
#endif

typedef enum nn_isa { NN_ISA_BASE, NN_ISA_AVX2, NN_ISA_AVX512 } nn_isa;

/* The best of them this CPU runs; NN_ISA_BASE without NN_ISA_X86. */
nn_isa nn_isa_best(void);

/* GCC (and Clang) vectors of 16 floats: one zmm, two ymm or four xmm or
 * NEON registers, as the target has. Kernels written on them keep their
 * accumulators in registers by construction, not by the vectoriser's
 * choice. Moves go through memcpy (unaligned), and no function takes or
 * returns one by value across the per-ISA builds. */
#define NN_VL 16
typedef float nn_vec __attribute__((vector_size(NN_VL * sizeof(float))));
typedef int nn_ivec __attribute__((vector_size(NN_VL * sizeof(int))));
#define NN_VLOAD(v, p) memcpy(&(v), (p), sizeof(nn_vec))
#define NN_VSTORE(p, v) memcpy((p), &(v), sizeof(nn_vec))

#endif
