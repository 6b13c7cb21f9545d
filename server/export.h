/* cohort-server --export: a committed model of a coordinator's database as
 * a safetensors file (models/nn_model_io.h), for Python tooling or for
 * starting elsewhere. */
#ifndef COHORT_EXPORT_H
#define COHORT_EXPORT_H

#include <stddef.h>

/* Writes model `version` (a number, or "latest") of the database at db_path
 * to file. The database must exist; the model's digest is checked before
 * anything is written. Returns COHORT_OK or a negative status with a
 * one-line reason in err. */
int export_model(const char *db_path, const char *version, const char *file,
                 char *err, size_t errlen);

#endif
