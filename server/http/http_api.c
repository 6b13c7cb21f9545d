/* The JSON API: /api/federation, /api/rounds and /api/clients (paged by
 * id: ?after=ID&limit=N, the reply's next_after continues), /api/models/N
 * (metadata; /api/models/N/safetensors the model itself), and the admin
 * action POST /api/rounds/current/abort. Rows become objects column by
 * column, so a column added to a SELECT appears in the API unchanged. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "export.h"
#include "http_internal.h"
#include "log.h"
#include "store_tokens.h"

#define PAGE_DEFAULT 100
#define PAGE_MAX 1000
#define ACTIVE_WINDOW_S 300.0

/* The current row of st as an object keyed by column name. */
static json_object *row_object(sqlite3_stmt *st) {
  json_object *o = json_object_new_object();
  for (int i = 0; o && i < sqlite3_column_count(st); i++) {
    json_object *v = NULL;
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
      v = json_object_new_int64(sqlite3_column_int64(st, i));
      break;
    case SQLITE_FLOAT:
      v = http_json_double(sqlite3_column_double(st, i));
      break;
    case SQLITE_TEXT:
      v = json_object_new_string((const char *)sqlite3_column_text(st, i));
      break;
    default: /* NULL; no endpoint selects a blob */
      break;
    }
    json_object_object_add(o, sqlite3_column_name(st, i), v);
  }
  return o;
}

/* The first row of sql (?1, if it has one, bound to arg) as an object, json
 * null when there is none; -1 after an error was put in res. */
static int one_row(const http_request *req, http_response *res, const char *sql,
                   int64_t arg, json_object **out) {
  *out = NULL;
  sqlite3_stmt *st = http_prepare(req, res, sql);
  if (!st)
    return -1;
  if (sqlite3_bind_parameter_count(st) >= 1)
    sqlite3_bind_int64(st, 1, arg);
  int step = sqlite3_step(st);
  int rc = 0;
  if (step == SQLITE_ROW)
    *out = row_object(st);
  else if (step != SQLITE_DONE) {
    http_json_error(res, MHD_HTTP_SERVICE_UNAVAILABLE,
                    "the database cannot be read just now");
    rc = -1;
  }
  sqlite3_finalize(st);
  return rc;
}

/* A page of rows of sql, which selects "id" first and binds ?1 (after) and
 * ?2 (limit), as {key: [...], next_after: ID or null}. */
static void page(const http_request *req, http_response *res, const char *sql,
                 const char *key) {
  int64_t after, limit;
  if (http_query_int(req, res, "after", 0, 0, INT64_MAX, &after) != 0 ||
      http_query_int(req, res, "limit", PAGE_DEFAULT, 1, PAGE_MAX, &limit) != 0)
    return;
  sqlite3_stmt *st = http_prepare(req, res, sql);
  if (!st)
    return;
  sqlite3_bind_int64(st, 1, after);
  sqlite3_bind_int64(st, 2, limit);
  json_object *list = json_object_new_array();
  int64_t last = 0, n = 0;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    last = sqlite3_column_int64(st, 0);
    n++;
    json_object_array_add(list, row_object(st));
  }
  sqlite3_finalize(st);
  if (step != SQLITE_DONE) {
    json_object_put(list);
    http_json_error(res, MHD_HTTP_SERVICE_UNAVAILABLE,
                    "the database cannot be read just now");
    return;
  }
  json_object *o = json_object_new_object();
  json_object_object_add(o, key, list);
  json_object_object_add(o, "next_after",
                         n == limit ? json_object_new_int64(last) : NULL);
  http_json_reply(res, o);
}

void http_api_rounds(const http_request *req, http_response *res) {
  page(req, res,
       "SELECT r.id, r.kind, r.state, r.reason, r.target, r.clients_selected,"
       " r.clients_aggregated, r.late_uploads, r.accuracy, r.loss,"
       " r.fed_accuracy, r.fed_loss, r.bytes_up_mean, r.bytes_down_mean,"
       " r.started_at, r.finished_at, r.base_version, r.model_version,"
       " r.codec, r.secagg, r.secagg_advertised, r.secagg_shared,"
       " r.secagg_masked, r.secagg_attested, r.secagg_unmasked,"
       " p.epsilon, p.noise_multiplier, p.clip"
       " FROM rounds r LEFT JOIN privacy_ledger p ON p.round = r.id"
       " WHERE r.id > ?1 ORDER BY r.id LIMIT ?2",
       "rounds");
}

void http_api_clients(const http_request *req, http_response *res) {
  /* Never the token's hash or keys: what an operator needs to see. */
  page(req, res,
       "SELECT id, platform, registered_at, last_seen,"
       " identity_key IS NOT NULL AS has_identity_key,"
       " enrollment_cert IS NOT NULL AS certified, rounds_failed,"
       " excluded_until, " STORE_CLIENT_STATE_SQL " AS session"
       " FROM clients WHERE id > ?1 ORDER BY id LIMIT ?2",
       "clients");
}

/* Why version could not be exported, told to the peer without export's
 * message, which names the database's path: that goes to the log. The
 * caller saw the version's row, so a missing one means its parameters were
 * pruned (--keep-models), for good: 410. */
static void export_failed(http_response *res, int64_t version, int rc,
                          const char *why) {
  log_warn("http: model version %lld not exported: %s", (long long)version,
           why);
  if (rc == COHORT_ENOTFOUND)
    http_json_error(res, MHD_HTTP_GONE,
                    "model version %lld: its parameters were pruned "
                    "(--keep-models); /api/models/%lld still describes it",
                    (long long)version, (long long)version);
  else
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR,
                    "model version %lld cannot be exported (%s); the "
                    "coordinator's log says why",
                    (long long)version, cohort_strerror(rc));
}

/* The model as safetensors (export.c) through a file in a private
 * temporary folder, unlinked once open: the response streams from it. */
static void model_file(const http_request *req, http_response *res,
                       int64_t version) {
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[600], ver[24], err[256];
  snprintf(dir, sizeof dir, "%s/cohort-export-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR,
                    "cannot make a temporary folder: %s", strerror(errno));
    return;
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(ver, sizeof ver, "%lld", (long long)version);
  int fd = -1;
  struct stat st;
  int rc = export_model(req->srv->db_path, ver, path, err, sizeof err);
  if (rc != COHORT_OK)
    export_failed(res, version, rc, err);
  else if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0)
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR,
                    "cannot read the exported model: %s", strerror(errno));
  else {
    res->fd = fd;
    fd = -1;
    res->len = (size_t)st.st_size;
    res->status = MHD_HTTP_OK;
    res->type = "application/octet-stream";
  }
  if (fd >= 0)
    close(fd);
  unlink(path);
  rmdir(dir);
}

void http_api_model(const http_request *req, http_response *res) {
  char *end;
  errno = 0;
  long long v = strtoll(req->rest, &end, 10);
  int as_file = strcmp(end, "/safetensors") == 0;
  if (req->rest[0] < '0' || req->rest[0] > '9' || (*end && !as_file) || errno) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST,
                    "/api/models/N[/safetensors]: N must be a model version "
                    "number");
    return;
  }
  json_object *m;
  if (one_row(req, res,
              "SELECT version, round, parent, spec, sha256, size, created_at"
              " FROM models WHERE version = ?1",
              v, &m) != 0)
    return;
  if (!m) {
    http_json_error(res, MHD_HTTP_NOT_FOUND, "no model version %lld", v);
    return;
  }
  if (as_file) {
    json_object_put(m);
    model_file(req, res, v);
    return;
  }
  http_json_reply(res, m);
}

void http_api_abort(const http_request *req, http_response *res) {
  const service *svc = req->srv->svc;
  int64_t round = 0;
  if (!svc || !svc->engine) {
    http_json_error(res, MHD_HTTP_SERVICE_UNAVAILABLE, "no round engine");
    return;
  }
  int rc = round_abort(svc->engine, "aborted by an operator", &round);
  if (rc == COHORT_EINVAL) {
    http_json_error(res, MHD_HTTP_CONFLICT,
                    "no round to abort: none is open or training (one that "
                    "is aggregating can no longer be aborted)");
    return;
  }
  if (rc != COHORT_OK) {
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR,
                    "round %lld ended, but its failure was not recorded: %s",
                    (long long)round, cohort_strerror(rc));
    return;
  }
  log_warn("http: round %lld aborted by an operator", (long long)round);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "aborted", json_object_new_int64(round));
  http_json_reply(res, o);
}

void http_api_federation(const http_request *req, http_response *res) {
  http_server *srv = req->srv;
  json_object *o = json_object_new_object(), *part;
  double since = clock_wall_s() - ACTIVE_WINDOW_S;
  struct {
    const char *key, *sql;
  } parts[] = {
      {"current_round",
       "SELECT id, kind, state, target, clients_selected, clients_aggregated,"
       " started_at, deadline_at FROM rounds ORDER BY id DESC LIMIT 1"},
      {"committed",
       "SELECT count(*) AS training_rounds,"
       " (SELECT max(version) FROM models) AS latest_model"
       " FROM rounds WHERE state = 'COMMITTED' AND kind = 'TRAIN'"},
      {"privacy", "SELECT mode, epsilon, delta, noise_multiplier, clip"
                  " FROM privacy_ledger ORDER BY round DESC LIMIT 1"},
  };
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (one_row(req, res, parts[i].sql, 0, &part) != 0) {
      json_object_put(o);
      return;
    }
    json_object_object_add(o, parts[i].key, part);
  }
  sqlite3_stmt *st = http_prepare(
      req, res,
      "SELECT count(*), coalesce(sum(last_seen >= ?1), 0) FROM clients");
  if (!st) {
    json_object_put(o);
    return;
  }
  sqlite3_bind_double(st, 1, since);
  json_object *clients = json_object_new_object();
  if (sqlite3_step(st) == SQLITE_ROW) {
    json_object_object_add(clients, "registered",
                           json_object_new_int64(sqlite3_column_int64(st, 0)));
    json_object_object_add(clients, "active",
                           json_object_new_int64(sqlite3_column_int64(st, 1)));
  }
  sqlite3_finalize(st);
  const service *svc = srv->svc;
  json_object_object_add(
      clients, "checkins_held",
      json_object_new_int64(
          svc && svc->long_poll ? (int64_t)long_poll_held(svc->long_poll) : 0));
  json_object_object_add(o, "clients", clients);
  json_object_object_add(
      o, "transport_insecure",
      json_object_new_boolean(svc &&
                              svc->transport == SERVICE_TRANSPORT_INSECURE));
  http_json_reply(res, o);
}
