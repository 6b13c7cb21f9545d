/* `cohort tokens create|list|revoke` and `cohort clients revoke` against a
 * running coordinator, through its HTTP API (/api/tokens,
 * /api/clients/ID/revoke) with the admin token: the live forms of
 * cohort_admin_tokens.c's --db commands, printing alike. A new token is
 * printed once, to standard output or a new 0600 --out file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "cohort_admin.h"
#include "cohort_live.h"
#include "cohort_live_internal.h"

/* An API token object as the store's struct, for admin_print_token. */
static void token_from_json(json_object *o, store_enroll_token *t) {
  memset(t, 0, sizeof *t);
  t->id = json_object_get_int64(live_get(o, "id"));
  snprintf(t->label, sizeof t->label, "%s",
           json_object_get_string(live_get(o, "label")));
  t->max_uses = json_object_get_int64(live_get(o, "max_uses"));
  t->uses = json_object_get_int64(live_get(o, "uses"));
  t->expires_at = json_object_get_double(live_get(o, "expires_at"));
  t->revoked_at = json_object_get_double(live_get(o, "revoked_at"));
  t->created_at = json_object_get_double(live_get(o, "created_at"));
}

int live_tokens_list(const char *prog, int argc, char **argv) {
  static const flag_def defs[] = {LIVE_FLAGS};
  int rc = flags_main(prog,
                      "usage: cohort tokens list [--server URL] [--token-file "
                      "PATH] [--json]\n\nThe enrollment tokens of a running "
                      "coordinator (never the tokens themselves).",
                      defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  json_object *o;
  if (live_call(prog, "GET", "/api/tokens", NULL, NULL, &o) != 0)
    return 1;
  if (g_live.json) {
    live_print_json(o);
  } else {
    json_object *list = live_get(o, "tokens");
    double now = clock_wall_s();
    printf("ID   STATE    USES         EXPIRES              CREATED"
           "              LABEL\n");
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      store_enroll_token t;
      token_from_json(json_object_array_get_idx(list, i), &t);
      admin_print_token(&t, 0, now);
    }
  }
  json_object_put(o);
  return 0;
}

/* Revokes token id through the API: for a token that was made but could
 * not be handed over. */
static void revoke_undelivered(const char *prog, int64_t id) {
  char path[64];
  snprintf(path, sizeof path, "/api/tokens/%lld/revoke", (long long)id);
  if (live_call(prog, "POST", path, NULL, NULL, NULL) == 0)
    fprintf(stderr,
            "%s: enrollment token %lld revoked, since it could not "
            "be written\n",
            prog, (long long)id);
}

int live_tokens_create(const char *prog, int argc, char **argv) {
  static const flag_def defs[] = {
      LIVE_FLAGS,
      TOKEN_CREATE_FLAGS(g_live),
  };
  int rc = flags_main(
      prog,
      "usage: cohort tokens create --label TEXT [--uses N] [--expires "
      "DURATION] [--out FILE] [--server URL] [--token-file PATH] [--json]\n\n"
      "Makes an enrollment token on a running coordinator. It is shown once, "
      "on standard output (in the JSON with --json) or in --out; the "
      "coordinator keeps only its SHA-256.",
      defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  if (!g_live.label) {
    fprintf(stderr, "%s: --label is required (see --help)\n", prog);
    return 2;
  }
  /* Before the token exists: one that nobody received would admit clients
   * that no one can account for. */
  if (g_live.out && access(g_live.out, F_OK) == 0) {
    fprintf(stderr, "%s: %s exists; it is never replaced\n", prog, g_live.out);
    return 1;
  }
  json_object *req = json_object_new_object(), *o = NULL;
  json_object_object_add(req, "label", json_object_new_string(g_live.label));
  json_object_object_add(req, "uses", json_object_new_int64(g_live.uses));
  if (g_live.expires)
    json_object_object_add(req, "expires",
                           json_object_new_string(g_live.expires));
  rc = live_call(prog, "POST", "/api/tokens",
                 json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN),
                 NULL, &o);
  json_object_put(req);
  if (rc)
    return 1;
  json_object *token = live_get(o, "token");
  store_enroll_token made;
  token_from_json(o, &made);
  if (!json_object_is_type(token, json_type_string)) {
    fprintf(stderr, "%s: the answer holds no token\n", prog);
    rc = 1;
  } else if (g_live.out &&
             admin_write_new_file(prog, g_live.out,
                                  json_object_get_string(token), 0600)) {
    revoke_undelivered(prog, made.id);
    rc = 1;
  } else if (g_live.json) {
    if (g_live.out) { /* the token is in the file, not on the screen */
      json_object_object_del(o, "token");
      json_object_object_add(o, "file", json_object_new_string(g_live.out));
    }
    live_print_json(o);
  } else {
    if (!g_live.out)
      printf("%s\n", json_object_get_string(token));
    admin_token_made(&made, g_live.out);
  }
  /* The answer's copy of the token: json-c frees without wiping. */
  if (json_object_is_type((token = live_get(o, "token")), json_type_string))
    OPENSSL_cleanse((char *)json_object_get_string(token),
                    (size_t)json_object_get_string_len(token));
  json_object_put(o);
  return rc;
}

/* `revoke ID` of either kind through POST /api/KIND/ID/revoke. */
static int revoke_command(const char *prog, const char *kind, const char *what,
                          int argc, char **argv) {
  static const flag_def defs[] = {LIVE_FLAGS};
  char usage[320], path[96], *args[ADMIN_MAX_ARGS];
  snprintf(usage, sizeof usage,
           "usage: %s ID [--server URL] [--token-file PATH] [--json]\n\n"
           "Revokes %s ID for good on a running coordinator; it is refused "
           "from its next call on.",
           prog, what);
  if (argc > ADMIN_MAX_ARGS) {
    fprintf(stderr, "%s: too many arguments\n", prog);
    return 2;
  }
  int n;
  int64_t id =
      admin_split_id(defs, sizeof defs / sizeof defs[0], argc, argv, args, &n);
  int rc = flags_main(prog, usage, defs, sizeof defs / sizeof defs[0], n, args);
  if (rc >= 0)
    return rc;
  if (!id) {
    fprintf(stderr, "%s: expected one ID, a positive number (see --help)\n",
            prog);
    return 2;
  }
  snprintf(path, sizeof path, "/api/%s/%lld/revoke", kind, (long long)id);
  json_object *o;
  if (live_call(prog, "POST", path, NULL, NULL, &o) != 0)
    return 1;
  if (g_live.json)
    live_print_json(o);
  else
    printf("%s %lld revoked\n", what, (long long)id);
  json_object_put(o);
  return 0;
}

int live_tokens_revoke(const char *prog, int argc, char **argv) {
  return revoke_command(prog, "tokens", "enrollment token", argc, argv);
}

int live_clients_revoke(const char *prog, int argc, char **argv) {
  return revoke_command(prog, "clients", "client", argc, argv);
}
