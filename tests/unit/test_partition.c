/* Tests of the data partitioners: every spec is a permutation, seeded and
 * reproducible; shards and Dirichlet skews behave as their parameters say;
 * bad specs are refused with a message. Synthetic data sets always run; the
 * Fashion-MNIST labels, when installed, give real-data skew figures. Also a
 * sanity check of nn_rng_gamma, which the Dirichlet draws rest on. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_dataset.h"
#include "nn_partition.h"
#include "nn_rng.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* n examples of dim 2, x = (i, label). Labels are i % classes (interleaved)
 * or i / (n / classes) (sorted), always in [0, classes). */
static void make_ds(nn_dataset *ds, size_t n, int classes, int sorted) {
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->dim = 2;
  ds->n_classes = classes;
  ds->channels = 2;
  ds->height = 1;
  ds->width = 1;
  ds->x = malloc(n * 2 * sizeof(float));
  ds->y = malloc(n ? n : 1);
  CU_ASSERT_FATAL(ds->x && ds->y);
  size_t per = n / (size_t)classes ? n / (size_t)classes : 1;
  for (size_t i = 0; i < n; i++) {
    size_t c = sorted ? i / per : i % (size_t)classes;
    ds->y[i] = (uint8_t)(c < (size_t)classes ? c : (size_t)classes - 1);
    ds->x[2 * i] = (float)i;
    ds->x[2 * i + 1] = (float)ds->y[i];
  }
}

/* Checks the partition's invariants; returns 1 when they all hold. */
static int is_permutation(const nn_partition *p, size_t n, int k) {
  int ok = p->n_clients == k && p->n == n && p->offsets && p->index &&
           p->offsets[0] == 0 && p->offsets[k] == n;
  char *seen = calloc(n ? n : 1, 1);
  CU_ASSERT_FATAL(seen != NULL);
  for (int c = 0; ok && c < k; c++) {
    if (p->offsets[c + 1] < p->offsets[c])
      ok = 0;
    for (size_t j = p->offsets[c]; ok && j < p->offsets[c + 1]; j++) {
      uint32_t i = p->index[j];
      if (i >= n || seen[i])
        ok = 0;
      else
        seen[i] = 1;
      /* Ascending within a client. */
      if (ok && j > p->offsets[c] && p->index[j - 1] >= i)
        ok = 0;
    }
  }
  free(seen);
  return ok;
}

static int same_partition(const nn_partition *a, const nn_partition *b) {
  return a->n_clients == b->n_clients && a->n == b->n &&
         memcmp(a->offsets, b->offsets,
                ((size_t)a->n_clients + 1) * sizeof *a->offsets) == 0 &&
         memcmp(a->index, b->index,
                a->offsets[a->n_clients] * sizeof *a->index) == 0;
}

/* Label histogram of client c. */
static void client_hist(const nn_partition *p, const nn_dataset *ds, int c,
                        size_t hist[256]) {
  memset(hist, 0, 256 * sizeof hist[0]);
  for (size_t j = p->offsets[c]; j < p->offsets[c + 1]; j++)
    hist[ds->y[p->index[j]]]++;
}

static int distinct_labels(const size_t hist[256]) {
  int d = 0;
  for (int c = 0; c < 256; c++)
    d += hist[c] > 0;
  return d;
}

/* Mean over non-empty clients of the total-variation distance between the
 * client's label distribution and the whole data set's. */
static double mean_tv(const nn_partition *p, const nn_dataset *ds) {
  size_t global[256] = {0}, hist[256];
  for (size_t i = 0; i < ds->n; i++)
    global[ds->y[i]]++;
  double sum = 0;
  int used = 0;
  for (int k = 0; k < p->n_clients; k++) {
    size_t m = p->offsets[k + 1] - p->offsets[k];
    if (!m)
      continue;
    client_hist(p, ds, k, hist);
    double tv = 0;
    for (int c = 0; c < 256; c++)
      tv +=
          fabs((double)hist[c] / (double)m - (double)global[c] / (double)ds->n);
    sum += tv / 2;
    used++;
  }
  return used ? sum / used : 0;
}

/* Coefficient of variation of the client sizes. */
static double size_cv(const nn_partition *p) {
  double mean = (double)p->n / p->n_clients, var = 0;
  for (int k = 0; k < p->n_clients; k++) {
    double d = (double)(p->offsets[k + 1] - p->offsets[k]) - mean;
    var += d * d;
  }
  return sqrt(var / p->n_clients) / mean;
}

static size_t min_size(const nn_partition *p) {
  size_t m = SIZE_MAX;
  for (int k = 0; k < p->n_clients; k++)
    if (p->offsets[k + 1] - p->offsets[k] < m)
      m = p->offsets[k + 1] - p->offsets[k];
  return m;
}

static const char *const all_specs[] = {
    "iid",         "shards:1",       "shards:2",
    "shards:5",    "dirichlet:0.01", "dirichlet:0.1",
    "dirichlet:1", "dirichlet:100",  "quantity:0.1",
    "quantity:1",  "quantity:100"};
#define N_SPECS (sizeof all_specs / sizeof all_specs[0])

static void test_every_spec_is_a_permutation(void) {
  const int clients[] = {1, 3, 10, 64};
  const size_t sizes[] = {640, 3001};
  char err[512];
  for (int sorted = 0; sorted < 2; sorted++)
    for (size_t z = 0; z < 2; z++) {
      nn_dataset ds;
      make_ds(&ds, sizes[z], 10, sorted);
      for (size_t s = 0; s < N_SPECS; s++)
        for (size_t c = 0; c < 4; c++) {
          nn_partition p;
          int rc = nn_partition_make(&ds, all_specs[s], clients[c], 42, &p, err,
                                     sizeof err);
          if (rc) {
            fprintf(stderr, "\n  %s, %d clients: %s\n", all_specs[s],
                    clients[c], err);
            CU_FAIL("partition failed");
            continue;
          }
          int ok = is_permutation(&p, ds.n, clients[c]);
          CU_ASSERT(ok);
          if (!ok)
            fprintf(stderr, "\n  not a permutation: %s, %d clients\n",
                    all_specs[s], clients[c]);
          nn_partition_free(&p);
        }
      nn_dataset_close(&ds);
    }
}

static void test_iid_slices_are_near_equal_and_balanced(void) {
  nn_dataset ds;
  make_ds(&ds, 10003, 10, 1);
  nn_partition p;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "iid", 10, 1, &p, err, sizeof err), COHORT_OK);
  for (int k = 0; k < 10; k++)
    CU_ASSERT_EQUAL(p.offsets[k + 1] - p.offsets[k], k < 3 ? 1001u : 1000u);
  /* Shuffled before slicing: sorted labels end up mixed everywhere. */
  CU_ASSERT(mean_tv(&p, &ds) < 0.05);
  nn_partition_free(&p);

  /* More clients than examples: the extra clients are empty but valid; so
   * is an empty data set. */
  nn_dataset few;
  make_ds(&few, 3, 3, 0);
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&few, "iid", 5, 1, &p, err, sizeof err), COHORT_OK);
  CU_ASSERT(is_permutation(&p, 3, 5));
  CU_ASSERT_EQUAL(p.offsets[4], 3);
  nn_partition_free(&p);
  nn_dataset none = {0};
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&none, "iid", 4, 1, &p, err, sizeof err), COHORT_OK);
  CU_ASSERT(is_permutation(&p, 0, 4));
  nn_partition_free(&p);
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&none, "dirichlet:1", 4, 1, &p, err, sizeof err),
      COHORT_OK);
  CU_ASSERT(is_permutation(&p, 0, 4));
  nn_partition_free(&p);
  nn_dataset_close(&few);
  nn_dataset_close(&ds);
}

static void test_same_seed_same_partition(void) {
  nn_dataset ds;
  make_ds(&ds, 2000, 10, 0);
  char err[256];
  for (size_t s = 0; s < N_SPECS; s++) {
    nn_partition a, b, c;
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, all_specs[s], 10, 7, &a, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, all_specs[s], 10, 7, &b, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, all_specs[s], 10, 8, &c, err, sizeof err),
        COHORT_OK);
    CU_ASSERT(same_partition(&a, &b));
    int differ = !same_partition(&a, &c);
    CU_ASSERT(differ);
    if (!differ)
      fprintf(stderr, "\n  seeds 7 and 8 agree for %s\n", all_specs[s]);
    nn_partition_free(&a);
    nn_partition_free(&b);
    nn_partition_free(&c);
  }
  nn_dataset_close(&ds);
}

static void test_shards_give_few_labels_per_client(void) {
  char err[256];
  for (int sorted = 0; sorted < 2; sorted++) {
    nn_dataset ds;
    make_ds(&ds, 6000, 10, sorted);
    nn_partition p;
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, "shards:2", 100, 3, &p, err, sizeof err),
        COHORT_OK);
    int at_most_two = 0;
    for (int k = 0; k < 100; k++) {
      size_t hist[256];
      client_hist(&p, &ds, k, hist);
      CU_ASSERT_EQUAL(p.offsets[k + 1] - p.offsets[k], 60); /* 2 x 30 */
      CU_ASSERT(distinct_labels(hist) <= 4);
      at_most_two += distinct_labels(hist) <= 2;
    }
    /* Shards of 30 never straddle two labels of 600 here: all clients. */
    CU_ASSERT(at_most_two >= 90);
    nn_partition_free(&p);

    /* Shard size 1 (n_clients * S == n) is allowed, and uneven shards get
     * the remainder one each. */
    CU_ASSERT_EQUAL(
        nn_partition_make(&ds, "shards:60", 100, 3, &p, err, sizeof err),
        COHORT_OK);
    CU_ASSERT(is_permutation(&p, ds.n, 100));
    nn_partition_free(&p);
    nn_dataset_close(&ds);
  }
  /* 1001 examples in 10 shards: the first shard has 101. */
  nn_dataset ds;
  make_ds(&ds, 1001, 10, 1);
  nn_partition p;
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "shards:1", 10, 3, &p, err, sizeof err),
      COHORT_OK);
  int seen101 = 0;
  for (int k = 0; k < 10; k++) {
    size_t m = p.offsets[k + 1] - p.offsets[k];
    CU_ASSERT(m == 100 || m == 101);
    seen101 += m == 101;
  }
  CU_ASSERT_EQUAL(seen101, 1);
  nn_partition_free(&p);
  nn_dataset_close(&ds);
}

static void test_dirichlet_skew_follows_alpha(void) {
  nn_dataset ds;
  make_ds(&ds, 10000, 10, 0);
  char err[256];
  const char *specs[] = {"dirichlet:0.1", "dirichlet:1", "dirichlet:100"};
  double tv[3], top[3];
  for (int s = 0; s < 3; s++) {
    nn_partition p;
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, specs[s], 10, 11, &p, err, sizeof err),
        COHORT_OK);
    tv[s] = mean_tv(&p, &ds);
    top[s] = 0;
    for (int k = 0; k < 10; k++) {
      size_t hist[256], mx = 0, m = p.offsets[k + 1] - p.offsets[k];
      client_hist(&p, &ds, k, hist);
      for (int c = 0; c < 10; c++)
        mx = hist[c] > mx ? hist[c] : mx;
      top[s] += m ? (double)mx / (double)m / 10 : 0;
      CU_ASSERT(m > 0);
    }
    nn_partition_free(&p);
  }
  fprintf(stderr,
          "\n  synthetic 10 x 1000, 10 clients: mean TV %.3f / %.3f / %.3f, "
          "mean top-label share %.3f / %.3f / %.3f (alpha 0.1 / 1 / 100)\n",
          tv[0], tv[1], tv[2], top[0], top[1], top[2]);
  CU_ASSERT(tv[0] > 0.4);
  CU_ASSERT(tv[0] > tv[1] && tv[1] > tv[2]);
  CU_ASSERT(tv[2] < 0.06);
  CU_ASSERT(top[0] > 0.4);
  CU_ASSERT(top[2] < 0.16);
  nn_dataset_close(&ds);
}

static void test_every_client_gets_an_example(void) {
  char err[256];
  const char *specs[] = {"dirichlet:0.01", "dirichlet:0.001", "quantity:0.01",
                         "quantity:0.001", "dirichlet:1e-300"};
  for (int s = 0; s < 5; s++) {
    /* Plenty of data, and exactly one example per client. */
    const size_t sizes[] = {3000, 100};
    for (int z = 0; z < 2; z++) {
      nn_dataset ds;
      make_ds(&ds, sizes[z], 10, 0);
      nn_partition p;
      CU_ASSERT_EQUAL_FATAL(
          nn_partition_make(&ds, specs[s], 100, 5, &p, err, sizeof err),
          COHORT_OK);
      CU_ASSERT(is_permutation(&p, ds.n, 100));
      CU_ASSERT(min_size(&p) >= 1);
      if (z == 1)
        for (int k = 0; k < 100; k++)
          CU_ASSERT_EQUAL(p.offsets[k + 1] - p.offsets[k], 1);
      nn_partition_free(&p);
      nn_dataset_close(&ds);
    }
  }
  /* Fewer examples than clients: allowed, some clients stay empty. */
  nn_dataset ds;
  make_ds(&ds, 5, 2, 0);
  nn_partition p;
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "quantity:1", 8, 5, &p, err, sizeof err),
      COHORT_OK);
  CU_ASSERT(is_permutation(&p, 5, 8));
  nn_partition_free(&p);
  nn_dataset_close(&ds);
}

static void test_quantity_skew_follows_alpha(void) {
  nn_dataset ds;
  make_ds(&ds, 10000, 10, 1);
  char err[256];
  const char *specs[] = {"quantity:0.1", "quantity:1", "quantity:100"};
  double cv[3], tv[3];
  for (int s = 0; s < 3; s++) {
    nn_partition p;
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, specs[s], 20, 13, &p, err, sizeof err),
        COHORT_OK);
    cv[s] = size_cv(&p);
    tv[s] = mean_tv(&p, &ds);
    CU_ASSERT(min_size(&p) >= 1);
    nn_partition_free(&p);
  }
  fprintf(stderr,
          "\n  synthetic 10000, 20 clients: size CV %.3f / %.3f / %.3f, "
          "mean TV %.3f / %.3f / %.3f (quantity alpha 0.1 / 1 / 100)\n",
          cv[0], cv[1], cv[2], tv[0], tv[1], tv[2]);
  /* Expected CV sqrt((k - 1) / (k alpha + 1)): 2.5, 0.95, 0.10. */
  CU_ASSERT(cv[0] > 1.2);
  CU_ASSERT(cv[2] < 0.2);
  /* Labels stay IID: with 500 examples a client, close to the global mix. */
  CU_ASSERT(tv[2] < 0.08);
  nn_dataset_close(&ds);
}

/* Asserts a refused spec: EINVAL, *out zeroed, a message with word. */
static void expect_bad_spec(const nn_dataset *ds, const char *spec,
                            int n_clients, const char *word) {
  nn_partition p;
  memset(&p, 0x5a, sizeof p);
  char err[512] = "";
  int rc = nn_partition_make(ds, spec, n_clients, 1, &p, err, sizeof err);
  int ok = rc == COHORT_EINVAL && p.offsets == NULL && p.index == NULL &&
           p.n_clients == 0 && strstr(err, word) && !strchr(err, '\n');
  CU_ASSERT(ok);
  if (!ok)
    fprintf(stderr, "\n  spec \"%s\", %d clients: rc %d, err \"%s\"\n",
            spec ? spec : "(null)", n_clients, rc, err);
}

/* No example in two clients, indices in range and ascending per client;
 * returns the examples owned. */
static size_t owned_disjoint(const nn_partition *p, size_t n) {
  char *seen = calloc(n ? n : 1, 1);
  CU_ASSERT_FATAL(seen != NULL);
  size_t owned = 0;
  CU_ASSERT_EQUAL(p->offsets[0], 0);
  for (int c = 0; c < p->n_clients; c++) {
    CU_ASSERT_FATAL(p->offsets[c + 1] >= p->offsets[c]);
    for (size_t j = p->offsets[c]; j < p->offsets[c + 1]; j++) {
      uint32_t i = p->index[j];
      CU_ASSERT_FATAL(i < n);
      CU_ASSERT(!seen[i]);
      seen[i] = 1;
      if (j > p->offsets[c])
        CU_ASSERT(p->index[j - 1] < i);
      owned++;
    }
  }
  free(seen);
  CU_ASSERT_EQUAL(owned, p->offsets[p->n_clients]);
  return owned;
}

/* labels:C as NIID-Bench's #C=k: each client exactly C labels, its first
 * c % K; each label's examples split near-evenly among its holders; with
 * at least K clients every example is owned. */
static void test_labels_give_exactly_c_labels(void) {
  const int per[] = {1, 2, 3, 10};
  char err[256];
  for (int sorted = 0; sorted < 2; sorted++) {
    nn_dataset ds;
    make_ds(&ds, 3001, 10, sorted);
    for (size_t t = 0; t < 4; t++)
      for (int k = 10; k <= 37; k += 27) {
        char spec[32];
        snprintf(spec, sizeof spec, "labels:%d", per[t]);
        nn_partition p;
        CU_ASSERT_EQUAL_FATAL(
            nn_partition_make(&ds, spec, k, 5, &p, err, sizeof err), COHORT_OK);
        CU_ASSERT_EQUAL(owned_disjoint(&p, ds.n), ds.n);
        size_t holders[256] = {0}, lo[256], hi[256] = {0}, hist[256];
        for (int l = 0; l < 256; l++)
          lo[l] = SIZE_MAX;
        for (int c = 0; c < k; c++) {
          client_hist(&p, &ds, c, hist);
          CU_ASSERT_EQUAL(distinct_labels(hist), per[t]);
          CU_ASSERT(hist[c % 10] > 0);
          for (int l = 0; l < 10; l++)
            if (hist[l]) {
              holders[l]++;
              lo[l] = hist[l] < lo[l] ? hist[l] : lo[l];
              hi[l] = hist[l] > hi[l] ? hist[l] : hi[l];
            }
        }
        for (int l = 0; l < 10; l++)
          CU_ASSERT(holders[l] > 0 && hi[l] - lo[l] <= 1);
        nn_partition_free(&p);
      }
    nn_dataset_close(&ds);
  }
}

/* Fewer clients than labels: labels no client drew stay unowned, and no
 * example is in two clients. */
static void test_labels_with_few_clients(void) {
  nn_dataset ds;
  make_ds(&ds, 1000, 10, 0);
  char err[256];
  nn_partition p, q;
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "labels:2", 3, 1, &p, err, sizeof err), COHORT_OK);
  size_t owned = owned_disjoint(&p, ds.n);
  CU_ASSERT(owned >= 300 && owned <= 600); /* 3 to 6 of 10 labels */
  CU_ASSERT_EQUAL(p.n, ds.n);
  size_t hist[256];
  for (int c = 0; c < 3; c++) {
    client_hist(&p, &ds, c, hist);
    CU_ASSERT_EQUAL(distinct_labels(hist), 2);
    CU_ASSERT(hist[c] > 0);
  }
  /* The summary's total counts the owned examples only. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_FATAL(f != NULL);
  nn_partition_summary(&p, &ds, f);
  fclose(f);
  char want[64];
  snprintf(want, sizeof want, " total %6zu", owned);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
  free(buf);
  /* Deterministic for a seed; another seed, another draw. */
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "labels:2", 3, 1, &q, err, sizeof err), COHORT_OK);
  CU_ASSERT(same_partition(&p, &q));
  nn_partition_free(&q);
  nn_partition_free(&p);
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "labels:3", 40, 1, &p, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "labels:3", 40, 2, &q, err, sizeof err),
      COHORT_OK);
  CU_ASSERT(!same_partition(&p, &q));
  nn_partition_free(&q);
  nn_partition_free(&p);
  nn_dataset_close(&ds);
}

/* labelsets: each client holds exactly the labels written for it (here
 * NIID-Bench's own #C=2 draw for its init_seed 0), each label's examples
 * split near-evenly among its holders in client order; the seed only
 * shuffles within labels, so two seeds give the same label sets. */
static void test_labelsets_give_the_written_labels(void) {
  static const char *spec = "labelsets:0+6,1+6,2+0,3+4,4+8,5+7,6+4,7+5,8+9,9+3";
  static const int want[10][2] = {{0, 6}, {1, 6}, {2, 0}, {3, 4}, {4, 8},
                                  {5, 7}, {6, 4}, {7, 5}, {8, 9}, {9, 3}};
  nn_dataset ds;
  make_ds(&ds, 3001, 10, 0);
  char err[256];
  nn_partition p, q;
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, spec, 10, 5, &p, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(owned_disjoint(&p, ds.n), ds.n);
  size_t label_n[256] = {0}, hist[256];
  for (size_t i = 0; i < ds.n; i++)
    label_n[ds.y[i]]++;
  int holders[10] = {0};
  for (int c = 0; c < 10; c++)
    for (int j = 0; j < 2; j++)
      holders[want[c][j]]++;
  for (int c = 0; c < 10; c++) {
    client_hist(&p, &ds, c, hist);
    CU_ASSERT_EQUAL(distinct_labels(hist), 2);
    for (int j = 0; j < 2; j++) {
      int l = want[c][j];
      size_t even = label_n[l] / (size_t)holders[l];
      CU_ASSERT(hist[l] == even || hist[l] == even + 1);
    }
  }
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, spec, 10, 6, &q, err, sizeof err), COHORT_OK);
  CU_ASSERT(!same_partition(&p, &q));
  for (int c = 0; c < 10; c++) {
    size_t h2[256];
    client_hist(&p, &ds, c, hist);
    client_hist(&q, &ds, c, h2);
    CU_ASSERT_EQUAL(memcmp(hist, h2, sizeof hist), 0);
  }
  nn_partition_free(&q);
  nn_partition_free(&p);
  /* Sets of different sizes; a label nobody holds stays unowned. */
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "labelsets:3,1+2+3,9", 3, 1, &p, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL(owned_disjoint(&p, ds.n),
                  label_n[1] + label_n[2] + label_n[3] + label_n[9]);
  client_hist(&p, &ds, 0, hist);
  CU_ASSERT(distinct_labels(hist) == 1 && hist[3] > 0);
  client_hist(&p, &ds, 1, hist);
  CU_ASSERT(distinct_labels(hist) == 3 && hist[1] == label_n[1] &&
            hist[2] == label_n[2]);
  client_hist(&p, &ds, 2, hist);
  CU_ASSERT(distinct_labels(hist) == 1 && hist[9] == label_n[9]);
  nn_partition_free(&p);
  nn_dataset_close(&ds);
}

static void test_bad_specs_are_refused(void) {
  nn_dataset ds;
  make_ds(&ds, 100, 10, 0);
  expect_bad_spec(&ds, "", 4, "empty partition spec; known specs: iid");
  expect_bad_spec(&ds, NULL, 4, "empty partition spec");
  expect_bad_spec(&ds, "shards", 4, "missing the number of shards");
  expect_bad_spec(&ds, "shards:", 4, "missing the number of shards");
  expect_bad_spec(&ds, "shards:0", 4, "must be >= 1, got 0");
  expect_bad_spec(&ds, "shards:x", 4, "\"x\" is not a whole number");
  expect_bad_spec(&ds, "shards:-2", 4, "not a whole number");
  expect_bad_spec(&ds, "shards:2.5", 4, "not a whole number");
  expect_bad_spec(&ds, "shards:99999999999999999999", 4, "too large");
  expect_bad_spec(&ds, "dirichlet:-1", 4, "finite number > 0, got -1");
  expect_bad_spec(&ds, "dirichlet:nan", 4, "finite number > 0, got nan");
  expect_bad_spec(&ds, "dirichlet:inf", 4, "finite number > 0");
  expect_bad_spec(&ds, "dirichlet:1e999", 4, "finite number > 0");
  expect_bad_spec(&ds, "dirichlet:0", 4, "finite number > 0, got 0");
  expect_bad_spec(&ds, "dirichlet:0.5x", 4, "\"0.5x\" is not a number");
  expect_bad_spec(&ds, "dirichlet: 1", 4, "not a number");
  expect_bad_spec(&ds, "dirichlet", 4, "missing ALPHA");
  expect_bad_spec(&ds, "quantity:", 4, "missing ALPHA, e.g. quantity:0.5");
  expect_bad_spec(&ds, "unknown:3", 4, "unknown partition spec \"unknown:3\"");
  expect_bad_spec(&ds, "IID", 4, "unknown partition spec");
  expect_bad_spec(&ds, "iid:2", 4, "iid takes no parameter");
  expect_bad_spec(&ds, "labels", 4, "missing the number of labels per client");
  expect_bad_spec(&ds, "labels:", 4, "e.g. labels:2");
  expect_bad_spec(&ds, "labels:0", 4, "labels per client must be >= 1, got 0");
  expect_bad_spec(&ds, "labels:two", 4, "\"two\" is not a whole number");
  expect_bad_spec(&ds, "labels:11", 4,
                  "11 labels per client, but the data set has 10 labels; use "
                  "labels:1 to labels:10");
  expect_bad_spec(&ds, "labelsets", 2, "missing the clients' label sets");
  expect_bad_spec(&ds, "labelsets:", 2, "e.g. labelsets:0+6,1+6");
  expect_bad_spec(&ds, "labelsets:0+1,2", 3, "2 label sets for 3 clients");
  expect_bad_spec(&ds, "labelsets:0,1,2", 2, "3 label sets for 2 clients");
  expect_bad_spec(&ds, "labelsets:0+10,1", 2,
                  "client 0's label set names label 10, but the data set's "
                  "labels are 0 to 9");
  expect_bad_spec(&ds, "labelsets:0,1+4+1", 2,
                  "client 1's label set names label 1 twice");
  expect_bad_spec(&ds, "labelsets:0,,1", 3,
                  "client 1's label set: expected a label (a whole number) "
                  "at \",1\"");
  expect_bad_spec(&ds, "labelsets:0+,1", 2, "client 0's label set: expected");
  expect_bad_spec(&ds, "labelsets:0,1,", 2, "client 2's label set: expected");
  expect_bad_spec(&ds, "labelsets:0;1", 2, "unexpected \";1\" after client 0");
  expect_bad_spec(&ds, "labelsets:-1,1", 2, "expected a label");
  expect_bad_spec(&ds, "labelsets:0 +1,2", 2, "unexpected \" +1,2\"");
  expect_bad_spec(&ds, "labelsets:99999999999999999999999,1", 2,
                  "names label 99999999999999999999999, but");
  expect_bad_spec(&ds, "iid", 0, "number of clients must be 1 to");
  expect_bad_spec(&ds, "iid", -3, "got -3");
  expect_bad_spec(&ds, "shards:3", 34, "34 clients x 3 shards = 102 shards");
  expect_bad_spec(&ds, "shards:1", 101, "more than the 100 examples");
  /* Every spec error lists the known ones. */
  expect_bad_spec(&ds, "dirichlet:-1", 4, "dirichlet:ALPHA");
  expect_bad_spec(&ds, "shards:x", 4, "quantity:ALPHA");
  expect_bad_spec(NULL, "iid", 4, "no data set");

  nn_partition p;
  CU_ASSERT_EQUAL(nn_partition_make(&ds, "iid", 4, 1, NULL, NULL, 0),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_partition_make(&ds, "bad", 4, 1, &p, NULL, 0),
                  COHORT_EINVAL);
  nn_partition_free(&p);
  nn_partition_free(NULL);
  nn_dataset_close(&ds);
}

static void test_subset_copies_rows_in_order(void) {
  nn_dataset ds, sub;
  make_ds(&ds, 20, 4, 0);
  ds.channels = 1;
  ds.height = 1;
  ds.width = 2;
  const uint32_t idx[] = {7, 3, 19, 3};
  CU_ASSERT_EQUAL_FATAL(nn_dataset_subset(&ds, idx, 4, &sub), COHORT_OK);
  CU_ASSERT(sub.n == 4 && sub.dim == 2 && sub.n_classes == 4);
  CU_ASSERT(sub.channels == 1 && sub.height == 1 && sub.width == 2);
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_EQUAL(sub.x[2 * i], (float)idx[i]);
    CU_ASSERT_EQUAL(sub.y[i], ds.y[idx[i]]);
  }
  CU_ASSERT(sub.x != ds.x);
  nn_dataset_close(&sub);

  CU_ASSERT_EQUAL(nn_dataset_subset(&ds, idx, 0, &sub), COHORT_OK);
  CU_ASSERT(sub.n == 0 && sub.x == NULL && sub.dim == 2);
  nn_dataset_close(&sub);
  const uint32_t bad[] = {1, 20};
  CU_ASSERT_EQUAL(nn_dataset_subset(&ds, bad, 2, &sub), COHORT_EINVAL);
  CU_ASSERT(sub.n == 0 && sub.x == NULL);
  CU_ASSERT_EQUAL(nn_dataset_subset(NULL, idx, 1, &sub), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_dataset_subset(&ds, NULL, 1, &sub), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_dataset_subset(&ds, idx, 1, NULL), COHORT_EINVAL);
  nn_dataset_close(&ds);
}

/* Each client computing its own share gets exactly the partition's slice,
 * so the shares are disjoint and together cover the data set. */
static void test_client_shares_are_disjoint_and_cover(void) {
  nn_dataset ds;
  make_ds(&ds, 1000, 10, 0);
  char err[256];
  const char *specs[] = {"iid", "shards:2", "dirichlet:0.3", "quantity:0.5"};
  for (int s = 0; s < 4; s++) {
    char *seen = calloc(ds.n, 1);
    CU_ASSERT_FATAL(seen != NULL);
    size_t total = 0;
    int dup = 0;
    for (int k = 0; k < 8; k++) {
      nn_dataset mine;
      CU_ASSERT_EQUAL_FATAL(
          nn_partition_client(&ds, specs[s], k, 8, 99, &mine, err, sizeof err),
          COHORT_OK);
      CU_ASSERT(mine.dim == 2 && mine.n_classes == 10 && mine.channels == 2);
      for (size_t i = 0; i < mine.n; i++) {
        size_t orig = (size_t)mine.x[2 * i]; /* x[0] is the index */
        CU_ASSERT_FATAL(orig < ds.n);
        dup += seen[orig];
        seen[orig] = 1;
        CU_ASSERT_EQUAL(mine.y[i], ds.y[orig]);
      }
      total += mine.n;
      nn_dataset_close(&mine);
    }
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(total, ds.n);
    free(seen);
  }
  nn_dataset mine;
  CU_ASSERT_EQUAL(
      nn_partition_client(&ds, "iid", 8, 8, 1, &mine, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "client 8 is not in 0..7"));
  CU_ASSERT(mine.n == 0 && mine.x == NULL);
  CU_ASSERT_EQUAL(
      nn_partition_client(&ds, "iid", -1, 8, 1, &mine, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(
      nn_partition_client(&ds, "nope", 0, 8, 1, &mine, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown partition spec"));
  nn_dataset_close(&ds);
}

static void test_summary_prints_a_table(void) {
  nn_dataset ds;
  make_ds(&ds, 600, 3, 1);
  nn_partition p;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(
      nn_partition_make(&ds, "shards:1", 3, 2, &p, err, sizeof err), COHORT_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_FATAL(f != NULL);
  nn_partition_summary(&p, &ds, f);
  CU_ASSERT_FATAL(fclose(f) == 0);
  /* A header, three clients, the totals. */
  int lines = 0;
  for (size_t i = 0; i < len; i++)
    lines += text[i] == '\n';
  CU_ASSERT_EQUAL(lines, 5);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "client"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "labels"));
  /* Each client holds one whole label: 200 of it and two zero columns. */
  char *line = strchr(text, '\n') + 1;
  for (int k = 0; k < 3; k++) {
    int idx, n, labels, c0, c1, c2;
    CU_ASSERT_EQUAL(
        sscanf(line, "%d %d %d %d %d %d", &idx, &n, &labels, &c0, &c1, &c2), 6);
    CU_ASSERT(idx == k && n == 200 && labels == 1 && c0 + c1 + c2 == 200);
    line = strchr(line, '\n') + 1;
  }
  int n, labels, c0, c1, c2;
  CU_ASSERT_EQUAL(
      sscanf(line, " total %d %d %d %d %d", &n, &labels, &c0, &c1, &c2), 5);
  CU_ASSERT(n == 600 && labels == 3 && c0 == 200 && c1 == 200 && c2 == 200);
  free(text);
  nn_partition_free(&p);
  nn_dataset_close(&ds);
}

/* Gamma(k, 1) has mean k and variance k. */
static void test_rng_gamma_mean_and_variance(void) {
  const double shapes[] = {0.1, 1.0, 5.0};
  const int draws = 400000;
  for (int s = 0; s < 3; s++) {
    nn_rng r;
    nn_rng_seed(&r, 1234 + (uint64_t)s);
    double k = shapes[s], sum = 0, sq = 0;
    int bad = 0;
    for (int i = 0; i < draws; i++) {
      double g = nn_rng_gamma(&r, k);
      bad += !(g >= 0) || !isfinite(g);
      sum += g;
      sq += g * g;
    }
    double mean = sum / draws, var = sq / draws - mean * mean;
    CU_ASSERT_EQUAL(bad, 0);
    /* Standard error of the mean is sqrt(k / draws): 0.16% of k at k = 5,
     * 0.5% at k = 0.1; allow 2%. */
    CU_ASSERT_DOUBLE_EQUAL(mean, k, 0.02 * k);
    CU_ASSERT_DOUBLE_EQUAL(var, k, 0.06 * k);
    if (fabs(mean - k) > 0.02 * k || fabs(var - k) > 0.06 * k)
      fprintf(stderr, "\n  Gamma(%g): mean %g, variance %g\n", k, mean, var);
  }
}

/* The real training labels: the skew figures that a federation on
 * Fashion-MNIST would see, printed for the record. */
static void test_fashion_mnist_skew_figures(void) {
  nn_dataset ds;
  char err[512];
  int rc = nn_idx_load_dir(FASHION_DIR, 1, &ds, err, sizeof err);
  if (rc)
    fprintf(stderr, "\n  %s\n", err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(ds.n, 60000);
  const char *specs[] = {"iid",          "dirichlet:0.1", "dirichlet:0.5",
                         "dirichlet:1",  "dirichlet:100", "shards:2",
                         "quantity:0.1", "quantity:100"};
  double tv[8];
  fprintf(stderr, "\n  Fashion-MNIST train, 10 clients, seed 1:\n");
  for (int s = 0; s < 8; s++) {
    nn_partition p;
    CU_ASSERT_EQUAL_FATAL(
        nn_partition_make(&ds, specs[s], 10, 1, &p, err, sizeof err),
        COHORT_OK);
    CU_ASSERT(is_permutation(&p, ds.n, 10));
    CU_ASSERT(min_size(&p) >= 1);
    tv[s] = mean_tv(&p, &ds);
    int labels = 0;
    for (int k = 0; k < 10; k++) {
      size_t hist[256];
      client_hist(&p, &ds, k, hist);
      labels += distinct_labels(hist);
    }
    fprintf(stderr,
            "    %-14s mean TV %.3f, mean labels/client %.1f, size CV %.3f\n",
            specs[s], tv[s], labels / 10.0, size_cv(&p));
    if (s == 1)
      nn_partition_summary(&p, &ds, stderr);
    nn_partition_free(&p);
  }
  CU_ASSERT(tv[0] < 0.02);
  CU_ASSERT(tv[1] > tv[2] && tv[2] > tv[3] && tv[3] > tv[4]);
  CU_ASSERT(tv[1] > 0.4);
  /* Each class's share per client is Beta(100, 900): sd ~9.5% of the mean,
   * hence a mean TV near 0.04, against 0.016 for IID sampling noise. */
  CU_ASSERT(tv[4] < 0.06);
  nn_dataset_close(&ds);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"every spec is a permutation", test_every_spec_is_a_permutation},
      {"iid slices are near-equal and balanced",
       test_iid_slices_are_near_equal_and_balanced},
      {"same seed, same partition", test_same_seed_same_partition},
      {"shards give few labels per client",
       test_shards_give_few_labels_per_client},
      {"dirichlet skew follows alpha", test_dirichlet_skew_follows_alpha},
      {"every client gets an example", test_every_client_gets_an_example},
      {"quantity skew follows alpha", test_quantity_skew_follows_alpha},
      {"labels give exactly C labels", test_labels_give_exactly_c_labels},
      {"labelsets give the written labels",
       test_labelsets_give_the_written_labels},
      {"labels with few clients", test_labels_with_few_clients},
      {"bad specs are refused", test_bad_specs_are_refused},
      {"subset copies rows in order", test_subset_copies_rows_in_order},
      {"client shares are disjoint and cover",
       test_client_shares_are_disjoint_and_cover},
      {"summary prints a table", test_summary_prints_a_table},
      {"rng gamma mean and variance", test_rng_gamma_mean_and_variance},
      {"fashion-mnist skew figures", test_fashion_mnist_skew_figures},
  };
  size_t n = sizeof tests / sizeof tests[0];
  /* The real data set is an optional package: without it the test (the
   * last one) is left out, and says so, never counted as a pass. */
  if (access(FASHION_DIR, F_OK) != 0) {
    fprintf(stderr,
            "note: %s not installed (Debian package "
            "dataset-fashion-mnist); its test is not registered\n",
            FASHION_DIR);
    n--;
  }
  return test_add_suite("nn_partition", NULL, NULL, tests, n);
}
