/* Lock-free RPC counters and latency histograms; see http_rpc_stats.h. */
#include "http_rpc_stats.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_buf.h"
#include "rpc_status.h"

#define N_CODES RPC_STATUS_COUNT

/* Upper bounds in seconds; long polls are held up to tens of seconds. */
static const double BUCKETS[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                 0.5,   1,     2.5,  5,     10,   30,  60};
#define N_BUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])

typedef struct series {
  atomic_uint_fast64_t count;
  atomic_uint_fast64_t micros; /* sum of latencies */
  atomic_uint_fast64_t le[N_BUCKETS];
} series;

struct http_rpc_stats {
  const rpc_method *methods;
  size_t n_methods;
  series *rows; /* (n_methods + 1) * N_CODES */
};

http_rpc_stats *http_rpc_stats_new(const rpc_method *methods,
                                   size_t n_methods) {
  http_rpc_stats *st = calloc(1, sizeof *st);
  if (!st)
    return NULL;
  st->methods = methods;
  st->n_methods = n_methods;
  /* calloc'd atomics start at zero, as atomic_init would set them. */
  st->rows = calloc((n_methods + 1) * N_CODES, sizeof *st->rows);
  if (!st->rows) {
    free(st);
    return NULL;
  }
  return st;
}

void http_rpc_stats_free(http_rpc_stats *st) {
  if (!st)
    return;
  free(st->rows);
  free(st);
}

void http_rpc_stats_observe(void *ctx, size_t method, int code,
                            double seconds) {
  http_rpc_stats *st = ctx;
  if (method > st->n_methods || code < 0 || code >= N_CODES)
    return;
  series *s = &st->rows[method * N_CODES + (size_t)code];
  if (seconds < 0)
    seconds = 0;
  atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->micros, (uint_fast64_t)(seconds * 1e6),
                            memory_order_relaxed);
  for (size_t b = 0; b < N_BUCKETS; b++)
    if (seconds <= BUCKETS[b]) {
      atomic_fetch_add_explicit(&s->le[b], 1, memory_order_relaxed);
      break;
    }
}

/* "Upload" of "/cohort.v1.Coordinator/Upload". */
static const char *method_name(const http_rpc_stats *st, size_t m) {
  if (m == st->n_methods)
    return "unknown";
  const char *slash = strrchr(st->methods[m].path, '/');
  return slash ? slash + 1 : st->methods[m].path;
}

int http_rpc_stats_write(const http_rpc_stats *st, http_buf *out) {
  http_buf_printf(out, "# HELP cohort_rpc_requests_total gRPC calls answered, "
                       "by method and status.\n"
                       "# TYPE cohort_rpc_requests_total counter\n");
  for (size_t m = 0; m <= st->n_methods; m++)
    for (int c = 0; c < N_CODES; c++) {
      const series *s = &st->rows[m * N_CODES + (size_t)c];
      uint_fast64_t n = atomic_load_explicit(&s->count, memory_order_relaxed);
      if (n)
        http_buf_printf(out,
                        "cohort_rpc_requests_total{method=\"%s\",code=\"%s\"}"
                        " %llu\n",
                        method_name(st, m), rpc_status_name(c),
                        (unsigned long long)n);
    }
  http_buf_printf(out,
                  "# HELP cohort_rpc_duration_seconds Time from a gRPC call's "
                  "arrival to its answer (long polls include their hold).\n"
                  "# TYPE cohort_rpc_duration_seconds histogram\n");
  for (size_t m = 0; m <= st->n_methods; m++)
    for (int c = 0; c < N_CODES; c++) {
      const series *s = &st->rows[m * N_CODES + (size_t)c];
      uint_fast64_t n = atomic_load_explicit(&s->count, memory_order_relaxed);
      if (!n)
        continue;
      const char *name = method_name(st, m);
      uint64_t cumulative = 0;
      for (size_t b = 0; b < N_BUCKETS; b++) {
        cumulative += atomic_load_explicit(&s->le[b], memory_order_relaxed);
        http_buf_printf(out,
                        "cohort_rpc_duration_seconds_bucket{method=\"%s\","
                        "code=\"%s\",le=\"%g\"} %llu\n",
                        name, rpc_status_name(c), BUCKETS[b],
                        (unsigned long long)cumulative);
      }
      /* Read apart from the buckets, so +Inf is never below the last. */
      if (n < cumulative)
        n = cumulative;
      http_buf_printf(
          out,
          "cohort_rpc_duration_seconds_bucket{method=\"%s\",code=\"%s\","
          "le=\"+Inf\"} %llu\n"
          "cohort_rpc_duration_seconds_sum{method=\"%s\",code=\"%s\"} %.6f\n"
          "cohort_rpc_duration_seconds_count{method=\"%s\",code=\"%s\"} "
          "%llu\n",
          name, rpc_status_name(c), (unsigned long long)n, name,
          rpc_status_name(c),
          (double)atomic_load_explicit(&s->micros, memory_order_relaxed) / 1e6,
          name, rpc_status_name(c), (unsigned long long)n);
    }
  return out->failed ? -1 : 0;
}
