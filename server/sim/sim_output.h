/* cohort-sim's per-round records (docs/simulation.md, "Outputs"): CSV in the
 * report's format (sim_report.h) with the client counts after its six
 * columns, so cohort-report reads it; JSON lines; and the HTML report of
 * the run, written when it ends. */
#ifndef COHORT_SIM_OUTPUT_H
#define COHORT_SIM_OUTPUT_H

#include <stdio.h>

#include "sim_loop.h"
#include "sim_report.h"

typedef struct sim_output {
  FILE *csv;          /* NULL: none */
  FILE *jsonl;        /* NULL: none */
  const char *report; /* the HTML report's path, or NULL */
  const char *label, *config;
  sim_round_record *rounds; /* kept for the report */
  size_t n, cap;
} sim_output;

/* Opens the files named (NULL: that output is off) and writes the CSV's
 * label, config and header lines. label and config (borrowed) describe the
 * run. COHORT_EIO with "--flag PATH: reason" in err. */
int sim_output_open(sim_output *o, const char *csv, const char *jsonl,
                    const char *report, const char *label, const char *config,
                    char *err, size_t errlen);
/* A sim_record_fn: one row in each; COHORT_EIO when a write fails. */
int sim_output_record(void *ctx, const sim_record *r);
/* Writes the report (when asked for) and closes the files; COHORT_EIO (or
 * the report's status) with the reason in err when something was lost. */
int sim_output_finish(sim_output *o, char *err, size_t errlen);
/* Frees everything without writing the report; accepts a zeroed one. */
void sim_output_close(sim_output *o);

#endif
