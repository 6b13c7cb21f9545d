/* Seeds of fuzz_http: one request per route, with the admin token, and a
 * few the checks refuse. */
#include <stdio.h>
#include <string.h>

#include "fuzz_corpus.h"
#include "fuzz_http.h"

#define AUTH "Authorization: Bearer " FUZZ_HTTP_TOKEN "\r\n"

static void request(const char *name, const char *method, const char *path,
                    const char *headers, const char *body) {
  char text[2048];
  int n = snprintf(text, sizeof text,
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                   method, path, headers, strlen(body), body);
  corpus_write("fuzz_http", name, text, (size_t)n, NULL, 0);
}

void corpus_http(void) {
  request("dashboard", "GET", "/", "", "");
  request("metrics", "GET", "/metrics", AUTH, "");
  request("federation", "GET", "/api/federation", AUTH, "");
  request("rounds", "GET", "/api/rounds?limit=5&before=9", AUTH, "");
  request("clients", "GET", "/api/clients?limit=3", AUTH, "");
  request("model", "GET", "/api/models/1", AUTH, "");
  request("model_file", "GET", "/api/models/1/safetensors", AUTH, "");
  request("abort", "POST", "/api/rounds/current/abort", AUTH, "");
  request("tokens", "GET", "/api/tokens", AUTH, "");
  request("token_create", "POST", "/api/tokens", AUTH,
          "{\"label\":\"lab\",\"uses\":3,\"expires\":\"1h\"}");
  request("token_revoke", "POST", "/api/tokens/1/revoke", AUTH, "");
  request("client_revoke", "POST", "/api/clients/1/revoke", AUTH, "");
  request("foreign_origin", "GET", "/api/federation",
          AUTH "Origin: http://evil.example\r\n", "");
  request("no_token", "GET", "/api/rounds", "", "");
}
