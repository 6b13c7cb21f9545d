/* cohort-sim's CSV, JSON-lines and HTML output; see sim_output.h. */
#include "sim_output.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"

#define CSV_MORE ",committed,selected,completed,dropped"

static FILE *open_out(const char *path, const char *flag, char *err,
                      size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f)
    errbuf_fail(err, errlen, COHORT_EIO, NULL, "--%s %s: %s", flag, path,
                strerror(errno));
  return f;
}

int sim_output_open(sim_output *o, const char *csv, const char *jsonl,
                    const char *report, const char *label, const char *config,
                    char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->report = report;
  o->label = label;
  o->config = config;
  if ((csv && !(o->csv = open_out(csv, "csv", err, errlen))) ||
      (jsonl && !(o->jsonl = open_out(jsonl, "jsonl", err, errlen)))) {
    sim_output_close(o);
    return COHORT_EIO;
  }
  if (o->csv && sim_report_csv_header_more(o->csv, label, config, CSV_MORE)) {
    sim_output_close(o);
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "--csv %s: %s", csv,
                       strerror(errno));
  }
  return COHORT_OK;
}

/* A figure for JSON: null when not known. */
static void json_number(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.12g", v);
  else
    fputs("null", f);
}

int sim_output_record(void *ctx, const sim_record *r) {
  sim_output *o = ctx;
  sim_round_record rr = {.round = r->round,
                         .accuracy = r->accuracy,
                         .loss = r->loss,
                         .upload_bytes = r->upload_bytes,
                         .sim_time_s = r->sim_time_s,
                         .epsilon = r->epsilon};
  if (o->report) {
    if (o->n == o->cap) {
      size_t cap = o->cap ? 2 * o->cap : 64;
      sim_round_record *p = realloc(o->rounds, cap * sizeof *p);
      if (!p)
        return COHORT_ENOMEM;
      o->rounds = p;
      o->cap = cap;
    }
    o->rounds[o->n++] = rr;
  }
  if (o->csv) {
    char more[96];
    snprintf(more, sizeof more, ",%d,%zu,%zu,%zu", r->committed, r->selected,
             r->completed, r->dropped);
    if (sim_report_csv_row_more(o->csv, &rr, more))
      return COHORT_EIO;
  }
  if (o->jsonl) {
    FILE *f = o->jsonl;
    fprintf(f,
            "{\"round\":%lld,\"committed\":%s,\"selected\":%zu,"
            "\"completed\":%zu,\"dropped\":%zu,\"accuracy\":",
            (long long)r->round, r->committed ? "true" : "false", r->selected,
            r->completed, r->dropped);
    json_number(f, r->accuracy);
    fputs(",\"loss\":", f);
    json_number(f, r->loss);
    fprintf(f, ",\"upload_bytes\":%llu,\"sim_time_s\":",
            (unsigned long long)r->upload_bytes);
    json_number(f, r->sim_time_s);
    fputs(",\"epsilon\":", f);
    json_number(f, r->epsilon);
    if (fputs("}\n", f) == EOF)
      return COHORT_EIO;
  }
  return COHORT_OK;
}

int sim_output_finish(sim_output *o, char *err, size_t errlen) {
  int rc = COHORT_OK;
  if (o->csv && fclose(o->csv) != 0)
    rc = errbuf_fail(err, errlen, COHORT_EIO, NULL, "--csv: %s",
                     strerror(errno));
  o->csv = NULL;
  if (o->jsonl && fclose(o->jsonl) != 0 && !rc)
    rc = errbuf_fail(err, errlen, COHORT_EIO, NULL, "--jsonl: %s",
                     strerror(errno));
  o->jsonl = NULL;
  if (!rc && o->report) {
    sim_series s = {
        .label = o->label, .config = o->config, .rounds = o->rounds, .n = o->n};
    char why[300];
    rc = sim_report_write_html(o->report, "cohort-sim", &s, 1, NAN, why,
                               sizeof why);
    if (rc)
      errbuf_fail(err, errlen, rc, NULL, "--report %s: %s", o->report, why);
  }
  sim_output_close(o);
  return rc;
}

void sim_output_close(sim_output *o) {
  if (o->csv)
    fclose(o->csv);
  if (o->jsonl)
    fclose(o->jsonl);
  free(o->rounds);
  memset(o, 0, sizeof *o);
}
