/* See cohort_live.h. One HTTP exchange per call through libcurl; the admin
 * token comes from --token-file or $COHORT_ADMIN_TOKEN, never from a flag
 * value (which the process list would show), and is sent only as
 * "Authorization: Bearer". --json prints the API's own JSON. */
#include "cohort_live.h"
#include "cohort_live_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin_token.h"
#include "durable.h"
#include "fd_io.h"
#include "flags.h"

#define MAX_JSON_BYTES (64u << 20)

live_opts g_live;

#define PAGE_FLAGS                                                             \
  {"after",                                                                    \
   FLAG_INT,                                                                   \
   &g_live.after,                                                              \
   "0",                                                                        \
   0,                                                                          \
   9e15,                                                                       \
   "ID",                                                                       \
   "start after this id (the previous page's next_after)"},                    \
  {                                                                            \
    "limit", FLAG_INT, &g_live.limit, "100", 1, 1000, "N", "rows at most"      \
  }

/* The response of one call: a growing buffer, or a file to write to. */
typedef struct body {
  char *data;
  size_t len;
  FILE *file; /* for a 200 answer; an error's JSON goes to data */
  CURL *curl;
  int too_big;
} body;

static size_t on_data(char *p, size_t size, size_t n, void *ctx) {
  body *b = ctx;
  size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(b->curl, CURLINFO_RESPONSE_CODE, &status);
  if (b->file && status == 200)
    return fwrite(p, 1, len, b->file);
  if (b->len + len > MAX_JSON_BYTES) {
    b->too_big = 1;
    return 0;
  }
  char *d = realloc(b->data, b->len + len + 1);
  if (!d)
    return 0;
  memcpy(d + b->len, p, len);
  b->data = d;
  b->len += len;
  d[b->len] = '\0';
  return len;
}

/* Room for a token, "\r\n" and the NUL. */
#define TOKEN_BUF (ADMIN_TOKEN_MAX_LEN + 3)

/* A token longer than ADMIN_TOKEN_MAX_LEN is refused, not cut: cut, it would be
 * refused with a 401 that does not say why. Returns -1. */
static int too_long(const char *prog, const char *from, const char *file) {
  fprintf(stderr, "%s: %s%s: the token is longer than %d characters\n", prog,
          from, file ? file : "", ADMIN_TOKEN_MAX_LEN);
  return -1;
}

/* The admin token into tok (empty when none is configured). 0 or -1. */
static int read_token(const char *prog, char tok[TOKEN_BUF]) {
  tok[0] = '\0';
  const char *env = getenv("COHORT_ADMIN_TOKEN");
  if (!g_live.token_file) {
    if (env && strlen(env) > ADMIN_TOKEN_MAX_LEN)
      return too_long(prog, "$COHORT_ADMIN_TOKEN", NULL);
    if (env)
      snprintf(tok, TOKEN_BUF, "%s", env);
    return 0;
  }
  FILE *f = fd_fopen_regular(g_live.token_file, NULL);
  if (!f) {
    fprintf(stderr, "%s: --token-file %s: %s\n", prog, g_live.token_file,
            fd_open_strerror(errno));
    return -1;
  }
  int whole = fd_read_line(f, tok, TOKEN_BUF) >= 0;
  fclose(f);
  if (!whole || strlen(tok) > ADMIN_TOKEN_MAX_LEN)
    return too_long(prog, "--token-file ", g_live.token_file);
  if (!tok[0]) {
    fprintf(stderr, "%s: --token-file %s: no token on its first line\n", prog,
            g_live.token_file);
    return -1;
  }
  return 0;
}

int live_call(const char *prog, const char *method, const char *path,
              const char *json_body, FILE *file, json_object **out) {
  char tok[TOKEN_BUF], url[2048], auth[TOKEN_BUF + 32] = "";
  body b = {.file = file};
  struct curl_slist *headers = NULL;
  int rc = 1;
  long status = 0;
  if (out)
    *out = NULL;
  CURL *c = curl_easy_init();
  b.curl = c;
  if (!c || read_token(prog, tok) != 0)
    goto out;
  size_t n = strlen(g_live.server);
  while (n && g_live.server[n - 1] == '/')
    n--;
  snprintf(url, sizeof url, "%.*s%s", (int)n, g_live.server, path);
  if (tok[0]) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
    headers = curl_slist_append(headers, auth);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  if (json_body)
    headers = curl_slist_append(headers, "Content-Type: application/json");
  if (strcmp(method, "POST") == 0) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
                     json_body ? (long)strlen(json_body) : 0L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_body ? json_body : "");
  }
  CURLcode e = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (e != CURLE_OK) {
    fprintf(stderr, "%s: %s %s: %s\n", prog, method, url,
            b.too_big ? "answer too large" : curl_easy_strerror(e));
    goto out;
  }
  if (status != 200) {
    json_object *err = b.data ? json_tokener_parse(b.data) : NULL, *msg;
    fprintf(stderr, "%s: %s %s: HTTP %ld: %s\n", prog, method, url, status,
            err && json_object_object_get_ex(err, "error", &msg)
                ? json_object_get_string(msg)
                : "no explanation");
    json_object_put(err);
    goto out;
  }
  if (out && !(*out = b.data ? json_tokener_parse(b.data) : NULL)) {
    fprintf(stderr, "%s: %s %s: the answer is not JSON\n", prog, method, url);
    goto out;
  }
  rc = 0;
out:
  memset(tok, 0, sizeof tok);
  memset(auth, 0, sizeof auth);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  free(b.data);
  return rc;
}

void live_print_json(json_object *o) {
  puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

json_object *live_get(json_object *o, const char *key) {
  json_object *v = NULL;
  return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* A number field as text ("-" when null or absent). */
static const char *num(json_object *o, const char *key, const char *fmt,
                       char *buf, size_t len) {
  json_object *v = live_get(o, key);
  if (!v)
    return "-";
  snprintf(buf, len, fmt, json_object_get_double(v));
  return buf;
}

int live_status(const char *prog, int argc, char **argv) {
  static const flag_def defs[] = {LIVE_FLAGS};
  int rc = flags_main(prog,
                      "usage: cohort status [--server URL] [--token-file PATH] "
                      "[--json]\n\nThe federation at a glance, from a running "
                      "coordinator's HTTP API (docs/operations.md).",
                      defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  json_object *f;
  if (live_call(prog, "GET", "/api/federation", NULL, NULL, &f) != 0)
    return 1;
  if (g_live.json) {
    live_print_json(f);
    json_object_put(f);
    return 0;
  }
  json_object *cur = live_get(f, "current_round"),
              *com = live_get(f, "committed"), *cl = live_get(f, "clients"),
              *pr = live_get(f, "privacy");
  char a[32], b[32];
  if (cur)
    printf("round %s (%s, %s): %s of %s updates\n",
           num(cur, "id", "%.0f", a, sizeof a),
           json_object_get_string(live_get(cur, "kind")),
           json_object_get_string(live_get(cur, "state")),
           num(cur, "clients_aggregated", "%.0f", b, sizeof b),
           json_object_get_string(live_get(cur, "target")));
  else
    printf("no round yet\n");
  printf("training rounds committed: %s (latest model %s)\n",
         num(com, "training_rounds", "%.0f", a, sizeof a),
         num(com, "latest_model", "%.0f", b, sizeof b));
  printf("clients: %lld registered, %lld active in the last 5 minutes, "
         "%lld check-ins held\n",
         (long long)json_object_get_int64(live_get(cl, "registered")),
         (long long)json_object_get_int64(live_get(cl, "active")),
         (long long)json_object_get_int64(live_get(cl, "checkins_held")));
  if (pr)
    printf("privacy: epsilon %s at delta %s\n",
           num(pr, "epsilon", "%.4g", a, sizeof a),
           num(pr, "delta", "%g", b, sizeof b));
  else
    printf("privacy: no differentially private round yet\n");
  if (json_object_get_boolean(live_get(f, "transport_insecure")))
    printf("transport: INSECURE (plaintext gRPC beyond loopback)\n");
  json_object_put(f);
  return 0;
}

/* GET path?after=&limit= with the page flags. */
static int get_page(const char *prog, const char *path, json_object **out) {
  char p[256];
  snprintf(p, sizeof p, "%s?after=%ld&limit=%ld", path, g_live.after,
           g_live.limit);
  return live_call(prog, "GET", p, NULL, NULL, out);
}

/* The hint to the next page, on standard error so the lines stay clean. */
static void next_hint(const char *prog, json_object *page) {
  json_object *next = live_get(page, "next_after");
  if (next)
    fprintf(stderr, "%s: more after this page: --after %lld\n", prog,
            (long long)json_object_get_int64(next));
}

/* A paged list command: one page of path's key array, as lines (header,
 * then print_row per row) or the page's JSON. */
static int list_command(const char *prog, const char *usage, const char *path,
                        const char *key, const char *header,
                        void (*print_row)(json_object *row), int argc,
                        char **argv) {
  static const flag_def defs[] = {LIVE_FLAGS, PAGE_FLAGS};
  int rc =
      flags_main(prog, usage, defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  json_object *page;
  if (get_page(prog, path, &page) != 0)
    return 1;
  if (g_live.json) {
    live_print_json(page);
  } else {
    json_object *list = live_get(page, key);
    fputs(header, stdout);
    for (size_t i = 0; i < json_object_array_length(list); i++)
      print_row(json_object_array_get_idx(list, i));
  }
  next_hint(prog, page);
  json_object_put(page);
  return 0;
}

#define ROUND_LINE "%-6s %-8s %-11s %-9s %-8s %-8s %-12s %-12s %s\n"

static void print_round(json_object *r) {
  char id[24], cl[32], acc[24], loss[24], up[24], down[24], eps[24];
  snprintf(cl, sizeof cl, "%lld/%lld",
           (long long)json_object_get_int64(live_get(r, "clients_aggregated")),
           (long long)json_object_get_int64(live_get(r, "target")));
  printf(ROUND_LINE, num(r, "id", "%.0f", id, sizeof id),
         json_object_get_string(live_get(r, "kind")),
         json_object_get_string(live_get(r, "state")), cl,
         num(r, "accuracy", "%.4f", acc, sizeof acc),
         num(r, "loss", "%.4f", loss, sizeof loss),
         num(r, "bytes_up_mean", "%.0f", up, sizeof up),
         num(r, "bytes_down_mean", "%.0f", down, sizeof down),
         num(r, "epsilon", "%.4g", eps, sizeof eps));
}

int live_rounds_list(const char *prog, int argc, char **argv) {
  char header[160];
  snprintf(header, sizeof header, ROUND_LINE, "round", "kind", "state",
           "clients", "accuracy", "loss", "up B/client", "down B/client",
           "epsilon");
  return list_command(prog,
                      "usage: cohort rounds list [--after ID] [--limit N] "
                      "[--server URL] [--token-file PATH] [--json]\n\n"
                      "Rounds of a running coordinator, oldest first.",
                      "/api/rounds", "rounds", header, print_round, argc, argv);
}

static void print_client(json_object *c) {
  char ago[32];
  snprintf(ago, sizeof ago, "%.0f s ago",
           (double)time(NULL) -
               json_object_get_double(live_get(c, "last_seen")));
  /* At most 16 characters, control bytes shown as '?': the platform is
   * the client's own text. */
  char platform[17];
  snprintf(platform, sizeof platform, "%s",
           json_object_get_string(live_get(c, "platform")));
  for (char *p = platform; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = '?';
  double excluded = json_object_get_double(live_get(c, "excluded_until"));
  char until[32] = "-";
  if (excluded > (double)time(NULL))
    snprintf(until, sizeof until, "%.0f s more", excluded - (double)time(NULL));
  /* A coordinator before the session state sends none. */
  const char *session = json_object_get_string(live_get(c, "session"));
  printf("%-8lld %-8s %-16s %-14s %-9s %-6lld %s\n",
         (long long)json_object_get_int64(live_get(c, "id")),
         session ? session : "-", platform[0] ? platform : "-", ago,
         json_object_get_boolean(live_get(c, "certified")) ? "yes" : "no",
         (long long)json_object_get_int64(live_get(c, "rounds_failed")), until);
}

int live_clients_list(const char *prog, int argc, char **argv) {
  return list_command(prog,
                      "usage: cohort clients list [--after ID] [--limit N] "
                      "[--server URL] [--token-file PATH] [--json]\n\n"
                      "Registered clients of a running coordinator.",
                      "/api/clients", "clients",
                      "client   session  platform         last seen      "
                      "certified failed excluded\n",
                      print_client, argc, argv);
}

int live_rounds_abort(const char *prog, int argc, char **argv) {
  static const flag_def defs[] = {LIVE_FLAGS};
  int rc =
      flags_main(prog,
                 "usage: cohort rounds abort [--server URL] [--token-file "
                 "PATH] [--json]\n\nEnds the running round as FAILED "
                 "(\"aborted by an operator\"); the next one opens as after "
                 "any failure.",
                 defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  json_object *o;
  if (live_call(prog, "POST", "/api/rounds/current/abort", NULL, NULL, &o) != 0)
    return 1;
  if (g_live.json)
    live_print_json(o);
  else
    printf("aborted round %lld\n",
           (long long)json_object_get_int64(live_get(o, "aborted")));
  json_object_put(o);
  return 0;
}

int live_models_export(const char *prog, int argc, char **argv) {
  static const flag_def defs[] = {
      LIVE_FLAGS,
      /* Not --version: every program's flag for its own version. */
      {"model", FLAG_STRING, &g_live.version, "latest", 0, 0, "N|latest",
       "the model version"},
      {"out", FLAG_STRING, &g_live.out, NULL, 0, 0, "FILE",
       "where to write the safetensors file (required)"}};
  int rc =
      flags_main(prog,
                 "usage: cohort models export --out FILE [--model "
                 "N|latest] [--server URL] [--token-file PATH] [--json]\n\n"
                 "A committed model of a running coordinator as safetensors.",
                 defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  if (!g_live.out) {
    fprintf(stderr, "%s: --out is required (see --help)\n", prog);
    return 2;
  }
  long long version = -1;
  if (strcmp(g_live.version, "latest") == 0) {
    json_object *f;
    if (live_call(prog, "GET", "/api/federation", NULL, NULL, &f) != 0)
      return 1;
    json_object *latest = live_get(live_get(f, "committed"), "latest_model");
    version = latest ? json_object_get_int64(latest) : -1;
    json_object_put(f);
  } else {
    char *end;
    version = strtoll(g_live.version, &end, 10);
    if (*end || !*g_live.version || version < 0) {
      fprintf(stderr, "%s: --model '%s': expected a number or latest\n", prog,
              g_live.version);
      return 2;
    }
  }
  if (version < 0) {
    fprintf(stderr, "%s: the coordinator has no model yet\n", prog);
    return 1;
  }
  /* Written beside the target and renamed: never a half-written FILE.
   * The temporary file is a new one (mkstemp: 0600, O_EXCL), so a link an
   * attacker left at its name is not followed and the model is not open
   * to others whatever the umask; fsynced, then its folder once renamed. */
  char tmp[4096], path[64];
  snprintf(tmp, sizeof tmp, "%s.part-XXXXXX", g_live.out);
  snprintf(path, sizeof path, "/api/models/%lld/safetensors", version);
  int fd = mkstemp(tmp);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
  if (!f) {
    fprintf(stderr, "%s: cannot create %s: %s\n", prog, tmp, strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    return 1;
  }
  rc = live_call(prog, "GET", path, NULL, f, NULL);
  long size = ftell(f);
  if ((fflush(f) != 0 || fsync(fileno(f)) != 0) && !rc) {
    fprintf(stderr, "%s: %s: %s\n", prog, tmp, strerror(errno));
    rc = 1;
  }
  if (fclose(f) != 0 && !rc) {
    fprintf(stderr, "%s: %s: %s\n", prog, tmp, strerror(errno));
    rc = 1;
  }
  if (!rc &&
      (rename(tmp, g_live.out) != 0 || durable_sync_folder(g_live.out) != 0)) {
    fprintf(stderr, "%s: %s: %s\n", prog, g_live.out, strerror(errno));
    rc = 1;
  }
  if (rc) {
    remove(tmp);
    return 1;
  }
  if (g_live.json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "file", json_object_new_string(g_live.out));
    json_object_object_add(o, "version", json_object_new_int64(version));
    json_object_object_add(o, "bytes", json_object_new_int64(size));
    live_print_json(o);
    json_object_put(o);
  } else {
    printf("wrote %s (model version %lld, %ld bytes)\n", g_live.out, version,
           size);
  }
  return 0;
}

int live_privacy_report(const char *prog, int argc, char **argv) {
  static const flag_def defs[] = {LIVE_FLAGS};
  int rc =
      flags_main(prog,
                 "usage: cohort privacy report [--server URL] [--token-file "
                 "PATH] [--json]\n\nThe privacy budget a running coordinator "
                 "has spent, round by round (docs/privacy.md).",
                 defs, sizeof defs / sizeof defs[0], argc, argv);
  if (rc >= 0)
    return rc;
  rc = 0;
  json_object *f, *rounds = json_object_new_array();
  if (live_call(prog, "GET", "/api/federation", NULL, NULL, &f) != 0) {
    json_object_put(rounds);
    return 1;
  }
  g_live.after = 0;
  g_live.limit = 1000;
  for (;;) {
    json_object *page, *next;
    if (get_page(prog, "/api/rounds", &page) != 0) {
      rc = 1;
      break;
    }
    json_object *list = live_get(page, "rounds");
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *r = json_object_array_get_idx(list, i);
      if (!live_get(r, "epsilon"))
        continue;
      json_object *o = json_object_new_object();
      static const char *keys[] = {"id", "epsilon", "noise_multiplier", "clip",
                                   "clients_aggregated"};
      for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        json_object_object_add(o, keys[k],
                               json_object_get(live_get(r, keys[k])));
      json_object_array_add(rounds, o);
    }
    next = live_get(page, "next_after");
    g_live.after = next ? (long)json_object_get_int64(next) : 0;
    json_object_put(page);
    if (!next)
      break;
  }
  json_object *privacy = live_get(f, "privacy");
  if (rc) {
    /* call() has said why */
  } else if (g_live.json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "privacy", json_object_get(privacy));
    json_object_object_add(o, "rounds", json_object_get(rounds));
    live_print_json(o);
    json_object_put(o);
  } else if (!privacy) {
    printf("no differentially private round yet\n");
  } else {
    char a[32], b[32], c[32];
    printf("%s: epsilon %s at delta %s after %zu rounds\n",
           json_object_get_string(live_get(privacy, "mode")),
           num(privacy, "epsilon", "%.4g", a, sizeof a),
           num(privacy, "delta", "%g", b, sizeof b),
           json_object_array_length(rounds));
    printf("%-6s %-10s %-8s %-8s %s\n", "round", "epsilon", "noise", "clip",
           "clients");
    for (size_t i = 0; i < json_object_array_length(rounds); i++) {
      json_object *r = json_object_array_get_idx(rounds, i);
      printf(
          "%-6lld %-10s %-8s %-8s %lld\n",
          (long long)json_object_get_int64(live_get(r, "id")),
          num(r, "epsilon", "%.4g", a, sizeof a),
          num(r, "noise_multiplier", "%.4g", b, sizeof b),
          num(r, "clip", "%.4g", c, sizeof c),
          (long long)json_object_get_int64(live_get(r, "clients_aggregated")));
    }
  }
  json_object_put(rounds);
  json_object_put(f);
  return rc;
}
