/* Leveled logging to standard error as text or JSON lines; see log.h. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_level = LOG_INFO;
static atomic_int g_format = LOG_FORMAT_TEXT;
static char g_tag[32] = "cohort";
static char g_path[4096]; /* the log file, "" when standard error is ours */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* An app's sink (log_set_sink), under g_lock. */
static log_sink_fn g_sink;
static void *g_sink_user;

void log_set_level(log_level level) { atomic_store(&g_level, (int)level); }

int log_parse_level(const char *name, log_level *out) {
  static const char *names[] = {"debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 5; i++) {
    if (strcmp(name, names[i]) == 0) {
      *out = (log_level)i;
      return 0;
    }
  }
  return -1;
}

void log_set_tag(const char *tag) {
  pthread_mutex_lock(&g_lock);
  snprintf(g_tag, sizeof g_tag, "%s", tag);
  pthread_mutex_unlock(&g_lock);
}

int log_parse_format(const char *name, log_format *out) {
  if (strcmp(name, "text") == 0)
    *out = LOG_FORMAT_TEXT;
  else if (strcmp(name, "json") == 0)
    *out = LOG_FORMAT_JSON;
  else
    return -1;
  return 0;
}

void log_set_format(log_format format) { atomic_store(&g_format, (int)format); }

/* Opens path for appending, 0600, and puts it on standard error. */
static int attach(const char *path, char *err, size_t errlen) {
  /* O_NONBLOCK: a FIFO planted at path must not hang the process (without a
   * reader the open fails at once; with one it is refused below). */
  int fd = open(
      path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
      0600);
  if (fd < 0) {
    snprintf(err, errlen, "log file %s: %s", path, strerror(errno));
    return -1;
  }
  /* An existing file keeps its mode through open: narrow it, since a
   * debug log names clients and addresses. */
  struct stat st;
  int rc = -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    snprintf(err, errlen, "log file %s: not a regular file", path);
  else if (fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) != 0)
    snprintf(err, errlen, "log file %s: %s", path, strerror(errno));
  else if ((st.st_mode & 077) && fchmod(fd, 0600) != 0)
    snprintf(err, errlen, "log file %s: cannot make it 0600: %s", path,
             strerror(errno));
  else if (dup2(fd, STDERR_FILENO) < 0)
    snprintf(err, errlen, "log file %s: %s", path, strerror(errno));
  else
    rc = 0;
  close(fd);
  return rc;
}

int log_open_file(const char *path, char *err, size_t errlen) {
  if (strlen(path) >= sizeof g_path) {
    snprintf(err, errlen, "log file path longer than %zu bytes",
             sizeof g_path - 1);
    return -1;
  }
  if (attach(path, err, errlen) != 0)
    return -1;
  pthread_mutex_lock(&g_lock);
  snprintf(g_path, sizeof g_path, "%s", path);
  pthread_mutex_unlock(&g_lock);
  return 0;
}

int log_reopen(char *err, size_t errlen) {
  char path[sizeof g_path];
  pthread_mutex_lock(&g_lock);
  memcpy(path, g_path, sizeof path);
  pthread_mutex_unlock(&g_lock);
  return path[0] ? attach(path, err, errlen) : 0;
}

void log_reopen_on_sighup(void) {
  char err[512];
  if (log_reopen(err, sizeof err) != 0)
    log_error("SIGHUP: %s; still writing to the old file", err);
  else
    log_info("SIGHUP: log file reopened");
}

int log_configure(const char *level, const char *format, const char *file,
                  char *err, size_t errlen) {
  log_level lv;
  log_format fmt;
  if (log_parse_level(level, &lv) != 0) {
    snprintf(err, errlen,
             "--log-level '%s': expected debug, info, warn, error or off",
             level);
    return -1;
  }
  if (log_parse_format(format, &fmt) != 0) {
    snprintf(err, errlen, "--log-format '%s': expected text or json", format);
    return -1;
  }
  if (file && log_open_file(file, err, errlen) != 0)
    return -1;
  log_set_level(lv);
  log_set_format(fmt);
  return 0;
}

/* Appends the n bytes of s to out (of cap bytes) at *len if they fit. */
static void put(char *out, size_t cap, size_t *len, const char *s, size_t n) {
  if (*len + n < cap) {
    memcpy(out + *len, s, n);
    *len += n;
  }
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0 when it is not
 * one (overlong forms, surrogates and code points past U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s) {
  if (s[0] < 0x80)
    return 1;
  size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (n == 0 || s[0] > 0xf4)
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 0;
  if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
      (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
    return 0;
  return n;
}

/* s with its control bytes escaped (and, for JSON, quotes, backslashes and
 * bytes that are not UTF-8), appended to out. */
static void put_escaped(char *out, size_t cap, size_t *len, const char *s,
                        int json) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    char esc[8];
    size_t n = json ? utf8_len(p) : 1;
    int plain =
        *p >= 0x20 && *p != 0x7f && (!json || (*p != '"' && *p != '\\'));
    if (n > 1 || (n == 1 && plain)) {
      put(out, cap, len, (const char *)p, n);
      p += n;
      continue;
    }
    if (n == 0)
      snprintf(esc, sizeof esc, "\\ufffd");
    else if (*p == '"' || *p == '\\')
      snprintf(esc, sizeof esc, "\\%c", *p);
    else if (*p == '\n')
      snprintf(esc, sizeof esc, "\\n");
    else if (*p == '\r')
      snprintf(esc, sizeof esc, "\\r");
    else if (*p == '\t')
      snprintf(esc, sizeof esc, "\\t");
    else if (json)
      snprintf(esc, sizeof esc, "\\u%04x", *p);
    else
      snprintf(esc, sizeof esc, "\\x%02x", *p);
    put(out, cap, len, esc, strlen(esc));
    p++;
  }
}

void log_set_sink(log_sink_fn sink, void *user) {
  pthread_mutex_lock(&g_lock);
  g_sink = sink;
  g_sink_user = user;
  pthread_mutex_unlock(&g_lock);
}

void log_msg(log_level level, const char *fmt, ...) {
  static const char *labels[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  static const char *names[] = {"debug", "info", "warn", "error"};
  if ((int)level < atomic_load(&g_level) || level >= LOG_OFF)
    return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32], head[160];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);

  /* Room for every byte of msg escaped as \ufffd. */
  char line[sizeof msg * 6 + 256];
  size_t len = 0;
  int json = atomic_load(&g_format) == LOG_FORMAT_JSON;
  pthread_mutex_lock(&g_lock);
  if (g_sink) {
    /* The message alone, one line: the app adds its own time and tag. */
    put_escaped(line, sizeof line, &len, msg, 0);
    line[len < sizeof line ? len : sizeof line - 1] = '\0';
    g_sink((int)level, line, g_sink_user);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  if (json) {
    snprintf(head, sizeof head,
             "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"tag\":\"", when,
             ts.tv_nsec / 1000000L, names[level]);
    put(line, sizeof line, &len, head, strlen(head));
    put_escaped(line, sizeof line, &len, g_tag, 1);
    snprintf(head, sizeof head, "\",\"pid\":%ld,\"msg\":\"", (long)getpid());
    put(line, sizeof line, &len, head, strlen(head));
    put_escaped(line, sizeof line, &len, msg, 1);
    put(line, sizeof line, &len, "\"}\n", 3);
  } else {
    snprintf(head, sizeof head, "%s.%03ldZ %-5s ", when, ts.tv_nsec / 1000000L,
             labels[level]);
    put(line, sizeof line, &len, head, strlen(head));
    put_escaped(line, sizeof line, &len, g_tag, 0);
    put(line, sizeof line, &len, ": ", 2);
    put_escaped(line, sizeof line, &len, msg, 0);
    put(line, sizeof line, &len, "\n", 1);
  }
  /* One write per line (under the lock, so threads keep their order): an
   * O_APPEND log file shared with other processes or with libcohort's own
   * copy of this logger never gets a torn line. */
  ssize_t unused = write(STDERR_FILENO, line, len);
  (void)unused;
  pthread_mutex_unlock(&g_lock);
}
