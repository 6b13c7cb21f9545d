/* What cohort_live.c shares with the other files of live commands
 * (cohort_live_tokens.c): the flags every live command takes, one HTTP
 * exchange with the coordinator, and reading its JSON. */
#ifndef COHORT_LIVE_INTERNAL_H
#define COHORT_LIVE_INTERNAL_H

#include <json-c/json.h>
#include <stdio.h>

#include "flags.h"

typedef struct live_opts {
  const char *server, *token_file, *version, *out, *label, *expires;
  long after, limit, uses;
  int json;
} live_opts;

extern live_opts g_live; /* the flags of the one command that runs */

#define LIVE_FLAGS                                                             \
  {"server", FLAG_STRING, &g_live.server, "http://127.0.0.1:8080",             \
   0,        0,           "URL",          "the coordinator's --http address"}, \
      {"token-file",                                                           \
       FLAG_STRING,                                                            \
       &g_live.token_file,                                                     \
       NULL,                                                                   \
       0,                                                                      \
       0,                                                                      \
       "PATH",                                                                 \
       "file whose first line is the admin token (or set "                     \
       "COHORT_ADMIN_TOKEN; none: a loopback port without a token)"},          \
  {                                                                            \
    "json", FLAG_BOOL, &g_live.json, NULL, 0, 0, NULL,                         \
        "print the API's JSON instead of lines"                                \
  }

/* method path on --server, with json_body (NULL: none) as a POST's body;
 * the JSON answer into *out (when out), or the bytes into file. 0, or 1
 * after an error message naming the call. */
int live_call(const char *prog, const char *method, const char *path,
              const char *json_body, FILE *file, json_object **out);

/* o's member key, or NULL (o may be NULL). */
json_object *live_get(json_object *o, const char *key);

/* o as one line of JSON on standard output. */
void live_print_json(json_object *o);

#endif
