/* GET /metrics: Prometheus text format. Durable figures come from the
 * database in one read transaction (a consistent snapshot that never blocks
 * the coordinator's writer under WAL), with finished rounds summed once
 * (http_totals); live ones from lock-free counters and the long-poll
 * queue's short lock. docs/operations.md lists every series. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "conn_guard.h"
#include "http_internal.h"
#include "log.h"

/* Clients whose last check-in is this recent count as active (the store
 * writes last_seen at most once a minute per client). */
#define ACTIVE_WINDOW_S 300.0

static const char *STATES[] = {"OPEN", "TRAINING", "AGGREGATING", "COMMITTED",
                               "FAILED"};
#define N_STATES (sizeof STATES / sizeof STATES[0])

/* Runs sql with ?1 and ?2 bound to a and b (when it has them) and calls
 * each(row, ctx) per row. 0 or -1. */
static int query(sqlite3 *db, const char *sql, int64_t a, int64_t b,
                 void (*each)(sqlite3_stmt *, void *), void *ctx) {
  sqlite3_stmt *st = NULL;
  int rc = -1, step;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    goto out;
  if (sqlite3_bind_parameter_count(st) >= 1)
    sqlite3_bind_int64(st, 1, a);
  if (sqlite3_bind_parameter_count(st) >= 2)
    sqlite3_bind_int64(st, 2, b);
  while ((step = sqlite3_step(st)) == SQLITE_ROW)
    each(st, ctx);
  rc = step == SQLITE_DONE ? 0 : -1;
out:
  if (rc)
    log_warn("http: /metrics: %s", sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

/* Copies the row's columns into a double array (NULL as 0). */
typedef struct columns {
  double v[8];
} columns;
static void take_columns(sqlite3_stmt *st, void *ctx) {
  columns *c = ctx;
  for (int i = 0; i < sqlite3_column_count(st) && i < 8; i++)
    c->v[i] = sqlite3_column_double(st, i);
}

static void add_round_states(sqlite3_stmt *st, void *ctx) {
  http_totals *t = ctx;
  const char *state = (const char *)sqlite3_column_text(st, 0);
  for (size_t i = 0; state && i < N_STATES; i++)
    if (strcmp(state, STATES[i]) == 0)
      t->by_state[i] += sqlite3_column_double(st, 1);
  t->round_n += sqlite3_column_double(st, 2);
  t->round_s += sqlite3_column_double(st, 3);
}

/* Adds the rounds with lo < id <= hi and their participations to t. */
static int add_rounds(sqlite3 *db, int64_t lo, int64_t hi, http_totals *t) {
  if (query(db,
            "SELECT state, count(*), count(finished_at),"
            " coalesce(sum(finished_at - started_at), 0)"
            " FROM rounds WHERE id > ?1 AND id <= ?2 GROUP BY state",
            lo, hi, add_round_states, t) != 0)
    return -1;
  columns c = {{0}};
  if (query(db,
            "SELECT count(*), coalesce(sum(state = 'UPLOADED'), 0),"
            " coalesce(sum(bytes_up), 0), coalesce(sum(bytes_down), 0),"
            " count(uploaded_at), coalesce(sum(uploaded_at - selected_at), 0)"
            " FROM participations WHERE round > ?1 AND round <= ?2",
            lo, hi, take_columns, &c) != 0)
    return -1;
  t->participants += c.v[0];
  t->uploads += c.v[1];
  t->bytes_up += c.v[2];
  t->bytes_down += c.v[3];
  t->task_n += c.v[4];
  t->task_s += c.v[5];
  c = (columns){{0}};
  if (query(db,
            "SELECT count(*) FROM participations WHERE state = 'SELECTED'"
            " AND round IN (SELECT id FROM rounds WHERE id > ?1 AND id <= ?2"
            " AND finished_at IS NOT NULL)",
            lo, hi, take_columns, &c) != 0)
    return -1;
  t->dropouts += c.v[0];
  return 0;
}

/* Sums of every round: the kept ones of the finished rounds, moved up to
 * the first unfinished round, plus what is after it. */
static int totals(http_server *srv, http_totals *out) {
  columns c = {{0}};
  http_totals *kept = &srv->finished;
  if (query(srv->db,
            "SELECT coalesce((SELECT min(id) - 1 FROM rounds WHERE id > ?1"
            " AND finished_at IS NULL), (SELECT max(id) FROM rounds), 0)",
            kept->upto, 0, take_columns, &c) != 0)
    return -1;
  int64_t upto = (int64_t)c.v[0];
  if (upto > kept->upto) {
    http_totals next = *kept;
    if (add_rounds(srv->db, kept->upto, upto, &next) != 0)
      return -1;
    next.upto = upto;
    *kept = next;
  }
  *out = *kept;
  return add_rounds(srv->db, kept->upto, INT64_MAX, out);
}

static void metric(http_buf *b, const char *name, const char *type,
                   const char *help, double value) {
  http_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                  type, name, value);
}

static int durable(http_server *srv, http_buf *b) {
  sqlite3 *db = srv->db;
  http_totals t;
  if (totals(srv, &t) != 0)
    return -1;
  http_buf_printf(b, "# HELP cohort_rounds Rounds by state.\n"
                     "# TYPE cohort_rounds gauge\n");
  for (size_t i = 0; i < N_STATES; i++)
    http_buf_printf(b, "cohort_rounds{state=\"%s\"} %.0f\n", STATES[i],
                    t.by_state[i]);
  columns c = {{0}};
  if (query(db,
            "SELECT id, target, clients_selected FROM rounds ORDER BY id "
            "DESC LIMIT 1",
            0, 0, take_columns, &c) != 0)
    return -1;
  metric(b, "cohort_round_current", "gauge",
         "Id of the latest round (0: none yet).", c.v[0]);
  metric(b, "cohort_round_current_target", "gauge",
         "Updates the latest round aims for.", c.v[1]);
  metric(b, "cohort_round_current_participants", "gauge",
         "Clients selected in the latest round.", c.v[2]);
  metric(b, "cohort_participants_total", "counter",
         "Clients selected into rounds, summed over rounds.", t.participants);
  metric(b, "cohort_uploads_total", "counter",
         "Participations whose update arrived.", t.uploads);
  metric(b, "cohort_bytes_up_total", "counter",
         "Update bytes received from clients.", t.bytes_up);
  metric(b, "cohort_bytes_down_total", "counter",
         "Model bytes sent to clients.", t.bytes_down);
  metric(b, "cohort_dropouts_total", "counter",
         "Selected clients whose update never arrived, in finished rounds.",
         t.dropouts);
  http_buf_printf(b,
                  "# HELP cohort_round_seconds Rounds from open to commit "
                  "or failure.\n# TYPE cohort_round_seconds summary\n"
                  "cohort_round_seconds_sum %.6f\n"
                  "cohort_round_seconds_count %.0f\n",
                  t.round_s, t.round_n);
  http_buf_printf(b,
                  "# HELP cohort_client_task_seconds A client's task from "
                  "selection to its upload (download, training, upload).\n"
                  "# TYPE cohort_client_task_seconds summary\n"
                  "cohort_client_task_seconds_sum %.6f\n"
                  "cohort_client_task_seconds_count %.0f\n",
                  t.task_s, t.task_n);
  c = (columns){{0}};
  if (query(db,
            "SELECT id, secagg_advertised, secagg_shared, secagg_masked,"
            " secagg_attested, secagg_unmasked FROM rounds"
            " WHERE secagg IS NOT NULL ORDER BY id DESC LIMIT 1",
            0, 0, take_columns, &c) != 0)
    return -1;
  static const char *PHASES[] = {"advertise", "share", "masked_input",
                                 "consistency", "unmask"};
  http_buf_printf(b,
                  "# HELP cohort_secagg_round Latest round under secure "
                  "aggregation (0: none).\n# TYPE cohort_secagg_round gauge\n"
                  "cohort_secagg_round %.0f\n"
                  "# HELP cohort_secagg_survivors Clients that sent their "
                  "message in each phase of that round.\n"
                  "# TYPE cohort_secagg_survivors gauge\n",
                  c.v[0]);
  for (int i = 0; i < 5; i++)
    http_buf_printf(b, "cohort_secagg_survivors{phase=\"%s\"} %.0f\n",
                    PHASES[i], c.v[i + 1]);
  c = (columns){{0}};
  if (query(db,
            "SELECT epsilon, delta FROM privacy_ledger ORDER BY round DESC"
            " LIMIT 1",
            0, 0, take_columns, &c) != 0)
    return -1;
  metric(b, "cohort_dp_epsilon_spent", "gauge",
         "Privacy budget spent so far, at cohort_dp_delta (0: no DP round).",
         c.v[0]);
  metric(b, "cohort_dp_delta", "gauge", "The delta epsilon is reported at.",
         c.v[1]);
  c = (columns){{0}};
  /* Whole seconds are enough for a five-minute window. */
  if (query(db,
            "SELECT count(*), coalesce(sum(last_seen >= ?1), 0),"
            " coalesce(sum(rounds_failed), 0),"
            " coalesce(sum(excluded_until > ?2), 0) FROM clients",
            (int64_t)(clock_wall_s() - ACTIVE_WINDOW_S),
            (int64_t)clock_wall_s(), take_columns, &c) != 0)
    return -1;
  metric(b, "cohort_clients_registered", "gauge", "Registered clients.",
         c.v[0]);
  metric(b, "cohort_clients_active", "gauge",
         "Clients seen within the last 5 minutes (last_seen is written at "
         "most once a minute).",
         c.v[1]);
  metric(b, "cohort_client_rounds_failed_total", "counter",
         "Rounds clients were selected for and did not complete (no "
         "accepted update or report by the deadline, secure-aggregation "
         "dropouts).",
         c.v[2]);
  metric(b, "cohort_clients_excluded", "gauge",
         "Clients excluded from selection now as repeat offenders "
         "(--offender-failures).",
         c.v[3]);
  return 0;
}

void http_metrics(const http_request *req, http_response *res) {
  http_server *srv = req->srv;
  http_buf b;
  http_buf_init(&b, HTTP_MAX_BODY);
  int ok = sqlite3_exec(srv->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
  ok = ok && durable(srv, &b) == 0;
  sqlite3_exec(srv->db, "COMMIT", NULL, NULL, NULL);
  if (!ok) {
    http_buf_free(&b);
    http_json_error(res, MHD_HTTP_SERVICE_UNAVAILABLE,
                    "the database cannot be read just now");
    return;
  }
  const service *svc = srv->svc;
  metric(&b, "cohort_checkins_held", "gauge",
         "Check-ins held open as long polls (connected clients waiting for a "
         "task).",
         svc && svc->long_poll ? (double)long_poll_held(svc->long_poll) : 0);
  metric(&b, "cohort_transport_insecure", "gauge",
         "1 when the gRPC port serves without TLS on a non-loopback address.",
         svc ? svc->transport == SERVICE_TRANSPORT_INSECURE : 0);
  conn_guard_stats g;
  conn_guard_stats_get(&g);
  metric(&b, "cohort_connections_counted", "gauge",
         "gRPC connections counted against --max-connections-per-address "
         "(closed ones leave the count when their address is next looked "
         "at).",
         (double)g.open);
  http_buf_printf(&b,
                  "# HELP cohort_connections_refused_total gRPC connections "
                  "closed as they were accepted: over the limit per address, "
                  "or from an address banned for resets.\n"
                  "# TYPE cohort_connections_refused_total counter\n"
                  "cohort_connections_refused_total{reason=\"per_address\"} "
                  "%ld\n"
                  "cohort_connections_refused_total{reason=\"banned\"} "
                  "%ld\n",
                  g.refused_per_address, g.refused_banned);
  metric(&b, "cohort_address_bans_total", "counter",
         "Addresses banned for calls that never sent their message "
         "(--max-resets-per-address; rapid reset).",
         (double)g.bans);
  if (srv->rpc)
    http_rpc_stats_write(srv->rpc, &b);
  if (b.failed) {
    http_buf_free(&b);
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR,
                    "the metrics did not fit in memory");
    return;
  }
  res->body = http_buf_take(&b, &res->len);
  res->status = MHD_HTTP_OK;
  res->type = "text/plain; version=0.0.4; charset=utf-8";
}
