/* Counts of the coordinator's gRPC calls by method and status, with latency
 * histograms, for /metrics. Written by the rpc server's workers through
 * http_rpc_stats_observe (an rpc_observe_fn) and read by a scrape, both
 * without a lock: every counter is a relaxed atomic. */
#ifndef COHORT_HTTP_RPC_STATS_H
#define COHORT_HTTP_RPC_STATS_H

#include <stddef.h>

#include "rpc_server.h"

typedef struct http_rpc_stats http_rpc_stats;
typedef struct http_buf http_buf;

/* Stats for the n_methods methods (borrowed; they must outlive the stats),
 * plus one row for calls to unknown methods. NULL on allocation failure. */
http_rpc_stats *http_rpc_stats_new(const rpc_method *methods, size_t n_methods);
void http_rpc_stats_free(http_rpc_stats *st); /* accepts NULL */

/* The rpc_observe_fn to give rpc_server_start, with the stats as ctx. */
void http_rpc_stats_observe(void *st, size_t method, int code, double seconds);

/* Appends cohort_rpc_requests_total and cohort_rpc_duration_seconds in
 * Prometheus text format (series with no call are left out). 0 or -1. */
int http_rpc_stats_write(const http_rpc_stats *st, http_buf *out);

#endif
