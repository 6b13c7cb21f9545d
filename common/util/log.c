/* Leveled logging to standard error; see log.h. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int g_level = LOG_INFO;
static char g_tag[32] = "cohort";
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

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

void log_msg(log_level level, const char *fmt, ...) {
  static const char *labels[] = {"DEBUG", "INFO", "WARN", "ERROR"};
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
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);

  /* One fprintf per line under the lock, so threads never interleave. */
  pthread_mutex_lock(&g_lock);
  fprintf(stderr, "%s.%03ldZ %-5s %s: %s\n", when, ts.tv_nsec / 1000000L,
          labels[level], g_tag, msg);
  pthread_mutex_unlock(&g_lock);
}
