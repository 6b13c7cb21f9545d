/* Splitting one data set among the simulated clients of a federation: IID,
 * label-sorted shards (McMahan et al. 2017), a fixed number of labels per
 * client (NIID-Bench's #C=k, drawn or given), Dirichlet label skew and
 * Dirichlet quantity skew, all deterministic for a seed (nn_rng only). */
#ifndef COHORT_NN_PARTITION_H
#define COHORT_NN_PARTITION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nn_dataset.h"

/* Client k owns examples index[offsets[k]] .. index[offsets[k + 1] - 1] of
 * the data set, in ascending order (the source's order is kept; trainers
 * shuffle per epoch). No example belongs to two clients; every one belongs
 * to a client (index is a permutation of [0, n), offsets[n_clients] = n)
 * except under labels:C, whose labels that no client drew stay unowned. */
typedef struct nn_partition {
  int n_clients;
  size_t n;        /* the data set's n */
  size_t *offsets; /* n_clients + 1, offsets[0] = 0, offsets[n_clients] <= n:
                      the examples owned */
  uint32_t *index; /* offsets[n_clients] used (room for n), owned */
} nn_partition;

/* Partitions ds among n_clients clients by spec:
 *
 *   "iid"              shuffled, then near-equal contiguous slices (the first
 *                      n % n_clients clients get one extra example).
 *   "shards:S"         examples sorted by label (ties by index), cut into
 *                      n_clients * S equal shards (the first n % (n_clients*S)
 *                      one example larger), S shards per client drawn at
 *                      random without replacement. Needs S >= 1 and
 *                      n_clients * S <= n. With S = 2 most clients see two
 *                      labels (McMahan et al. 2017's pathological non-IID).
 *   "labels:C"         label-count skew, NIID-Bench's "#C=k" (Li et al.,
 *                      ICDE 2022): client c holds label c % K (K the data
 *                      set's labels: n_classes, or the largest label + 1)
 *                      and C - 1 distinct others drawn at random; each
 *                      label's examples, shuffled, are cut into near-equal
 *                      parts (the first ones one larger) among the clients
 *                      that hold it, in ascending client order. Every
 *                      client then has exactly C labels, unless a label has
 *                      fewer examples than holders; with fewer than K
 *                      clients, labels that no client drew are left out of
 *                      the partition (offsets[n_clients] < n). Needs
 *                      1 <= C <= K.
 *   "labelsets:SETS"   labels:C with each client's labels written out
 *                      instead of drawn: one set per client in client order,
 *                      sets separated by ',', labels within a set by '+'
 *                      (labelsets:0+6,1+6,2+0 gives three clients two labels
 *                      each), so a partition drawn by another framework's
 *                      generator can be replayed; each label's examples are
 *                      then cut as for labels:C (with the seed's shuffle).
 *                      Needs exactly n_clients non-empty sets, each label
 *                      below K and named once in its set.
 *   "dirichlet:ALPHA"  label skew: for each label c, p ~ Dirichlet(ALPHA, ...,
 *                      ALPHA) over the clients and c's examples, shuffled,
 *                      are cut in proportions p (cumulative rounding, so the
 *                      counts add up). Small ALPHA (0.1): few labels per
 *                      client; large (100): close to IID.
 *   "quantity:ALPHA"   quantity skew: client sizes proportional to
 *                      q ~ Dirichlet(ALPHA, ..., ALPHA) (cumulative
 *                      rounding), examples drawn IID.
 *
 * ALPHA is a finite number > 0. For dirichlet and quantity, when n >=
 * n_clients every client gets at least one example: each empty client, in
 * ascending order, takes one example from the then largest client (lowest
 * index on ties), the example chosen with the seed's generator.
 *
 * The same (ds labels, spec, n_clients, seed) give the same partition at
 * any thread count (iid and shards on every platform; the Dirichlet specs
 * also use libm's log and exp: identical where the libm is the same), so
 * the clients of one federation can each compute it and take their own,
 * disjoint share. The generator runs on nn_rng_mix(seed, a fixed stream), so
 * a run may reuse its seed for model initialisation without the two drawing
 * the same numbers. Needs ds->n < 2^32 and 1 <= n_clients <= 1000000.
 *
 * On success fills *out (free it with nn_partition_free). On failure returns
 * COHORT_EINVAL (bad spec, n_clients or data set) or COHORT_ENOMEM, leaves
 * *out zeroed with nothing allocated, and writes a one-line reason into err
 * (may be NULL); a bad spec's reason lists the known specs. Thread-safe. */
int nn_partition_make(const nn_dataset *ds, const char *spec, int n_clients,
                      uint64_t seed, nn_partition *out, char *err,
                      size_t errlen);

/* Frees the arrays and zeroes *p. Accepts NULL and a zeroed partition. */
void nn_partition_free(nn_partition *p);

/* Copies the n examples src[idx[0]], ..., src[idx[n - 1]] (rows in that
 * order) into out, which keeps src's dim, n_classes and shape; n == 0 gives a
 * valid, empty data set. idx is borrowed. Returns COHORT_OK, COHORT_EINVAL
 * (an index >= src->n, or bad arguments; *out zeroed) or COHORT_ENOMEM. */
int nn_dataset_subset(const nn_dataset *src, const uint32_t *idx, size_t n,
                      nn_dataset *out);

/* Partitions ds as nn_partition_make does and copies client's share into
 * out (client in [0, n_clients)). Clients that pass the same ds, spec,
 * n_clients and seed get disjoint shares that together cover ds. Errors as
 * nn_partition_make; *out is zeroed on failure. */
int nn_partition_client(const nn_dataset *ds, const char *spec, int client,
                        int n_clients, uint64_t seed, nn_dataset *out,
                        char *err, size_t errlen);

/* Prints a table to f: one line per client with its index, example count,
 * number of distinct labels and count per label, then a line of totals. ds
 * must be the data set p was made from. */
void nn_partition_summary(const nn_partition *p, const nn_dataset *ds, FILE *f);

#endif
