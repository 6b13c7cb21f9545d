/* Tests of the IDX reader and the data set helpers: small IDX files, plain
 * and gzip'd, written into a fresh temporary directory, read back exactly;
 * every malformed case rejected with a message that names the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_dataset.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define MAX_PATHS 64

static char tmpdir[128];
static char *made[MAX_PATHS]; /* files and folders to remove, in order */
static int n_made;

static int suite_init(void) {
  return test_tmpdir_make(tmpdir, sizeof tmpdir, "idx");
}

static int suite_clean(void) {
  for (int i = n_made - 1; i >= 0; i--) {
    remove(made[i]);
    free(made[i]);
  }
  n_made = 0;
  return rmdir(tmpdir);
}

/* Returns "<tmpdir>/<name>" and remembers it for cleanup. */
static const char *tmp_path(const char *name) {
  size_t len = strlen(tmpdir) + strlen(name) + 2;
  char *p = malloc(len);
  CU_ASSERT_FATAL(p != NULL);
  CU_ASSERT_FATAL(n_made < MAX_PATHS);
  snprintf(p, len, "%s/%s", tmpdir, name);
  made[n_made++] = p;
  return p;
}

static void write_file(const char *path, const void *buf, size_t len, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(len == 0 || gzwrite(f, buf, (unsigned)len) == (int)len);
    CU_ASSERT_FATAL(gzclose(f) == Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(fwrite(buf, 1, len, f) == len);
    CU_ASSERT_FATAL(fclose(f) == 0);
  }
}

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Writes an IDX image file claiming n images of rows x cols, followed by
 * the first `have` bytes of pixels (0, 1, ..., 255, 0, ... with pixel 0 of
 * each image forced to 255 and pixel 1 to 0). */
static const char *write_images(const char *name, uint32_t magic, uint32_t n,
                                uint32_t rows, uint32_t cols, size_t have,
                                int gz) {
  uint8_t *buf = malloc(16 + have);
  CU_ASSERT_FATAL(buf != NULL);
  put_u32(buf, magic);
  put_u32(buf + 4, n);
  put_u32(buf + 8, rows);
  put_u32(buf + 12, cols);
  size_t dim = (size_t)rows * cols;
  for (size_t i = 0; i < have; i++) {
    size_t k = dim ? i % dim : 0;
    buf[16 + i] = k == 0 ? 255 : k == 1 ? 0 : (uint8_t)(i * 7 + 3);
  }
  const char *path = tmp_path(name);
  write_file(path, buf, 16 + have, gz);
  free(buf);
  return path;
}

/* Label i is (i * 3) % 7, so n >= 3 labels reach class 6 at i = 2. */
static const char *write_labels(const char *name, uint32_t magic, uint32_t n,
                                size_t have, int gz) {
  uint8_t *buf = malloc(8 + have);
  CU_ASSERT_FATAL(buf != NULL);
  put_u32(buf, magic);
  put_u32(buf + 4, n);
  for (size_t i = 0; i < have; i++)
    buf[8 + i] = (uint8_t)((i * 3) % 7);
  const char *path = tmp_path(name);
  write_file(path, buf, 8 + have, gz);
  free(buf);
  return path;
}

/* Feature i of an IDX load: kept as the file's byte, worth byte / 255. */
static float pixel(const nn_dataset *ds, size_t i) {
  return ds->x8_value[ds->x8[i]];
}

static void check_contents(const nn_dataset *ds, size_t n, size_t dim) {
  CU_ASSERT_EQUAL_FATAL(ds->n, n);
  CU_ASSERT_EQUAL_FATAL(ds->dim, dim);
  CU_ASSERT_EQUAL(ds->n_classes, 7);
  CU_ASSERT_FATAL(ds->x8 != NULL && ds->x == NULL);
  for (size_t i = 0; i < n * dim; i++) {
    size_t k = i % dim;
    uint8_t v = k == 0 ? 255 : k == 1 ? 0 : (uint8_t)(i * 7 + 3);
    CU_ASSERT_EQUAL(ds->x8[i], v);
    CU_ASSERT_EQUAL(pixel(ds, i), (float)v / 255.0f);
  }
  for (size_t i = 0; i < n; i++)
    CU_ASSERT_EQUAL(ds->y[i], (i * 3) % 7);
  CU_ASSERT_EQUAL(pixel(ds, 0), 1.0f);
  CU_ASSERT_EQUAL(pixel(ds, 1), 0.0f);
}

/* Asserts a failed load: negative status, dataset left zeroed, and a
 * one-line message naming path and containing word. */
static void check_failed(int rc, const nn_dataset *ds, const char *err,
                         const char *path, const char *word) {
  CU_ASSERT(rc < 0);
  CU_ASSERT(ds->n == 0 && ds->x == NULL && ds->x8 == NULL && ds->y == NULL);
  CU_ASSERT(err[0] != '\0');
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
  if (word)
    CU_ASSERT_PTR_NOT_NULL(strstr(err, word));
  CU_ASSERT_PTR_NULL(strchr(err, '\n'));
  if (rc >= 0 || !strstr(err, path) || (word && !strstr(err, word)))
    fprintf(stderr, "\n  unexpected: rc %d, err \"%s\"\n", rc, err);
}

static void test_plain_values_read_back_exactly(void) {
  const char *im = write_images("p-img", 0x803, 5, 3, 4, 5 * 12, 0);
  const char *lb = write_labels("p-lab", 0x801, 5, 5, 0);
  nn_dataset ds;
  char err[256];
  int rc = nn_idx_load(im, lb, &ds, err, sizeof err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  CU_ASSERT_STRING_EQUAL(err, "");
  check_contents(&ds, 5, 12);
  nn_dataset_close(&ds);
  CU_ASSERT(ds.x == NULL && ds.y == NULL && ds.n == 0);
}

/* Bytes become the table's floats through the vector kernel of the path
 * this run takes (ctest runs this program once per path, COHORT_ISA),
 * bit for bit: every byte value, at every alignment and tail length; and
 * the pixel table is byte / 255.0f, exactly, as before it was a product. */
static void test_bytes_convert_as_the_table_says(void) {
  nn_dataset ds;
  memset(&ds, 0, sizeof ds);
  static const float divisors[] = {255.0f, 10.0f, 3.7e3f, 1e30f};
  uint8_t src[600];
  for (size_t i = 0; i < sizeof src; i++)
    src[i] = (uint8_t)(i * 7 + i / 256);
  float out[600];
  int wrong = 0;
  for (size_t s = 0; s < sizeof divisors / sizeof divisors[0]; s++) {
    nn_dataset_set_x8_divisor(&ds, divisors[s]);
    for (size_t off = 0; off < 5; off++)
      for (size_t n = 0; n < 70; n += 3) {
        size_t len = 512 + n;
        memset(out, 0xff, sizeof out);
        nn_dataset_bytes_to_floats(&ds, src + off, len, out);
        for (size_t j = 0; j < len; j++)
          wrong += memcmp(&out[j], &ds.x8_value[src[off + j]], 4) != 0;
        wrong += out[len] == out[len]; /* past the end: untouched (NaN) */
      }
  }
  CU_ASSERT_EQUAL(wrong, 0);
  nn_dataset_set_x8_divisor(&ds, 255.0f);
  int differ = 0;
  for (int b = 0; b < 256; b++)
    differ += ds.x8_value[b] != (float)b / 255.0f;
  CU_ASSERT_EQUAL(differ, 0);
  CU_ASSERT(ds.x8_value[255] == 1.0f);
}

static void test_gzip_and_mixed_read_back_exactly(void) {
  const char *im = write_images("g-img.gz", 0x803, 4, 2, 5, 4 * 10, 1);
  const char *lb = write_labels("g-lab.gz", 0x801, 4, 4, 1);
  const char *lbp = write_labels("g-lab-plain", 0x801, 4, 4, 0);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_idx_load(im, lb, &ds, err, sizeof err), COHORT_OK);
  check_contents(&ds, 4, 10);
  nn_dataset_close(&ds);
  /* Compression is told by the bytes, not the name. */
  CU_ASSERT_EQUAL_FATAL(nn_idx_load(im, lbp, &ds, err, sizeof err), COHORT_OK);
  check_contents(&ds, 4, 10);
  nn_dataset_close(&ds);
}

static void test_trailing_bytes_are_ignored(void) {
  const char *im = write_images("t-img", 0x803, 3, 2, 2, 3 * 4 + 9, 0);
  const char *lb = write_labels("t-lab.gz", 0x801, 3, 3 + 5, 1);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_idx_load(im, lb, &ds, err, sizeof err), COHORT_OK);
  check_contents(&ds, 3, 4);
  nn_dataset_close(&ds);
}

static void test_bad_magic_is_rejected(void) {
  const char *im = write_images("m-img", 0x803, 3, 2, 2, 12, 0);
  const char *lb = write_labels("m-lab", 0x801, 3, 3, 0);
  const char *im_bad = write_images("m-img-bad.gz", 0x801, 3, 2, 2, 12, 1);
  const char *lb_bad = write_labels("m-lab-bad", 0x0803, 3, 3, 0);
  const char *im_f32 = write_images("m-img-f32", 0x0d03, 3, 2, 2, 12, 0);
  nn_dataset ds;
  char err[256];
  check_failed(nn_idx_load(im_bad, lb, &ds, err, sizeof err), &ds, err, im_bad,
               "magic");
  check_failed(nn_idx_load(im, lb_bad, &ds, err, sizeof err), &ds, err, lb_bad,
               "magic");
  check_failed(nn_idx_load(im_f32, lb, &ds, err, sizeof err), &ds, err, im_f32,
               "magic");
  /* Labels given as images and the other way round. */
  check_failed(nn_idx_load(lb, im, &ds, err, sizeof err), &ds, err, lb,
               "magic");
}

static void test_truncated_files_are_rejected(void) {
  const char *lb = write_labels("tr-lab", 0x801, 3, 3, 0);
  const char *im_plain = write_images("tr-img", 0x803, 3, 4, 4, 2 * 16 + 5, 0);
  const char *im_gz = write_images("tr-img.gz", 0x803, 3, 4, 4, 2 * 16 + 5, 1);
  const char *lb_short = write_labels("tr-lab-short.gz", 0x801, 3, 2, 1);
  const char *im_ok = write_images("tr-img-ok", 0x803, 3, 4, 4, 3 * 16, 0);
  const char *hdr = write_images("tr-hdr", 0x803, 3, 4, 4, 0, 0);
  const char *empty = tmp_path("tr-empty");
  write_file(empty, "", 0, 0);
  nn_dataset ds;
  char err[256];

  check_failed(nn_idx_load(im_plain, lb, &ds, err, sizeof err), &ds, err,
               im_plain, "truncated");
  /* The message gives expected and actual sizes: 48 bytes, 37 read. */
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "48"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "37"));
  check_failed(nn_idx_load(im_gz, lb, &ds, err, sizeof err), &ds, err, im_gz,
               "truncated");
  check_failed(nn_idx_load(im_ok, lb_short, &ds, err, sizeof err), &ds, err,
               lb_short, "truncated");
  check_failed(nn_idx_load(hdr, lb, &ds, err, sizeof err), &ds, err, hdr,
               "truncated");
  check_failed(nn_idx_load(empty, lb, &ds, err, sizeof err), &ds, err, empty,
               "short");

  /* A gzip stream cut in the middle: zlib's own end-of-data error. */
  size_t dim = 28 * 28, n = 20;
  uint8_t *raw = malloc(16 + n * dim);
  CU_ASSERT_FATAL(raw != NULL);
  put_u32(raw, 0x803);
  put_u32(raw + 4, (uint32_t)n);
  put_u32(raw + 8, 28);
  put_u32(raw + 12, 28);
  for (size_t i = 0; i < n * dim; i++)
    raw[16 + i] = (uint8_t)((i * 2654435761u) >> 13);
  const char *full = tmp_path("tr-full.gz");
  write_file(full, raw, 16 + n * dim, 1);
  free(raw);
  FILE *f = fopen(full, "rb");
  CU_ASSERT_FATAL(f != NULL);
  uint8_t gzbytes[1 << 15];
  size_t glen = fread(gzbytes, 1, sizeof gzbytes, f);
  fclose(f);
  CU_ASSERT_FATAL(glen > 200 && glen < sizeof gzbytes);
  const char *cut = tmp_path("tr-cut.gz");
  write_file(cut, gzbytes, glen / 2, 0);
  const char *lb20 = write_labels("tr-lab20", 0x801, 20, 20, 0);
  CU_ASSERT_EQUAL_FATAL(nn_idx_load(full, lb20, &ds, err, sizeof err),
                        COHORT_OK);
  nn_dataset_close(&ds);
  check_failed(nn_idx_load(cut, lb20, &ds, err, sizeof err), &ds, err, cut,
               NULL);
}

static void test_label_count_mismatch_is_rejected(void) {
  const char *im = write_images("c-img", 0x803, 3, 2, 2, 12, 0);
  const char *lb = write_labels("c-lab.gz", 0x801, 2, 2, 1);
  nn_dataset ds;
  char err[256];
  check_failed(nn_idx_load(im, lb, &ds, err, sizeof err), &ds, err, lb,
               "label file has 2 labels, image file has 3 images");
}

static void test_absurd_dimensions_are_rejected(void) {
  const char *lb = write_labels("a-lab", 0x801, 3, 3, 0);
  const char *zero_n = write_images("a-zero-n", 0x803, 0, 2, 2, 0, 0);
  const char *zero_r = write_images("a-zero-r", 0x803, 3, 0, 2, 12, 0);
  const char *huge_n =
      write_images("a-huge-n", 0x803, 0xffffffffu, 28, 28, 16, 0);
  const char *huge_d =
      write_images("a-huge-d.gz", 0x803, 3, 65536, 65536, 16, 1);
  /* Each cap holds, the product does not: 10^7 images of 28x28. */
  const char *huge_p = write_images("a-huge-p", 0x803, 10000000, 28, 28, 16, 0);
  nn_dataset ds;
  char err[256];
  check_failed(nn_idx_load(zero_n, lb, &ds, err, sizeof err), &ds, err, zero_n,
               NULL);
  check_failed(nn_idx_load(zero_r, lb, &ds, err, sizeof err), &ds, err, zero_r,
               NULL);
  check_failed(nn_idx_load(huge_n, lb, &ds, err, sizeof err), &ds, err, huge_n,
               "4294967295");
  check_failed(nn_idx_load(huge_d, lb, &ds, err, sizeof err), &ds, err, huge_d,
               "65536");
  check_failed(nn_idx_load(huge_p, lb, &ds, err, sizeof err), &ds, err, huge_p,
               NULL);
}

/* Virtual memory of this process in bytes, 0 when /proc is unavailable. */
static size_t vm_size(void) {
  unsigned long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  if (fscanf(f, "%lu", &pages) != 1)
    pages = 0;
  fclose(f);
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* A header within every cap that promises 2,000,000 images of 28x28 (6 GB
 * as floats) in a file of a few bytes. The load runs in a child whose
 * address space is capped at 512 MB more than it uses, so a reader that
 * trusted the header would fail to allocate (ENOMEM) instead of reporting
 * the truncation. ASan reserves terabytes of shadow and enforces no such
 * limit meaningfully, so sanitizer builds run the load without the cap. */
static void test_lying_header_allocates_only_what_arrives(void) {
  const uint32_t n = 2000000;
  const char *im = write_images("l-img.gz", 0x803, n, 28, 28, 28 * 28 * 2, 1);
  const char *lb = write_labels("l-lab.gz", 0x801, n, n, 1);
  fflush(NULL);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    size_t vm = vm_size();
#ifdef __SANITIZE_ADDRESS__
    vm = 0;
#endif
    if (vm) {
      struct rlimit rl = {vm + ((size_t)512 << 20), vm + ((size_t)512 << 20)};
      if (setrlimit(RLIMIT_AS, &rl) != 0)
        _exit(3);
    }
    nn_dataset ds;
    char err[256];
    int rc = nn_idx_load(im, lb, &ds, err, sizeof err);
    int ok = rc == COHORT_EFORMAT && strstr(err, "truncated") &&
             strstr(err, im) && strstr(err, "2 whole images");
    if (!ok)
      fprintf(stderr, "\n  child: rc %d, err \"%s\"\n", rc, err);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_missing_file_is_reported(void) {
  const char *im = write_images("x-img", 0x803, 3, 2, 2, 12, 0);
  const char *lb = write_labels("x-lab", 0x801, 3, 3, 0);
  const char *gone = tmp_path("x-does-not-exist");
  nn_dataset ds;
  char err[256];
  check_failed(nn_idx_load(gone, lb, &ds, err, sizeof err), &ds, err, gone,
               NULL);
  CU_ASSERT_EQUAL(nn_idx_load(gone, lb, &ds, err, sizeof err), COHORT_EIO);
  check_failed(nn_idx_load(im, gone, &ds, err, sizeof err), &ds, err, gone,
               NULL);
  /* A tiny err buffer is filled, truncated and terminated; none is fine. */
  char small[8];
  CU_ASSERT(nn_idx_load(im, gone, &ds, small, sizeof small) < 0);
  CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
  CU_ASSERT(nn_idx_load(im, gone, &ds, NULL, 0) < 0);
}

static void test_load_dir_finds_gz_then_plain(void) {
  const char *sub = tmp_path("dir");
  CU_ASSERT_FATAL(mkdir(sub, 0700) == 0);
  write_images("dir/train-images-idx3-ubyte.gz", 0x803, 6, 2, 3, 36, 1);
  write_labels("dir/train-labels-idx1-ubyte.gz", 0x801, 6, 6, 1);
  nn_dataset ds;
  char err[512];
  CU_ASSERT_EQUAL_FATAL(nn_idx_load_dir(sub, 1, &ds, err, sizeof err),
                        COHORT_OK);
  check_contents(&ds, 6, 6);
  nn_dataset_close(&ds);

  /* No test pair yet: the message names the folder and the files. */
  check_failed(nn_idx_load_dir(sub, 0, &ds, err, sizeof err), &ds, err, sub,
               "t10k-images-idx3-ubyte");

  write_images("dir/t10k-images-idx3-ubyte", 0x803, 3, 2, 2, 12, 0);
  write_labels("dir/t10k-labels-idx1-ubyte", 0x801, 3, 3, 0);
  CU_ASSERT_EQUAL_FATAL(nn_idx_load_dir(sub, 0, &ds, err, sizeof err),
                        COHORT_OK);
  check_contents(&ds, 3, 4);
  nn_dataset_close(&ds);

  char slash[512];
  snprintf(slash, sizeof slash, "%s/", sub);
  CU_ASSERT_EQUAL(nn_idx_load_dir(slash, 0, &ds, err, sizeof err), COHORT_OK);
  nn_dataset_close(&ds);
}

/* Ten examples of dim 2, x = (i, -i), label i % 4. */
static void make_ten(nn_dataset *ds) {
  memset(ds, 0, sizeof *ds); /* x8, fetch and the rest: none */
  ds->n = 10;
  ds->dim = 2;
  ds->n_classes = 4;
  ds->x = malloc(20 * sizeof(float));
  ds->y = malloc(10);
  CU_ASSERT_FATAL(ds->x && ds->y);
  for (int i = 0; i < 10; i++) {
    ds->x[2 * i] = (float)i;
    ds->x[2 * i + 1] = (float)-i;
    ds->y[i] = (uint8_t)(i % 4);
  }
}

static void test_shard_sizes_and_concatenation(void) {
  nn_dataset src, s[3];
  make_ten(&src);
  size_t at = 0;
  const size_t want[3] = {4, 3, 3};
  for (int k = 0; k < 3; k++) {
    CU_ASSERT_EQUAL_FATAL(nn_dataset_shard(&src, k, 3, &s[k]), COHORT_OK);
    CU_ASSERT_EQUAL(s[k].n, want[k]);
    CU_ASSERT_EQUAL(s[k].dim, 2);
    CU_ASSERT_EQUAL(s[k].n_classes, 4);
    CU_ASSERT(s[k].x != src.x); /* a copy, not a view */
    CU_ASSERT_EQUAL(memcmp(s[k].x, src.x + at * 2, s[k].n * 2 * sizeof(float)),
                    0);
    CU_ASSERT_EQUAL(memcmp(s[k].y, src.y + at, s[k].n), 0);
    at += s[k].n;
  }
  CU_ASSERT_EQUAL(at, src.n);
  for (int k = 0; k < 3; k++)
    nn_dataset_close(&s[k]);

  nn_dataset one;
  CU_ASSERT_EQUAL(nn_dataset_shard(&src, 0, 1, &one), COHORT_OK);
  CU_ASSERT_EQUAL(one.n, 10);
  nn_dataset_close(&one);
  /* More slices than examples: the tail slices are valid and empty. */
  CU_ASSERT_EQUAL(nn_dataset_shard(&src, 11, 12, &one), COHORT_OK);
  CU_ASSERT(one.n == 0 && one.x == NULL && one.y == NULL && one.dim == 2);
  nn_dataset_close(&one);
  CU_ASSERT_EQUAL(nn_dataset_shard(&src, 3, 3, &one), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_dataset_shard(&src, -1, 3, &one), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_dataset_shard(&src, 0, 0, &one), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_dataset_shard(NULL, 0, 1, &one), COHORT_EINVAL);
  nn_dataset_close(&src);
}

static void test_truncate_and_close(void) {
  nn_dataset ds;
  make_ten(&ds);
  nn_dataset_truncate(&ds, 100);
  CU_ASSERT_EQUAL(ds.n, 10);
  nn_dataset_truncate(&ds, 4);
  CU_ASSERT_EQUAL_FATAL(ds.n, 4);
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_EQUAL(ds.x[2 * i], (float)i);
    CU_ASSERT_EQUAL(ds.x[2 * i + 1], (float)-i);
    CU_ASSERT_EQUAL(ds.y[i], i % 4);
  }
  nn_dataset_truncate(&ds, 0);
  CU_ASSERT(ds.n == 0 && ds.x == NULL && ds.y == NULL);
  nn_dataset_close(&ds);
  nn_dataset_close(&ds);
  nn_dataset_close(NULL);
  nn_dataset zero = {0};
  nn_dataset_close(&zero);
}

/* The real data set is an optional package. */
static const char *no_fashion_mnist(void) {
  return access(FASHION_DIR, F_OK) == 0 ? NULL
                                        : FASHION_DIR
             " not installed (Debian package "
             "dataset-fashion-mnist)";
}

static void test_fashion_mnist_test_set(void) {
  nn_dataset ds;
  char err[512];
  int rc = nn_idx_load_dir(FASHION_DIR, 0, &ds, err, sizeof err);
  if (rc)
    fprintf(stderr, "\n  %s\n", err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(ds.n, 10000);
  CU_ASSERT_EQUAL(ds.dim, 784);
  CU_ASSERT_EQUAL(ds.n_classes, 10);
  float lo = 1.0f, hi = 0.0f;
  for (size_t i = 0; i < ds.n * ds.dim; i++) {
    lo = pixel(&ds, i) < lo ? pixel(&ds, i) : lo;
    hi = pixel(&ds, i) > hi ? pixel(&ds, i) : hi;
  }
  CU_ASSERT(lo == 0.0f && hi == 1.0f);
  nn_dataset_close(&ds);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"plain values read back exactly", test_plain_values_read_back_exactly},
      {"bytes convert as the table says", test_bytes_convert_as_the_table_says},
      {"gzip and mixed read back exactly",
       test_gzip_and_mixed_read_back_exactly},
      {"trailing bytes are ignored", test_trailing_bytes_are_ignored},
      {"bad magic is rejected", test_bad_magic_is_rejected},
      {"truncated files are rejected", test_truncated_files_are_rejected},
      {"label count mismatch is rejected",
       test_label_count_mismatch_is_rejected},
      {"absurd dimensions are rejected", test_absurd_dimensions_are_rejected},
      {"lying header allocates only what arrives",
       test_lying_header_allocates_only_what_arrives},
      {"missing file is reported", test_missing_file_is_reported},
      {"load_dir finds gz then plain", test_load_dir_finds_gz_then_plain},
      {"shard sizes and concatenation", test_shard_sizes_and_concatenation},
      {"truncate and close", test_truncate_and_close},
      {"fashion-mnist test set loads", test_fashion_mnist_test_set,
       no_fashion_mnist},
  };
  return test_add_suite("nn_idx", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
