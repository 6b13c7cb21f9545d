/* The per-round CSV files of simulated runs (see sim_report.h): writing a
 * run's rows, and reading them back strictly, naming the file and line of
 * the first thing wrong, within bounded memory. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "sim_report.h"

#define N_FIELDS 6
#define SHOW 60 /* characters of a bad field or line quoted in a message */

/* Writes s on one line: control characters (newlines above all) become
 * spaces, so a label cannot end the comment it sits in. */
static int put_line_text(FILE *f, const char *s) {
  for (; *s; s++)
    if (putc((unsigned char)*s < 0x20 ? ' ' : *s, f) == EOF)
      return -1;
  return 0;
}

int sim_report_csv_header(FILE *f, const char *label, const char *config) {
  return sim_report_csv_header_more(f, label, config, NULL);
}

int sim_report_csv_header_more(FILE *f, const char *label, const char *config,
                               const char *more) {
  if (label && (fputs("# label: ", f) == EOF || put_line_text(f, label) ||
                putc('\n', f) == EOF))
    return -1;
  if (config && (fputs("# config: ", f) == EOF || put_line_text(f, config) ||
                 putc('\n', f) == EOF))
    return -1;
  return fprintf(f, "%s%s\n", SIM_REPORT_CSV_HEADER, more ? more : "") < 0 ? -1
                                                                           : 0;
}

/* A figure as the reader takes it back: empty for NaN, "inf" or "-inf",
 * else enough digits to round-trip a float's precision and more. */
static void put_figure(char *out, size_t len, double v) {
  if (isnan(v))
    out[0] = '\0';
  else if (isinf(v))
    snprintf(out, len, "%s", v > 0 ? "inf" : "-inf");
  else
    snprintf(out, len, "%.12g", v);
}

int sim_report_csv_row(FILE *f, const sim_round_record *r) {
  return sim_report_csv_row_more(f, r, NULL);
}

int sim_report_csv_row_more(FILE *f, const sim_round_record *r,
                            const char *more) {
  char acc[32], loss[32], time[32], eps[32];
  put_figure(acc, sizeof acc, r->accuracy);
  put_figure(loss, sizeof loss, r->loss);
  put_figure(time, sizeof time, r->sim_time_s);
  put_figure(eps, sizeof eps, r->epsilon);
  return fprintf(f, "%lld,%s,%s,%llu,%s,%s%s\n", (long long)r->round, acc, loss,
                 (unsigned long long)r->upload_bytes, time, eps,
                 more ? more : "") < 0
             ? -1
             : 0;
}

/* ---- Reading ---- */

typedef struct reader {
  const char *path;
  long line;
  char *err;
  size_t errlen;
} reader;

static int fail(const reader *rd, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(const reader *rd, int rc, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (rd->line > 0)
    return errbuf_fail(rd->err, rd->errlen, rc, NULL, "%s:%ld: %s", rd->path,
                       rd->line, why);
  return errbuf_fail(rd->err, rd->errlen, rc, rd->path, "%s", why);
}

/* s made printable for a message: at most SHOW characters, bytes outside
 * printable ASCII as '?'. */
static const char *shown(const char *s, char out[SHOW + 4]) {
  size_t i = 0;
  for (; s[i] && i < SHOW; i++)
    out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  strcpy(out + i, s[i] ? "..." : "");
  return out;
}

/* Reads one line into buf (without its newline or a "\r" before it).
 * Returns 1 with a line, 0 at the end of the file, or a status. */
static int read_line(reader *rd, FILE *f, char *buf) {
  size_t n = 0;
  int c;
  while ((c = getc(f)) != EOF && c != '\n') {
    if (c == '\0')
      return fail(rd, COHORT_EFORMAT, "a NUL byte (not a text file)");
    if (n + 1 >= SIM_REPORT_MAX_LINE)
      return fail(rd, COHORT_EFORMAT, "line longer than %d bytes",
                  SIM_REPORT_MAX_LINE - 1);
    buf[n++] = (char)c;
  }
  if (ferror(f))
    return fail(rd, COHORT_EIO, "read error: %s", strerror(errno));
  if (c == EOF && n == 0)
    return 0;
  if (n && buf[n - 1] == '\r')
    n--;
  buf[n] = '\0';
  return 1;
}

/* A figure that may be unknown (empty or "nan": NaN). allow_inf admits
 * "inf" and "-inf"; lo bounds the rest from below. */
static int parse_figure(reader *rd, const char *name, const char *s,
                        bool may_be_nan, bool allow_inf, double lo, double hi,
                        double *out) {
  char show[SHOW + 4];
  if (!*s || strcmp(s, "nan") == 0 || strcmp(s, "NaN") == 0) {
    if (!may_be_nan)
      return fail(rd, COHORT_EFORMAT, "%s is empty; it is required", name);
    *out = NAN;
    return COHORT_OK;
  }
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || isnan(v) || *s == ' ' || *s == '\t')
    return fail(rd, COHORT_EFORMAT, "%s \"%s\" is not a number", name,
                shown(s, show));
  if (isinf(v) && !allow_inf)
    return fail(rd, COHORT_EFORMAT, "%s \"%s\" is not finite", name,
                shown(s, show));
  if (!isinf(v) && (v < lo || v > hi))
    return fail(rd, COHORT_EFORMAT, "%s %s is not in [%g, %g]%s", name,
                shown(s, show), lo, hi,
                hi == 1.0 ? " (a fraction, not a percentage)" : "");
  *out = v;
  return COHORT_OK;
}

/* A plain decimal integer (digits only) no larger than max. */
static int parse_count(reader *rd, const char *name, const char *s,
                       unsigned long long max, unsigned long long *out) {
  char show[SHOW + 4];
  unsigned long long v = 0;
  if (!*s)
    return fail(rd, COHORT_EFORMAT, "%s is empty; it is required", name);
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9')
      return fail(rd, COHORT_EFORMAT, "%s \"%s\" is not a whole number >= 0",
                  name, shown(s, show));
    unsigned d = (unsigned)(*p - '0');
    if (v > (max - d) / 10)
      return fail(rd, COHORT_EFORMAT, "%s \"%s\" is too large", name,
                  shown(s, show));
    v = v * 10 + d;
  }
  *out = v;
  return COHORT_OK;
}

/* A row of N_FIELDS figures and the `more` columns its header named after
 * them (skipped). */
static int parse_row(reader *rd, char *line, int more,
                     const sim_round_record *prev, sim_round_record *r) {
  char *field[N_FIELDS];
  int n = 0;
  for (char *p = line;; p++) {
    if (n == N_FIELDS + more)
      return fail(rd, COHORT_EFORMAT, "more than %d fields (expected %s)",
                  N_FIELDS + more, SIM_REPORT_CSV_HEADER);
    if (n < N_FIELDS)
      field[n] = p;
    n++;
    p = strchr(p, ',');
    if (!p)
      break;
    *p = '\0';
  }
  if (n != N_FIELDS + more)
    return fail(rd, COHORT_EFORMAT, "%d fields, expected %d (%s)", n,
                N_FIELDS + more, SIM_REPORT_CSV_HEADER);
  unsigned long long round, bytes;
  int rc = parse_count(rd, "round", field[0], INT64_MAX, &round);
  if (!rc)
    rc = parse_figure(rd, "accuracy", field[1], true, false, 0.0, 1.0,
                      &r->accuracy);
  if (!rc)
    rc = parse_figure(rd, "loss", field[2], true, true, -HUGE_VAL, HUGE_VAL,
                      &r->loss);
  if (!rc)
    rc = parse_count(rd, "upload_bytes", field[3], UINT64_MAX, &bytes);
  if (!rc)
    rc = parse_figure(rd, "sim_time_s", field[4], false, false, 0.0, HUGE_VAL,
                      &r->sim_time_s);
  if (!rc)
    rc = parse_figure(rd, "epsilon", field[5], true, true, 0.0, HUGE_VAL,
                      &r->epsilon);
  if (rc)
    return rc;
  r->round = (int64_t)round;
  r->upload_bytes = (uint64_t)bytes;
  if (prev && r->round <= prev->round)
    return fail(rd, COHORT_EFORMAT,
                "round %lld does not follow round %lld (rounds must increase)",
                (long long)r->round, (long long)prev->round);
  if (prev && r->upload_bytes < prev->upload_bytes)
    return fail(rd, COHORT_EFORMAT,
                "upload_bytes %llu is less than the row before's %llu "
                "(the column is cumulative)",
                bytes, (unsigned long long)prev->upload_bytes);
  if (prev && r->sim_time_s < prev->sim_time_s)
    return fail(rd, COHORT_EFORMAT,
                "sim_time_s %g is less than the row before's %g (the column "
                "is cumulative)",
                r->sim_time_s, prev->sim_time_s);
  return COHORT_OK;
}

/* How many columns a header names after SIM_REPORT_CSV_HEADER (cohort-sim
 * adds its client counts): 0 to SIM_REPORT_CSV_MAX_MORE, or -1 when it is
 * not a header of this format. */
static int header_more(const char *text) {
  size_t len = strlen(SIM_REPORT_CSV_HEADER);
  if (strncmp(text, SIM_REPORT_CSV_HEADER, len) != 0)
    return -1;
  int more = 0;
  for (const char *p = text + len; *p; p++) {
    if (*p != ',' || !p[1] || p[1] == ',')
      return -1; /* each added column has a name */
    if (++more > SIM_REPORT_CSV_MAX_MORE)
      return -1;
    p += strcspn(p + 1, ",");
  }
  return more;
}

/* "# key: text" before the header: the text, or NULL. */
static const char *comment_value(const char *line, const char *key) {
  size_t k = strlen(key);
  if (line[0] != '#')
    return NULL;
  line++;
  while (*line == ' ')
    line++;
  if (strncmp(line, key, k) != 0 || line[k] != ':')
    return NULL;
  line += k + 1;
  while (*line == ' ')
    line++;
  return line;
}

/* The file's name without its folder and a ".csv" ending. */
static char *default_label(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t len = strlen(base);
  if (len > 4 && strcmp(base + len - 4, ".csv") == 0)
    len -= 4;
  return strndup(base, len);
}

void sim_series_free(sim_series *s) {
  if (!s)
    return;
  free((void *)s->label);
  free((void *)s->config);
  free((void *)s->rounds);
  memset(s, 0, sizeof *s);
}

int sim_report_read_csv(const char *path, sim_series *out, char *err,
                        size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!path || !*path)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "report",
                       "missing CSV file name");
  reader rd = {.path = path, .err = err, .errlen = errlen};
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(&rd, COHORT_EIO, "cannot open: %s", strerror(errno));
  char *line = malloc(SIM_REPORT_MAX_LINE);
  char *label = NULL, *config = NULL;
  sim_round_record *rows = NULL;
  size_t n = 0, cap = 0;
  bool header = false;
  int more = 0; /* columns after the six, named by the header */
  int rc = line ? COHORT_OK : fail(&rd, COHORT_ENOMEM, "out of memory");
  while (!rc) {
    rd.line++;
    rc = read_line(&rd, f, line);
    if (rc <= 0)
      break;
    rc = COHORT_OK;
    char *text = line;
    if (rd.line == 1 && strncmp(text, "\xef\xbb\xbf", 3) == 0)
      text += 3; /* a byte-order mark from a spreadsheet */
    const char *v;
    if (!header && (v = comment_value(text, "label")) && !label) {
      if (!(label = strdup(v)))
        rc = fail(&rd, COHORT_ENOMEM, "out of memory");
    } else if (!header && (v = comment_value(text, "config")) && !config) {
      if (!(config = strdup(v)))
        rc = fail(&rd, COHORT_ENOMEM, "out of memory");
    } else if (text[0] == '#' || text[0] == '\0') {
      continue; /* comments and blank lines */
    } else if (!header) {
      char show[SHOW + 4];
      more = header_more(text);
      if (more < 0)
        rc = fail(&rd, COHORT_EFORMAT, "expected the header \"%s\", got \"%s\"",
                  SIM_REPORT_CSV_HEADER, shown(text, show));
      header = true;
    } else {
      if (n == SIM_REPORT_MAX_ROUNDS) {
        rc = fail(&rd, COHORT_EFORMAT, "more than %d rounds",
                  SIM_REPORT_MAX_ROUNDS);
        break;
      }
      if (n == cap) {
        size_t grow = cap ? cap * 2 : 256;
        if (grow > SIM_REPORT_MAX_ROUNDS)
          grow = SIM_REPORT_MAX_ROUNDS;
        sim_round_record *p = realloc(rows, grow * sizeof *rows);
        if (!p) {
          rc = fail(&rd, COHORT_ENOMEM, "out of memory for %zu rounds", grow);
          break;
        }
        rows = p;
        cap = grow;
      }
      rc = parse_row(&rd, text, more, n ? &rows[n - 1] : NULL, &rows[n]);
      n += rc == COHORT_OK;
    }
  }
  if (!rc && !header) {
    rd.line = 0;
    rc = fail(&rd, COHORT_EFORMAT, "no header row \"%s\" (an empty file?)",
              SIM_REPORT_CSV_HEADER);
  }
  if (!rc && !label && !(label = default_label(path)))
    rc = fail(&rd, COHORT_ENOMEM, "out of memory");
  fclose(f);
  free(line);
  if (rc) {
    free(label);
    free(config);
    free(rows);
    return rc;
  }
  out->label = label;
  out->config = config;
  out->rounds = rows;
  out->n = n;
  return COHORT_OK;
}
