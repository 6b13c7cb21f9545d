/* The API's admin actions on identities (docs/tokens.md): GET /api/tokens,
 * POST /api/tokens, POST /api/tokens/ID/revoke and POST
 * /api/clients/ID/revoke, through the store's own functions
 * (store_tokens.h) on the side port's read-write connection (see
 * http_server.c for why a connection of its own). A new token is in the
 * answer once and nowhere else: the database keeps its hash, the log its
 * id and label. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "duration.h"
#include "http_internal.h"
#include "log.h"
#include "sanitize.h"
#include "store_tokens.h"

#define MAX_USES 1000000000 /* as `cohort tokens create --uses` */

/* Wall-clock seconds, or null for 0 (never, not revoked). */
static json_object *time_or_null(double t) {
  return t > 0 ? http_json_double(t) : NULL;
}

static json_object *token_object(const store_enroll_token *t, double now) {
  const char *refusal = store_token_refusal(t, now);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "id", json_object_new_int64(t->id));
  json_object_object_add(o, "label", json_object_new_string(t->label));
  json_object_object_add(o, "state",
                         json_object_new_string(refusal ? refusal : "active"));
  json_object_object_add(o, "uses", json_object_new_int64(t->uses));
  json_object_object_add(
      o, "max_uses", t->max_uses ? json_object_new_int64(t->max_uses) : NULL);
  json_object_object_add(o, "expires_at", time_or_null(t->expires_at));
  json_object_object_add(o, "revoked_at", time_or_null(t->revoked_at));
  json_object_object_add(o, "created_at", http_json_double(t->created_at));
  return o;
}

/* The store's failure as a 503 (its text goes to the log, not the peer). */
static void store_failed(const http_request *req, http_response *res,
                         const char *what) {
  log_warn("http: %s: %s", what, store_errmsg(req->srv->admin));
  http_json_error(res, MHD_HTTP_SERVICE_UNAVAILABLE,
                  "%s: the database cannot be written just now", what);
}

void http_api_tokens(const http_request *req, http_response *res) {
  store_enroll_token *tokens = NULL;
  size_t n = 0;
  if (store_token_list(req->srv->admin, &tokens, &n) != COHORT_OK) {
    store_failed(req, res, "listing the enrollment tokens");
    return;
  }
  double now = clock_wall_s();
  json_object *list = json_object_new_array();
  for (size_t i = 0; i < n; i++)
    json_object_array_add(list, token_object(&tokens[i], now));
  free(tokens);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "tokens", list);
  http_json_reply(res, o);
}

/* What POST /api/tokens asks for. */
typedef struct token_request {
  const char *label, *expires;
  size_t label_len; /* the JSON string's, which may hold a NUL */
  int64_t uses;
} token_request;

/* The body as {"label": TEXT, "uses": N, "expires": DURATION} (label
 * required, the others optional, nothing else): 0, or -1 after a 400 that
 * names the problem. *parsed holds the strings; the caller puts it. */
static int read_token_request(const http_request *req, http_response *res,
                              json_object **parsed, token_request *out) {
  memset(out, 0, sizeof *out);
  *parsed = NULL;
  json_tokener *tok = json_tokener_new_ex(4);
  if (!tok) {
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return -1;
  }
  json_object *o = json_tokener_parse_ex(tok, req->body ? req->body : "",
                                         (int)req->body_len);
  int complete = json_tokener_get_error(tok) == json_tokener_success &&
                 json_tokener_get_parse_end(tok) == req->body_len;
  json_tokener_free(tok);
  *parsed = o;
  if (!complete || !json_object_is_type(o, json_type_object)) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST,
                    "the body must be one JSON object such as "
                    "{\"label\": \"lab phones\", \"uses\": 10, "
                    "\"expires\": \"30d\"}");
    return -1;
  }
  json_object_object_foreach(o, key, val) {
    if (strcmp(key, "label") == 0 &&
        json_object_is_type(val, json_type_string)) {
      out->label = json_object_get_string(val);
      out->label_len = (size_t)json_object_get_string_len(val);
    } else if (strcmp(key, "expires") == 0 &&
               json_object_is_type(val, json_type_string))
      out->expires = json_object_get_string(val);
    else if (strcmp(key, "uses") == 0 &&
             json_object_is_type(val, json_type_int))
      out->uses = json_object_get_int64(val);
    else {
      http_json_error(res, MHD_HTTP_BAD_REQUEST,
                      "%.32s: not a field of a token request (label: text, "
                      "uses: integer, expires: a duration such as \"30d\")",
                      key);
      return -1;
    }
  }
  /* The JSON string's own length, not strlen: "a\u0000b" would otherwise
   * be stored as "a". */
  char why[200];
  if (store_label_check(out->label, out->label_len, why, sizeof why) !=
      COHORT_OK) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST, "%s", why);
    return -1;
  }
  if (out->uses < 0 || out->uses > MAX_USES) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST,
                    "uses must be from 0 (no limit) to %d", MAX_USES);
    return -1;
  }
  return 0;
}

void http_api_tokens_create(const http_request *req, http_response *res) {
  json_object *parsed;
  token_request tr;
  char token[CRYPTO_TOKEN_HEX_LEN] = {0}, hash[CRYPTO_SHA256_HEX_LEN];
  double ttl = 0, now = clock_wall_s();
  int64_t id = 0;
  if (read_token_request(req, res, &parsed, &tr) != 0)
    goto out;
  if (tr.expires && duration_parse(tr.expires, &ttl) != 0) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST,
                    "expires: expected a duration such as \"90m\", \"12h\" or "
                    "\"30d\"");
    goto out;
  }
  if (crypto_new_token(token) || crypto_sha256_hex(token, hash)) {
    http_json_error(res, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot make a token");
    goto out;
  }
  if (store_token_add(req->srv->admin, hash, tr.label, tr.uses,
                      ttl ? now + ttl : 0, now, &id) != COHORT_OK) {
    store_failed(req, res, "adding the enrollment token");
    goto out;
  }
  store_enroll_token made = {.id = id,
                             .max_uses = tr.uses,
                             .expires_at = ttl ? now + ttl : 0,
                             .created_at = now};
  snprintf(made.label, sizeof made.label, "%s", tr.label);
  json_object *o = token_object(&made, now);
  json_object_object_add(o, "token", json_object_new_string(token));
  http_json_reply(res, o);
  char label[SANITIZE_NAME_LEN];
  log_info("http: enrollment token %lld (%s) created by an operator",
           (long long)id, sanitize_text(tr.label, label, sizeof label));
out:
  OPENSSL_cleanse(token, sizeof token);
  json_object_put(parsed);
}

/* "ID/revoke" after a route's prefix: ID, or 0 after a 400 in res. */
static int64_t revoke_id(const http_request *req, http_response *res,
                         const char *what) {
  char *end;
  errno = 0;
  long long id = strtoll(req->rest, &end, 10);
  if (req->rest[0] < '1' || req->rest[0] > '9' || errno ||
      strcmp(end, "/revoke") != 0) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST,
                    "expected POST .../%s/ID/revoke with ID a positive number",
                    what);
    return 0;
  }
  return id;
}

/* The answer to store_token_revoke or store_client_revoke of id. */
static void revoked(const http_request *req, http_response *res, int rc,
                    const char *what, int64_t id) {
  if (rc == COHORT_ENOTFOUND) {
    http_json_error(res, MHD_HTTP_NOT_FOUND, "no %s %lld", what, (long long)id);
  } else if (rc == COHORT_ESTATE) {
    http_json_error(res, MHD_HTTP_CONFLICT, "%s %lld was already revoked", what,
                    (long long)id);
  } else if (rc != COHORT_OK) {
    store_failed(req, res, "revoking");
  } else {
    log_warn("http: %s %lld revoked by an operator", what, (long long)id);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "revoked", json_object_new_int64(id));
    json_object_object_add(o, "kind", json_object_new_string(what));
    http_json_reply(res, o);
  }
}

void http_api_token_revoke(const http_request *req, http_response *res) {
  int64_t id = revoke_id(req, res, "tokens");
  if (id)
    revoked(req, res, store_token_revoke(req->srv->admin, id, clock_wall_s()),
            "enrollment token", id);
}

void http_api_client_revoke(const http_request *req, http_response *res) {
  int64_t id = revoke_id(req, res, "clients");
  if (id)
    revoked(req, res, store_client_revoke(req->srv->admin, id, clock_wall_s()),
            "client", id);
}
