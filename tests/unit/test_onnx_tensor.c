/* Single ONNX TensorProto files (.pb): every dtype written and read back,
 * the typed-field encodings, and the refusals of bad files (truncation,
 * raw_data length, dims, unsupported types, bool values, external data
 * leaving the folder, the byte cap), each naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <unistd.h>

#include "ccgraph/onnx.h"
#include "test_util.h"

/* ---- a tiny protobuf writer for hand-made tensors ----------------------- */

typedef struct pb {
  uint8_t b[1024];
  size_t n;
} pb;

static void pb_varint(pb *p, uint64_t v) {
  do {
    assert_true(p->n < sizeof p->b);
    uint8_t c = v & 0x7f;
    v >>= 7;
    p->b[p->n++] = (uint8_t)(c | (v ? 0x80 : 0));
  } while (v);
}
static void pb_key(pb *p, unsigned field, unsigned wt) {
  pb_varint(p, (uint64_t)field << 3 | wt);
}
static void pb_int(pb *p, unsigned field, int64_t v) {
  pb_key(p, field, 0);
  pb_varint(p, (uint64_t)v);
}
static void pb_bytes(pb *p, unsigned field, const void *d, size_t n) {
  pb_key(p, field, 2);
  pb_varint(p, n);
  assert_true(p->n + n <= sizeof p->b);
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
/* A length-delimited field holding entry key/value strings (external_data). */
static void pb_entry(pb *p, unsigned field, const char *k, const char *v) {
  pb e = {{0}, 0};
  pb_bytes(&e, 1, k, strlen(k));
  pb_bytes(&e, 2, v, strlen(v));
  pb_bytes(p, field, e.b, e.n);
}

static char dir[64];

static int setup(void **state) {
  (void)state;
  strcpy(dir, "/tmp/ccg_tensor_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  const char *names[] = {"t.pb", "bad.pb", "w.pb"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
  return rmdir(dir);
}

static const char *path_of(const char *name) {
  static char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

static void write_bytes(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(d, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* ---- good files --------------------------------------------------------- */

static void test_round_trip_every_dtype(void **state) {
  (void)state;
  uint8_t data[6 * 8];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 37 + 11);
  for (int dt = 1; dt < CCG_DTYPE_COUNT; dt++) {
    if (dt == CCG_DTYPE_BOOL)
      for (size_t i = 0; i < sizeof data; i++)
        data[i] &= 1;
    ccg_tensor t = {(ccg_dtype)dt, 2, {2, 3}, data};
    const char *p = path_of("t.pb");
    assert_ok(NULL, ccg_onnx_tensor_write_file(p, &t, "input_x"));
    ccg_tensor r;
    char *name = NULL;
    assert_ok(NULL, ccg_onnx_tensor_read_file(p, NULL, &r, &name));
    assert_int_equal(r.dtype, dt);
    assert_int_equal(r.rank, 2);
    assert_int_equal(r.dims[0], 2);
    assert_int_equal(r.dims[1], 3);
    assert_int_equal((uintptr_t)r.data % 64, 0);
    assert_memory_equal(r.data, data, 6 * ccg_dtype_size((ccg_dtype)dt));
    assert_string_equal(name, "input_x");
    free(name);
    ccg_onnx_tensor_free(&r);
    assert_null(r.data);
  }
}

static void test_scalar_and_empty(void **state) {
  (void)state;
  const char *p = path_of("t.pb");
  int64_t v = -42;
  ccg_tensor s = {CCG_DTYPE_I64, 0, {0}, &v};
  assert_ok(NULL, ccg_onnx_tensor_write_file(p, &s, NULL));
  ccg_tensor r;
  char *name = NULL;
  assert_ok(NULL, ccg_onnx_tensor_read_file(p, NULL, &r, &name));
  assert_int_equal(r.rank, 0);
  assert_int_equal(*(const int64_t *)r.data, -42);
  assert_string_equal(name, "");
  free(name);
  ccg_onnx_tensor_free(&r);
  ccg_tensor e = {CCG_DTYPE_F32, 2, {0, 3}, NULL};
  assert_ok(NULL, ccg_onnx_tensor_write_file(p, &e, "e"));
  assert_ok(NULL, ccg_onnx_tensor_read_file(p, NULL, &r, NULL));
  assert_int_equal(r.rank, 2);
  assert_int_equal(r.dims[0], 0);
  assert_int_equal(r.dims[1], 3);
  ccg_onnx_tensor_free(&r);
}

/* float_data, int64_data, double_data and int32_data (bool) encodings. */
static void test_typed_fields(void **state) {
  (void)state;
  const char *p = path_of("t.pb");
  ccg_tensor r;
  pb f = {{0}, 0};
  pb_int(&f, 1, 2); /* dims */
  pb_int(&f, 2, 1); /* FLOAT */
  float fv[2] = {1.5f, -3.25f};
  pb_bytes(&f, 4, fv, sizeof fv); /* packed float_data (little-endian) */
  write_bytes(p, f.b, f.n);
  assert_ok(NULL, ccg_onnx_tensor_read_file(p, NULL, &r, NULL));
  assert_int_equal(r.dtype, CCG_DTYPE_F32);
  assert_memory_equal(r.data, fv, sizeof fv);
  ccg_onnx_tensor_free(&r);

  pb i = {{0}, 0};
  pb_int(&i, 1, 3);
  pb_int(&i, 2, 7); /* INT64 */
  pb_int(&i, 7, 5);
  pb_int(&i, 7, -1);
  pb_int(&i, 7, 1LL << 40);
  write_bytes(p, i.b, i.n);
  assert_ok(NULL, ccg_onnx_tensor_read_file(p, NULL, &r, NULL));
  const int64_t want[3] = {5, -1, 1LL << 40};
  assert_memory_equal(r.data, want, sizeof want);
  ccg_onnx_tensor_free(&r);

  pb b = {{0}, 0};
  pb_int(&b, 1, 2);
  pb_int(&b, 2, 9); /* BOOL in int32_data */
  pb_int(&b, 5, 1);
  pb_int(&b, 5, 0);
  write_bytes(p, b.b, b.n);
  assert_ok(NULL, ccg_onnx_tensor_read_file(p, NULL, &r, NULL));
  assert_int_equal(r.dtype, CCG_DTYPE_BOOL);
  assert_int_equal(((const uint8_t *)r.data)[0], 1);
  assert_int_equal(((const uint8_t *)r.data)[1], 0);
  ccg_onnx_tensor_free(&r);
}

/* ---- bad files ---------------------------------------------------------- */

static void expect_bad(const void *bytes, size_t n, ccg_status want,
                       const char *frag) {
  const char *p = path_of("bad.pb");
  write_bytes(p, bytes, n);
  ccg_tensor r;
  char *name = (char *)"unchanged";
  assert_fails(NULL, want, ccg_onnx_tensor_read_file(p, NULL, &r, &name), p,
               frag);
  assert_null(r.data);
  assert_null(name);
}

static void test_bad_files(void **state) {
  (void)state;
  float four[4] = {1, 2, 3, 4};
  pb m = {{0}, 0}; /* raw_data of 12 bytes for 2x3 floats */
  pb_int(&m, 1, 2);
  pb_int(&m, 1, 3);
  pb_int(&m, 2, 1);
  pb_bytes(&m, 9, four, 12);
  expect_bad(m.b, m.n, CCG_STATUS_PARSE, "raw_data");

  pb neg = {{0}, 0};
  pb_int(&neg, 1, -1);
  pb_int(&neg, 2, 1);
  expect_bad(neg.b, neg.n, CCG_STATUS_PARSE, "dim 0 = -1");

  pb big = {{0}, 0};
  pb_int(&big, 1, 1LL << 40);
  pb_int(&big, 1, 1LL << 40);
  pb_int(&big, 2, 1);
  expect_bad(big.b, big.n, CCG_STATUS_PARSE, "overflows");

  pb deep = {{0}, 0};
  for (int d = 0; d < CCG_MAX_RANK + 1; d++)
    pb_int(&deep, 1, 1);
  pb_int(&deep, 2, 1);
  expect_bad(deep.b, deep.n, CCG_STATUS_UNSUPPORTED, "rank 9");

  pb u16 = {{0}, 0};
  pb_int(&u16, 1, 2);
  pb_int(&u16, 2, 4); /* UINT16 */
  pb_bytes(&u16, 9, four, 4);
  expect_bad(u16.b, u16.n, CCG_STATUS_UNSUPPORTED, "UINT16");

  pb str = {{0}, 0};
  pb_int(&str, 1, 1);
  pb_int(&str, 2, 8); /* STRING */
  pb_bytes(&str, 6, "ab", 2);
  expect_bad(str.b, str.n, CCG_STATUS_UNSUPPORTED, "STRING");

  pb none = {{0}, 0}; /* no data_type */
  pb_int(&none, 1, 1);
  expect_bad(none.b, none.n, CCG_STATUS_UNSUPPORTED, "UNDEFINED");

  pb bl = {{0}, 0};
  pb_int(&bl, 1, 2);
  pb_int(&bl, 2, 9);
  pb_bytes(&bl, 9, "\x01\x02", 2);
  expect_bad(bl.b, bl.n, CCG_STATUS_PARSE, "BOOL element 1 holds 2");

  pb ty = {{0}, 0}; /* 3 floats declared, 2 given */
  pb_int(&ty, 1, 3);
  pb_int(&ty, 2, 1);
  pb_bytes(&ty, 4, four, 8);
  expect_bad(ty.b, ty.n, CCG_STATUS_PARSE, "typed data elements");

  pb ext = {{0}, 0};
  pb_int(&ext, 1, 1);
  pb_int(&ext, 2, 1);
  pb_entry(&ext, 13, "location", "../outside.bin");
  pb_int(&ext, 14, 1); /* EXTERNAL */
  expect_bad(ext.b, ext.n, CCG_STATUS_PARSE, "leaves the model's folder");

  pb miss = {{0}, 0};
  pb_int(&miss, 1, 1);
  pb_int(&miss, 2, 1);
  pb_entry(&miss, 13, "location", "absent.bin");
  pb_int(&miss, 14, 1);
  expect_bad(miss.b, miss.n, CCG_STATUS_IO, "absent.bin");

  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
  expect_bad(junk, sizeof junk, CCG_STATUS_PARSE,
             "not an ONNX tensor: the first bytes");
  const uint8_t cut[] = {0x08, 0x02, 0x10}; /* data_type without a value */
  expect_bad(cut, sizeof cut, CCG_STATUS_PARSE, "truncated varint");
  expect_bad("", 0, CCG_STATUS_PARSE, "empty");

  ccg_tensor r;
  assert_fails(NULL, CCG_STATUS_IO,
               ccg_onnx_tensor_read_file(path_of("nope.pb"), NULL, &r, NULL),
               "nope.pb");
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_onnx_tensor_read_file(NULL, NULL, &r, NULL), "no file");
}

/* Every strict prefix of a valid file is refused (raw_data is its last
 * field, so a cut lands inside a field or leaves the data missing). */
static void test_truncations(void **state) {
  (void)state;
  float v[6] = {1, 2, 3, 4, 5, 6};
  ccg_tensor t = {CCG_DTYPE_F32, 2, {2, 3}, v};
  const char *p = path_of("w.pb");
  assert_ok(NULL, ccg_onnx_tensor_write_file(p, &t, "x"));
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  uint8_t buf[256];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(n > 24);
  for (size_t cut = 0; cut < n; cut++) {
    const char *bp = path_of("bad.pb");
    write_bytes(bp, buf, cut);
    ccg_tensor r;
    ccg_status st = ccg_onnx_tensor_read_file(bp, NULL, &r, NULL);
    if (st == CCG_STATUS_OK)
      fail_msg("a file cut to %zu of %zu bytes was accepted", cut, n);
    assert_non_null(strstr(ccg_last_error(NULL), bp));
  }
}

static void test_byte_cap_and_write_errors(void **state) {
  (void)state;
  float v[64] = {0};
  ccg_tensor t = {CCG_DTYPE_F32, 1, {64}, v};
  const char *p = path_of("w.pb");
  assert_ok(NULL, ccg_onnx_tensor_write_file(p, &t, "x"));
  ccg_onnx_import_options o = CCG_ONNX_IMPORT_OPTIONS_INIT;
  o.max_bytes = 100;
  ccg_tensor r;
  assert_fails(NULL, CCG_STATUS_OOM, ccg_onnx_tensor_read_file(p, &o, &r, NULL),
               p, "byte cap");

  assert_fails(NULL, CCG_STATUS_IO,
               ccg_onnx_tensor_write_file("/nonexistent-dir/x.pb", &t, "x"),
               "/nonexistent-dir/x.pb");
  ccg_tensor bad = {CCG_DTYPE_UNDEFINED, 1, {4}, v};
  assert_fails(NULL, CCG_STATUS_DTYPE, ccg_onnx_tensor_write_file(p, &bad, "x"),
               p, "no ONNX type");
  ccg_tensor rank = {CCG_DTYPE_F32, CCG_MAX_RANK + 1, {1}, v};
  assert_fails(NULL, CCG_STATUS_SHAPE,
               ccg_onnx_tensor_write_file(p, &rank, "x"), p, "rank 9");
  ccg_tensor nodata = {CCG_DTYPE_F32, 1, {4}, NULL};
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_onnx_tensor_write_file(p, &nodata, "x"), p, "no data");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_dtype),
      cmocka_unit_test(test_scalar_and_empty),
      cmocka_unit_test(test_typed_fields),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_truncations),
      cmocka_unit_test(test_byte_cap_and_write_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
