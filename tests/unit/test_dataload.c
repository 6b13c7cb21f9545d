/* Tests of the client's share loader (client/dataset.c): it picks a share
 * from the labels alone and decodes only those images, and must give byte
 * for byte what the old loader gave (decode everything, partition, copy,
 * cut, hold out) for every partition spec, limit and holdout; and its peak
 * memory must follow the share, not the whole file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "dataset.h"
#include "nn_partition.h"
#include "nn_rng.h"
#include "proc_mem.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[128];

static int suite_init(void) {
  return test_tmpdir_make(tmpdir, sizeof tmpdir, "dataload");
}

static int suite_clean(void) {
  test_tmpdir_remove(tmpdir);
  return 0;
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* Writes "<sub>/train-{images,labels}-idx{3,1}-ubyte[.gz]" under tmpdir:
 * n images of rows x cols with pixels and labels that differ per image. */
static void write_pair(const char *sub, uint32_t n, uint32_t rows,
                       uint32_t cols, int gz) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, sub);
  CU_ASSERT_FATAL(mkdir(path, 0700) == 0);
  const char *ext = gz ? ".gz" : "";
  const char *mode = gz ? "wb1" : "wbT"; /* T: plain, no gzip wrapper */
  unsigned char hdr[16];
  snprintf(path, sizeof path, "%s/%s/train-images-idx3-ubyte%s", tmpdir, sub,
           ext);
  gzFile f = gzopen(path, mode);
  CU_ASSERT_FATAL(f != NULL);
  put_u32(hdr, 0x803);
  put_u32(hdr + 4, n);
  put_u32(hdr + 8, rows);
  put_u32(hdr + 12, cols);
  CU_ASSERT_FATAL(gzwrite(f, hdr, 16) == 16);
  size_t dim = (size_t)rows * cols;
  unsigned char *img = malloc(dim);
  CU_ASSERT_FATAL(img != NULL);
  for (uint32_t i = 0; i < n; i++) {
    for (size_t j = 0; j < dim; j++)
      img[j] = (unsigned char)(i * 31u + j * 7u + (i >> 8));
    CU_ASSERT_FATAL(gzwrite(f, img, (unsigned)dim) == (int)dim);
  }
  free(img);
  CU_ASSERT_FATAL(gzclose(f) == Z_OK);
  snprintf(path, sizeof path, "%s/%s/train-labels-idx1-ubyte%s", tmpdir, sub,
           ext);
  f = gzopen(path, mode);
  CU_ASSERT_FATAL(f != NULL);
  put_u32(hdr, 0x801);
  put_u32(hdr + 4, n);
  CU_ASSERT_FATAL(gzwrite(f, hdr, 8) == 8);
  for (uint32_t i = 0; i < n; i++) {
    unsigned char y = (unsigned char)((i * 2654435761u) >> 29); /* 0..7 */
    CU_ASSERT_FATAL(gzwrite(f, &y, 1) == 1);
  }
  CU_ASSERT_FATAL(gzclose(f) == Z_OK);
}

/* The loader as it was before it read labels first: decode the whole file,
 * partition, copy the share, cut it, then hold a fraction out. */
static void old_load(const cohort_dataset_options *o, nn_dataset *train,
                     nn_dataset *hold) {
  nn_dataset all = {0}, share = {0};
  char err[256];
  memset(hold, 0, sizeof *hold);
  CU_ASSERT_FATAL(nn_dataset_load_path(o->path, 1, &all, err, sizeof err) == 0);
  CU_ASSERT_FATAL(nn_partition_client(&all, o->partition, o->client_index,
                                      o->client_count, o->seed, &share, err,
                                      sizeof err) == 0);
  nn_dataset_close(&all);
  if (o->limit)
    nn_dataset_truncate(&share, o->limit);
  size_t n = share.n, k = (size_t)(o->holdout * (double)n);
  if (k == 0 || k >= n) {
    *train = share;
    return;
  }
  uint32_t *idx = malloc(n * sizeof *idx);
  CU_ASSERT_FATAL(idx != NULL);
  for (size_t i = 0; i < n; i++)
    idx[i] = (uint32_t)i;
  nn_rng rng;
  nn_rng_seed(&rng, nn_rng_mix(o->seed, 0x401d0u + (uint64_t)o->client_index));
  nn_rng_shuffle(&rng, idx, n);
  CU_ASSERT_FATAL(nn_dataset_subset(&share, idx + k, n - k, train) == 0);
  CU_ASSERT_FATAL(nn_dataset_subset(&share, idx, k, hold) == 0);
  free(idx);
  nn_dataset_close(&share);
}

static void assert_same(const nn_dataset *a, const nn_dataset *b) {
  CU_ASSERT_EQUAL_FATAL(a->n, b->n);
  CU_ASSERT_EQUAL(a->dim, b->dim);
  CU_ASSERT_EQUAL(a->n_classes, b->n_classes);
  CU_ASSERT_EQUAL(a->channels, b->channels);
  CU_ASSERT_EQUAL(a->height, b->height);
  CU_ASSERT_EQUAL(a->width, b->width);
  if (!a->n)
    return;
  CU_ASSERT(memcmp(a->y, b->y, a->n) == 0);
  /* The same floats, however each keeps them (bytes or floats). */
  float *ax = malloc(a->n * a->dim * sizeof *ax);
  float *bx = malloc(a->n * a->dim * sizeof *bx);
  uint32_t *all = malloc(a->n * sizeof *all);
  CU_ASSERT_FATAL(ax && bx && all);
  for (size_t i = 0; i < a->n; i++)
    all[i] = (uint32_t)i;
  nn_dataset_gather(a, all, a->n, ax, NULL);
  nn_dataset_gather(b, all, a->n, bx, NULL);
  CU_ASSERT(memcmp(ax, bx, a->n * a->dim * sizeof *ax) == 0);
  free(ax);
  free(bx);
  free(all);
}

static void check_equal_to_old(const cohort_dataset_options *o) {
  nn_dataset train, hold;
  old_load(o, &train, &hold);
  cohort_dataset_t *d = NULL;
  char err[256] = "";
  int rc = cohort_dataset_load(o, &d, err, sizeof err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  assert_same(&d->ds, &train);
  assert_same(&d->holdout, &hold);
  CU_ASSERT(d->ds.n > 0);
  cohort_dataset_free(d);
  nn_dataset_close(&train);
  nn_dataset_close(&hold);
}

/* Every spec, client, limit and holdout, gzip'd and plain: same examples in
 * the same order, same bytes. */
static void test_same_share_as_full_decode(void) {
  static const char *specs[] = {"iid", "shards:2", "dirichlet:0.5",
                                "quantity:1"};
  static const char *subs[] = {"gz", "plain"};
  write_pair("gz", 503, 5, 4, 1);
  write_pair("plain", 503, 5, 4, 0);
  for (int s = 0; s < 2; s++) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, subs[s]);
    for (size_t p = 0; p < sizeof specs / sizeof specs[0]; p++)
      for (int c = 0; c < 4; c++)
        for (int v = 0; v < 4; v++) {
          cohort_dataset_options o;
          cohort_dataset_options_init(&o);
          o.path = path;
          o.partition = specs[p];
          o.client_count = 4;
          o.client_index = c;
          o.seed = 42 + (uint64_t)v;
          o.limit = v & 1 ? 37 : 0;
          o.holdout = v & 2 ? 0.2 : 0;
          check_equal_to_old(&o);
        }
  }
}

/* Writes "<tmpdir>/<name>": a header, then n rows of a label and dim
 * features, integers in [0, 255] (bytes) or not (decimals). */
static void write_csv(const char *name, uint32_t n, size_t dim, int bytes) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fprintf(f, "label");
  for (size_t j = 0; j < dim; j++)
    fprintf(f, ",p%zu", j);
  fputc('\n', f);
  for (uint32_t i = 0; i < n; i++) {
    fprintf(f, "%u", (unsigned)((i * 2654435761u) >> 29));
    for (size_t j = 0; j < dim; j++) {
      unsigned v = (unsigned)((i * 31u + j * 7u + (i >> 8)) & 255);
      if (bytes)
        fprintf(f, ",%u", v);
      else
        fprintf(f, ",%.3f", v / 7.0 - 9);
    }
    fputc('\n', f);
  }
  CU_ASSERT_FATAL(fclose(f) == 0);
}

/* A CSV share, read in two passes, is the one nn_csv_load and a copy give,
 * value for value, kept as bytes when every feature is a byte. */
static void test_csv_same_share(void) {
  static const char *specs[] = {"iid", "shards:2", "dirichlet:0.5"};
  write_csv("bytes.csv", 311, 6, 1);
  write_csv("decimals.csv", 311, 6, 0);
  for (int b = 0; b < 2; b++) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir,
             b ? "bytes.csv" : "decimals.csv");
    for (size_t p = 0; p < sizeof specs / sizeof specs[0]; p++)
      for (int v = 0; v < 4; v++) {
        cohort_dataset_options o;
        cohort_dataset_options_init(&o);
        o.path = path;
        o.partition = specs[p];
        o.client_count = 3;
        o.client_index = v % 3;
        o.seed = 5 + (uint64_t)v;
        o.limit = v & 1 ? 29 : 0;
        o.holdout = v & 2 ? 0.2 : 0;
        check_equal_to_old(&o);
        cohort_dataset_t *d = NULL;
        char err[256];
        CU_ASSERT_FATAL(cohort_dataset_load(&o, &d, err, sizeof err) == 0);
        CU_ASSERT((d->ds.x8 != NULL) == b);
        cohort_dataset_free(d);
      }
  }
}

/* A CSV that changed between the two passes is refused, not misread. */
static void test_csv_changed_between_passes_refused(void) {
  char path[256], err[256] = "";
  write_csv("changing.csv", 40, 3, 1);
  snprintf(path, sizeof path, "%s/changing.csv", tmpdir);
  nn_dataset labels = {0}, out = {0};
  int bytes = 0;
  CU_ASSERT_FATAL(nn_csv_load_labels(path, NULL, &labels, &bytes, err,
                                     sizeof err) == COHORT_OK);
  CU_ASSERT(labels.n == 40 && labels.x == NULL && bytes == 1);
  write_csv("changing.csv", 39, 3, 1);
  uint32_t rows[] = {3, 1, 3};
  CU_ASSERT(nn_csv_load_rows(path, NULL, &labels, bytes, rows, 3, &out, err,
                             sizeof err) == COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "changed"));
  CU_ASSERT(out.n == 0 && out.x == NULL && out.x8 == NULL);
  write_csv("changing.csv", 40, 4, 1);
  CU_ASSERT(nn_csv_load_rows(path, NULL, &labels, bytes, rows, 3, &out, err,
                             sizeof err) == COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "changed"));
  write_csv("changing.csv", 40, 3, 0); /* decimals where bytes were */
  CU_ASSERT(nn_csv_load_rows(path, NULL, &labels, bytes, rows, 3, &out, err,
                             sizeof err) == COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "changed"));
  CU_ASSERT(out.n == 0 && out.x == NULL && out.x8 == NULL);
  nn_dataset_close(&labels);
}

/* cohort_dataset_load_idx's contiguous shards equal nn_dataset_shard's. */
static void test_shard_as_before(void) {
  char path[256], err[256];
  snprintf(path, sizeof path, "%s/gz", tmpdir);
  nn_dataset all = {0};
  CU_ASSERT_FATAL(nn_dataset_load_path(path, 1, &all, err, sizeof err) == 0);
  for (int i = 0; i < 7; i++) {
    nn_dataset want = {0};
    CU_ASSERT_FATAL(nn_dataset_shard(&all, i, 7, &want) == 0);
    nn_dataset_truncate(&want, 50);
    cohort_dataset_t *d = NULL;
    CU_ASSERT_FATAL(cohort_dataset_load_idx(path, i, 7, 50, &d, err,
                                            sizeof err) == COHORT_OK);
    assert_same(&d->ds, &want);
    cohort_dataset_free(d);
    nn_dataset_close(&want);
  }
  nn_dataset_close(&all);
}

/* A file cut short after the chosen images is still refused, as before. */
static void test_truncated_file_refused(void) {
  char path[256], err[256] = "";
  write_pair("cut", 64, 4, 4, 0);
  snprintf(path, sizeof path, "%s/cut/train-images-idx3-ubyte", tmpdir);
  CU_ASSERT_FATAL(truncate(path, 16 + 63 * 16) == 0); /* drop the last */
  snprintf(path, sizeof path, "%s/cut", tmpdir);
  cohort_dataset_t *d = NULL;
  int rc = cohort_dataset_load_idx(path, 0, 8, 0, &d, err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_EFORMAT);
  CU_ASSERT(d == NULL);
  CU_ASSERT(strstr(err, "truncated") != NULL);
}

/* A gzip'd image file with a damaged byte mid-stream is refused, not
 * decoded into a share of garbage or a crash. */
static void test_corrupt_gzip_refused(void) {
  char path[256], err[256] = "";
  write_pair("bad", 4000, 8, 8, 1);
  snprintf(path, sizeof path, "%s/bad/train-images-idx3-ubyte.gz", tmpdir);
  FILE *f = fopen(path, "r+b");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_FATAL(fseek(f, 0, SEEK_END) == 0);
  long size = ftell(f);
  CU_ASSERT_FATAL(size > 200);
  CU_ASSERT_FATAL(fseek(f, size / 2, SEEK_SET) == 0);
  int c = fgetc(f);
  CU_ASSERT_FATAL(fseek(f, size / 2, SEEK_SET) == 0);
  CU_ASSERT_FATAL(fputc(c ^ 0x5a, f) != EOF);
  CU_ASSERT_FATAL(fclose(f) == 0);
  snprintf(path, sizeof path, "%s/bad", tmpdir);
  cohort_dataset_t *d = NULL;
  int rc = cohort_dataset_load_idx(path, 0, 10, 0, &d, err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_EFORMAT);
  CU_ASSERT(d == NULL);
  CU_ASSERT(strstr(err, "train-images-idx3-ubyte.gz") != NULL);
}

/* A FIFO where the images or a CSV file should be is refused at once as
 * not a regular file, not waited on for a writer that never comes. */
static void test_fifo_refused(void) {
  char path[256], err[256] = "";
  write_pair("fifo", 64, 4, 4, 0);
  snprintf(path, sizeof path, "%s/fifo/train-images-idx3-ubyte", tmpdir);
  CU_ASSERT_FATAL(unlink(path) == 0 && mkfifo(path, 0600) == 0);
  snprintf(path, sizeof path, "%s/fifo", tmpdir);
  cohort_dataset_t *d = NULL;
  int rc = cohort_dataset_load_idx(path, 0, 8, 0, &d, err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_EIO);
  CU_ASSERT(d == NULL);
  CU_ASSERT(strstr(err, "not a regular file") != NULL);
  snprintf(path, sizeof path, "%s/fifo.csv", tmpdir);
  CU_ASSERT_FATAL(mkfifo(path, 0600) == 0);
  nn_dataset all;
  CU_ASSERT_EQUAL(nn_dataset_load_path(path, 1, &all, err, sizeof err),
                  COHORT_EIO);
  CU_ASSERT(strstr(err, "not a regular file") != NULL);
}

/* The real data set is an optional package. */
static const char *no_fashion_mnist(void) {
  return access(FASHION_DIR, R_OK) == 0 ? NULL
                                        : FASHION_DIR
             " not installed (Debian package "
             "dataset-fashion-mnist)";
}

/* The real data set, when installed: a quarter with a held-out part. */
static void test_fashion_mnist_same(void) {
  cohort_dataset_options o;
  cohort_dataset_options_init(&o);
  o.path = FASHION_DIR;
  o.client_count = 4;
  o.client_index = 1;
  o.seed = 7;
  o.holdout = 0.1;
  check_equal_to_old(&o);
  /* Packed: about half of every image is background. */
  cohort_dataset_t *d = NULL;
  char err[256];
  CU_ASSERT_FATAL(cohort_dataset_load(&o, &d, err, sizeof err) == COHORT_OK);
  CU_ASSERT_FATAL(d->ds.x8_offsets != NULL);
  CU_ASSERT(d->ds.x8_offsets[d->ds.n] < d->ds.n * d->ds.dim * 7 / 10);
  cohort_dataset_free(d);
}

/* Packing keeps every feature's float, bit for bit, for rows that pack
 * (sparse) and rows that do not (dense, and exactly at the limit), with a
 * dim that is no multiple of 8; gather, span and truncate read it; the rows
 * of a packed set are not copied. */
static void test_pack_same_floats(void) {
  const size_t n = 64, dim = 29; /* bitmap 4 bytes: packs below 25 set */
  nn_dataset raw = {.n = n,
                    .dim = dim,
                    .n_classes = 3,
                    .channels = 1,
                    .height = 29,
                    .width = 1};
  raw.x8 = malloc(n * dim);
  raw.y = malloc(n);
  CU_ASSERT_FATAL(raw.x8 && raw.y);
  for (size_t b = 0; b < 256; b++)
    raw.x8_value[b] = (float)b / 255.0f + 0.25f; /* byte 0 is not 0.0f */
  size_t packed_rows = 0;
  for (size_t i = 0; i < n; i++) {
    size_t set = i % 30; /* 0 .. 29 features non-zero */
    packed_rows += 4 + set < dim;
    for (size_t j = 0; j < dim; j++)
      raw.x8[i * dim + j] =
          (uint8_t)((j * 7 + i) % dim < set ? 1 + (i * 13 + j) % 255 : 0);
    raw.y[i] = (uint8_t)(i % 3);
  }
  nn_dataset packed;
  CU_ASSERT_FATAL(nn_dataset_alloc_like(&raw, n, &packed) == COHORT_OK);
  for (size_t i = 0; i < n; i++)
    nn_dataset_copy_row(&packed, i, &raw, i);
  nn_dataset_pack(&packed);
  CU_ASSERT_FATAL(packed.x8_offsets != NULL);
  size_t expect = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = packed.x8_offsets[i + 1] - packed.x8_offsets[i];
    expect += len;
    CU_ASSERT(len <= dim);
  }
  CU_ASSERT(packed_rows > 0 && packed_rows < n);
  CU_ASSERT_EQUAL(packed.x8_offsets[n], expect);
  CU_ASSERT(expect < n * dim);
  assert_same(&packed, &raw);
  float a[5 * 29], b[5 * 29];
  const float *pa = nn_dataset_span(&packed, 20, 5, a);
  const float *pb = nn_dataset_span(&raw, 20, 5, b);
  CU_ASSERT(memcmp(pa, pb, sizeof a) == 0);
  nn_dataset copy;
  CU_ASSERT_EQUAL(nn_dataset_alloc_like(&packed, 2, &copy), COHORT_EINVAL);
  nn_dataset_pack(&packed); /* packed already: nothing changes */
  CU_ASSERT_EQUAL(packed.x8_offsets[n], expect);
  nn_dataset_truncate(&packed, 31);
  nn_dataset_truncate(&raw, 31);
  assert_same(&packed, &raw);
  nn_dataset_close(&packed);
  nn_dataset_close(&raw);
}

/* The peak memory of loading a twentieth of a 62 MB (as floats) data set
 * follows the share (3 MB), not the file: the old loader's peak grew by the
 * whole 62 MB. The peak is reset first (clear_refs 5), so only the load's
 * own growth counts. */
static void test_peak_follows_share(void) {
  const uint32_t n = 20000;
  write_pair("big", n, 28, 28, 1);
  char path[256], err[256];
  snprintf(path, sizeof path, "%s/big", tmpdir);
  CU_ASSERT_FATAL(proc_peak_reset() == 0);
  long before = proc_status_kb("VmRSS:");
  cohort_dataset_options o;
  cohort_dataset_options_init(&o);
  o.path = path;
  o.client_count = 20;
  cohort_dataset_t *d = NULL;
  CU_ASSERT_FATAL(cohort_dataset_load(&o, &d, err, sizeof err) == COHORT_OK);
  long peak = proc_status_kb("VmHWM:");
  CU_ASSERT_EQUAL(cohort_dataset_size(d), n / 20);
  cohort_dataset_free(d);
  long full_kb = (long)n * 28 * 28 * 4 / 1024;
  printf(" (peak grew %ld KiB; the whole set is %ld KiB) ", peak - before,
         full_kb);
  CU_ASSERT(before > 0 && peak > 0);
  CU_ASSERT(peak - before < full_kb / 4);
}

/* A CSV whose features as floats (25 MB) are far more than the share may
 * take: a twentieth of it loads with the peak growing by the share and the
 * labels, not the file; whole, it would grow by the 25 MB. */
static void test_csv_peak_follows_share(void) {
  const uint32_t n = 8000;
  const size_t dim = 784;
  write_csv("big.csv", n, dim, 1);
  char path[256], err[256];
  snprintf(path, sizeof path, "%s/big.csv", tmpdir);
  CU_ASSERT_FATAL(proc_peak_reset() == 0);
  long before = proc_status_kb("VmRSS:");
  cohort_dataset_options o;
  cohort_dataset_options_init(&o);
  o.path = path;
  o.client_count = 20;
  cohort_dataset_t *d = NULL;
  CU_ASSERT_FATAL(cohort_dataset_load(&o, &d, err, sizeof err) == COHORT_OK);
  long peak = proc_status_kb("VmHWM:");
  CU_ASSERT_EQUAL(cohort_dataset_size(d), n / 20);
  CU_ASSERT(d->ds.x8 != NULL); /* byte pixels stay bytes */
  cohort_dataset_free(d);
  long full_kb = (long)(n * dim * sizeof(float) / 1024);
  printf(" (peak grew %ld KiB; the whole set as floats is %ld KiB) ",
         peak - before, full_kb);
  CU_ASSERT(before > 0 && peak > 0);
  CU_ASSERT(peak - before < full_kb / 8);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"same share as the full decode, every spec",
       test_same_share_as_full_decode},
      {"contiguous shards as before", test_shard_as_before},
      {"truncated file refused", test_truncated_file_refused},
      {"corrupt gzip refused", test_corrupt_gzip_refused},
      {"a FIFO is refused, not waited on", test_fifo_refused},
      {"Fashion-MNIST quarter as before", test_fashion_mnist_same,
       no_fashion_mnist},
      {"packed bytes read back as the same floats", test_pack_same_floats},
      {"peak memory follows the share", test_peak_follows_share},
      {"CSV share as nn_csv_load and a copy", test_csv_same_share},
      {"CSV changed between the passes refused",
       test_csv_changed_between_passes_refused},
      {"CSV peak memory follows the share", test_csv_peak_follows_share},
  };
  return test_add_suite("dataload", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
