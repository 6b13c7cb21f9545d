/* Leveled logging to standard error, one line per message, as text (UTC
 * timestamp, level, tag, message) or as JSON (one object per line). An
 * optional log file is put in standard error's place, so everything the
 * process writes there lands in it, and is reopened on request for
 * logrotate. Standard output stays free for results such as the
 * coordinator's round lines. Never log tokens or keys. */
#ifndef COHORT_LOG_H
#define COHORT_LOG_H

#include <stddef.h>

typedef enum log_level {
  LOG_DEBUG = 0,
  LOG_INFO = 1,
  LOG_WARN = 2,
  LOG_ERROR = 3,
  LOG_OFF = 4
} log_level;

typedef enum log_format {
  /* 2026-01-02T03:04:05.678Z INFO  server: message */
  LOG_FORMAT_TEXT = 0,
  /* {"ts":"2026-01-02T03:04:05.678Z","level":"info","tag":"server",
   *  "pid":42,"msg":"message"} */
  LOG_FORMAT_JSON = 1
} log_format;

/* Messages below level are dropped. Thread-safe. */
void log_set_level(log_level level);
/* "debug", "info", "warn", "error", "off"; returns 0, or -1 if unknown. */
int log_parse_level(const char *name, log_level *out);
/* Tag printed before each message, e.g. "server" or "client 3". */
void log_set_tag(const char *tag);

/* "text" or "json"; returns 0, or -1 if unknown. */
int log_parse_format(const char *name, log_format *out);
/* Thread-safe. In both formats a message's control bytes are escaped, so a
 * message is always one line; in JSON, bytes that are not UTF-8 become
 * U+FFFD, so every line is valid JSON. */
void log_set_format(log_format format);

/* From now on standard error is path, opened for appending and created
 * 0600 (an existing file is made 0600 too). The path is kept for
 * log_reopen. 0, or -1 with the reason in err. */
int log_open_file(const char *path, char *err, size_t errlen);
/* Opens the log_open_file path again (after logrotate renamed the file)
 * and puts it in standard error's place in one step (dup2), so no line is
 * lost or split. Call it from normal context, never from a signal handler
 * (it opens files); a handler only records that a reopen is due. 0 (also
 * when there is no log file), or -1 with the reason in err: the old file
 * then stays in use. */
int log_reopen(char *err, size_t errlen);

/* log_reopen for SIGHUP, with the outcome logged (to the new file, or to
 * the old one with the reason). */
void log_reopen_on_sighup(void);

/* The --log-level, --log-format and --log-file rows of a program's flag
 * table (flags.h), writing to the given const char * targets. */
// clang-format off
#define LOG_FLAG_ROWS(level, format, file)                                   \
  {"log-level", FLAG_STRING, (level), "info", 0, 0, "LEVEL",                 \
   "debug, info, warn, error or off"},                                       \
  {"log-format", FLAG_STRING, (format), "text", 0, 0, "text|json",           \
   "log lines as text, or as one JSON object per line (ts, level, tag, "     \
   "pid, msg)"},                                                             \
  {"log-file", FLAG_STRING, (file), NULL, 0, 0, "PATH",                      \
   "append the log (all of standard error) to PATH, created 0600, instead "  \
   "of standard error; SIGHUP reopens it (logrotate)"}
// clang-format on

/* A program's --log-level, --log-format and --log-file flags (file may be
 * NULL) applied in that order. 0, or -1 with a reason naming the flag in
 * err. */
int log_configure(const char *level, const char *format, const char *file,
                  char *err, size_t errlen);

/* From now on each message goes to sink (level, the message as one line
 * without time or tag, user) instead of standard error; NULL: standard
 * error again. Calls to sink are serialized under the logger's lock, and
 * once log_set_sink returns the old sink is never called again. */
typedef void (*log_sink_fn)(int level, const char *message, void *user);
void log_set_sink(log_sink_fn sink, void *user);

void log_msg(log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
