/* The configuration file side of the flag table: reading "key = value"
 * files through libinih, and printing the table back as a commented file
 * (--print-config), so the example config is generated, never hand-kept. */
#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd_io.h"
#include "flags.h"
#include "flags_impl.h"

/* ---- strings that outlive libinih's line buffer ---- */

/* Kept for the life of the process: a target set from a file may still
 * point at one after a later parse, whose defaults leave it alone. */
static char **g_kept;
static size_t g_n_kept, g_cap_kept;

const char *flags_keep(const char *s) {
  if (g_n_kept == g_cap_kept) {
    size_t cap = g_cap_kept ? 2 * g_cap_kept : 32;
    char **grown = realloc(g_kept, cap * sizeof *grown);
    if (!grown)
      return NULL;
    g_kept = grown;
    g_cap_kept = cap;
  }
  char *copy = strdup(s);
  if (copy)
    g_kept[g_n_kept++] = copy;
  return copy;
}

/* ---- reading a file ---- */

typedef struct file_ctx {
  FILE *f;
  const char *path;
  const flag_def *defs;
  size_t n;
  unsigned char *seen; /* per flag: given in this file already */
  int line;            /* of the line libinih is parsing now */
  int failed_at;       /* line of our first error (0: none) */
  char *err;
  size_t errlen;
} file_ctx;

/* Records the first error of the file, at the current line. */
static void fail_line(file_ctx *c, const char *reason) {
  snprintf(c->err, c->errlen, "%s:%d: %s", c->path, c->line, reason);
  c->failed_at = c->line;
}

/* libinih's reader: counts lines (its handler has no line number in
 * Debian's build) and refuses a NUL byte, which would hide the rest of a
 * line, and a line that does not fit its buffer, which libinih would
 * otherwise split into two lines. */
static char *read_line(char *buf, int size, void *stream) {
  file_ctx *c = stream;
  size_t len = 0;
  int ch = EOF;
  if (c->failed_at)
    return NULL;
  while (len + 1 < (size_t)size && (ch = getc(c->f)) != EOF) {
    buf[len++] = (char)ch;
    if (ch == '\n')
      break;
  }
  if (len == 0)
    return NULL;
  buf[len] = '\0';
  c->line++;
  if (strlen(buf) != len) {
    fail_line(c, "NUL byte in the line");
    return NULL;
  }
  /* libinih (Debian builds it with multi-line values) reads any indented
   * line that is not a comment as the previous key's value continued:
   * "  port = 5" under "eligible = a=1" would be one more eligibility
   * condition, silently. And a [section] line with no key under it would
   * pass unseen. Both are refused. */
  size_t lead = strspn(buf, " \t");
  char first = buf[lead];
  if (first != '\0' && first != '\n' && first != '\r' && first != '#' &&
      first != ';') {
    if (lead > 0) {
      fail_line(c, "an indented line (it would continue the previous key's "
                   "value); write each key at the start of its line");
      return NULL;
    }
    if (first == '[') {
      fail_line(c, "a [section] line; the file has no sections");
      return NULL;
    }
  }
  /* A full buffer without the newline: the line fits only if the newline
   * or the end of the file comes next. */
  if (len + 1 == (size_t)size && buf[len - 1] != '\n' &&
      (ch = getc(c->f)) != EOF && ch != '\n') {
    char reason[64];
    snprintf(reason, sizeof reason, "line longer than %d characters", size - 1);
    fail_line(c, reason);
    return NULL;
  }
  return buf;
}

static int on_key(void *user, const char *section, const char *name,
                  const char *value) {
  file_ctx *c = user;
  char label[4096 + 200];
  snprintf(label, sizeof label, "%s:%d: %s", c->path, c->line, name);
  const flag_def *d = flags_find(c->defs, c->n, name, strlen(name));
  if (section[0])
    snprintf(c->err, c->errlen,
             "%s: key under section [%s]; the file has no sections", label,
             section);
  else if (!d)
    snprintf(c->err, c->errlen, "%s: unknown key (see --help)", label);
  else if (flags_is_secret(d))
    snprintf(c->err, c->errlen,
             "%s: secrets are not accepted in a config file; name a 0600 "
             "file that holds it (e.g. %s-file) or pass it otherwise",
             label, name);
  else if (flags_base_type(d) != FLAG_STRING_LIST && c->seen[d - c->defs])
    snprintf(c->err, c->errlen, "%s: given twice (only repeatable keys repeat)",
             label);
  else if (!value[0])
    snprintf(c->err, c->errlen,
             "%s: empty value (comment the line out to keep the default)",
             label);
  else {
    const char *kept = flags_keep(value);
    if (!kept)
      snprintf(c->err, c->errlen, "%s: out of memory", label);
    else if (flags_set_value(d, label, kept, c->err, c->errlen) == 0) {
      c->seen[d - c->defs] = 1;
      return 1;
    }
  }
  c->failed_at = c->line;
  return 0;
}

int flags_load_file(const flag_def *defs, size_t n, const char *path, char *err,
                    size_t errlen) {
  file_ctx c = {
      .path = path, .defs = defs, .n = n, .err = err, .errlen = errlen};
  int rc = -1;
  /* A regular file only: a FIFO that nobody writes would hang the process
   * (fd_io.h), a directory or device is no configuration. */
  c.f = fd_fopen_regular(path, NULL);
  if (!c.f) {
    snprintf(err, errlen, "--config %s: %s", path, fd_open_strerror(errno));
    goto out;
  }
  c.seen = calloc(n ? n : 1, 1);
  if (!c.seen) {
    snprintf(err, errlen, "--config %s: out of memory", path);
    goto out;
  }
  /* libinih goes on after a syntax error and reports the first one's line;
   * our own errors stop the reading, so the earlier of the two wins. */
  int syntax_at = ini_parse_stream(read_line, &c, on_key, &c);
  if (syntax_at > 0 && (!c.failed_at || syntax_at < c.failed_at)) {
    snprintf(err, errlen,
             "%s:%d: expected 'key = value', a comment or a "
             "blank line",
             path, syntax_at);
    goto out;
  }
  if (c.failed_at || syntax_at != 0) {
    if (!c.failed_at)
      snprintf(err, errlen, "--config %s: cannot parse it", path);
    goto out;
  }
  if (ferror(c.f)) {
    snprintf(err, errlen, "--config %s: read error", path);
    goto out;
  }
  rc = 0;
out:
  free(c.seen);
  if (c.f)
    fclose(c.f);
  return rc;
}

/* ---- printing the table as a file ---- */

/* text as "# " comment lines of at most 78 columns. */
static void print_comment(FILE *out, const char *text) {
  const size_t width = 76;
  while (*text) {
    size_t len = strlen(text);
    if (len > width) {
      len = width;
      while (len > 0 && text[len] != ' ')
        len--;
      if (len == 0)
        len = strcspn(text, " ");
    }
    size_t shown = len;
    while (shown > 0 && text[shown - 1] == ' ')
      shown--;
    fprintf(out, "# %.*s\n", (int)shown, text);
    text += len;
    while (*text == ' ')
      text++;
  }
}

/* The shortest decimal that reads back as v. */
static void print_double(FILE *out, double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  fputs(buf, out);
}

/* "key = value" lines for d's current value; a "# key = METAVAR" line when
 * it has none or is a secret. */
static void print_value(FILE *out, const flag_def *d) {
  const char *metavar = d->metavar ? d->metavar : "VALUE";
  switch (flags_base_type(d)) {
  case FLAG_STRING: {
    const char *s = *(const char **)d->target;
    if (s && !flags_is_secret(d))
      fprintf(out, "%s = %s\n", d->name, s);
    else
      fprintf(out, "# %s = %s\n", d->name, metavar);
    break;
  }
  case FLAG_STRING_LIST: {
    const flag_list *l = d->target;
    if (!l->count || flags_is_secret(d))
      fprintf(out, "# %s = %s\n", d->name, metavar);
    else
      for (size_t i = 0; i < l->count; i++)
        fprintf(out, "%s = %s\n", d->name, l->items[i]);
    break;
  }
  case FLAG_INT:
    fprintf(out, "%s = %ld\n", d->name, *(const long *)d->target);
    break;
  case FLAG_DOUBLE:
    fprintf(out, "%s = ", d->name);
    print_double(out, *(const double *)d->target);
    fprintf(out, "\n");
    break;
  case FLAG_BOOL:
    fprintf(out, "%s = %s\n", d->name,
            *(const int *)d->target ? "true" : "false");
    break;
  default:
    break;
  }
}

void flags_print_config(FILE *out, const char *prog, const flag_def *defs,
                        size_t n) {
  fprintf(out, "# %s configuration (%s --config FILE).\n", prog, prog);
  print_comment(out,
                "Every key is also a command-line flag of the same name "
                "(--key VALUE): the command line wins over this file, which "
                "wins over the defaults. One 'key = value' a line; a "
                "repeatable key is given once per value. Secrets (tokens) "
                "never go in this file: a key such as enroll-token-file names "
                "a 0600 file that holds them.");
  fprintf(out,
          "# Printed by `%s --print-config` with the values in "
          "effect.\n",
          prog);
  for (size_t i = 0; i < n; i++) {
    const flag_def *d = &defs[i];
    /* "METAVAR, repeatable, default X" (or a secret's warning). */
    char about[512];
    int len = snprintf(about, sizeof about, "%s%s",
                       flags_is_secret(d) ? "secret, not accepted here: " : "",
                       d->metavar                        ? d->metavar
                       : flags_base_type(d) == FLAG_BOOL ? "true|false"
                                                         : "VALUE");
    if (flags_base_type(d) == FLAG_STRING_LIST)
      len += snprintf(about + len, sizeof about - (size_t)len, ", repeatable");
    if (d->fallback && len < (int)sizeof about)
      snprintf(about + len, sizeof about - (size_t)len, ", default %s",
               d->fallback);
    fprintf(out, "\n");
    print_comment(out, d->help);
    print_comment(out, about);
    print_value(out, d);
  }
}
