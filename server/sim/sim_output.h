/* cohort-sim's per-round records as CSV and as JSON lines
 * (docs/simulation.md, "Outputs"): round, clients selected, completed and
 * dropped, the global model's accuracy and loss on the held-out set,
 * cumulative upload bytes and simulated time, and epsilon under DP. */
#ifndef COHORT_SIM_OUTPUT_H
#define COHORT_SIM_OUTPUT_H

#include <stdio.h>

#include "sim_loop.h"

typedef struct sim_output {
  FILE *csv;   /* NULL: none */
  FILE *jsonl; /* NULL: none */
} sim_output;

/* Opens the files named (NULL: that output is off) and writes the CSV
 * header. COHORT_EIO with "PATH: reason" in err. */
int sim_output_open(sim_output *o, const char *csv, const char *jsonl,
                    char *err, size_t errlen);
/* A sim_record_fn: one row in each. */
int sim_output_record(void *ctx, const sim_record *r);
/* Closes both; COHORT_EIO when a write was lost. */
int sim_output_close(sim_output *o);

#endif
