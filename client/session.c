/* The saved session's record and its store; see session.h. The record is
 * text, one "name value" a line, closed by the SHA-256 of the lines before
 * it, so that a truncated or damaged record is told apart from a valid one
 * instead of being half read:
 *
 *   cohort-session 1
 *   server 127.0.0.1:50051
 *   client 17
 *   session <the session token>
 *   key <the identity key's 32-byte seed, hex>
 *   sha256 <hex of every byte above this line> */
#include "session.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "log.h"
#include "session_file.h"

#define MAGIC "cohort-session 1"
#define SUM_TAG "sha256 "

int session_is_word(const char *s, size_t max) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > max)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] <= ' ' || s[i] > '~')
      return 0;
  return 1;
}

int session_encode(const session_record *r, uint8_t *out, size_t cap,
                   size_t *len) {
  if (!session_is_word(r->server, sizeof r->server - 1) ||
      !session_is_word(r->token, sizeof r->token - 1) || r->client_id == 0)
    return COHORT_EINVAL;
  char seed[2 * SIGN_SEED_LEN + 1];
  crypto_hex(r->seed, SIGN_SEED_LEN, seed);
  int n =
      snprintf((char *)out, cap,
               MAGIC "\nserver %s\nclient %" PRIu64 "\nsession %s\nkey %s\n",
               r->server, r->client_id, r->token, seed);
  OPENSSL_cleanse(seed, sizeof seed);
  uint8_t sum[CRYPTO_SHA256_LEN];
  char hex[CRYPTO_SHA256_HEX_LEN];
  if (n < 0 || (size_t)n + sizeof SUM_TAG + sizeof hex > cap ||
      crypto_sha256(out, (size_t)n, sum))
    return COHORT_EINVAL;
  crypto_hex(sum, sizeof sum, hex);
  int m = snprintf((char *)out + n, cap - (size_t)n, SUM_TAG "%s\n", hex);
  *len = (size_t)n + (size_t)m;
  return COHORT_OK;
}

/* The next line of text (NUL-terminated in place of its newline), or NULL
 * when there is none. */
static char *next_line(char **cursor) {
  char *line = *cursor;
  char *nl = line ? strchr(line, '\n') : NULL;
  if (!nl)
    return NULL;
  *nl = '\0';
  *cursor = nl + 1;
  return line;
}

/* "name value" with value no longer than max: the value, or NULL. */
static const char *field(char *line, const char *name, size_t max) {
  size_t n = strlen(name);
  if (!line || strncmp(line, name, n) != 0 || line[n] != ' ' ||
      !session_is_word(line + n + 1, max))
    return NULL;
  return line + n + 1;
}

static int parse_fields(char *text, session_record *r, char *why,
                        size_t whylen) {
  char *cur = text;
  char *line = next_line(&cur);
  if (!line || strcmp(line, MAGIC) != 0)
    return errbuf_fail(why, whylen, COHORT_EFORMAT, NULL,
                       "not a saved session (it does not begin with '" MAGIC
                       "')");
  const char *server = field(next_line(&cur), "server", sizeof r->server - 1);
  const char *client = field(next_line(&cur), "client", 20);
  const char *token = field(next_line(&cur), "session", sizeof r->token - 1);
  const char *seed = field(next_line(&cur), "key", 2 * SIGN_SEED_LEN);
  char *end = NULL;
  unsigned long long id = client ? strtoull(client, &end, 10) : 0;
  if (!server || !client || !token || !seed || *end || id == 0 ||
      client[0] == '-' || crypto_unhex(seed, r->seed, SIGN_SEED_LEN) != 0 ||
      *cur != '\0')
    return errbuf_fail(why, whylen, COHORT_EFORMAT, NULL,
                       "its fields are not server, client, session and key, "
                       "in that order, each well formed");
  snprintf(r->server, sizeof r->server, "%s", server);
  snprintf(r->token, sizeof r->token, "%s", token);
  r->client_id = id;
  return COHORT_OK;
}

int session_decode(const uint8_t *buf, size_t len, session_record *r, char *why,
                   size_t whylen) {
  memset(r, 0, sizeof *r);
  if (len == 0 || len > COHORT_SESSION_MAX_BYTES ||
      memchr(buf, '\0', len) != NULL || buf[len - 1] != '\n')
    return errbuf_fail(why, whylen, COHORT_EFORMAT, NULL,
                       "truncated or not text (%zu bytes, not ending in a "
                       "newline)",
                       len);
  /* The checksum line is the last: everything before it is summed. */
  size_t sum_at = len - 1;
  while (sum_at > 0 && buf[sum_at - 1] != '\n')
    sum_at--;
  size_t tag = sizeof SUM_TAG - 1;
  if (len - sum_at != tag + 2 * CRYPTO_SHA256_LEN + 1 ||
      memcmp(buf + sum_at, SUM_TAG, tag) != 0)
    return errbuf_fail(why, whylen, COHORT_EFORMAT, NULL,
                       "truncated: its last line is not its checksum");
  /* Compared as the lower-case hex it was written as: one text per record. */
  uint8_t sum[CRYPTO_SHA256_LEN];
  char hex[CRYPTO_SHA256_HEX_LEN];
  if (crypto_sha256(buf, sum_at, sum))
    return COHORT_EIO;
  crypto_hex(sum, sizeof sum, hex);
  if (memcmp(hex, buf + sum_at + tag, 2 * CRYPTO_SHA256_LEN) != 0)
    return errbuf_fail(why, whylen, COHORT_EFORMAT, NULL,
                       "corrupt: its checksum does not match its contents");
  char *text = malloc(sum_at + 1);
  if (!text)
    return COHORT_ENOMEM;
  memcpy(text, buf, sum_at);
  text[sum_at] = '\0';
  int rc = parse_fields(text, r, why, whylen);
  OPENSSL_cleanse(text, sum_at);
  free(text);
  if (rc)
    session_record_wipe(r);
  return rc;
}

int session_store_load(const session_store *s, session_record *r, int *found,
                       char *err, size_t errlen) {
  uint8_t buf[COHORT_SESSION_MAX_BYTES];
  size_t len = 0;
  const char *who = s->path ? s->path : "the app's session store";
  int rc = COHORT_OK;
  *found = 0;
  memset(r, 0, sizeof *r);
  if (s->path) {
    rc = session_file_read(s->path, buf, sizeof buf, &len, err, errlen);
    if (rc == COHORT_ENOTFOUND)
      return COHORT_OK;
  } else if (s->load(s->user, buf, sizeof buf, &len) != 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, who, "the load callback failed");
  } else if (len > sizeof buf) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, who,
                     "the load callback gave %zu bytes, more than the %zu "
                     "asked for",
                     len, sizeof buf);
  }
  if (!rc && len > 0) {
    char why[160];
    rc = session_decode(buf, len, r, why, sizeof why);
    if (rc)
      errbuf_fail(err, errlen, rc, who,
                  "%s; delete it to enroll this device anew", why);
    *found = rc == COHORT_OK;
  }
  OPENSSL_cleanse(buf, sizeof buf);
  return rc;
}

int session_store_save(const session_store *s, const session_record *r,
                       char *err, size_t errlen) {
  uint8_t buf[COHORT_SESSION_MAX_BYTES];
  size_t len = 0;
  const char *who = s->path ? s->path : "the app's session store";
  int rc = session_encode(r, buf, sizeof buf, &len);
  if (rc)
    rc = errbuf_fail(err, errlen, COHORT_EIO, who,
                     "the session does not fit a saved session");
  else if (s->path)
    rc = session_file_write(s->path, buf, len, err, errlen);
  else if (s->save(s->user, buf, len) != 0)
    rc = errbuf_fail(err, errlen, COHORT_EIO, who, "the save callback failed");
  OPENSSL_cleanse(buf, sizeof buf);
  return rc;
}

void session_store_clear(session_store *s) {
  free(s->path);
  memset(s, 0, sizeof *s);
}

void session_record_wipe(session_record *r) { OPENSSL_cleanse(r, sizeof *r); }

int client_session_open(client_session *s, session_store *store, char *err,
                        size_t errlen) {
  session_record r;
  int found = 0;
  int rc = session_store_load(store, &r, &found, err, errlen);
  if (rc) {
    session_store_clear(store);
    return rc;
  }
  client_session_close(s);
  s->store = *store;
  s->record = r;
  s->loaded = found;
  session_record_wipe(&r);
  return COHORT_OK;
}

int client_session_take(client_session *s, const char *server,
                        client_identity *id, uint64_t *client_id,
                        char token[65]) {
  if (!s->loaded)
    return 0;
  s->loaded = 0;
  const session_record *r = &s->record;
  int usable = 1;
  if (strcmp(r->server, server) != 0) {
    /* Its token is another coordinator's secret: not sent here. */
    log_warn("the saved session is for coordinator %s, not %s; registering "
             "anew",
             r->server, server);
    usable = 0;
  } else if (id->from_file) {
    sign_key *saved = NULL;
    uint8_t a[SIGN_PUBLIC_LEN], b[SIGN_PUBLIC_LEN];
    usable = sign_key_from_seed(r->seed, &saved) == COHORT_OK;
    if (usable) {
      sign_key_public(saved, a);
      sign_key_public(id->key, b);
      usable = memcmp(a, b, sizeof a) == 0;
    }
    sign_key_free(saved);
    if (!usable)
      log_warn("the saved session was made with another identity key than "
               "the one given; registering anew");
  }
  if (usable && client_identity_adopt(id, r->seed) != COHORT_OK)
    usable = 0;
  if (usable) {
    *client_id = r->client_id;
    memcpy(token, r->token, sizeof r->token);
    log_info("resumed the saved session of client %llu",
             (unsigned long long)r->client_id);
  }
  session_record_wipe(&s->record);
  return usable;
}

int client_session_save(client_session *s, const char *server,
                        client_identity *id, uint64_t client_id,
                        const char *token, char *err, size_t errlen) {
  if (!s->store.path && !s->store.load)
    return COHORT_OK;
  session_record r;
  memset(&r, 0, sizeof r);
  if (strlen(server) >= sizeof r.server || strlen(token) >= sizeof r.token)
    return errbuf_fail(err, errlen, COHORT_EIO, NULL,
                       "the coordinator address is too long to save the "
                       "session");
  snprintf(r.server, sizeof r.server, "%s", server);
  snprintf(r.token, sizeof r.token, "%s", token);
  r.client_id = client_id;
  int rc = sign_key_seed(id->key, r.seed);
  if (rc)
    rc = errbuf_fail(err, errlen, COHORT_EIO, NULL,
                     "cannot read the identity key to save the session");
  else
    rc = session_store_save(&s->store, &r, err, errlen);
  session_record_wipe(&r);
  if (!rc && !id->from_file)
    id->saved = 1;
  return rc;
}

void client_session_close(client_session *s) {
  session_store_clear(&s->store);
  session_record_wipe(&s->record);
  s->loaded = 0;
}
