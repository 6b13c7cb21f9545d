/* See nn_isa.h. */
#include "nn_isa.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__)
#define BASE_NAME "neon"
#elif defined(__x86_64__)
#define BASE_NAME "sse2"
#else
#define BASE_NAME "generic"
#endif

const char *nn_isa_name(nn_isa isa) {
  static const char *const names[NN_ISA_COUNT] = {"scalar", BASE_NAME, "avx2",
                                                  "avx512"};
  return (unsigned)isa < NN_ISA_COUNT ? names[isa] : "unknown";
}

/* Bit 1u << isa for each path this CPU and build run. */
static unsigned detect_runs(void) {
  unsigned runs = 1u << NN_ISA_SCALAR | 1u << NN_ISA_BASE;
#ifdef NN_ISA_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    runs |= 1u << NN_ISA_AVX2;
  if (__builtin_cpu_supports("avx512f"))
    runs |= 1u << NN_ISA_AVX512;
#endif
  return runs;
}

static nn_isa best_of(unsigned runs) {
  nn_isa best = NN_ISA_SCALAR;
  for (int i = 0; i < NN_ISA_COUNT; i++)
    if (runs & 1u << i)
      best = (nn_isa)i;
  return best;
}

/* "avx512 avx2 sse2 scalar": the paths of runs, best first. */
static void list_runs(unsigned runs, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = NN_ISA_COUNT - 1; i >= 0; i--) {
    if (!(runs & 1u << i))
      continue;
    int n = snprintf(buf + used, cap - used, "%s%s", used ? " " : "",
                     nn_isa_name((nn_isa)i));
    if (n < 0 || (size_t)n >= cap - used)
      return;
    used += (size_t)n;
  }
}

int nn_isa_choose(const char *env, unsigned runs, nn_isa *out, char *err,
                  size_t cap) {
  *out = best_of(runs);
  if (!env || !*env)
    return 0;
  char have[64];
  list_runs(runs, have, sizeof have);
  static const char *const known[] = {"avx512", "avx2",    "sse2",
                                      "neon",   "generic", "scalar"};
  bool is_known = false;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    is_known = is_known || strcmp(env, known[i]) == 0;
  if (!is_known) {
    /* %.32s: the value is the user's, bound what is echoed of it. */
    snprintf(err, cap,
             "COHORT_ISA=%.32s: unknown instruction set; use avx512, avx2, "
             "sse2, neon or scalar (this CPU and build run: %s)",
             env, have);
    return -1;
  }
  for (int i = 0; i < NN_ISA_COUNT; i++)
    if (runs & 1u << i && strcmp(env, nn_isa_name((nn_isa)i)) == 0) {
      *out = (nn_isa)i;
      return 0;
    }
  snprintf(err, cap,
           "COHORT_ISA=%s: this CPU or build lacks it; this CPU and build "
           "run: %s",
           env, have);
  return -1;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static nn_isa g_isa;
static unsigned g_runs;
static int g_refused;
static char g_err[256];

static void choose_once(void) {
  g_runs = detect_runs();
  g_refused =
      nn_isa_choose(getenv("COHORT_ISA"), g_runs, &g_isa, g_err, sizeof g_err);
}

int nn_isa_runs(nn_isa isa) {
  pthread_once(&g_once, choose_once);
  return (unsigned)isa < NN_ISA_COUNT && (g_runs >> isa & 1u);
}

nn_isa nn_isa_best(void) {
  pthread_once(&g_once, choose_once);
  return g_isa;
}

int nn_isa_check(char *err, size_t cap) {
  pthread_once(&g_once, choose_once);
  if (cap) /* "" when accepted, as the engine-off build writes */
    snprintf(err, cap, "%s", g_refused ? g_err : "");
  return g_refused ? -1 : 0;
}
