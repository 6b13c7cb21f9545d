/* The command line that makes a report from earlier runs' CSV files
 * (cohort-report, or cohort-sim's "report" subcommand); see sim_report.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "sim_report.h"

#define PROG "cohort-report"

static const char USAGE[] =
    "usage: " PROG " --out FILE [--title TEXT] [--target ACC] RUN.csv...\n"
    "Writes one self-contained HTML report (inline SVG plots of accuracy by\n"
    "round, upload bytes and simulated time, epsilon by round when DP was\n"
    "on, and a table of final figures) of up to 64 runs, each a CSV file\n"
    "with the columns " SIM_REPORT_CSV_HEADER ".\n"
    "  --out FILE     the report to write (replaced atomically)\n"
    "  --title TEXT   the report's title\n"
    "  --target ACC   a target accuracy in (0, 1]: the table gives the\n"
    "                 round, time and upload at which each run reached it\n"
    "A run's legend label is its \"# label:\" line, else its file name.\n";

/* "--name VALUE" or "--name=VALUE" at argv[*i]: the value, or NULL when
 * argv[*i] is another argument. *missing is set when the value is absent. */
static const char *option(int argc, char **argv, int *i, const char *name,
                          int *missing) {
  size_t len = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, len) != 0)
    return NULL;
  if (a[len] == '=')
    return a + len + 1;
  if (a[len] != '\0')
    return NULL;
  if (*i + 1 >= argc) {
    *missing = 1;
    return NULL;
  }
  return argv[++*i];
}

int sim_report_main(int argc, char **argv) {
  const char *out = NULL, *title = NULL, *target_text = NULL;
  const char *files[SIM_REPORT_MAX_SERIES];
  int n_files = 0, missing = 0;
  int only_files = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
      if (n_files == SIM_REPORT_MAX_SERIES) {
        fprintf(stderr, "%s: at most %d runs in one report\n", PROG,
                SIM_REPORT_MAX_SERIES);
        return 2;
      }
      files[n_files++] = a;
    } else if (strcmp(a, "--") == 0)
      only_files = 1;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(USAGE, stdout);
      return 0;
    } else if ((v = option(argc, argv, &i, "--out", &missing)))
      out = v;
    else if ((v = option(argc, argv, &i, "--title", &missing)))
      title = v;
    else if ((v = option(argc, argv, &i, "--target", &missing)))
      target_text = v;
    else {
      fprintf(stderr, "%s: %s '%s'\n%s", PROG,
              missing ? "missing the value of" : "unknown option", a, USAGE);
      return 2;
    }
  }
  if (!out || !*out || n_files == 0) {
    fprintf(stderr, "%s: needs --out FILE and at least one CSV file\n%s", PROG,
            USAGE);
    return 2;
  }
  double target = NAN;
  if (target_text) {
    char *end;
    target = strtod(target_text, &end);
    if (end == target_text || *end || !(target > 0.0 && target <= 1.0)) {
      fprintf(stderr,
              "%s: --target '%s': expected an accuracy in (0, 1], e.g. 0.85\n",
              PROG, target_text);
      return 2;
    }
  }
  sim_series series[SIM_REPORT_MAX_SERIES];
  char err[512];
  int n_read = 0, status = 0;
  for (; n_read < n_files; n_read++)
    if (sim_report_read_csv(files[n_read], &series[n_read], err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", PROG, err);
      status = 1;
      break;
    }
  if (!status && sim_report_write_html(out, title, series, (size_t)n_files,
                                       target, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", PROG, err);
    status = 1;
  }
  for (int i = 0; i < n_read; i++)
    sim_series_free(&series[i]);
  return status;
}
