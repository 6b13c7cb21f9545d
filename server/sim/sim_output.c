/* cohort-sim's CSV and JSON-lines output; see sim_output.h. */
#include "sim_output.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"

static FILE *open_out(const char *path, const char *flag, char *err,
                      size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f)
    errbuf_fail(err, errlen, COHORT_EIO, NULL, "--%s %s: %s", flag, path,
                strerror(errno));
  return f;
}

int sim_output_open(sim_output *o, const char *csv, const char *jsonl,
                    char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  if (csv && !(o->csv = open_out(csv, "csv", err, errlen)))
    return COHORT_EIO;
  if (jsonl && !(o->jsonl = open_out(jsonl, "jsonl", err, errlen))) {
    sim_output_close(o);
    return COHORT_EIO;
  }
  if (o->csv)
    fprintf(o->csv, "round,committed,selected,completed,dropped,accuracy,"
                    "loss,upload_bytes,sim_time_s,epsilon\n");
  return COHORT_OK;
}

/* A number for CSV (empty when not known) or JSON (null). */
static void number(FILE *f, double v, const char *none) {
  if (isfinite(v))
    fprintf(f, "%.6g", v);
  else
    fputs(none, f);
}

int sim_output_record(void *ctx, const sim_record *r) {
  sim_output *o = ctx;
  if (o->csv) {
    fprintf(o->csv, "%lld,%d,%zu,%zu,%zu,", (long long)r->round, r->committed,
            r->selected, r->completed, r->dropped);
    number(o->csv, r->accuracy, "");
    fputc(',', o->csv);
    number(o->csv, r->loss, "");
    fprintf(o->csv, ",%llu,%.3f,", (unsigned long long)r->upload_bytes,
            r->sim_time_s);
    number(o->csv, r->epsilon, "");
    fputc('\n', o->csv);
  }
  if (o->jsonl) {
    FILE *f = o->jsonl;
    fprintf(f,
            "{\"round\":%lld,\"committed\":%s,\"selected\":%zu,"
            "\"completed\":%zu,\"dropped\":%zu,\"accuracy\":",
            (long long)r->round, r->committed ? "true" : "false", r->selected,
            r->completed, r->dropped);
    number(f, r->accuracy, "null");
    fputs(",\"loss\":", f);
    number(f, r->loss, "null");
    fprintf(f, ",\"upload_bytes\":%llu,\"sim_time_s\":%.3f,\"epsilon\":",
            (unsigned long long)r->upload_bytes, r->sim_time_s);
    number(f, r->epsilon, "null");
    fputs("}\n", f);
  }
  return COHORT_OK;
}

int sim_output_close(sim_output *o) {
  int rc = COHORT_OK;
  if (o->csv && fclose(o->csv) != 0)
    rc = COHORT_EIO;
  if (o->jsonl && fclose(o->jsonl) != 0)
    rc = COHORT_EIO;
  memset(o, 0, sizeof *o);
  return rc;
}
