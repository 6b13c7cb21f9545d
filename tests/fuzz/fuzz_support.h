/* What the libFuzzer targets share: a private scratch folder for the
 * readers that take a path (IDX, CSV, the configuration file), and the
 * logger silenced, since refusals are what fuzzing provokes. */
#ifndef COHORT_FUZZ_SUPPORT_H
#define COHORT_FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/* Writes len bytes of data to file `name` in this process's scratch folder
 * (made on first use under $TMPDIR, removed at exit) and its path into
 * path (FUZZ_PATH_MAX bytes). Aborts when it cannot: the harness is
 * broken, not the code under test. */
#define FUZZ_PATH_MAX 512
void fuzz_write_file(const char *name, const uint8_t *data, size_t len,
                     char path[FUZZ_PATH_MAX]);

/* The scratch folder itself (made on first use). */
const char *fuzz_scratch_dir(void);

/* Logging off (LOG_OFF), once. */
void fuzz_quiet(void);

#endif
