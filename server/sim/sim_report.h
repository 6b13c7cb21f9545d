/* Reports of simulated federations: one self-contained HTML file (inline
 * SVG and CSS, no scripts, fonts, images or links, so it opens offline and
 * can be mailed) that plots several runs side by side, and the CSV files
 * that carry a run's per-round figures between cohort-sim and the report.
 *
 * Plots, one line per series: accuracy against round, against cumulative
 * upload bytes (log axis when the bytes span two decades or more) and
 * against simulated time; epsilon against round when any series has one.
 * A table gives each series' configuration and final figures, and, with a
 * target accuracy, the round, simulated time and bytes at which it was
 * first reached. Every user string (title, labels, configurations) is
 * escaped; NaN and infinite figures are left out of the lines, never
 * drawn or printed as numbers.
 *
 * CSV (docs/simulation.md, "Report"): optional leading "# label: TEXT" and
 * "# config: TEXT" lines, then the header
 *   round,accuracy,loss,upload_bytes,sim_time_s,epsilon
 * and one row per round. accuracy, loss and epsilon may be empty (or nan)
 * when unknown; upload_bytes and sim_time_s are cumulative.
 *
 * Thread-safety: no shared state; every function may run on any thread. */
#ifndef COHORT_SIM_REPORT_H
#define COHORT_SIM_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds on what a report takes and a CSV file may hold, so that a bad or
 * hostile file costs bounded memory and time. */
#define SIM_REPORT_MAX_SERIES 64
#define SIM_REPORT_MAX_ROUNDS 1000000
#define SIM_REPORT_MAX_LINE 4096 /* bytes of a CSV line, newline included */
/* A line of a plot draws at most this many points (evenly spaced rows, the
 * first and the last always among them), so a report of a million rounds
 * stays a few megabytes. */
#define SIM_REPORT_MAX_POINTS 2000

#define SIM_REPORT_CSV_HEADER                                                  \
  "round,accuracy,loss,upload_bytes,sim_time_s,epsilon"

typedef struct sim_round_record {
  int64_t round;
  double accuracy;       /* in [0, 1]; NAN when the round was not evaluated */
  double loss;           /* NAN when unknown */
  uint64_t upload_bytes; /* cumulative, all clients, up to this round */
  double sim_time_s;     /* cumulative simulated wall-clock */
  double epsilon;        /* spent so far; NAN when DP is off */
} sim_round_record;

/* One run. Every pointer is borrowed by the functions below, except from
 * sim_report_read_csv, whose results sim_series_free releases. */
typedef struct sim_series {
  const char *label;  /* legend and table; NULL: "series N" */
  const char *config; /* one line for the table; NULL: none */
  const sim_round_record *rounds;
  size_t n; /* rounds in order of increasing round number */
} sim_series;

/* Writes the report of n_series series (1 to SIM_REPORT_MAX_SERIES; a
 * series may be empty) to path, atomically: into "path.tmp-XXXXXX" beside
 * it, fsynced, then renamed over path, so a reader never sees half a
 * report. title may be NULL. target_accuracy is NAN for none, else in
 * (0, 1]. Returns COHORT_OK, COHORT_EINVAL (bad arguments), COHORT_ENOMEM
 * or COHORT_EIO, with a one-line reason in err. */
int sim_report_write_html(const char *path, const char *title,
                          const sim_series *series, size_t n_series,
                          double target_accuracy, char *err, size_t errlen);

/* The same report as a NUL-terminated string in *out (malloc'd, the
 * caller frees it) and its length in *len: for tests and for callers that
 * serve it rather than store it. */
int sim_report_render(const char *title, const sim_series *series,
                      size_t n_series, double target_accuracy, char **out,
                      size_t *len, char *err, size_t errlen);

/* Writes the optional "# label:" and "# config:" lines (NULL: left out;
 * newlines in them become spaces) and the header row; then
 * sim_report_csv_row once per round. Returns 0, or -1 on a write error
 * (errno set by stdio). */
int sim_report_csv_header(FILE *f, const char *label, const char *config);
int sim_report_csv_row(FILE *f, const sim_round_record *r);
/* The same with more columns after the six (cohort-sim's client counts):
 * more is ",name,..." for the header and ",value,..." for each row (NULL:
 * none). The reader skips up to SIM_REPORT_CSV_MAX_MORE such columns when
 * the header names them, and still refuses a row with another count. */
#define SIM_REPORT_CSV_MAX_MORE 16
int sim_report_csv_header_more(FILE *f, const char *label, const char *config,
                               const char *more);
int sim_report_csv_row_more(FILE *f, const sim_round_record *r,
                            const char *more);

/* Reads a CSV file of the format above into *out: rounds, and label and
 * config from the "#" lines (label defaults to the file's name without its
 * folder and ".csv"). Refuses, naming the file and line, a missing or
 * different header, a row without exactly six fields, a field that is not
 * a number of its kind, a negative or non-finite figure where one is
 * required, rounds that do not increase, a line over SIM_REPORT_MAX_LINE
 * bytes, a NUL byte, and more than SIM_REPORT_MAX_ROUNDS rows. Returns
 * COHORT_OK, COHORT_EIO (cannot open or read), COHORT_EFORMAT or
 * COHORT_ENOMEM; on failure *out is zeroed with nothing allocated. */
int sim_report_read_csv(const char *path, sim_series *out, char *err,
                        size_t errlen);

/* Frees what sim_report_read_csv allocated and zeroes *s. Accepts NULL and
 * a zeroed series; never call it on a series the caller built. */
void sim_series_free(sim_series *s);

/* The command line "cohort-report": reads CSV files and writes their
 * report. Usage:
 *   cohort-report --out FILE [--title TEXT] [--target ACC] RUN.csv...
 * Returns the process exit status: 0 done, 1 a file could not be read or
 * written (reason on stderr), 2 a usage error. cohort-sim may call it for
 * a "report" subcommand, passing its argv from the subcommand on. */
int sim_report_main(int argc, char **argv);

#endif
