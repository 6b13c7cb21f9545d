/* Tests of the simulation report (server/sim/sim_report.h): the HTML has
 * one line per series in every plot, escapes what users write, survives
 * empty series, NaN and infinities; the axes pick 1/2/5 steps and a log
 * scale for bytes across decades; the CSV files round-trip and a malformed
 * one is refused naming its line. tests/sim_report_xml.sh parses a report
 * with an XML parser. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "sim_report.h"

static char g_dir[256];

static int suite_init(void) {
  return test_tmpdir_make(g_dir, sizeof g_dir, "simreport");
}
static int suite_clean(void) {
  test_tmpdir_remove(g_dir);
  return 0;
}

/* n rounds of a run learning at rate k, epsilon when dp. */
static sim_round_record *make_run(size_t n, double k, int dp) {
  sim_round_record *r = calloc(n ? n : 1, sizeof *r);
  CU_ASSERT_FATAL(r != NULL);
  for (size_t i = 0; i < n; i++)
    r[i] = (sim_round_record){.round = (int64_t)i + 1,
                              .accuracy = 1.0 - 0.9 * exp(-k * (double)i),
                              .loss = exp(-k * (double)i),
                              .upload_bytes = (uint64_t)(i + 1) * 40000,
                              .sim_time_s = 2.5 * (double)(i + 1),
                              .epsilon = dp ? 0.1 * sqrt((double)i + 1) : NAN};
  return r;
}

static size_t count(const char *hay, const char *needle) {
  size_t c = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
    c++;
  return c;
}

/* The polylines inside each <svg>...</svg>, into per[] (at most max). */
static int polylines_per_plot(const char *html, size_t *per, int max) {
  int plots = 0;
  for (const char *p = html; (p = strstr(p, "<svg")) && plots < max;) {
    const char *end = strstr(p, "</svg>");
    CU_ASSERT_FATAL(end != NULL);
    size_t c = 0;
    for (const char *q = p; (q = strstr(q, "<polyline")) && q < end; q++)
      c++;
    per[plots++] = c;
    p = end;
  }
  return plots;
}

static char *render(const sim_series *s, size_t n, double target) {
  char *html = NULL, err[256];
  size_t len = 0;
  int rc = sim_report_render("t", s, n, target, &html, &len, err, sizeof err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(strlen(html), len);
  return html;
}

static void test_one_polyline_per_series_per_plot(void) {
  sim_round_record *a = make_run(30, 0.1, 0), *b = make_run(40, 0.2, 0);
  sim_series s[2] = {{"fp32", "codec=fp32", a, 30}, {"q8", "codec=q8", b, 40}};
  char *html = render(s, 2, NAN);
  size_t per[8];
  /* No DP: accuracy by round, by upload and by time. */
  CU_ASSERT_EQUAL(polylines_per_plot(html, per, 8), 3);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(per[i], 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "codec=q8"));
  /* Self-contained: nothing fetched, nothing run. */
  CU_ASSERT_PTR_NULL(strstr(html, "<script"));
  CU_ASSERT_PTR_NULL(strstr(html, "http"));
  CU_ASSERT_PTR_NULL(strstr(html, "<img"));
  CU_ASSERT_PTR_NULL(strstr(html, "url("));
  free(html);
  free(a);
  free(b);
}

static void test_epsilon_plot_only_with_dp(void) {
  sim_round_record *a = make_run(10, 0.1, 1), *b = make_run(10, 0.1, 0);
  sim_series s[2] = {{"dp", NULL, a, 10}, {"plain", NULL, b, 10}};
  char *html = render(s, 2, NAN);
  size_t per[8];
  CU_ASSERT_EQUAL(polylines_per_plot(html, per, 8), 4);
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "Privacy spent by round"));
  free(html);
  html = render(s + 1, 1, NAN);
  CU_ASSERT_EQUAL(polylines_per_plot(html, per, 8), 3);
  CU_ASSERT_PTR_NULL(strstr(html, "Privacy spent"));
  free(html);
  free(a);
  free(b);
}

static void test_labels_are_escaped(void) {
  sim_round_record *a = make_run(5, 0.1, 0);
  sim_series s[1] = {{"<script>alert('x')</script> & \"q\"\n\x01\xff",
                      "<img src=x onerror=alert(1)>", a, 5}};
  char *html = NULL, err[256];
  size_t len;
  CU_ASSERT_EQUAL_FATAL(
      sim_report_render("<title>&", s, 1, NAN, &html, &len, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_PTR_NULL(strstr(html, "<script"));
  CU_ASSERT_PTR_NULL(strstr(html, "<img"));
  CU_ASSERT_PTR_NULL(strstr(html, "<title>&<"));
  CU_ASSERT(count(html, "&lt;script&gt;alert(&#39;x&#39;)") >= 4);
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "&amp; &quot;q&quot;"));
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "&lt;title&gt;&amp;"));
  /* The invalid byte became U+FFFD; no control character survives. */
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "\xef\xbf\xbd"));
  CU_ASSERT_PTR_NULL(strchr(html, '\x01'));
  CU_ASSERT_PTR_NULL(strstr(html, "\xff"));
  free(html);
  free(a);
}

static void test_empty_series_and_nan(void) {
  sim_round_record *a = make_run(20, 0.1, 1);
  a[3].accuracy = NAN;
  a[4].accuracy = INFINITY;
  a[5].sim_time_s = NAN;
  a[6].epsilon = INFINITY;
  a[7].loss = NAN;
  sim_round_record none = {.round = 1, .accuracy = NAN, .epsilon = NAN};
  sim_series s[3] = {{"gaps", NULL, a, 20},
                     {"empty", NULL, NULL, 0},
                     {"no accuracy", NULL, &none, 1}};
  char *html = render(s, 3, 0.9);
  size_t per[8];
  CU_ASSERT_EQUAL(polylines_per_plot(html, per, 8), 4);
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(per[i], 3);
  /* No non-finite number reaches the SVG or the table. */
  CU_ASSERT_PTR_NULL(strstr(html, "nan"));
  CU_ASSERT_PTR_NULL(strstr(html, "inf"));
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "points=\"\""));
  /* Accuracy by round draws 18 of series 1's 20 rows: 17 spaces. */
  const char *p = strstr(html, "<polyline");
  const char *pts = strstr(p, "points=\"") + 8, *q = strchr(pts, '"');
  size_t spaces = 0;
  for (const char *c = pts; c < q; c++)
    spaces += *c == ' ';
  CU_ASSERT_EQUAL(spaces, 17);
  free(html);
  /* All series empty: a report with axes and "no data". */
  sim_series e[1] = {{NULL, NULL, NULL, 0}};
  html = render(e, 1, NAN);
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "no data"));
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "series 1"));
  free(html);
  free(a);
}

static void test_target_figures_in_table(void) {
  sim_round_record *a = make_run(50, 0.1, 0);
  sim_series s[1] = {{"run", NULL, a, 50}};
  /* 1 - 0.9 exp(-0.1 i) >= 0.8 first at i = 16 (round 17, 42.5 s). */
  char *html = render(s, 1, 0.8);
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "<th>round to 0.8</th>"));
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "<td>17</td><td>42.5</td>"));
  free(html);
  html = render(s, 1, 1.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "not reached"));
  free(html);
  free(a);
}

/* The tick labels of the first plot's x axis, in order, joined by '|'. */
static void x_ticks(const char *svg, char *out, size_t len) {
  out[0] = '\0';
  const char *end = strstr(svg, "</svg>");
  for (const char *p = svg;
       (p = strstr(p, "text-anchor=\"middle\">")) && p < end;) {
    p += strlen("text-anchor=\"middle\">");
    const char *q = strchr(p, '<');
    if (q - p > 12 || !strchr("0123456789", *p))
      continue; /* titles and axis names */
    size_t at = strlen(out);
    snprintf(out + at, len - at, "%s%.*s", at ? "|" : "", (int)(q - p), p);
  }
}

static void test_axes_are_nice(void) {
  sim_round_record *a = make_run(37, 0.1, 0);
  sim_series s[1] = {{"run", NULL, a, 37}};
  char *html = render(s, 1, NAN), ticks[512];
  /* Rounds 1..37: steps of 10 from 0 to 40. */
  x_ticks(strstr(html, "<svg"), ticks, sizeof ticks);
  CU_ASSERT_STRING_EQUAL(ticks, "0|10|20|30|40");
  /* Bytes 40 kB .. 1.48 MB do not span two decades: linear, 0.5 MB steps. */
  const char *bytes_svg = strstr(html, "Accuracy by upload");
  x_ticks(bytes_svg, ticks, sizeof ticks);
  CU_ASSERT_STRING_EQUAL(ticks, "0 B|500 kB|1 MB|1.5 MB");
  CU_ASSERT_PTR_NULL(strstr(html, "(log scale)"));
  free(html);
  /* From 5 kB to 50 MB: a log axis, one tick a decade. */
  for (size_t i = 0; i < 37; i++)
    a[i].upload_bytes = (uint64_t)(5000.0 * pow(10.0, (double)i / 9.0));
  html = render(s, 1, NAN);
  x_ticks(strstr(html, "Accuracy by upload"), ticks, sizeof ticks);
  CU_ASSERT_STRING_EQUAL(ticks, "1 kB|10 kB|100 kB|1 MB|10 MB|100 MB");
  CU_ASSERT_PTR_NOT_NULL(strstr(html, "cumulative upload (log scale)"));
  free(html);
  free(a);
}

static void test_bad_arguments_refused(void) {
  sim_round_record r = {.round = 1, .accuracy = 0.5};
  sim_series s[1] = {{"x", NULL, &r, 1}};
  char *html = NULL, err[256];
  size_t len;
  CU_ASSERT_EQUAL(
      sim_report_render(NULL, s, 0, NAN, &html, &len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "1 to 64 series"));
  CU_ASSERT_EQUAL(
      sim_report_render(NULL, s, 1, 1.5, &html, &len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "target accuracy 1.5"));
  sim_series broken[1] = {{"x", NULL, NULL, 3}};
  CU_ASSERT_EQUAL(
      sim_report_render(NULL, broken, 1, NAN, &html, &len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(html);
}

static void test_many_rounds_are_thinned(void) {
  size_t n = 100000;
  sim_round_record *a = make_run(n, 0.001, 0);
  sim_series s[1] = {{"long", NULL, a, n}};
  char *html = render(s, 1, NAN);
  const char *pts = strstr(html, "points=\"") + 8, *q = strchr(pts, '"');
  size_t points = 1;
  for (const char *c = pts; c < q; c++)
    points += *c == ' ';
  CU_ASSERT(points <= SIM_REPORT_MAX_POINTS && points >= 1000);
  /* The last round is always drawn: at the right edge of the plot box
   * (x = 520), rounds 1 to 100,000 on an axis of 0 to 100,000. */
  const char *last = q;
  while (last > pts && last[-1] != ' ')
    last--;
  CU_ASSERT_NSTRING_EQUAL(last, "520.0,", 6);
  CU_ASSERT(strlen(html) < 1000000);
  free(html);
  free(a);
}

static void test_write_is_atomic_and_replaces(void) {
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/r.html", g_dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("old", f);
  fclose(f);
  sim_round_record *a = make_run(5, 0.1, 0);
  sim_series s[1] = {{"run", NULL, a, 5}};
  CU_ASSERT_EQUAL(sim_report_write_html(path, "T", s, 1, NAN, err, sizeof err),
                  COHORT_OK);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
  CU_ASSERT(st.st_size > 1000);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0644);
  /* A folder that does not exist: an error naming the file, nothing left. */
  char bad[600];
  snprintf(bad, sizeof bad, "%s/missing/r.html", g_dir);
  CU_ASSERT_EQUAL(sim_report_write_html(bad, "T", s, 1, NAN, err, sizeof err),
                  COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "missing/r.html"));
  free(a);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  fputs(text, f);
  fclose(f);
}

static void test_csv_round_trip(void) {
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/run.csv", g_dir);
  sim_round_record *a = make_run(12, 0.3, 1);
  a[2].accuracy = NAN;
  a[3].loss = INFINITY;
  a[4].epsilon = NAN;
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_EQUAL(sim_report_csv_header(f, "q8\nx", "codec=q8 <b>"), 0);
  for (size_t i = 0; i < 12; i++)
    CU_ASSERT_EQUAL(sim_report_csv_row(f, &a[i]), 0);
  fclose(f);
  sim_series s;
  CU_ASSERT_EQUAL_FATAL(sim_report_read_csv(path, &s, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_STRING_EQUAL(s.label, "q8 x");
  CU_ASSERT_STRING_EQUAL(s.config, "codec=q8 <b>");
  CU_ASSERT_EQUAL_FATAL(s.n, 12);
  for (size_t i = 0; i < 12; i++) {
    const sim_round_record *x = &s.rounds[i], *y = &a[i];
    CU_ASSERT_EQUAL(x->round, y->round);
    CU_ASSERT_EQUAL(x->upload_bytes, y->upload_bytes);
    CU_ASSERT(isnan(y->accuracy) ? isnan(x->accuracy)
                                 : fabs(x->accuracy - y->accuracy) < 1e-11);
    CU_ASSERT(isinf(y->loss) ? isinf(x->loss)
                             : fabs(x->loss - y->loss) < 1e-11);
    CU_ASSERT(isnan(y->epsilon) ? isnan(x->epsilon)
                                : fabs(x->epsilon - y->epsilon) < 1e-11);
    CU_ASSERT(fabs(x->sim_time_s - y->sim_time_s) < 1e-9);
  }
  sim_series_free(&s);
  CU_ASSERT_PTR_NULL(s.rounds);
  /* Without a label line the file's name is the label. */
  write_file(path, SIM_REPORT_CSV_HEADER "\r\n1,0.5,,10,1.5,\r\n");
  CU_ASSERT_EQUAL_FATAL(sim_report_read_csv(path, &s, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_STRING_EQUAL(s.label, "run");
  CU_ASSERT_PTR_NULL(s.config);
  CU_ASSERT_EQUAL(s.n, 1);
  sim_series_free(&s);
  free(a);
}

/* cohort-sim's CSV: its client counts after the six columns, named in the
 * header, written by the _more functions and skipped by the reader; a row
 * with another count, or a header adding an unnamed or a 17th column, is
 * still refused. */
static void test_csv_more_columns(void) {
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/more.csv", g_dir);
  sim_round_record *a = make_run(3, 0.3, 1);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_EQUAL(
      sim_report_csv_header_more(f, "sim", NULL, ",selected,dropped"), 0);
  for (size_t i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(sim_report_csv_row_more(f, &a[i], ",7,2"), 0);
  fclose(f);
  sim_series s;
  CU_ASSERT_EQUAL_FATAL(sim_report_read_csv(path, &s, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(s.n, 3);
  CU_ASSERT_EQUAL(s.rounds[2].upload_bytes, a[2].upload_bytes);
  sim_series_free(&s);
  free(a);
  char many[512] = SIM_REPORT_CSV_HEADER;
  for (int i = 0; i <= SIM_REPORT_CSV_MAX_MORE; i++)
    strcat(many, ",x");
  strcat(many, "\n");
  const struct {
    const char *text, *want;
  } bad[] = {
      {SIM_REPORT_CSV_HEADER ",n\n1,0.5,,10,1,\n", ":2: 6 fields, expected 7"},
      {SIM_REPORT_CSV_HEADER ",n\n1,0.5,,10,1,,3,4\n",
       ":2: more than 7 fields"},
      {SIM_REPORT_CSV_HEADER ",\n1,0.5,,10,1,,3\n", ":1: expected the header"},
      {SIM_REPORT_CSV_HEADER ",a,,b\n", ":1: expected the header"},
      {SIM_REPORT_CSV_HEADER "x\n", ":1: expected the header"},
      {many, ":1: expected the header"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_file(path, bad[i].text);
    CU_ASSERT_EQUAL(sim_report_read_csv(path, &s, err, sizeof err),
                    COHORT_EFORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].want));
  }
}

/* Each malformed file, the message it must give (file:line: reason). */
static void test_csv_malformed_refused(void) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"", "no header row"},
      {"round,accuracy\n1,0.5\n", ":1: expected the header"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,0.1,10,1\n", ":2: 5 fields, expected 6"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,0.1,10,1,,7\n", ":2: more than 6 fields"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,0.1,10,1,\n2,abc,0.1,20,2,\n",
       ":3: accuracy \"abc\" is not a number"},
      {SIM_REPORT_CSV_HEADER "\n1,89.5,0.1,10,1,\n",
       ":2: accuracy 89.5 is not in [0, 1] (a fraction"},
      {SIM_REPORT_CSV_HEADER "\n-1,0.5,0.1,10,1,\n",
       ":2: round \"-1\" is not a whole number"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,0.1,99999999999999999999,1,\n",
       ":2: upload_bytes \"99999999999999999999\" is too large"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,0.1,10,inf,\n",
       ":2: sim_time_s \"inf\" is not finite"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,0.1,10,,\n", ":2: sim_time_s is empty"},
      {SIM_REPORT_CSV_HEADER "\n\n2,0.5,,10,1,\n2,0.6,,20,2,\n",
       ":4: round 2 does not follow round 2"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,,10,1,\n2,0.6,,5,2,\n",
       ":3: upload_bytes 5 is less than"},
      {SIM_REPORT_CSV_HEADER "\n1,0.5,,10,1,-0.5\n",
       ":2: epsilon -0.5 is not in"},
  };
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/bad.csv", g_dir);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_file(path, cases[i].text);
    sim_series s = {.n = 99};
    int rc = sim_report_read_csv(path, &s, err, sizeof err);
    CU_ASSERT_EQUAL(rc, COHORT_EFORMAT);
    CU_ASSERT_EQUAL(s.n, 0);
    CU_ASSERT_PTR_NULL(s.rounds);
    if (!strstr(err, cases[i].want) || !strstr(err, "bad.csv"))
      fprintf(stderr, "case %zu: got \"%s\", want \"%s\"\n", i, err,
              cases[i].want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].want));
  }
  /* A NUL byte and an over-long line. */
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  fputs(SIM_REPORT_CSV_HEADER "\n1,0.5", f);
  fputc('\0', f);
  fputs(",,10,1,\n", f);
  fclose(f);
  sim_series s;
  CU_ASSERT_EQUAL(sim_report_read_csv(path, &s, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.csv:2: a NUL byte"));
  char *line = malloc(SIM_REPORT_MAX_LINE + 10);
  CU_ASSERT_FATAL(line != NULL);
  memset(line, '#', SIM_REPORT_MAX_LINE + 9);
  line[SIM_REPORT_MAX_LINE + 9] = '\0';
  write_file(path, line);
  free(line);
  CU_ASSERT_EQUAL(sim_report_read_csv(path, &s, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.csv:1: line longer than"));
  snprintf(path, sizeof path, "%s/none.csv", g_dir);
  CU_ASSERT_EQUAL(sim_report_read_csv(path, &s, err, sizeof err), COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "none.csv: cannot open"));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"one polyline per series per plot",
       test_one_polyline_per_series_per_plot},
      {"epsilon plot only with dp", test_epsilon_plot_only_with_dp},
      {"labels are escaped", test_labels_are_escaped},
      {"empty series and nan", test_empty_series_and_nan},
      {"target figures in table", test_target_figures_in_table},
      {"axes are nice", test_axes_are_nice},
      {"bad arguments refused", test_bad_arguments_refused},
      {"many rounds are thinned", test_many_rounds_are_thinned},
      {"write is atomic and replaces", test_write_is_atomic_and_replaces},
      {"csv round trip", test_csv_round_trip},
      {"csv more columns", test_csv_more_columns},
      {"csv malformed refused", test_csv_malformed_refused},
  };
  return test_add_suite("sim_report", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
