/* `cohort tokens` and `cohort clients`: enrollment tokens and client
 * sessions, on a coordinator's database file, while the coordinator runs
 * (SQLite's WAL and locks; the coordinator reads these rows at every call,
 * so a new or revoked token or a revoked client counts at once). A new
 * token is shown once and only its hash is stored; no token is ever taken
 * from the command line. docs/tokens.md is the manual. */
#include "cohort_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "duration.h"
#include "flags.h"
#include "sanitize.h"
#include "store_tokens.h"

typedef struct tokens_opts {
  const char *db, *label, *expires, *out;
  long uses;
  int json;
} tokens_opts;

static tokens_opts g_tok;

#define DB_FLAG                                                                \
  {                                                                            \
    "db", FLAG_STRING, &g_tok.db, NULL, 0, 0, "PATH",                          \
        "the coordinator's database (it may be serving it)"                    \
  }
#define JSON_FLAG                                                              \
  {                                                                            \
    "json", FLAG_BOOL, &g_tok.json, NULL, 0, 0, NULL,                          \
        "one JSON object instead of a table"                                   \
  }

const char *admin_when(double t, char out[32]) {
  if (t <= 0)
    return "-";
  time_t s = (time_t)t;
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

/* text (client- or operator-supplied) as a JSON string: sanitized first,
 * which leaves printable ASCII and valid UTF-8 only, then quotes and
 * backslashes escaped. */
static void json_string(const char *key, const char *text) {
  char clean[SANITIZE_NAME_LEN];
  sanitize_text(text, clean, sizeof clean);
  printf("\"%s\":\"", key);
  for (const char *p = clean; *p; p++)
    printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
  printf("\"");
}

static void json_time(const char *key, double t) {
  char buf[32];
  if (t > 0)
    printf(",\"%s\":\"%s\"", key, admin_when(t, buf));
  else
    printf(",\"%s\":null", key);
}

/* The subcommand's flags, its one ID argument when want_id (the first
 * argument that is neither a flag nor a flag's value), and --db: the exit
 * status when it stops here, or -1 to go on. */
static int parse(const char *prog, const char *usage, const flag_def *flags,
                 size_t n_flags, int want_id, int64_t *id, int argc,
                 char **argv) {
  char *args[ADMIN_MAX_ARGS];
  int n = argc;
  if (argc > ADMIN_MAX_ARGS) {
    fprintf(stderr, "%s: too many arguments\n", prog);
    return 2;
  }
  if (want_id)
    *id = admin_split_id(flags, n_flags, argc, argv, args, &n);
  else
    memcpy(args, argv, (size_t)argc * sizeof *argv);
  int rc = flags_main(prog, usage, flags, n_flags, n, args);
  if (rc >= 0)
    return rc;
  if (!g_tok.db) {
    fprintf(stderr, "%s: --db is required (see --help)\n", prog);
    return 2;
  }
  if (want_id && !*id) {
    fprintf(stderr, "%s: expected one ID, a positive number (see --help)\n",
            prog);
    return 2;
  }
  return -1;
}

static int open_db(const char *prog, store **s) {
  char err[512];
  if (store_open_admin(g_tok.db, s, err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return 1;
  }
  return 0;
}

int admin_tokens_create(const char *prog, int argc, char **argv) {
  const flag_def flags[] = {
      DB_FLAG,
      TOKEN_CREATE_FLAGS(g_tok),
  };
  static const char usage[] =
      "usage: cohort tokens create --db PATH --label TEXT [--uses N] "
      "[--expires DURATION] [--out FILE]\n\n"
      "Makes an enrollment token from the CSPRNG. It is shown once, on "
      "standard output or in --out; the database keeps only its SHA-256.";
  int64_t unused;
  int rc = parse(prog, usage, flags, sizeof flags / sizeof flags[0], 0, &unused,
                 argc, argv);
  if (rc >= 0)
    return rc;
  double ttl = 0, now = clock_wall_s();
  if (!g_tok.label || !*g_tok.label || strlen(g_tok.label) > STORE_LABEL_MAX) {
    fprintf(stderr, "%s: --label is required, 1 to %d bytes\n", prog,
            STORE_LABEL_MAX);
    return 2;
  }
  if (g_tok.expires && duration_parse(g_tok.expires, &ttl) != 0) {
    fprintf(stderr,
            "%s: --expires '%s': expected a duration such as 90m, 12h or "
            "30d\n",
            prog, g_tok.expires);
    return 2;
  }
  store *s = NULL;
  char token[CRYPTO_TOKEN_HEX_LEN] = {0}, hash[CRYPTO_SHA256_HEX_LEN];
  int64_t id = 0;
  if ((rc = open_db(prog, &s)))
    goto out;
  rc = 1;
  if (crypto_new_token(token) || crypto_sha256_hex(token, hash)) {
    fprintf(stderr, "%s: cannot make a token\n", prog);
    goto out;
  }
  /* The file first: a row whose token nobody received would be a token
   * that admits clients and that no one can hand out or account for. */
  /* 0600: it is a secret. */
  if (g_tok.out && admin_write_new_file(prog, g_tok.out, token, 0600))
    goto out;
  if (store_token_add(s, hash, g_tok.label, g_tok.uses, ttl ? now + ttl : 0,
                      now, &id) != COHORT_OK) {
    fprintf(stderr, "%s: %s\n", prog, store_errmsg(s));
    if (g_tok.out)
      unlink(g_tok.out);
    goto out;
  }
  if (!g_tok.out)
    printf("%s\n", token);
  store_enroll_token made = {
      .id = id, .max_uses = g_tok.uses, .expires_at = ttl ? now + ttl : 0};
  snprintf(made.label, sizeof made.label, "%s", g_tok.label);
  admin_token_made(&made, g_tok.out);
  rc = 0;
out:
  OPENSSL_cleanse(token, sizeof token);
  store_close(s);
  return rc;
}

void admin_token_made(const store_enroll_token *t, const char *out) {
  char at[32], uses[32] = "no use limit", label[SANITIZE_NAME_LEN];
  if (t->max_uses)
    snprintf(uses, sizeof uses, "%lld use(s)", (long long)t->max_uses);
  fprintf(out ? stdout : stderr,
          "enrollment token %lld (%s): %s, expires %s%s%s\n", (long long)t->id,
          sanitize_text(t->label, label, sizeof label), uses,
          t->expires_at > 0 ? admin_when(t->expires_at, at) : "never",
          out ? ", written to " : "", out ? out : "");
}

/* A listing subcommand: its usage, how it loads its rows (a malloc'd
 * array of `size`-byte items) and how it prints one, as a table row or as
 * a JSON object. */
typedef struct lister {
  const char *usage, *json_key, *table_head;
  size_t size;
  int (*load)(store *s, void **rows, size_t *n);
  void (*print)(const void *row, int json, double now);
} lister;

static int list_command(const char *prog, const lister *l, int argc,
                        char **argv) {
  const flag_def flags[] = {DB_FLAG, JSON_FLAG};
  int64_t unused;
  int rc = parse(prog, l->usage, flags, sizeof flags / sizeof flags[0], 0,
                 &unused, argc, argv);
  if (rc >= 0)
    return rc;
  store *s = NULL;
  char *rows = NULL;
  size_t n = 0;
  double now = clock_wall_s();
  if ((rc = open_db(prog, &s)))
    goto out;
  if (l->load(s, (void **)&rows, &n) != COHORT_OK) {
    fprintf(stderr, "%s: %s\n", prog, store_errmsg(s));
    rc = 1;
    goto out;
  }
  if (g_tok.json)
    printf("{\"command\":\"%s\",\"%s\":[", prog + strlen("cohort "),
           l->json_key);
  else
    printf("%s\n", l->table_head);
  for (size_t i = 0; i < n; i++) {
    if (g_tok.json && i)
      printf(",");
    l->print(rows + i * l->size, g_tok.json, now);
  }
  if (g_tok.json)
    printf("]}\n");
out:
  free(rows);
  store_close(s);
  return rc;
}

static void print_token(const void *row, int json, double now) {
  admin_print_token(row, json, now);
}

static int load_tokens(store *s, void **rows, size_t *n) {
  return store_token_list(s, (store_enroll_token **)rows, n);
}

void admin_print_token(const store_enroll_token *t, int json, double now) {
  const char *why = store_token_refusal(t, now);
  const char *state = why ? why : "active";
  char a[32], b[32], uses[32], label[SANITIZE_NAME_LEN];
  if (json) {
    printf("{\"id\":%lld,", (long long)t->id);
    json_string("label", t->label);
    printf(",\"state\":\"%s\",\"uses\":%lld", state, (long long)t->uses);
    if (t->max_uses)
      printf(",\"max_uses\":%lld", (long long)t->max_uses);
    else
      printf(",\"max_uses\":null");
    json_time("expires_at", t->expires_at);
    json_time("revoked_at", t->revoked_at);
    json_time("created_at", t->created_at);
    printf("}");
    return;
  }
  if (t->max_uses)
    snprintf(uses, sizeof uses, "%lld/%lld", (long long)t->uses,
             (long long)t->max_uses);
  else
    snprintf(uses, sizeof uses, "%lld", (long long)t->uses);
  printf("%-4lld %-8s %-12s %-20s %-20s %s\n", (long long)t->id, state, uses,
         admin_when(t->expires_at, a), admin_when(t->created_at, b),
         sanitize_text(t->label, label, sizeof label));
}

int admin_tokens_list(const char *prog, int argc, char **argv) {
  static const lister l = {
      .usage = "usage: cohort tokens list --db PATH [--json]\n\n"
               "The enrollment tokens made with `cohort tokens create` "
               "(never the tokens themselves: the database has only their "
               "hashes).",
      .json_key = "tokens",
      .table_head = "ID   STATE    USES         EXPIRES              CREATED"
                    "              LABEL",
      .size = sizeof(store_enroll_token),
      .load = load_tokens,
      .print = print_token};
  return list_command(prog, &l, argc, argv);
}

static int load_clients(store *s, void **rows, size_t *n) {
  return store_client_list(s, (store_client_info **)rows, n);
}

static void print_client(const void *row, int json, double now) {
  const store_client_info *c = row;
  const char *state = c->state;
  if (json) {
    printf("{\"id\":%lld,\"session\":\"%s\"", (long long)c->id, state);
    if (c->token_id)
      printf(",\"enrollment_token\":%lld,", (long long)c->token_id);
    else
      printf(",\"enrollment_token\":null,");
    json_string("platform", c->platform);
    json_time("session_expires_at", c->session_expires_at);
    json_time("revoked_at", c->revoked_at);
    json_time("registered_at", c->registered_at);
    json_time("last_seen", c->last_seen);
    json_time("excluded_until", c->excluded_until);
    printf(",\"rounds_failed\":%lld,\"certified\":%s}",
           (long long)c->rounds_failed, c->has_cert ? "true" : "false");
    return;
  }
  char a[32], b[32], d[32], x[32], tok[24], platform[SANITIZE_NAME_LEN];
  snprintf(tok, sizeof tok, "%lld", (long long)c->token_id);
  printf("%-6lld %-8s %-6s %-20s %-20s %-20s %-6lld %-20s %s\n",
         (long long)c->id, state, c->token_id ? tok : "flag",
         admin_when(c->session_expires_at, a), admin_when(c->registered_at, b),
         admin_when(c->last_seen, d), (long long)c->rounds_failed,
         c->excluded_until > now ? admin_when(c->excluded_until, x) : "-",
         sanitize_text(c->platform, platform, sizeof platform));
}

int admin_clients_list(const char *prog, int argc, char **argv) {
  static const lister l = {
      .usage = "usage: cohort clients list --db PATH [--json]\n\n"
               "The registered clients and their sessions (a platform "
               "string as the client sent it, escaped), the rounds each "
               "failed and the end of its exclusion from selection, if "
               "any.",
      .json_key = "clients",
      .table_head = "ID     SESSION  TOKEN  EXPIRES              REGISTERED"
                    "           LAST SEEN            FAILED EXCLUDED UNTIL"
                    "       PLATFORM",
      .size = sizeof(store_client_info),
      .load = load_clients,
      .print = print_client};
  return list_command(prog, &l, argc, argv);
}

/* `revoke ID` of either kind: what says which, and revoke does it. */
static int revoke_command(const char *prog, const char *what,
                          int (*revoke)(store *, int64_t, double), int argc,
                          char **argv) {
  const flag_def flags[] = {DB_FLAG};
  char usage[256];
  snprintf(usage, sizeof usage,
           "usage: %s --db PATH ID\n\nRevokes %s ID for good; a running "
           "coordinator refuses it from its next call on.",
           prog, what);
  int64_t id = 0;
  int rc = parse(prog, usage, flags, sizeof flags / sizeof flags[0], 1, &id,
                 argc, argv);
  if (rc >= 0)
    return rc;
  store *s = NULL;
  if ((rc = open_db(prog, &s)))
    return rc;
  rc = revoke(s, id, clock_wall_s());
  if (rc == COHORT_OK)
    printf("%s %lld revoked\n", what, (long long)id);
  else if (rc == COHORT_ENOTFOUND)
    fprintf(stderr, "%s: no %s %lld\n", prog, what, (long long)id);
  else if (rc == COHORT_ESTATE)
    fprintf(stderr, "%s: %s %lld was already revoked\n", prog, what,
            (long long)id);
  else
    fprintf(stderr, "%s: %s\n", prog, store_errmsg(s));
  store_close(s);
  return rc ? 1 : 0;
}

int admin_tokens_revoke(const char *prog, int argc, char **argv) {
  return revoke_command(prog, "enrollment token", store_token_revoke, argc,
                        argv);
}

int admin_clients_revoke(const char *prog, int argc, char **argv) {
  return revoke_command(prog, "client", store_client_revoke, argc, argv);
}
