/* GET /metrics: Prometheus text format. Durable figures come from the
 * database in one read transaction (a consistent snapshot that never blocks
 * the coordinator's writer under WAL); live ones from lock-free counters
 * and the long-poll queue's short lock. docs/operations.md lists them. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "http_internal.h"
#include "log.h"

/* Clients whose last check-in is this recent count as active (the store
 * writes last_seen at most once a minute per client). */
#define ACTIVE_WINDOW_S 300.0

static const char *STATES[] = {"OPEN", "TRAINING", "AGGREGATING", "COMMITTED",
                               "FAILED"};
#define N_STATES (sizeof STATES / sizeof STATES[0])

/* Runs sql (with ?1 bound to arg when given) and copies the first row's
 * columns as doubles into v (NULL columns as 0). 1 with a row, 0 without,
 * -1 on error. */
static int row(sqlite3 *db, const char *sql, const double *arg, double *v,
               int n) {
  sqlite3_stmt *st = NULL;
  int rc = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    goto out;
  if (arg)
    sqlite3_bind_double(st, 1, *arg);
  int step = sqlite3_step(st);
  if (step == SQLITE_DONE) {
    rc = 0;
    goto out;
  }
  if (step != SQLITE_ROW)
    goto out;
  for (int i = 0; i < n; i++)
    v[i] = sqlite3_column_double(st, i);
  rc = 1;
out:
  if (rc < 0)
    log_warn("http: /metrics: %s", sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

static void metric(http_buf *b, const char *name, const char *type,
                   const char *help, double value) {
  http_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                  type, name, value);
}

static int rounds_by_state(sqlite3 *db, http_buf *b) {
  http_buf_printf(b, "# HELP cohort_rounds Rounds by state.\n"
                     "# TYPE cohort_rounds gauge\n");
  for (size_t i = 0; i < N_STATES; i++) {
    sqlite3_stmt *st = NULL;
    double n = 0;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM rounds WHERE state = ?1",
                           -1, &st, NULL) != SQLITE_OK)
      return -1;
    sqlite3_bind_text(st, 1, STATES[i], -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    http_buf_printf(b, "cohort_rounds{state=\"%s\"} %.0f\n", STATES[i], n);
  }
  return 0;
}

static int durable(sqlite3 *db, http_buf *b) {
  double v[6] = {0};
  double since = clock_wall_s() - ACTIVE_WINDOW_S;
  if (rounds_by_state(db, b) != 0)
    return -1;
  if (row(db,
          "SELECT id, target, clients_selected FROM rounds ORDER BY id "
          "DESC LIMIT 1",
          NULL, v, 3) < 0)
    return -1;
  metric(b, "cohort_round_current", "gauge",
         "Id of the latest round (0: none yet).", v[0]);
  metric(b, "cohort_round_current_target", "gauge",
         "Updates the latest round aims for.", v[1]);
  metric(b, "cohort_round_current_participants", "gauge",
         "Clients selected in the latest round.", v[2]);
  memset(v, 0, sizeof v);
  if (row(db,
          "SELECT count(*), coalesce(sum(state = 'UPLOADED'), 0),"
          " coalesce(sum(bytes_up), 0), coalesce(sum(bytes_down), 0)"
          " FROM participations",
          NULL, v, 4) < 0)
    return -1;
  metric(b, "cohort_participants_total", "counter",
         "Clients selected into rounds, summed over rounds.", v[0]);
  metric(b, "cohort_uploads_total", "counter",
         "Participations whose update arrived.", v[1]);
  metric(b, "cohort_bytes_up_total", "counter",
         "Update bytes received from clients.", v[2]);
  metric(b, "cohort_bytes_down_total", "counter",
         "Model bytes sent to clients.", v[3]);
  if (row(db,
          "SELECT count(*) FROM participations p JOIN rounds r"
          " ON r.id = p.round WHERE p.state = 'SELECTED'"
          " AND r.state IN ('COMMITTED', 'FAILED')",
          NULL, v, 1) < 0)
    return -1;
  metric(b, "cohort_dropouts_total", "counter",
         "Selected clients whose update never arrived, in finished rounds.",
         v[0]);
  if (row(db,
          "SELECT count(*), coalesce(sum(finished_at - started_at), 0)"
          " FROM rounds WHERE finished_at IS NOT NULL",
          NULL, v, 2) < 0)
    return -1;
  http_buf_printf(b,
                  "# HELP cohort_round_seconds Rounds from open to commit "
                  "or failure.\n# TYPE cohort_round_seconds summary\n"
                  "cohort_round_seconds_sum %.6f\n"
                  "cohort_round_seconds_count %.0f\n",
                  v[1], v[0]);
  if (row(db,
          "SELECT count(*), coalesce(sum(uploaded_at - selected_at), 0)"
          " FROM participations WHERE uploaded_at IS NOT NULL",
          NULL, v, 2) < 0)
    return -1;
  http_buf_printf(b,
                  "# HELP cohort_client_task_seconds A client's task from "
                  "selection to its upload (download, training, upload).\n"
                  "# TYPE cohort_client_task_seconds summary\n"
                  "cohort_client_task_seconds_sum %.6f\n"
                  "cohort_client_task_seconds_count %.0f\n",
                  v[1], v[0]);
  memset(v, 0, sizeof v);
  if (row(db,
          "SELECT id, secagg_advertised, secagg_shared, secagg_masked,"
          " secagg_attested, secagg_unmasked FROM rounds"
          " WHERE secagg IS NOT NULL ORDER BY id DESC LIMIT 1",
          NULL, v, 6) < 0)
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
                  v[0]);
  for (int i = 0; i < 5; i++)
    http_buf_printf(b, "cohort_secagg_survivors{phase=\"%s\"} %.0f\n",
                    PHASES[i], v[i + 1]);
  memset(v, 0, sizeof v);
  if (row(db,
          "SELECT epsilon, delta FROM privacy_ledger ORDER BY round DESC"
          " LIMIT 1",
          NULL, v, 2) < 0)
    return -1;
  metric(b, "cohort_dp_epsilon_spent", "gauge",
         "Privacy budget spent so far, at cohort_dp_delta (0: no DP round).",
         v[0]);
  metric(b, "cohort_dp_delta", "gauge", "The delta epsilon is reported at.",
         v[1]);
  if (row(db, "SELECT count(*) FROM clients", NULL, v, 1) < 0)
    return -1;
  metric(b, "cohort_clients_registered", "gauge", "Registered clients.", v[0]);
  if (row(db, "SELECT count(*) FROM clients WHERE last_seen >= ?1", &since, v,
          1) < 0)
    return -1;
  metric(b, "cohort_clients_active", "gauge",
         "Clients seen within the last 5 minutes (last_seen is written at "
         "most once a minute).",
         v[0]);
  return 0;
}

void http_metrics(const http_request *req, http_response *res) {
  http_server *srv = req->srv;
  http_buf b;
  http_buf_init(&b, HTTP_MAX_BODY);
  int ok = sqlite3_exec(srv->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
  ok = ok && durable(srv->db, &b) == 0;
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
         svc ? svc->transport_insecure : 0);
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
