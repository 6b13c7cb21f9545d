/* See export.h. */
#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "nn_model_io.h"
#include "store.h"
#include "wire.h"

static int parse_version(const char *text, int64_t *out) {
  if (strcmp(text, "latest") == 0) {
    *out = -1;
    return 0;
  }
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (*text < '0' || *text > '9' || *end || errno || v < 0)
    return -1;
  *out = v;
  return 0;
}

/* The model the database was created for, from its settings. */
static int model_of(store *db, nn_model *m, char *err, size_t errlen) {
  char spec[NN_MAX_SPEC], hwc[64], classes[16];
  int rc = store_setting_get(db, "model_spec", spec, sizeof spec);
  if (!rc)
    rc = store_setting_get(db, "input_hwc", hwc, sizeof hwc);
  if (!rc)
    rc = store_setting_get(db, "classes", classes, sizeof classes);
  if (rc) {
    snprintf(err, errlen,
             "the database does not say which model it holds "
             "(no settings; was it created by this version?)");
    return rc;
  }
  nn_shape in;
  if (nn_shape_parse(hwc, &in) != 0) {
    snprintf(err, errlen, "the database's input shape '%s' is unreadable", hwc);
    return COHORT_EFORMAT;
  }
  return nn_zoo_resolve(spec, in, atoi(classes), m, err, errlen);
}

int export_model(const char *db_path, const char *version, const char *file,
                 char *err, size_t errlen) {
  int64_t want;
  if (parse_version(version, &want)) {
    snprintf(err, errlen, "version '%s': expected a number or 'latest'",
             version);
    return COHORT_EINVAL;
  }
  if (access(db_path, R_OK) != 0) {
    snprintf(err, errlen, "database %s: %s", db_path, strerror(errno));
    return COHORT_EIO;
  }
  store *db = NULL;
  store_model sm = {0};
  float *params = NULL;
  nn_model m;
  int rc = store_open_readonly(db_path, &db, err, errlen);
  if (!rc)
    rc = model_of(db, &m, err, errlen);
  if (rc)
    goto out;
  rc = want < 0 ? store_model_latest(db, &sm) : store_model_get(db, want, &sm);
  if (rc) {
    /* A pruned version has its row: saying there is none contradicted the
     * store's own log line. */
    if (rc == COHORT_ENOTFOUND && strstr(store_errmsg(db), "was pruned"))
      snprintf(err, errlen,
               "model version %s in %s was pruned (--keep-models): its row "
               "and digest are kept, its parameters are not",
               version, db_path);
    else
      snprintf(err, errlen, "no model version %s in %s", version, db_path);
    goto out;
  }
  uint8_t digest[CRYPTO_SHA256_LEN];
  char hex[CRYPTO_SHA256_HEX_LEN];
  crypto_sha256(sm.blob, sm.blob_len, digest);
  crypto_hex(digest, sizeof digest, hex);
  if (sm.blob_len != m.n_params * sizeof(float) ||
      strcmp(hex, sm.sha256_hex) != 0) {
    snprintf(err, errlen,
             "model version %lld does not match its recorded "
             "size or SHA-256; not exported",
             (long long)sm.version);
    rc = COHORT_EFORMAT;
    goto out;
  }
  params = malloc(sm.blob_len);
  rc = COHORT_ENOMEM;
  if (!params)
    goto out;
  wire_get_f32le(params, sm.blob, m.n_params);
  char ver[24], round[24];
  snprintf(ver, sizeof ver, "%lld", (long long)sm.version);
  snprintf(round, sizeof round, "%lld", (long long)sm.round);
  const char *meta[] = {"version", ver, "round", round, "sha256", hex, NULL};
  rc = nn_model_save(&m, params, file, meta, err, errlen);
out:
  free(params);
  store_model_clear(&sm);
  store_close(db);
  return rc;
}
