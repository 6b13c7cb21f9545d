/* Leveled logging to standard error, one line per message with a UTC
 * timestamp and the level. Standard output stays free for results such as
 * the coordinator's round lines. Never log tokens or keys. */
#ifndef COHORT_LOG_H
#define COHORT_LOG_H

typedef enum log_level {
  LOG_DEBUG = 0,
  LOG_INFO = 1,
  LOG_WARN = 2,
  LOG_ERROR = 3,
  LOG_OFF = 4
} log_level;

/* Messages below level are dropped. Thread-safe. */
void log_set_level(log_level level);
/* "debug", "info", "warn", "error", "off"; returns 0, or -1 if unknown. */
int log_parse_level(const char *name, log_level *out);
/* Tag printed before each message, e.g. "server" or "client 3". */
void log_set_tag(const char *tag);

void log_msg(log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
