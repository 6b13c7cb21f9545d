/* The seed generator's parts (fuzz_corpus.c writes the simple formats;
 * fuzz_corpus_rpc.c, fuzz_corpus_secagg.c and fuzz_corpus_http.c the
 * protocol messages). */
#ifndef COHORT_FUZZ_CORPUS_H
#define COHORT_FUZZ_CORPUS_H

#include <stddef.h>

/* Writes the concatenation of a and b as seed `name` of `target` (exits on
 * failure: the generator is a build tool). */
void corpus_write(const char *target, const char *name, const void *a,
                  size_t a_len, const void *b, size_t b_len);

/* The protocol seeds (fuzz_corpus_rpc.c, fuzz_corpus_secagg.c,
 * fuzz_corpus_http.c). */
void corpus_rpc(void);
void corpus_http(void);
void corpus_secagg(void);

#endif
