/* Which instruction set the engine's hand-vectorised kernels use
 * (nn_gemm_builtin.c, nn_gemm_small.c, nn_conv_gray.c, nn_winograd.c).
 * Their kernels are compiled once per ISA as separate objects, each at its
 * own vector width (models/CMakeLists.txt, cohort_isa_kernels): with GCC on
 * x86-64 for AVX-512, AVX2 with FMA and baseline x86-64 (SSE2), elsewhere
 * one portable build (NEON on aarch64). Every build also has a scalar
 * reference path, the same kernels at width 1. The best path the CPU runs is
 * picked once at run time, unless COHORT_ISA names one.
 *
 * The selection (nn_isa_best, nn_isa_check, nn_isa_name) is public; the
 * vector types below are internal to models/. */
#ifndef COHORT_NN_ISA_H
#define COHORT_NN_ISA_H

#include <stddef.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define NN_ISA_X86 1
#endif

#ifdef __GNUC__
#define NN_INLINE inline __attribute__((always_inline))
#else
#define NN_INLINE inline
#endif

/* In order of preference; the values index the kernels' per-path tables.
 * NN_ISA_BASE is the build's baseline vector path: SSE2 on x86-64, NEON on
 * aarch64, GCC's generic vectors elsewhere. NN_ISA_SCALAR runs the same
 * kernels at width 1 on plain floats (NN_VL 1 below), compiled without
 * vectorisation. */
typedef enum nn_isa {
  NN_ISA_SCALAR,
  NN_ISA_BASE,
  NN_ISA_AVX2,
  NN_ISA_AVX512,
  NN_ISA_COUNT
} nn_isa;

/* The path the kernels use: COHORT_ISA's when this CPU and build run it,
 * else the best they run. Decided at the first call (reads the environment
 * once); thread-safe. */
nn_isa nn_isa_best(void);

/* 0, with err "", when COHORT_ISA is unset, empty or names a path this CPU
 * and build run; else -1 with a message in err that names the paths they
 * do run. A
 * library does not exit: programs call this at start and refuse to run. */
int nn_isa_check(char *err, size_t cap);

/* 1 when this CPU and build run isa (NN_ISA_SCALAR and NN_ISA_BASE
 * always), else 0; whatever COHORT_ISA says. Thread-safe. */
int nn_isa_runs(nn_isa isa);

/* "avx512", "avx2", "sse2", "neon", "generic" or "scalar". */
const char *nn_isa_name(nn_isa isa);

/* The path COHORT_ISA's value env asks for, where runs has bit 1u << isa
 * set for each path this CPU and build run (NN_ISA_SCALAR and NN_ISA_BASE
 * always): *out is that path and 0 is returned, or *out is the best of runs
 * and -1 with a message in err naming them. NULL or "" asks for the best.
 * Exposed for the tests. */
int nn_isa_choose(const char *env, unsigned runs, nn_isa *out, char *err,
                  size_t cap);

/* GCC (and Clang) vectors of NN_VL floats, for the kernels CMake compiles
 * once per ISA (cohort_isa_kernels in models/CMakeLists.txt), each with
 * its target's -m flags and NN_VL set to its register: 16 (AVX-512), 8
 * (AVX2) or 4 (SSE2, NEON). A vector is then one register, so accumulators
 * written on them live in registers by construction, not by the
 * vectoriser's choice, and no vector wider than the target's registers
 * crosses a call. NN_VLOAD and NN_VSTORE are unaligned vector accesses,
 * not memcpy: GCC merges the memcpy of neighbouring vectors into one block
 * copy through the stack. may_alias: the data are floats. */
#if defined(NN_VL) && NN_VL == 1
/* The scalar path (NN_KERNEL_ISA scalar): the same kernels at width 1 on
 * plain floats, portable C. Not a GCC vector of one float: GCC keeps
 * those in integer registers and on the stack. */
typedef float nn_vec;
#define NN_VLOAD(v, p) ((v) = *(const float *)(p))
#define NN_VSTORE(p, v) (*(float *)(p) = (v))
/* max(v, 0) with NaN and -0 to +0, as the vector form below. */
#define NN_VRELU(v) ((v) > 0.0f ? (v) : 0.0f)
#elif defined(NN_VL)
typedef float nn_vec __attribute__((vector_size(NN_VL * sizeof(float))));
typedef int nn_ivec __attribute__((vector_size(NN_VL * sizeof(int))));
typedef float nn_vec_u __attribute__((vector_size(NN_VL * sizeof(float)),
                                      aligned(sizeof(float)), may_alias));
#define NN_VLOAD(v, p) ((v) = *(const nn_vec_u *)(p))
#define NN_VSTORE(p, v) (*(nn_vec_u *)(p) = (v))
/* Lanes above 0 kept, the others (NaN, -0 included) +0. */
#define NN_VRELU(v) ((nn_vec)((nn_ivec)(v) & ((v) > 0.0f)))
#endif

#ifdef NN_VL

/* The exported name of a per-ISA object's symbol: NN_ISA_SYM(nn_x_arch)
 * is nn_x_arch_avx2 in the AVX2 object. */
#define NN_ISA_SYM3(name, isa) name##_##isa
#define NN_ISA_SYM2(name, isa) NN_ISA_SYM3(name, isa)
#define NN_ISA_SYM(name) NN_ISA_SYM2(name, NN_KERNEL_ISA)
#endif

#endif
