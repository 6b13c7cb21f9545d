/* The admin token of fuzz_http's side port, shared with the seeds. */
#ifndef COHORT_FUZZ_HTTP_H
#define COHORT_FUZZ_HTTP_H

#define FUZZ_HTTP_TOKEN "fuzz-admin-token-0123456789abcdef"

#endif
