/* Tests of the CSV reader: small files, plain and gzip'd, written into a
 * fresh temporary directory and read back exactly; every malformed file is
 * rejected with a message naming the file, the line and the problem. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_dataset.h"

static char tmpdir[128];

static int suite_init(void) {
  return test_tmpdir_make(tmpdir, sizeof tmpdir, "csv");
}

static int suite_clean(void) {
  test_tmpdir_remove(tmpdir);
  return 0;
}

/* Returns "<tmpdir>/<name>" in one of a few rotating static buffers. */
static const char *tmp_path(const char *name) {
  static char bufs[4][256];
  static int next;
  char *p = bufs[next++ % 4];
  snprintf(p, sizeof bufs[0], "%s/%s", tmpdir, name);
  return p;
}

static const char *write_bytes(const char *name, const void *buf, size_t len,
                               int gz) {
  const char *path = tmp_path(name);
  if (gz) {
    gzFile f = gzopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(len == 0 || gzwrite(f, buf, (unsigned)len) == (int)len);
    CU_ASSERT_FATAL(gzclose(f) == Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(len == 0 || fwrite(buf, 1, len, f) == len);
    CU_ASSERT_FATAL(fclose(f) == 0);
  }
  return path;
}

static const char *write_text(const char *name, const char *text, int gz) {
  return write_bytes(name, text, strlen(text), gz);
}

/* Asserts a failed load: the status, the dataset left zeroed, and a
 * one-line message naming the path and containing each of the words. */
static void check_failed(int rc, int want, const nn_dataset *ds,
                         const char *err, const char *path, const char *word1,
                         const char *word2) {
  int ok = rc == want && ds->n == 0 && ds->x == NULL && ds->y == NULL &&
           strstr(err, path) && (!word1 || strstr(err, word1)) &&
           (!word2 || strstr(err, word2)) && !strchr(err, '\n');
  CU_ASSERT(ok);
  if (!ok)
    fprintf(stderr, "\n  unexpected: rc %d (want %d), err \"%s\"\n", rc, want,
            err);
}

/* Loads a text written to name and expects failure with both words. */
static void expect_bad(const char *name, const char *text, int want,
                       const char *word1, const char *word2) {
  const char *path = write_text(name, text, 0);
  nn_dataset ds;
  char err[512];
  int rc = nn_csv_load(path, NULL, &ds, err, sizeof err);
  check_failed(rc, want, &ds, err, path, word1, word2);
  nn_dataset_close(&ds);
}

/* The three rows used by the good-file tests: labels 1, 0, 2 and features
 * 0..11 in row-major order. */
static void check_three(const nn_dataset *ds) {
  CU_ASSERT_EQUAL_FATAL(ds->n, 3);
  CU_ASSERT_EQUAL_FATAL(ds->dim, 4);
  CU_ASSERT_EQUAL(ds->n_classes, 3);
  CU_ASSERT_EQUAL(ds->y[0], 1);
  CU_ASSERT_EQUAL(ds->y[1], 0);
  CU_ASSERT_EQUAL(ds->y[2], 2);
  for (int i = 0; i < 12; i++)
    CU_ASSERT_EQUAL(ds->x[i], (float)i);
  /* Four features are a perfect square: 1 x 2 x 2. */
  CU_ASSERT(ds->channels == 1 && ds->height == 2 && ds->width == 2);
}

static void test_header_is_detected_and_skipped(void) {
  const char *path = write_text(
      "h.csv", "label,a,b,c,d\n1,0,1,2,3\n0,4,5,6,7\n2,8,9,10,11\n", 0);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  /* Forced "no header": the names are then a bad first row. */
  nn_csv_options opt;
  nn_csv_options_init(&opt);
  opt.header = NN_CSV_HEADER_NO;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EFORMAT,
               &ds, err, path, ":1:", "field 1 (\"label\") is not a number");
}

static void test_no_header_reads_every_row(void) {
  const char *path =
      write_text("nh.csv", "1,0,1,2,3\n0,4,5,6,7\n2,8,9,10,11\n", 0);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  /* Forced header: the first (numeric) row is skipped. */
  nn_csv_options opt;
  nn_csv_options_init(&opt);
  opt.header = NN_CSV_HEADER_YES;
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(ds.n, 2);
  CU_ASSERT_EQUAL(ds.y[0], 0);
  CU_ASSERT_EQUAL(ds.x[0], 4.0f);
  nn_dataset_close(&ds);
}

static void test_label_column_last_and_middle(void) {
  const char *path = write_text(
      "last.csv", "a,b,c,d,y\n0,1,2,3,1\n4,5,6,7,0\n8,9,10,11,2\n", 0);
  nn_csv_options opt;
  nn_csv_options_init(&opt);
  opt.label_column = -1;
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  path = write_text("mid.csv", "0,1,1,2,3\n4,5,0,6,7\n8,9,2,10,11\n", 0);
  opt.label_column = 2;
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);
  opt.label_column = -3;
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  /* A label column the rows do not have. */
  opt.label_column = 5;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EINVAL,
               &ds, err, path, "label column 5", "5 fields");
  opt.label_column = -6;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EINVAL,
               &ds, err, path, "label column -6", NULL);
}

static void test_scale_and_shape(void) {
  const char *path = write_text(
      "px.csv",
      "label,p1,p2,p3,p4,p5,p6\n3,0,255,51,102,0,0\n7,255,255,0,0,0,1\n", 0);
  nn_csv_options opt;
  nn_csv_options_init(&opt);
  opt.scale = 1.0 / 255;
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(ds.n, 2);
  CU_ASSERT_EQUAL(ds.dim, 6);
  CU_ASSERT_EQUAL(ds.n_classes, 8);
  CU_ASSERT_EQUAL(ds.x[0], 0.0f);
  CU_ASSERT_EQUAL(ds.x[1], 1.0f);
  CU_ASSERT_DOUBLE_EQUAL(ds.x[2], 0.2, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(ds.x[3], 0.4, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(ds.x[11], 1.0 / 255, 1e-9);
  /* Six is not a square: a flat vector. */
  CU_ASSERT(ds.channels == 6 && ds.height == 1 && ds.width == 1);
  nn_dataset_close(&ds);

  opt.channels = 2;
  opt.height = 1;
  opt.width = 3;
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(ds.channels == 2 && ds.height == 1 && ds.width == 3);
  nn_dataset_close(&ds);

  opt.channels = 1;
  opt.height = 2;
  opt.width = 2;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EINVAL,
               &ds, err, path, "1x2x2 has 4 values", "6 features");
  opt.width = 0;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EINVAL,
               &ds, err, path, "shape", NULL);
  opt.width = 3;
  opt.channels = 1;
  opt.height = 2;
  opt.scale = NAN;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EINVAL,
               &ds, err, path, "scale", NULL);
  nn_csv_options_init(&opt);
  opt.header = 7;
  check_failed(nn_csv_load(path, &opt, &ds, err, sizeof err), COHORT_EINVAL,
               &ds, err, path, "header option 7", NULL);
}

/* A Kaggle-style image CSV: "label,pixel1,...,pixel784" becomes 1 x 28 x 28
 * and the pixels 0..1 with the 1/255 scale. */
static void test_image_csv_is_28_by_28(void) {
  size_t cap = 64 * 1024, len = 0;
  char *buf = malloc(cap);
  CU_ASSERT_FATAL(buf != NULL);
  len += (size_t)snprintf(buf + len, cap - len, "label");
  for (int i = 1; i <= 784; i++)
    len += (size_t)snprintf(buf + len, cap - len, ",pixel%d", i);
  for (int r = 0; r < 5; r++) {
    len += (size_t)snprintf(buf + len, cap - len, "\n%d", 9 - r);
    for (int i = 0; i < 784; i++)
      len += (size_t)snprintf(buf + len, cap - len, ",%d", (i * 7 + r) % 256);
  }
  CU_ASSERT_FATAL(len < cap - 1);
  const char *path = write_bytes("fm.csv.gz", buf, len, 1);
  free(buf);
  nn_csv_options opt;
  nn_csv_options_init(&opt);
  opt.scale = 1.0 / 255;
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, &opt, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(ds.n, 5);
  CU_ASSERT_EQUAL(ds.dim, 784);
  CU_ASSERT_EQUAL(ds.n_classes, 10);
  CU_ASSERT(ds.channels == 1 && ds.height == 28 && ds.width == 28);
  CU_ASSERT_EQUAL(ds.y[4], 5);
  CU_ASSERT_DOUBLE_EQUAL(ds.x[4 * 784 + 100], ((100 * 7 + 4) % 256) / 255.0,
                         1e-7);
  nn_dataset_close(&ds);
}

static void test_gzip_file_reads_like_plain(void) {
  const char *text = "label,a,b,c,d\r\n1,0,1,2,3\r\n0,4,5,6,7\r\n2,8,9,10,11";
  const char *path = write_text("g.csv.gz", text, 1);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  /* A gzip stream cut short is an error, not a silently shorter file. */
  const char *full = write_text("t.csv.gz", "1,2\n3,4\n5,6\n", 1);
  FILE *f = fopen(full, "rb");
  CU_ASSERT_FATAL(f != NULL);
  unsigned char raw[256];
  size_t got = fread(raw, 1, sizeof raw, f);
  fclose(f);
  CU_ASSERT_FATAL(got > 20);
  path = write_bytes("t2.csv.gz", raw, got - 12, 0);
  check_failed(nn_csv_load(path, NULL, &ds, err, sizeof err), COHORT_EFORMAT,
               &ds, err, path, "gzip", NULL);
}

/* CRLF endings, blanks and quotes around fields, a byte-order mark, a last
 * line without LF and blank lines at the end are all accepted. */
static void test_crlf_blanks_and_trailing_lines(void) {
  const char *path = write_text("crlf.csv",
                                "\xEF\xBB\xBF\"label\", a ,b,c,d\r\n"
                                " 1 ,0,\"1\",2,3\r\n"
                                "0,\t4,5,6,7 \r\n"
                                "2,8,9,10,11\r\n"
                                "\r\n"
                                "\n",
                                0);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  path = write_text("nolf.csv", "1,0,1,2,3\n0,4,5,6,7\n2,8,9,10,11", 0);
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  check_three(&ds);
  nn_dataset_close(&ds);

  /* Numbers in any strtod form: exponents, signs, decimals. */
  path = write_text("num.csv", "1,-1.5e2,+0.25,1E-3,.5\n", 0);
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(ds.x[0], -150.0f);
  CU_ASSERT_EQUAL(ds.x[1], 0.25f);
  CU_ASSERT_EQUAL(ds.x[2], 0.001f);
  CU_ASSERT_EQUAL(ds.x[3], 0.5f);
  nn_dataset_close(&ds);
}

static void test_ragged_row_is_rejected(void) {
  expect_bad("rag.csv", "label,a,b,c\n1,0,1,2\n0,4,5\n2,8,9,10\n",
             COHORT_EFORMAT, ":3: 3 fields, expected 4", NULL);
  expect_bad("rag2.csv", "1,0,1,2\n0,4,5,6\n2,8,9,10,11,12\n", COHORT_EFORMAT,
             ":3: 6 fields, expected 4", NULL);
  expect_bad("rag3.csv", "label,a,b\n1,0,1,2\n", COHORT_EFORMAT,
             ":2: 4 fields, expected 3", "header");
  expect_bad("one.csv", "1\n2\n", COHORT_EFORMAT, ":1:", "at least one");
}

static void test_bad_fields_are_rejected(void) {
  expect_bad("nn.csv", "1,2,3\n1,abc,3\n", COHORT_EFORMAT,
             ":2: field 2 (\"abc\") is not a number", NULL);
  expect_bad("empty-field.csv", "1,2,3\n1,,3\n", COHORT_EFORMAT, ":2: field 2",
             "not a number");
  expect_bad("half.csv", "1,2,3\n1,2x,3\n", COHORT_EFORMAT, ":2: field 2",
             "not a number");
  expect_bad("nan.csv", "1,2,3\n0,4,5\n1,nan,3\n", COHORT_EFORMAT,
             ":3: field 2 (\"nan\") is not a finite number", NULL);
  expect_bad("inf.csv", "1,2,3\n1,2,-inf\n", COHORT_EFORMAT,
             ":2: field 3 (\"-inf\") is not a finite", NULL);
  expect_bad("huge.csv", "1,2,3\n1,2,1e999\n", COHORT_EFORMAT, ":2: field 3",
             "not a finite");
  expect_bad("fl.csv", "1,2,3\n1,2,1e300\n", COHORT_EFORMAT, ":2: field 3",
             "overflows a float");
  expect_bad("blank.csv", "1,2,3\n\n1,2,3\n", COHORT_EFORMAT, ":2: empty line",
             NULL);
  nn_dataset ds;
  char err[512];
  const char *path = write_bytes("nul.csv", "1,2,3\n1,2\0003\n", 12, 0);
  check_failed(nn_csv_load(path, NULL, &ds, err, sizeof err), COHORT_EFORMAT,
               &ds, err, path, ":2:", "NUL byte");
  /* The quoted field is cut short in the message. */
  char long_field[300] = "1,2,3\n1,";
  memset(long_field + 8, 'z', 200);
  strcpy(long_field + 208, ",3\n");
  path = write_text("lf.csv", long_field, 0);
  check_failed(nn_csv_load(path, NULL, &ds, err, sizeof err), COHORT_EFORMAT,
               &ds, err, path, "...\") is not a number", NULL);
  CU_ASSERT(strlen(err) < 150 + strlen(path));
}

static void test_bad_labels_are_rejected(void) {
  expect_bad("l256.csv", "1,2,3\n0,2,3\n256,2,3\n", COHORT_EFORMAT,
             ":3: label \"256\"", "0..255");
  expect_bad("lneg.csv", "1,2,3\n-1,2,3\n", COHORT_EFORMAT, ":2: label \"-1\"",
             "0..255");
  expect_bad("lfrac.csv", "1,2,3\n1.5,2,3\n", COHORT_EFORMAT,
             ":2: label \"1.5\"", "not an integer");
  expect_bad("lnan.csv", "1,2,3\nnan,2,3\n", COHORT_EFORMAT, ":2: field 1",
             "not a finite");
  /* 255 and "2.0" are fine labels. */
  const char *path = write_text("l255.csv", "255,1\n2.0,1\n", 0);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(ds.n_classes, 256);
  CU_ASSERT(ds.y[0] == 255 && ds.y[1] == 2);
  nn_dataset_close(&ds);
}

static void test_empty_and_missing_files_are_rejected(void) {
  expect_bad("empty.csv", "", COHORT_EFORMAT, "empty file", NULL);
  expect_bad("blanks.csv", "\n\r\n  \n", COHORT_EFORMAT, "empty file", NULL);
  expect_bad("hdr.csv", "label,a,b\n", COHORT_EFORMAT,
             "a header but no data rows", NULL);
  expect_bad("hdr2.csv", "label,a,b\r\n\r\n", COHORT_EFORMAT,
             "a header but no data rows", NULL);
  const char *gone = tmp_path("does-not-exist.csv");
  nn_dataset ds;
  char err[256];
  check_failed(nn_csv_load(gone, NULL, &ds, err, sizeof err), COHORT_EIO, &ds,
               err, gone, "cannot open", NULL);
  /* A tiny err buffer is filled, truncated and terminated; none is fine. */
  char small[8];
  CU_ASSERT(nn_csv_load(gone, NULL, &ds, small, sizeof small) < 0);
  CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
  CU_ASSERT(nn_csv_load(gone, NULL, &ds, NULL, 0) < 0);
  CU_ASSERT_EQUAL(nn_csv_load(NULL, NULL, &ds, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_csv_load(gone, NULL, NULL, err, sizeof err),
                  COHORT_EINVAL);
}

/* 5,000 columns (a ~25 KiB line, past every fixed buffer) and enough rows
 * to cross many read chunks and buffer doublings. */
static void test_long_rows_and_many_rows(void) {
  const int cols = 5000, rows = 300;
  size_t cap = (size_t)rows * cols * 8 + 1024, len = 0;
  char *buf = malloc(cap);
  CU_ASSERT_FATAL(buf != NULL);
  for (int r = 0; r < rows; r++) {
    len += (size_t)snprintf(buf + len, cap - len, "%d", r % 7);
    for (int c = 1; c < cols; c++)
      len += (size_t)snprintf(buf + len, cap - len, ",%d", (r + c) % 1000);
    buf[len++] = '\n';
  }
  const char *path = write_bytes("long.csv", buf, len, 0);
  free(buf);
  nn_dataset ds;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_csv_load(path, NULL, &ds, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(ds.n, (size_t)rows);
  CU_ASSERT_EQUAL_FATAL(ds.dim, (size_t)cols - 1);
  CU_ASSERT_EQUAL(ds.n_classes, 7);
  int bad = 0;
  for (int r = 0; r < rows; r++) {
    bad += ds.y[r] != r % 7;
    for (int c = 1; c < cols; c++)
      bad += ds.x[(size_t)r * (cols - 1) + c - 1] != (float)((r + c) % 1000);
  }
  CU_ASSERT_EQUAL(bad, 0);
  nn_dataset_close(&ds);
}

/* A line over the 16 MiB cap is refused with a clear message, not read
 * into an ever-growing buffer. */
static void test_overlong_line_is_rejected(void) {
  size_t len = ((size_t)16 << 20) + 4096;
  char *buf = malloc(len);
  CU_ASSERT_FATAL(buf != NULL);
  for (size_t i = 0; i < len; i += 2) {
    buf[i] = '0';
    buf[i + 1] = ',';
  }
  buf[len - 1] = '\n';
  const char *line1 = "1,2\n";
  const char *path = tmp_path("huge-line.csv");
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  fwrite(line1, 1, strlen(line1), f);
  CU_ASSERT_FATAL(fwrite(buf, 1, len, f) == len);
  CU_ASSERT_FATAL(fclose(f) == 0);
  free(buf);
  nn_dataset ds;
  char err[256];
  check_failed(nn_csv_load(path, NULL, &ds, err, sizeof err), COHORT_EFORMAT,
               &ds, err, path, ":2: line longer than 16 MiB", NULL);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"header is detected and skipped", test_header_is_detected_and_skipped},
      {"no header reads every row", test_no_header_reads_every_row},
      {"label column last and middle", test_label_column_last_and_middle},
      {"scale and shape", test_scale_and_shape},
      {"image csv is 28 by 28", test_image_csv_is_28_by_28},
      {"gzip file reads like plain", test_gzip_file_reads_like_plain},
      {"crlf, blanks and trailing lines", test_crlf_blanks_and_trailing_lines},
      {"ragged row is rejected", test_ragged_row_is_rejected},
      {"bad fields are rejected", test_bad_fields_are_rejected},
      {"bad labels are rejected", test_bad_labels_are_rejected},
      {"empty and missing files are rejected",
       test_empty_and_missing_files_are_rejected},
      {"long rows and many rows", test_long_rows_and_many_rows},
      {"overlong line is rejected", test_overlong_line_is_rejected},
  };
  return test_add_suite("nn_csv", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
