/* The HTML report of simulated runs (see sim_report.h): a bounded string
 * buffer, escaping, nice axes, one inline SVG per plot, the table of final
 * figures, and the atomic write. The document is also well-formed XML
 * (every element closed, only the five XML entities), so tests parse it
 * with an XML parser. */
#include "sim_report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "durable.h"
#include "errbuf.h"
#include "fd_io.h"

/* With SIM_REPORT_MAX_SERIES series of SIM_REPORT_MAX_POINTS points in four
 * plots a report is a few megabytes; the cap only stops a runaway. */
#define REPORT_MAX_BYTES ((size_t)64 << 20)
#define LEGEND_CHARS 26 /* code points of a label in a legend */
#define MAX_TICKS 24

/* Plot geometry, in SVG user units: the axes box, then the legend column. */
enum {
  SVG_W = 760,
  SVG_H = 380,
  BOX_L = 72,
  BOX_R = 520,
  BOX_T = 28,
  BOX_B = 322,
  LEGEND_X = 536
};

/* Distinguishable on white and for the common colour-vision deficiencies
 * (Okabe and Ito's palette, then Tableau's); series past the colours
 * repeat them dashed. */
static const char *const COLORS[] = {
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
    "#000000", "#8c564b", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd"};
#define N_COLORS (sizeof COLORS / sizeof COLORS[0])

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool failed; /* out of memory or over REPORT_MAX_BYTES */
} sbuf;

static bool sb_reserve(sbuf *b, size_t more) {
  if (b->failed)
    return false;
  if (more >= REPORT_MAX_BYTES - b->len) {
    b->failed = true;
    return false;
  }
  size_t need = b->len + more + 1;
  if (need <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 16384;
  while (cap < need)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (!sb_reserve(b, n))
    return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !sb_reserve(b, (size_t)n)) {
    b->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* The length of the UTF-8 sequence at p that XML accepts as one character,
 * or 0 when p does not start one (a stray continuation byte, an overlong
 * form, a surrogate, past U+10FFFF, or U+FFFE and U+FFFF). */
static size_t utf8_char(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80)
    return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    lo = c == 0xe0 ? 0xa0 : 0x80;
    hi = c == 0xed ? 0x9f : 0xbf;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    lo = c == 0xf0 ? 0x90 : 0x80;
    hi = c == 0xf4 ? 0x8f : 0xbf;
  } else
    return 0;
  if (p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  if (c == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
    return 0;
  return len;
}

/* Appends s safe as element text or a quoted attribute value: the five
 * XML specials as entities, control characters as spaces, bytes that are
 * not UTF-8 as U+FFFD. Stops after max code points (0: no limit) with an
 * ellipsis when more follow. */
static void sb_escape(sbuf *b, const char *s, size_t max) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t cps = 0; *p; cps++) {
    if (max && cps == max) {
      sb_puts(b, "\xe2\x80\xa6");
      return;
    }
    size_t len = utf8_char(p);
    if (len == 0) {
      sb_puts(b, "\xef\xbf\xbd");
      p++;
      continue;
    }
    if (len > 1) {
      sb_put(b, (const char *)p, len);
      p += len;
      continue;
    }
    switch (*p) {
    case '&':
      sb_puts(b, "&amp;");
      break;
    case '<':
      sb_puts(b, "&lt;");
      break;
    case '>':
      sb_puts(b, "&gt;");
      break;
    case '"':
      sb_puts(b, "&quot;");
      break;
    case '\'':
      sb_puts(b, "&#39;");
      break;
    default:
      sb_put(b, *p < 0x20 || *p == 0x7f ? " " : (const char *)p, 1);
    }
    p++;
  }
}

/* A series' label, or "series N" when it has none. */
static void sb_label(sbuf *b, const sim_series *s, size_t i, size_t max) {
  if (s->label && *s->label)
    sb_escape(b, s->label, max);
  else
    sb_printf(b, "series %zu", i + 1);
}

/* ---- Axes ---- */

typedef enum xkind { X_ROUND, X_BYTES, X_TIME } xkind;
typedef enum ykind { Y_ACCURACY, Y_EPSILON } ykind;

typedef struct axis {
  double lo, hi; /* the drawn range (log: exponents of ten) */
  bool log;
  bool bytes; /* tick labels in B, kB, MB, ... */
  int decimals;
  int n_ticks;
  double ticks[MAX_TICKS]; /* values (not exponents) */
} axis;

/* 1, 2 or 5 times a power of ten, about span / target. */
static double nice_step(double span, int target) {
  double raw = span / target;
  double mag = pow(10.0, floor(log10(raw)));
  double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

/* A linear axis over [lo, hi] (lo > hi: no data) extended to whole steps. */
static void axis_linear(axis *a, double lo, double hi) {
  if (!(lo <= hi)) {
    lo = 0.0;
    hi = 1.0;
  }
  /* Far from overflow in hi - lo and in the steps. */
  lo = fmax(lo, -1e300);
  hi = fmin(hi, 1e300);
  if (hi - lo <= fmax(fabs(lo), fabs(hi)) * 1e-9) {
    double d = lo != 0.0 ? fabs(lo) * 0.1 : 0.5;
    lo -= d;
    hi += d;
  }
  double step = nice_step(hi - lo, 5);
  a->log = false;
  a->lo = floor(lo / step) * step;
  a->hi = ceil(hi / step) * step;
  if (!(a->hi > a->lo))
    a->hi = a->lo + step;
  a->n_ticks = 0;
  for (int i = 0; i < MAX_TICKS; i++) {
    double v = a->lo + i * step;
    if (v > a->hi + step * 1e-6)
      break;
    a->ticks[a->n_ticks++] = fabs(v) < step * 1e-9 ? 0.0 : v;
  }
  double d = ceil(-log10(step) - 1e-9);
  a->decimals = d < 0 ? 0 : d > 12 ? 12 : (int)d;
}

/* A log axis over [lo, hi] (both > 0) from one power of ten to another. */
static void axis_log(axis *a, double lo, double hi) {
  double e0 = floor(log10(lo)), e1 = ceil(log10(hi));
  if (e1 <= e0)
    e1 = e0 + 1.0;
  a->log = true;
  a->lo = e0;
  a->hi = e1;
  double every = ceil((e1 - e0) / (MAX_TICKS - 1));
  if ((e1 - e0) / every > 8)
    every = ceil((e1 - e0) / 8);
  a->n_ticks = 0;
  for (double e = e0; e <= e1 && a->n_ticks < MAX_TICKS; e += every)
    a->ticks[a->n_ticks++] = pow(10.0, e);
  a->decimals = 0;
}

/* Where v falls on the axis, 0 at lo and 1 at hi. */
static double axis_pos(const axis *a, double v) {
  double t = a->log ? log10(v) : v;
  return (t - a->lo) / (a->hi - a->lo);
}

static void format_bytes(char *out, size_t len, double v) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (fabs(v) >= 1000.0 && u < 6) {
    v /= 1000.0;
    u++;
  }
  snprintf(out, len, "%.3g %s", v, units[u]);
}

static void format_tick(const axis *a, double v, char *out, size_t len) {
  if (a->bytes)
    format_bytes(out, len, v);
  else if (fabs(v) >= 1e9 || (v != 0.0 && fabs(v) < 1e-6))
    snprintf(out, len, "%.3g", v);
  else
    snprintf(out, len, "%.*f", a->decimals, v);
}

/* ---- Plots ---- */

static double x_of(const sim_round_record *r, xkind x) {
  switch (x) {
  case X_ROUND:
    return (double)r->round;
  case X_BYTES:
    return (double)r->upload_bytes;
  case X_TIME:
    return r->sim_time_s;
  }
  return NAN;
}

static double y_of(const sim_round_record *r, ykind y) {
  return y == Y_ACCURACY ? r->accuracy : r->epsilon;
}

/* Whether row r is drawn on a plot of x against y (log_x: x must be
 * positive too). */
static bool usable(const sim_round_record *r, xkind x, ykind y, bool log_x) {
  double xv = x_of(r, x), yv = y_of(r, y);
  return isfinite(xv) && isfinite(yv) && (!log_x || xv > 0.0);
}

/* Rows drawn of a series of n: every stride-th, and the last. */
static size_t stride_of(size_t n) {
  return n <= SIM_REPORT_MAX_POINTS
             ? 1
             : (n + SIM_REPORT_MAX_POINTS - 2) / (SIM_REPORT_MAX_POINTS - 1);
}

static bool drawn_row(size_t i, size_t n, size_t stride) {
  return i % stride == 0 || i + 1 == n;
}

typedef struct plot {
  const char *title, *xlabel, *ylabel;
  xkind x;
  ykind y;
} plot;

/* The x range of the data (lo > hi when there is none), over positive
 * values only when positive is set. */
static void data_range(const sim_series *s, size_t ns, const plot *p,
                       bool want_x, bool positive, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (size_t k = 0; k < ns; k++)
    for (size_t i = 0; i < s[k].n; i++) {
      const sim_round_record *r = &s[k].rounds[i];
      if (!usable(r, p->x, p->y, positive))
        continue;
      double v = want_x ? x_of(r, p->x) : y_of(r, p->y);
      *lo = fmin(*lo, v);
      *hi = fmax(*hi, v);
    }
}

static double px(const axis *a, double v) {
  return BOX_L + axis_pos(a, v) * (BOX_R - BOX_L);
}
static double py(const axis *a, double v) {
  return BOX_B - axis_pos(a, v) * (BOX_B - BOX_T);
}

static void draw_axes(sbuf *b, const plot *p, const axis *ax, const axis *ay) {
  sb_printf(b,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"none\" stroke=\"#888\"/>\n",
            BOX_L, BOX_T, BOX_R - BOX_L, BOX_B - BOX_T);
  char t[48];
  for (int i = 0; i < ax->n_ticks; i++) {
    double x = px(ax, ax->ticks[i]);
    format_tick(ax, ax->ticks[i], t, sizeof t);
    sb_printf(b,
              "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
              "stroke=\"#e4e4e4\"/><text x=\"%.1f\" y=\"%d\" "
              "text-anchor=\"middle\">%s</text>\n",
              x, BOX_T, x, BOX_B, x, BOX_B + 16, t);
  }
  for (int i = 0; i < ay->n_ticks; i++) {
    double y = py(ay, ay->ticks[i]);
    format_tick(ay, ay->ticks[i], t, sizeof t);
    sb_printf(b,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
              "stroke=\"#e4e4e4\"/><text x=\"%d\" y=\"%.1f\" "
              "text-anchor=\"end\">%s</text>\n",
              BOX_L, y, BOX_R, y, BOX_L - 6, y + 4, t);
  }
  sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s%s</text>\n",
            (BOX_L + BOX_R) / 2, BOX_B + 40, p->xlabel,
            ax->log ? " (log scale)" : "");
  sb_printf(b,
            "<text transform=\"translate(18 %d) rotate(-90)\" "
            "text-anchor=\"middle\">%s</text>\n",
            (BOX_T + BOX_B) / 2, p->ylabel);
  sb_printf(b,
            "<text x=\"%d\" y=\"18\" text-anchor=\"middle\" "
            "font-weight=\"bold\">%s</text>\n",
            (BOX_L + BOX_R) / 2, p->title);
}

static void stroke_attrs(sbuf *b, size_t k) {
  sb_printf(b, "stroke=\"%s\"%s", COLORS[k % N_COLORS],
            k >= N_COLORS ? " stroke-dasharray=\"6 3\"" : "");
}

/* One polyline per series (empty when nothing of it is drawable), a dot
 * on its last point, and its legend entry. */
static void draw_series(sbuf *b, const sim_series *s, size_t k, const plot *p,
                        const axis *ax, const axis *ay) {
  sb_puts(b, "<polyline fill=\"none\" stroke-width=\"1.6\" ");
  stroke_attrs(b, k);
  sb_puts(b, " points=\"");
  size_t stride = stride_of(s->n), last = s->n;
  for (size_t i = 0; i < s->n; i++) {
    const sim_round_record *r = &s->rounds[i];
    if (!drawn_row(i, s->n, stride) || !usable(r, p->x, p->y, ax->log))
      continue;
    sb_printf(b, "%s%.1f,%.1f", last == s->n ? "" : " ", px(ax, x_of(r, p->x)),
              py(ay, y_of(r, p->y)));
    last = i;
  }
  sb_puts(b, "\"><title>");
  sb_label(b, s, k, 0);
  sb_puts(b, "</title></polyline>\n");
  if (last < s->n)
    sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
              px(ax, x_of(&s->rounds[last], p->x)),
              py(ay, y_of(&s->rounds[last], p->y)), COLORS[k % N_COLORS]);
  double ly = BOX_T + 8 + 18.0 * (double)k;
  sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" ", LEGEND_X,
            ly, LEGEND_X + 22, ly);
  stroke_attrs(b, k);
  sb_printf(b, " stroke-width=\"2\"/><text x=\"%d\" y=\"%.1f\">", LEGEND_X + 28,
            ly + 4);
  sb_label(b, s, k, LEGEND_CHARS);
  sb_puts(b, "</text>\n");
}

static void draw_plot(sbuf *b, const sim_series *s, size_t ns, const plot *p,
                      double target) {
  double xlo, xhi, ylo, yhi;
  axis ax = {0}, ay = {0};
  ax.bytes = p->x == X_BYTES;
  /* Bytes that span two decades or more read better on a log axis. */
  data_range(s, ns, p, true, ax.bytes, &xlo, &xhi);
  if (ax.bytes && xlo > 0.0 && xhi / xlo >= 100.0)
    axis_log(&ax, xlo, xhi);
  else {
    data_range(s, ns, p, true, false, &xlo, &xhi);
    axis_linear(&ax, xlo, xhi);
  }
  data_range(s, ns, p, false, ax.log, &ylo, &yhi);
  bool show_target = p->y == Y_ACCURACY && isfinite(target);
  if (show_target) {
    ylo = fmin(ylo, target);
    yhi = fmax(yhi, target);
  }
  axis_linear(&ay, ylo, yhi);
  int height = SVG_H;
  if (ns > 16) /* room for the legend */
    height = BOX_T + 8 + 18 * (int)ns;
  sb_printf(b,
            "<svg class=\"plot\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-size=\"12\" "
            "font-family=\"sans-serif\" role=\"img\">\n<title>",
            SVG_W, height, SVG_W, height);
  sb_puts(b, p->title);
  sb_puts(b, "</title>\n");
  draw_axes(b, p, &ax, &ay);
  if (show_target) {
    double y = py(&ay, target);
    sb_printf(b,
              "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
              "stroke=\"#555\" stroke-dasharray=\"2 3\"/><text x=\"%d\" "
              "y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">target "
              "%.4g</text>\n",
              BOX_L, y, BOX_R, y, BOX_R - 4, y - 4, target);
  }
  if (!(xlo <= xhi))
    sb_printf(b,
              "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
              "fill=\"#888\">no data</text>\n",
              (BOX_L + BOX_R) / 2, (BOX_T + BOX_B) / 2);
  for (size_t k = 0; k < ns; k++)
    draw_series(b, &s[k], k, p, &ax, &ay);
  sb_puts(b, "</svg>\n");
}

/* ---- Table ---- */

/* The last row whose accuracy (or epsilon) is finite, or NULL. */
static const sim_round_record *last_with(const sim_series *s, ykind y) {
  for (size_t i = s->n; i-- > 0;)
    if (isfinite(y_of(&s->rounds[i], y)))
      return &s->rounds[i];
  return NULL;
}

/* The first row at or above target accuracy, or NULL. */
static const sim_round_record *first_reaching(const sim_series *s,
                                              double target) {
  for (size_t i = 0; i < s->n; i++)
    if (isfinite(s->rounds[i].accuracy) && s->rounds[i].accuracy >= target)
      return &s->rounds[i];
  return NULL;
}

static void cell_number(sbuf *b, const char *fmt, double v) {
  if (isfinite(v))
    sb_printf(b, fmt, v);
  else
    sb_puts(b, "<td>&#8211;</td>");
}

static void cell_bytes(sbuf *b, uint64_t v) {
  char t[48];
  format_bytes(t, sizeof t, (double)v);
  sb_printf(b, "<td title=\"%llu bytes\">%s</td>", (unsigned long long)v, t);
}

static void draw_table(sbuf *b, const sim_series *s, size_t ns, double target) {
  sb_puts(b, "<table>\n<tr><th>series</th><th>configuration</th>"
             "<th>rounds</th><th>final accuracy</th><th>best accuracy</th>"
             "<th>upload</th><th>simulated time (s)</th><th>&#949;</th>");
  if (isfinite(target))
    sb_printf(b,
              "<th>round to %.4g</th><th>time to %.4g (s)</th>"
              "<th>upload to %.4g</th>",
              target, target, target);
  sb_puts(b, "</tr>\n");
  for (size_t k = 0; k < ns; k++) {
    const sim_series *r = &s[k];
    const sim_round_record *acc = last_with(r, Y_ACCURACY);
    const sim_round_record *eps = last_with(r, Y_EPSILON);
    const sim_round_record *end = r->n ? &r->rounds[r->n - 1] : NULL;
    double best = NAN;
    for (size_t i = 0; i < r->n; i++)
      if (isfinite(r->rounds[i].accuracy) && !(r->rounds[i].accuracy <= best))
        best = r->rounds[i].accuracy;
    sb_printf(b,
              "<tr><td class=\"l\"><span class=\"sw\" style=\"background:%s\">"
              "</span>",
              COLORS[k % N_COLORS]);
    sb_label(b, r, k, 0);
    sb_puts(b, "</td><td class=\"l\">");
    sb_escape(b, r->config ? r->config : "", 0);
    sb_puts(b, "</td>");
    if (end)
      sb_printf(b, "<td>%lld</td>", (long long)end->round);
    else
      sb_puts(b, "<td>0</td>");
    cell_number(b, "<td>%.4f</td>", acc ? acc->accuracy : NAN);
    cell_number(b, "<td>%.4f</td>", best);
    if (end)
      cell_bytes(b, end->upload_bytes);
    else
      sb_puts(b, "<td>&#8211;</td>");
    cell_number(b, "<td>%.1f</td>", end ? end->sim_time_s : NAN);
    cell_number(b, "<td>%.3g</td>", eps ? eps->epsilon : NAN);
    if (isfinite(target)) {
      const sim_round_record *hit = first_reaching(r, target);
      if (hit) {
        sb_printf(b, "<td>%lld</td>", (long long)hit->round);
        cell_number(b, "<td>%.1f</td>", hit->sim_time_s);
        cell_bytes(b, hit->upload_bytes);
      } else
        sb_puts(b, "<td colspan=\"3\">not reached</td>");
    }
    sb_puts(b, "</tr>\n");
  }
  sb_puts(b, "</table>\n");
}

/* ---- The document ---- */

static const char STYLE[] =
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    ".plots{display:flex;flex-wrap:wrap;gap:1em}"
    "svg.plot{background:#fff;border:1px solid #ddd;max-width:100%;"
    "height:auto}"
    "table{border-collapse:collapse;margin-top:1.5em}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
    "td.l{text-align:left}"
    ".sw{display:inline-block;width:1.4em;height:.35em;"
    "vertical-align:middle;margin-right:.4em}";

int sim_report_render(const char *title, const sim_series *series,
                      size_t n_series, double target_accuracy, char **out,
                      size_t *len, char *err, size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!out || !len)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "report", "no output");
  *out = NULL;
  *len = 0;
  if (!series || n_series < 1 || n_series > SIM_REPORT_MAX_SERIES)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "report",
                       "needs 1 to %d series, got %zu", SIM_REPORT_MAX_SERIES,
                       series ? n_series : 0);
  for (size_t k = 0; k < n_series; k++)
    if (series[k].n && !series[k].rounds)
      return errbuf_fail(err, errlen, COHORT_EINVAL, "report",
                         "series %zu has %zu rounds but no records", k + 1,
                         series[k].n);
  if (!isnan(target_accuracy) &&
      !(target_accuracy > 0.0 && target_accuracy <= 1.0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "report",
                       "target accuracy %g is not in (0, 1]", target_accuracy);
  bool dp = false;
  for (size_t k = 0; k < n_series && !dp; k++)
    dp = last_with(&series[k], Y_EPSILON) != NULL;

  sbuf b = {0};
  const char *t = title && *title ? title : "Cohort simulation report";
  sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
              "<meta charset=\"utf-8\"/>\n<title>");
  sb_escape(&b, t, 0);
  sb_printf(&b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", STYLE);
  sb_escape(&b, t, 0);
  sb_printf(&b, "</h1>\n<p>%zu series", n_series);
  if (isfinite(target_accuracy))
    sb_printf(&b, "; target accuracy %.4g", target_accuracy);
  sb_puts(&b, ". Lines leave out rounds without a figure; a dot marks each "
              "series' last point.</p>\n<div class=\"plots\">\n");
  static const plot plots[] = {
      {"Accuracy by round", "round", "accuracy", X_ROUND, Y_ACCURACY},
      {"Accuracy by upload", "cumulative upload", "accuracy", X_BYTES,
       Y_ACCURACY},
      {"Accuracy by simulated time", "simulated time (s)", "accuracy", X_TIME,
       Y_ACCURACY},
      {"Privacy spent by round", "round", "epsilon", X_ROUND, Y_EPSILON}};
  for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++)
    if (plots[i].y != Y_EPSILON || dp)
      draw_plot(&b, series, n_series, &plots[i], target_accuracy);
  sb_puts(&b, "</div>\n");
  draw_table(&b, series, n_series, target_accuracy);
  sb_puts(&b, "</body>\n</html>\n");
  if (b.failed) {
    free(b.p);
    return errbuf_fail(err, errlen, COHORT_ENOMEM, "report",
                       "out of memory (or over %zu MiB) building the report",
                       REPORT_MAX_BYTES >> 20);
  }
  *out = b.p;
  *len = b.len;
  return COHORT_OK;
}

/* ---- Atomic write ---- */

int sim_report_write_html(const char *path, const char *title,
                          const sim_series *series, size_t n_series,
                          double target_accuracy, char *err, size_t errlen) {
  if (!path || !*path || strlen(path) > 4000)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "report",
                       "missing or over-long output file name");
  char *html = NULL;
  size_t len = 0;
  int rc = sim_report_render(title, series, n_series, target_accuracy, &html,
                             &len, err, errlen);
  if (rc)
    return rc;
  char tmp[4096 + 16];
  snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                     "cannot create a temporary file beside it: %s",
                     strerror(errno));
    free(html);
    return rc;
  }
  /* mkstemp makes it 0600; a report is meant to be shared. */
  if (fchmod(fd, 0644) != 0 || fd_write_all(fd, html, len) != 0 ||
      fsync(fd) != 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path, "writing %s failed: %s",
                     tmp, strerror(errno));
    close(fd);
    unlink(tmp);
  } else if (close(fd) != 0 || rename(tmp, path) != 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                     "cannot put %s in its place: %s", tmp, strerror(errno));
    unlink(tmp);
  } else {
    /* So that the rename survives a crash; the file itself is synced. */
    (void)durable_sync_folder(path);
  }
  free(html);
  return rc;
}
