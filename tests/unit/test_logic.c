/* The logic family: comparisons, boolean logic, IsNaN/IsInf, the variadic
 * Min/Max/Sum/Mean, Mod, PRelu and the bitwise ops. Kernel values against
 * hand-computed ones (ONNX's examples where it has them) in several dtypes
 * with broadcasting; shape-rule refusals naming node and op; every gradient
 * rule against central finite differences (f64, h = 1e-6, tolerance 1e-6
 * absolute + 1e-5 relative) and Min/Max's tie rule exactly; sharded runs
 * (Shard and Partial operands) against the unsharded graph. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "exec_ranks.h"

/* ---- running one node ---------------------------------------------------- */

typedef struct tin {
  ccg_dtype dt;
  int rank;
  int64_t dims[4];
  const void *data;
} tin;

#define T1(dt, n, data)                                                        \
  { (dt), 1, {(n)}, (data) }
#define T2(dt, a, b, data)                                                     \
  { (dt), 2, {(a), (b)}, (data) }

/* Builds `op` over inputs in0, in1, ... with the given attributes, runs it
 * and copies its output into out (out_bytes). Returns the status of the
 * node's addition or of the run; msg gets the message. */
static ccg_status run_node(const char *op, const ccg_attr *attrs, size_t na,
                           const tin *in, size_t n, void *out, size_t out_bytes,
                           char *msg, size_t msg_size) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v[8];
  ccg_exec_tensor xin[8];
  char names[8][24];
  assert_true(n <= 8);
  for (size_t i = 0; i < n; i++) {
    snprintf(names[i], sizeof names[i], "in%zu", i);
    ccg_shape s = ccg_shape_make(in[i].rank, in[i].dims);
    assert_ok(g, ccg_graph_add_input(g, names[i], in[i].dt, &s, &v[i]));
    xin[i] = xt_in(names[i], in[i].dt, in[i].data, in[i].rank, in[i].dims);
  }
  ccg_value_id y;
  ccg_status st = xt_node(g, op, "node0", v, n, attrs, na, 1, &y);
  if (st == CCG_STATUS_OK) {
    assert_ok(g, ccg_graph_add_output(g, y));
    ccg_exec_tensor o = xt_out(ccg_value_name(g, y), out, out_bytes);
    ccg_exec_options eo = CCG_EXEC_OPTIONS_INIT;
    eo.input_shapes = xin;
    eo.n_input_shapes = n;
    ccg_exec *x = NULL;
    st = ccg_exec_create(g, &eo, &x);
    if (st == CCG_STATUS_OK) {
      st = ccg_exec_run(x, xin, n, &o, 1);
      snprintf(msg, msg_size, "%s", ccg_last_error(x));
      ccg_exec_free(x);
      ccg_graph_free(g);
      return st;
    }
  }
  snprintf(msg, msg_size, "%s", ccg_last_error(g));
  ccg_graph_free(g);
  return st;
}

/* Runs and asserts success. */
static void run_ok(const char *op, const ccg_attr *attrs, size_t na,
                   const tin *in, size_t n, void *out, size_t out_bytes) {
  char msg[512];
  ccg_status st =
      run_node(op, attrs, na, in, n, out, out_bytes, msg, sizeof msg);
  if (st != CCG_STATUS_OK)
    fail_msg("%s: %s: %s", op, ccg_status_name(st), msg);
}

static void expect_bools(const uint8_t *got, const uint8_t *want, size_t n,
                         const char *what) {
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("%s: element %zu is %d, expected %d", what, i, got[i], want[i]);
}

/* ---- comparisons ----------------------------------------------------------
 */

static void compare_f32_broadcast(void **state) {
  (void)state;
  /* a [2,3] against b [3]; NaN compares false, except under nothing */
  const float a[6] = {1, 2, 3, NAN, -0.0f, 5};
  const float b[3] = {1, 3, 2};
  const tin in[2] = {T2(CCG_DTYPE_F32, 2, 3, a), T1(CCG_DTYPE_F32, 3, b)};
  static const struct {
    const char *op;
    uint8_t want[6];
  } cases[] = {
      {"Equal", {1, 0, 0, 0, 0, 0}},          {"Less", {0, 1, 0, 0, 1, 0}},
      {"LessOrEqual", {1, 1, 0, 0, 1, 0}},    {"Greater", {0, 0, 1, 0, 0, 1}},
      {"GreaterOrEqual", {1, 0, 1, 0, 0, 1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    uint8_t got[6];
    memset(got, 7, sizeof got);
    run_ok(cases[c].op, NULL, 0, in, 2, got, sizeof got);
    expect_bools(got, cases[c].want, 6, cases[c].op);
  }
}

static void compare_ints_bool_halves(void **state) {
  (void)state;
  uint8_t got[4];
  /* i64 beyond 2^53: compared as integers, not through double */
  const int64_t a64[4] = {INT64_MAX, INT64_MAX - 1, -5, 0};
  const int64_t b64[1] = {INT64_MAX};
  const tin e64[2] = {T1(CCG_DTYPE_I64, 4, a64), T1(CCG_DTYPE_I64, 1, b64)};
  run_ok("Equal", NULL, 0, e64, 2, got, 4);
  expect_bools(got, (const uint8_t[]){1, 0, 0, 0}, 4, "Equal i64");
  run_ok("Less", NULL, 0, e64, 2, got, 4);
  expect_bools(got, (const uint8_t[]){0, 1, 1, 1}, 4, "Less i64");
  /* u8 reads 0..255: 200 > 100; i8 is signed */
  const uint8_t au[4] = {200, 100, 0, 255}, bu[4] = {100, 200, 0, 254};
  const tin u8[2] = {T1(CCG_DTYPE_U8, 4, au), T1(CCG_DTYPE_U8, 4, bu)};
  run_ok("Greater", NULL, 0, u8, 2, got, 4);
  expect_bools(got, (const uint8_t[]){1, 0, 0, 1}, 4, "Greater u8");
  const int8_t ai[4] = {-128, 127, -1, 0}, bi[4] = {127, -128, -1, 1};
  const tin i8[2] = {T1(CCG_DTYPE_I8, 4, ai), T1(CCG_DTYPE_I8, 4, bi)};
  run_ok("GreaterOrEqual", NULL, 0, i8, 2, got, 4);
  expect_bools(got, (const uint8_t[]){0, 1, 1, 0}, 4, "GreaterOrEqual i8");
  const int32_t a32[4] = {3, -3, 7, 8}, b32[4] = {3, 3, 8, 7};
  const tin i32[2] = {T1(CCG_DTYPE_I32, 4, a32), T1(CCG_DTYPE_I32, 4, b32)};
  run_ok("LessOrEqual", NULL, 0, i32, 2, got, 4);
  expect_bools(got, (const uint8_t[]){1, 1, 1, 0}, 4, "LessOrEqual i32");
  const uint8_t ab[4] = {1, 0, 1, 0}, bb[4] = {1, 1, 0, 0};
  const tin bl[2] = {T1(CCG_DTYPE_BOOL, 4, ab), T1(CCG_DTYPE_BOOL, 4, bb)};
  run_ok("Equal", NULL, 0, bl, 2, got, 4);
  expect_bools(got, (const uint8_t[]){1, 0, 0, 1}, 4, "Equal bool");
  /* f16: 1.0 0x3c00, 2.0 0x4000, -1.0 0xbc00, +inf 0x7c00 */
  const uint16_t ah[4] = {0x3c00, 0x4000, 0xbc00, 0x7c00};
  const uint16_t bh[4] = {0x4000, 0x4000, 0x3c00, 0x4000};
  const tin f16[2] = {T1(CCG_DTYPE_F16, 4, ah), T1(CCG_DTYPE_F16, 4, bh)};
  run_ok("Greater", NULL, 0, f16, 2, got, 4);
  expect_bools(got, (const uint8_t[]){0, 0, 0, 1}, 4, "Greater f16");
  const double ad[4] = {0.1, 0.2, 0.3, -1}, bd[4] = {0.1, 0.1, 0.4, -1};
  const tin f64[2] = {T1(CCG_DTYPE_F64, 4, ad), T1(CCG_DTYPE_F64, 4, bd)};
  run_ok("Equal", NULL, 0, f64, 2, got, 4);
  expect_bools(got, (const uint8_t[]){1, 0, 0, 1}, 4, "Equal f64");
}

static void logic_ops(void **state) {
  (void)state;
  const uint8_t a[4] = {0, 0, 1, 1}; /* [2,2] */
  const uint8_t b[2] = {0, 1};       /* [2], broadcast along rows */
  const tin in[2] = {T2(CCG_DTYPE_BOOL, 2, 2, a), T1(CCG_DTYPE_BOOL, 2, b)};
  uint8_t got[4];
  run_ok("And", NULL, 0, in, 2, got, 4);
  expect_bools(got, (const uint8_t[]){0, 0, 0, 1}, 4, "And");
  run_ok("Or", NULL, 0, in, 2, got, 4);
  expect_bools(got, (const uint8_t[]){0, 1, 1, 1}, 4, "Or");
  run_ok("Xor", NULL, 0, in, 2, got, 4);
  expect_bools(got, (const uint8_t[]){0, 1, 1, 0}, 4, "Xor");
  run_ok("Not", NULL, 0, in, 1, got, 4);
  expect_bools(got, (const uint8_t[]){1, 1, 0, 0}, 4, "Not");
}

static void isnan_isinf(void **state) {
  (void)state;
  const float x[5] = {1.0f, INFINITY, -INFINITY, NAN, -0.0f};
  const tin in = T1(CCG_DTYPE_F32, 5, x);
  uint8_t got[5];
  run_ok("IsNaN", NULL, 0, &in, 1, got, 5);
  expect_bools(got, (const uint8_t[]){0, 0, 0, 1, 0}, 5, "IsNaN");
  run_ok("IsInf", NULL, 0, &in, 1, got, 5);
  expect_bools(got, (const uint8_t[]){0, 1, 1, 0, 0}, 5, "IsInf");
  ccg_attr neg_only = CCG_ATTR_I("detect_positive", 0);
  run_ok("IsInf", &neg_only, 1, &in, 1, got, 5);
  expect_bools(got, (const uint8_t[]){0, 0, 1, 0, 0}, 5, "IsInf negative");
  ccg_attr pos_only = CCG_ATTR_I("detect_negative", 0);
  run_ok("IsInf", &pos_only, 1, &in, 1, got, 5);
  expect_bools(got, (const uint8_t[]){0, 1, 0, 0, 0}, 5, "IsInf positive");
  const double xd[3] = {NAN, INFINITY, 1e308};
  const tin ind = T1(CCG_DTYPE_F64, 3, xd);
  run_ok("IsNaN", NULL, 0, &ind, 1, got, 3);
  expect_bools(got, (const uint8_t[]){1, 0, 0}, 3, "IsNaN f64");
  run_ok("IsInf", NULL, 0, &ind, 1, got, 3);
  expect_bools(got, (const uint8_t[]){0, 1, 0}, 3, "IsInf f64");
  /* bf16: NaN 0x7fc0, -inf 0xff80, 1.0 0x3f80 */
  const uint16_t xb[3] = {0x7fc0, 0xff80, 0x3f80};
  const tin inb = T1(CCG_DTYPE_BF16, 3, xb);
  run_ok("IsNaN", NULL, 0, &inb, 1, got, 3);
  expect_bools(got, (const uint8_t[]){1, 0, 0}, 3, "IsNaN bf16");
  run_ok("IsInf", NULL, 0, &inb, 1, got, 3);
  expect_bools(got, (const uint8_t[]){0, 1, 0}, 3, "IsInf bf16");
}

/* ---- Min, Max, Sum, Mean --------------------------------------------------
 */

static void variadic_f32(void **state) {
  (void)state;
  /* ONNX's examples, then three inputs that broadcast: [2,3], [3], [1] */
  const float a[3] = {3, 2, 1}, b[3] = {1, 4, 4}, c[3] = {2, 5, 3};
  const tin ex[3] = {T1(CCG_DTYPE_F32, 3, a), T1(CCG_DTYPE_F32, 3, b),
                     T1(CCG_DTYPE_F32, 3, c)};
  float got[6];
  run_ok("Max", NULL, 0, ex, 3, got, 12);
  xt_close(got, (const float[]){3, 5, 4}, 3, 0, 0, "Max example");
  run_ok("Min", NULL, 0, ex, 3, got, 12);
  xt_close(got, (const float[]){1, 2, 1}, 3, 0, 0, "Min example");
  run_ok("Sum", NULL, 0, ex, 3, got, 12);
  xt_close(got, (const float[]){6, 11, 8}, 3, 0, 0, "Sum example");
  run_ok("Mean", NULL, 0, ex, 3, got, 12);
  xt_close(got, (const float[]){2, 11.0f / 3, 8.0f / 3}, 3, 0, 1e-6,
           "Mean example");
  run_ok("Mean", NULL, 0, ex, 1, got, 12);
  xt_close(got, a, 3, 0, 0, "Mean of one");

  const float x[6] = {1, -2, 3, NAN, 5, -6}, y[3] = {0, 0, 4}, z[1] = {2};
  const tin bc[3] = {T2(CCG_DTYPE_F32, 2, 3, x), T1(CCG_DTYPE_F32, 3, y),
                     T1(CCG_DTYPE_F32, 1, z)};
  run_ok("Max", NULL, 0, bc, 3, got, 24);
  xt_close(got, (const float[]){2, 2, 4, NAN, 5, 4}, 6, 0, 0, "Max bcast");
  run_ok("Min", NULL, 0, bc, 3, got, 24);
  xt_close(got, (const float[]){0, -2, 2, NAN, 0, -6}, 6, 0, 0, "Min bcast");
  run_ok("Sum", NULL, 0, bc, 3, got, 24);
  xt_close(got, (const float[]){3, 0, 9, NAN, 7, 0}, 6, 0, 0, "Sum bcast");
  run_ok("Mean", NULL, 0, bc, 3, got, 24);
  xt_close(got, (const float[]){1, 0, 3, NAN, 7.0f / 3, 0}, 6, 0, 1e-6,
           "Mean bcast");
  /* NaN second: kept as well */
  const float p[2] = {1, 2}, q[2] = {NAN, 0};
  const tin pq[2] = {T1(CCG_DTYPE_F32, 2, p), T1(CCG_DTYPE_F32, 2, q)};
  run_ok("Max", NULL, 0, pq, 2, got, 8);
  xt_close(got, (const float[]){NAN, 2}, 2, 0, 0, "Max NaN second");
}

static void variadic_other_dtypes(void **state) {
  (void)state;
  const int32_t a[4] = {-5, 7, INT32_MIN, 0}, b[1] = {3};
  const tin i32[2] = {T1(CCG_DTYPE_I32, 4, a), T1(CCG_DTYPE_I32, 1, b)};
  int32_t g32[4];
  run_ok("Max", NULL, 0, i32, 2, g32, sizeof g32);
  assert_memory_equal(g32, ((const int32_t[]){3, 7, 3, 3}), sizeof g32);
  run_ok("Min", NULL, 0, i32, 2, g32, sizeof g32);
  assert_memory_equal(g32, ((const int32_t[]){-5, 3, INT32_MIN, 0}),
                      sizeof g32);
  const uint8_t ua[3] = {200, 1, 128}, ub[3] = {100, 255, 127};
  const tin u8[2] = {T1(CCG_DTYPE_U8, 3, ua), T1(CCG_DTYPE_U8, 3, ub)};
  uint8_t gu[3];
  run_ok("Max", NULL, 0, u8, 2, gu, 3);
  assert_memory_equal(gu, ((const uint8_t[]){200, 255, 128}), 3);
  const double da[2] = {0.1, 1e308}, db[2] = {0.2, 1e308};
  const tin f64[2] = {T1(CCG_DTYPE_F64, 2, da), T1(CCG_DTYPE_F64, 2, db)};
  double gd[2];
  run_ok("Sum", NULL, 0, f64, 2, gd, sizeof gd);
  assert_true(gd[0] == 0.1 + 0.2 && isinf(gd[1]));
  run_ok("Mean", NULL, 0, f64, 2, gd, sizeof gd);
  assert_true(gd[0] == (0.1 + 0.2) / 2);
  /* f16: 1 + 2 = 3 (0x4200), mean 1.5 (0x3e00) */
  const uint16_t ha[1] = {0x3c00}, hb[1] = {0x4000};
  const tin f16[2] = {T1(CCG_DTYPE_F16, 1, ha), T1(CCG_DTYPE_F16, 1, hb)};
  uint16_t gh;
  run_ok("Sum", NULL, 0, f16, 2, &gh, 2);
  assert_int_equal(gh, 0x4200);
  run_ok("Mean", NULL, 0, f16, 2, &gh, 2);
  assert_int_equal(gh, 0x3e00);
}

/* Max(dim, 1) of known shape values stays known. */
static void minmax_folds_known_ints(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t av[2] = {4, 0}, bv[1] = {1};
  ccg_tensor at = {CCG_DTYPE_I64, 1, {2}, av}, bt = {CCG_DTYPE_I64, 1, {1}, bv};
  ccg_value_id in[2];
  assert_ok(g, ccg_graph_add_initializer(g, "a", &at, &in[0]));
  assert_ok(g, ccg_graph_add_initializer(g, "b", &bt, &in[1]));
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Max";
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, ccg_node_output(g, n, 0), k), 2);
  assert_int_equal(k[0].size, 4);
  assert_int_equal(k[1].size, 1);
  d.op = "Min";
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_int_equal(ccg_value_known(g, ccg_node_output(g, n, 0), k), 2);
  assert_int_equal(k[0].size, 1);
  assert_int_equal(k[1].size, 0);
  ccg_graph_free(g);
}

/* Equal(Shape(x), -1) of a shape with a symbol stays known: a dim is never
 * negative. A symbol against a number >= 0 is not decided. */
static void compare_folds_known_shapes(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,4]"), in[2];
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &in[0]));
  const int64_t m1[1] = {-1}, four[1] = {4};
  ccg_tensor tm = {CCG_DTYPE_I64, 1, {1}, m1},
             t4 = {CCG_DTYPE_I64, 1, {1}, four};
  ccg_value_id vm, v4;
  assert_ok(g, ccg_graph_add_initializer(g, "m1", &tm, &vm));
  assert_ok(g, ccg_graph_add_initializer(g, "four", &t4, &v4));
  static const struct {
    const char *op;
    int rhs; /* 0: -1, 1: 4, 2: the shape itself */
    int n;
    int64_t want[2];
  } cases[] = {
      {"Equal", 0, 2, {0, 0}}, {"Greater", 0, 2, {1, 1}},
      {"Equal", 2, 2, {1, 1}}, {"LessOrEqual", 2, 2, {1, 1}},
      {"Less", 2, 2, {0, 0}},  {"Equal", 1, -1, {0, 0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    in[1] = cases[c].rhs == 0 ? vm : cases[c].rhs == 1 ? v4 : in[0];
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = cases[c].op;
    d.inputs = in;
    d.n_inputs = 2;
    ccg_node_id n;
    assert_ok(g, ccg_graph_add_node(g, &d, &n));
    ccg_dim k[CCG_MAX_RANK];
    int got = ccg_value_known(g, ccg_node_output(g, n, 0), k);
    if (got != cases[c].n)
      fail_msg("case %zu (%s): %d known, expected %d", c, cases[c].op, got,
               cases[c].n);
    for (int i = 0; i < got; i++)
      if (k[i].size != cases[c].want[i])
        fail_msg("case %zu (%s): element %d is %lld", c, cases[c].op, i,
                 (long long)k[i].size);
  }
  ccg_graph_free(g);
}

/* ---- Mod, PRelu ------------------------------------------------------------
 */

static void mod_values(void **state) {
  (void)state;
  /* ONNX's mixed-sign examples */
  const int64_t x[6] = {-4, 7, 5, 4, -7, 8}, y[6] = {2, -3, 8, -2, 3, 5};
  const tin in[2] = {T1(CCG_DTYPE_I64, 6, x), T1(CCG_DTYPE_I64, 6, y)};
  int64_t got[6];
  run_ok("Mod", NULL, 0, in, 2, got, sizeof got);
  xt_equal_i64(got, (const int64_t[]){0, -2, 5, 0, 2, 3}, 6, "Mod i64");
  ccg_attr fm = CCG_ATTR_I("fmod", 1);
  run_ok("Mod", &fm, 1, in, 2, got, sizeof got);
  xt_equal_i64(got, (const int64_t[]){0, 1, 5, 0, -1, 3}, 6, "Mod i64 fmod");
  /* i8: -128 mod -1 (undefined in C) is 0; broadcasting a scalar divisor */
  const int8_t a8[3] = {-128, -7, 7}, b8[1] = {-1}, c8[1] = {-3};
  int8_t g8[3];
  const tin m1[2] = {T1(CCG_DTYPE_I8, 3, a8), {CCG_DTYPE_I8, 0, {0}, b8}};
  run_ok("Mod", NULL, 0, m1, 2, g8, 3);
  assert_memory_equal(g8, ((const int8_t[]){0, 0, 0}), 3);
  const tin m3[2] = {T1(CCG_DTYPE_I8, 3, a8), {CCG_DTYPE_I8, 0, {0}, c8}};
  run_ok("Mod", NULL, 0, m3, 2, g8, 3);
  assert_memory_equal(g8, ((const int8_t[]){-2, -1, -2}), 3);
  /* floats need fmod 1 */
  const float fx[6] = {-4.3f, 7.2f, 5.0f, 4.3f, -7.2f, 8.0f};
  const float fy[6] = {2.1f, -3.4f, 8.0f, -2.1f, 3.4f, 5.0f};
  const tin fin[2] = {T1(CCG_DTYPE_F32, 6, fx), T1(CCG_DTYPE_F32, 6, fy)};
  float gf[6];
  run_ok("Mod", &fm, 1, fin, 2, gf, sizeof gf);
  float want[6];
  for (int i = 0; i < 6; i++)
    want[i] = fmodf(fx[i], fy[i]);
  xt_close(gf, want, 6, 0, 0, "Mod f32 fmod");
  xt_close(gf, (const float[]){-0.1f, 0.4f, 5, 0.1f, -0.4f, 3}, 6, 1e-5, 0,
           "Mod f32 fmod (ONNX example)");
  /* division by zero is an error naming the divisor */
  const int32_t zx[2] = {1, 2}, zy[2] = {1, 0};
  const tin z[2] = {T1(CCG_DTYPE_I32, 2, zx), T1(CCG_DTYPE_I32, 2, zy)};
  int32_t gz[2];
  char msg[512];
  assert_int_equal(
      run_node("Mod", NULL, 0, z, 2, gz, sizeof gz, msg, sizeof msg),
      CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(msg, "division by zero"));
  assert_non_null(strstr(msg, "in1"));
}

static void prelu_values(void **state) {
  (void)state;
  const float x[6] = {-2, -1, 0, 1, 2, -3}, s[3] = {0.5f, 0.25f, 2};
  const tin in[2] = {T2(CCG_DTYPE_F32, 2, 3, x), T1(CCG_DTYPE_F32, 3, s)};
  float got[6];
  run_ok("PRelu", NULL, 0, in, 2, got, sizeof got);
  xt_close(got, (const float[]){-1, -0.25f, 0, 1, 2, -6}, 6, 0, 0, "PRelu");
  const int32_t xi[4] = {-3, 4, -1, 0}, si[1] = {2};
  const tin ii[2] = {T1(CCG_DTYPE_I32, 4, xi), T1(CCG_DTYPE_I32, 1, si)};
  int32_t gi[4];
  run_ok("PRelu", NULL, 0, ii, 2, gi, sizeof gi);
  assert_memory_equal(gi, ((const int32_t[]){-6, 4, -2, 0}), sizeof gi);
}

/* ---- bitwise ---------------------------------------------------------------
 */

static void bitwise_values(void **state) {
  (void)state;
  const int32_t a[3] = {0x0f0f, -1, 6}, b[3] = {0x00ff, 0x1234, 3};
  const tin in[2] = {T1(CCG_DTYPE_I32, 3, a), T1(CCG_DTYPE_I32, 3, b)};
  int32_t got[3];
  run_ok("BitwiseAnd", NULL, 0, in, 2, got, sizeof got);
  assert_memory_equal(got, ((const int32_t[]){0x000f, 0x1234, 2}), 12);
  run_ok("BitwiseOr", NULL, 0, in, 2, got, sizeof got);
  assert_memory_equal(got, ((const int32_t[]){0x0fff, -1, 7}), 12);
  run_ok("BitwiseXor", NULL, 0, in, 2, got, sizeof got);
  assert_memory_equal(got, ((const int32_t[]){0x0ff0, ~0x1234, 5}), 12);
  run_ok("BitwiseNot", NULL, 0, in, 1, got, sizeof got);
  assert_memory_equal(got, ((const int32_t[]){~0x0f0f, 0, ~6}), 12);
  const uint8_t u[3] = {0xf0, 0x01, 0xff};
  const tin un = T1(CCG_DTYPE_U8, 3, u);
  uint8_t gu[3];
  run_ok("BitwiseNot", NULL, 0, &un, 1, gu, 3);
  assert_memory_equal(gu, ((const uint8_t[]){0x0f, 0xfe, 0x00}), 3);
  /* BitShift: ONNX's example, then shifts at and past the width */
  const uint8_t x[4] = {16, 4, 1, 0x81}, y[4] = {1, 2, 3, 8};
  const tin sh[2] = {T1(CCG_DTYPE_U8, 4, x), T1(CCG_DTYPE_U8, 4, y)};
  ccg_attr right = CCG_ATTR_S("direction", "RIGHT");
  ccg_attr left = CCG_ATTR_S("direction", "LEFT");
  uint8_t gs[4];
  run_ok("BitShift", &right, 1, sh, 2, gs, 4);
  assert_memory_equal(gs, ((const uint8_t[]){8, 1, 0, 0}), 4);
  run_ok("BitShift", &left, 1, sh, 2, gs, 4);
  assert_memory_equal(gs, ((const uint8_t[]){32, 16, 8, 0}), 4);
  const uint8_t x2[2] = {0x81, 0x81}, y2[2] = {7, 1};
  const tin s2[2] = {T1(CCG_DTYPE_U8, 2, x2), T1(CCG_DTYPE_U8, 2, y2)};
  run_ok("BitShift", &left, 1, s2, 2, gs, 2);
  assert_memory_equal(gs, ((const uint8_t[]){0x80, 0x02}), 2);
}

/* ---- refusals -------------------------------------------------------------
 */

static void bad_inputs(void **state) {
  (void)state;
  const float f[2] = {0};
  const int32_t i[2] = {0};
  const uint8_t b[2] = {0};
  char msg[512];
  uint8_t out[64];
  const tin fi[2] = {T1(CCG_DTYPE_F32, 2, f), T1(CCG_DTYPE_I32, 2, i)};
  const tin ff[2] = {T1(CCG_DTYPE_F32, 2, f), T1(CCG_DTYPE_F32, 2, f)};
  const tin f3[2] = {T1(CCG_DTYPE_F32, 2, f), T1(CCG_DTYPE_F32, 3, f)};
  const tin ii[2] = {T1(CCG_DTYPE_I32, 2, i), T1(CCG_DTYPE_I32, 2, i)};
  const tin bb[2] = {T1(CCG_DTYPE_BOOL, 2, b), T1(CCG_DTYPE_BOOL, 2, b)};
  static const struct {
    const char *op;
    int which; /* 0 fi, 1 ff, 2 f3, 3 ii, 4 bb */
    size_t n;
    ccg_status st;
    const char *frag;
  } cases[] = {
      {"Equal", 0, 2, CCG_STATUS_DTYPE, "must match"},
      {"Less", 4, 2, CCG_STATUS_DTYPE, "numeric"},
      {"And", 1, 2, CCG_STATUS_DTYPE, "bool"},
      {"Not", 3, 1, CCG_STATUS_DTYPE, "bool"},
      {"IsNaN", 3, 1, CCG_STATUS_DTYPE, "float"},
      {"IsInf", 4, 1, CCG_STATUS_DTYPE, "float"},
      {"Max", 2, 2, CCG_STATUS_SHAPE, ""},
      {"Sum", 3, 2, CCG_STATUS_DTYPE, "float"},
      {"Mean", 4, 2, CCG_STATUS_DTYPE, "float"},
      {"Mod", 1, 2, CCG_STATUS_INVALID_ARG, "fmod"},
      {"BitwiseAnd", 1, 2, CCG_STATUS_DTYPE, "integer"},
      {"BitwiseNot", 4, 1, CCG_STATUS_DTYPE, "integer"},
  };
  const tin *sets[5] = {fi, ff, f3, ii, bb};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ccg_status st = run_node(cases[c].op, NULL, 0, sets[cases[c].which],
                             cases[c].n, out, sizeof out, msg, sizeof msg);
    if (st != cases[c].st || !strstr(msg, "node0") ||
        !strstr(msg, cases[c].op) || !strstr(msg, cases[c].frag))
      fail_msg("%s: %s: %s", cases[c].op, ccg_status_name(st), msg);
  }
  /* attributes */
  ccg_attr up = CCG_ATTR_S("direction", "UP");
  const tin uu[2] = {T1(CCG_DTYPE_U8, 2, b), T1(CCG_DTYPE_U8, 2, b)};
  assert_int_equal(
      run_node("BitShift", &up, 1, uu, 2, out, sizeof out, msg, sizeof msg),
      CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(msg, "'UP'"));
  assert_int_equal(
      run_node("BitShift", NULL, 0, uu, 2, out, sizeof out, msg, sizeof msg),
      CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(msg, "direction"));
  ccg_attr leftd = CCG_ATTR_S("direction", "LEFT");
  assert_int_equal(
      run_node("BitShift", &leftd, 1, ii, 2, out, sizeof out, msg, sizeof msg),
      CCG_STATUS_DTYPE);
  assert_non_null(strstr(msg, "u8"));
  ccg_attr two = CCG_ATTR_I("detect_negative", 2);
  assert_int_equal(
      run_node("IsInf", &two, 1, ff, 1, out, sizeof out, msg, sizeof msg),
      CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(msg, "detect_negative"));
  /* PRelu's slope broadcasts to X only */
  const float x6[6] = {0};
  const tin pr[2] = {T1(CCG_DTYPE_F32, 2, f), T2(CCG_DTYPE_F32, 3, 2, x6)};
  assert_int_equal(
      run_node("PRelu", NULL, 0, pr, 2, out, sizeof out, msg, sizeof msg),
      CCG_STATUS_SHAPE);
  assert_non_null(strstr(msg, "slope"));
}

static void registry_entries(void **state) {
  (void)state;
  static const struct {
    ccg_op op;
    int since;
    ccg_op_shard shard;
  } want[] = {
      {CCG_OP_EQUAL, 7, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_LESS, 7, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_LESS_OR_EQUAL, 12, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_GREATER, 7, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_GREATER_OR_EQUAL, 12, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_NOT, 1, CCG_OP_SHARD_KEEP},
      {CCG_OP_AND, 7, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_IS_NAN, 9, CCG_OP_SHARD_KEEP},
      {CCG_OP_IS_INF, 10, CCG_OP_SHARD_KEEP},
      {CCG_OP_MAX, 8, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_MEAN, 8, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_MOD, 10, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_PRELU, 7, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_BIT_SHIFT, 11, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_BITWISE_XOR, 18, CCG_OP_SHARD_BROADCAST},
      {CCG_OP_BITWISE_NOT, 18, CCG_OP_SHARD_KEEP},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (ccg_op_onnx_since(want[i].op) != want[i].since ||
        ccg_op_shard_rule(want[i].op) != want[i].shard ||
        ccg_op_family_of(want[i].op) != CCG_OP_FAMILY_LOGIC)
      fail_msg("%s: since %d, shard %d", ccg_op_name(want[i].op),
               ccg_op_onnx_since(want[i].op), ccg_op_shard_rule(want[i].op));
  }
}

/* ---- gradients -------------------------------------------------------------
 * Central finite differences of loss = sum(y * w), w fixed, f64. */

typedef struct grad_case {
  const char *name;
  const char *op;
  ccg_attr attr; /* .name NULL: none */
  size_t n_in;
  fd_arg in[3];
} grad_case;

/* y = op(inputs) of the grad_case at ctx. */
static ccg_status node_body(ccg_graph *g, const ccg_value_id *in,
                            const void *ctx, ccg_value_id *y) {
  const grad_case *c = ctx;
  return xt_node(g, c->op, NULL, in, c->n_in, &c->attr, c->attr.name ? 1 : 0, 1,
                 y);
}

#define S(nm, r, ...)                                                          \
  { nm, r, {__VA_ARGS__}, -1, 1 }
#define P(nm, r, ...)                                                          \
  { nm, r, {__VA_ARGS__}, 0.5, 1.5 }
#define NOATTR                                                                 \
  { 0 }

/* h = 1e-6, 1e-6 + 1e-5 relative (f64 kernels compute in double). */
static void gradients(void **state) {
  (void)state;
  const grad_case cases[] = {
      {"max3",
       "Max",
       NOATTR,
       3,
       {S("a", 2, 2, 3), S("b", 1, 3), S("c", 2, 2, 1)}},
      {"min2", "Min", NOATTR, 2, {S("a", 2, 2, 3), S("b", 3, 2, 2, 3)}},
      {"max1", "Max", NOATTR, 1, {S("a", 1, 4)}},
      {"sum3", "Sum", NOATTR, 3, {S("a", 2, 2, 3), S("b", 1, 3), S("c", 0, 0)}},
      {"mean3",
       "Mean",
       NOATTR,
       3,
       {S("a", 2, 2, 3), S("b", 2, 1, 3), S("c", 1, 1)}},
      {"mean1", "Mean", NOATTR, 1, {S("a", 1, 3)}},
      {"mod_fmod",
       "Mod",
       CCG_ATTR_I("fmod", 1),
       2,
       {S("a", 2, 2, 3), P("b", 1, 3)}},
      {"prelu", "PRelu", NOATTR, 2, {S("x", 3, 2, 3, 2), S("slope", 2, 3, 1)}},
      {"prelu_scalar_slope",
       "PRelu",
       NOATTR,
       2,
       {S("x", 1, 5), S("slope", 0, 0)}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    fd_check_body(cases[i].name, cases[i].in, cases[i].n_in, node_body,
                  &cases[i], FD_TIGHT);
}

/* Ties share dy evenly: Max([1,2,3], [1,5,0]) with loss sum(y) gives
 * [0.5, 0, 1] and [0.5, 1, 0]. */
static void minmax_ties_split(void **state) {
  (void)state;
  for (int is_max = 0; is_max < 2; is_max++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id in[2], y, loss;
    in[0] = ccg_test_input(g, "a", CCG_DTYPE_F32, "[3]");
    in[1] = ccg_test_input(g, "b", CCG_DTYPE_F32, "[3]");
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = is_max ? "Max" : "Min";
    d.inputs = in;
    d.n_inputs = 2;
    ccg_node_id n;
    assert_ok(g, ccg_graph_add_node(g, &d, &n));
    y = ccg_node_output(g, n, 0);
    assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &loss));
    const char *wrt[2] = {"a", "b"};
    assert_ok(g, fd_backward(g, loss, wrt, 2));
    const float a[3] = {1, 2, 3}, b[3] = {1, 5, 0};
    ccg_exec_tensor xin[2] = {XT_F32("a", a, 3), XT_F32("b", b, 3)};
    float ga[3], gb[3];
    ccg_exec_tensor out[2] = {xt_out("grad/a", ga, sizeof ga),
                              xt_out("grad/b", gb, sizeof gb)};
    assert_ok(g, xt_run1(g, xin, 2, out, 2));
    if (is_max) {
      xt_close(ga, (const float[]){0.5f, 0, 1}, 3, 0, 0, "Max grad a");
      xt_close(gb, (const float[]){0.5f, 1, 0}, 3, 0, 0, "Max grad b");
    } else {
      xt_close(ga, (const float[]){0.5f, 1, 0}, 3, 0, 0, "Min grad a");
      xt_close(gb, (const float[]){0.5f, 0, 1}, 3, 0, 0, "Min grad b");
    }
    ccg_graph_free(g);
  }
}

/* A comparison has no gradient rule, and needs none: its bool output carries
 * no gradient, so a loss that also uses a directly differentiates. */
static void gradient_skips_bool_paths(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[3]"), eq, f, loss;
  ccg_value_id in[2] = {a, a};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Equal";
  d.name = "eq0";
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  eq = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_cast(g, eq, CCG_DTYPE_F32, &f));
  assert_ok(g, ccg_mul(g, f, a, &f));
  assert_ok(g, ccg_reduce_sum(g, f, NULL, 0, false, &loss));
  const char *wrt[1] = {"a"};
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  o.wrt = wrt;
  o.n_wrt = 1;
  /* bool values carry no gradient: the path through Equal gives nothing,
   * the path through Mul gives Cast(Equal) */
  assert_ok(g, ccg_backward(g, &o));
  const float av[3] = {1, 2, 3};
  ccg_exec_tensor xin = XT_F32("a", av, 3);
  float ga[3];
  ccg_exec_tensor out = xt_out("grad/a", ga, sizeof ga);
  assert_ok(g, xt_run1(g, &xin, 1, &out, 1));
  xt_close(ga, (const float[]){1, 1, 1}, 3, 0, 0, "grad through Equal");
  ccg_graph_free(g);
}

/* ---- sharded against unsharded --------------------------------------------
 * a = x W1 (module fc1), b = x W2 (fc2) with W2 = W1 on columns 0..3 and
 * W1 + 1 on 4..7; x in [0.5, 1.5), so b - a = sum(x) >= 3 there. Then
 * c = Where(Equal(a, b), Sum(a, b, a), Max(a, b)),
 * d = Where(Greater(b, a), PRelu(a, b), Min(a, b)),
 * e = Where(IsNaN(a), a, Mean(a, b)), and the outputs are fc3(c), fc4(d)
 * and fc5(e) (rowwise modules: Shard(-1) inputs, as a Megatron MLP). colwise
 * fc1/fc2 give Shard(1) operands that every op keeps; rowwise fc1/fc2 with
 * Partial outputs give Partial operands, which the ops must see reduced. */

#define SX 4
#define SK 6
#define SN 8
#define SO 3

static void fill_same(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  xt_fill(data, n, (uint32_t)input + 5);
  for (size_t i = 0; i < n; i++)
    data[i] = 1.0f + 0.5f * data[i];
}

static ccg_value_id add_op(ccg_graph *g, const char *op, const char *name,
                           const ccg_value_id *in, size_t n) {
  ccg_value_id y;
  assert_ok(g, xt_node(g, op, name, in, n, NULL, 0, 1, &y));
  return y;
}

static ccg_value_id add_weight(ccg_graph *g, const char *name, int64_t k,
                               int64_t n, uint32_t seed, float shift_from) {
  float *w = malloc((size_t)(k * n) * sizeof *w);
  xt_fill(w, (size_t)(k * n), seed);
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = shift_from; j < n; j++)
      w[i * n + j] += 1.0f;
  ccg_tensor t = {CCG_DTYPE_F32, 2, {k, n}, w};
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &v));
  free(w);
  return v;
}

static ccg_graph *sharding_model(void) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]");
  ccg_value_id W1 = add_weight(g, "fc1.weight", SK, SN, 17, SN);
  ccg_value_id W2 = add_weight(g, "fc2.weight", SK, SN, 17, 4);
  ccg_value_id m1[2] = {x, W1}, m2[2] = {x, W2};
  ccg_value_id a = add_op(g, "MatMul", "/fc1/MatMul", m1, 2);
  ccg_value_id b = add_op(g, "MatMul", "/fc2/MatMul", m2, 2);
  ccg_value_id ab[2] = {a, b}, ba[2] = {b, a}, aba[3] = {a, b, a};
  ccg_value_id c[3] = {add_op(g, "Equal", "/Equal", ab, 2),
                       add_op(g, "Sum", "/Sum", aba, 3),
                       add_op(g, "Max", "/Max", ab, 2)};
  ccg_value_id d[3] = {add_op(g, "Greater", "/Greater", ba, 2),
                       add_op(g, "PRelu", "/PRelu", ab, 2),
                       add_op(g, "Min", "/Min", ab, 2)};
  ccg_value_id e[3] = {add_op(g, "IsNaN", "/IsNaN", &a, 1), a,
                       add_op(g, "Mean", "/Mean", ab, 2)};
  ccg_value_id w[3] = {add_op(g, "Where", "/WhereC", c, 3),
                       add_op(g, "Where", "/WhereD", d, 3),
                       add_op(g, "Where", "/WhereE", e, 3)};
  static const char *const mods[3] = {"/fc3/MatMul", "/fc4/MatMul",
                                      "/fc5/MatMul"};
  static const char *const wn[3] = {"fc3.weight", "fc4.weight", "fc5.weight"};
  for (int i = 0; i < 3; i++) {
    ccg_value_id mm[2] = {w[i], add_weight(g, wn[i], SN, SO, 30 + i, SO)};
    assert_ok(g, ccg_graph_add_output(g, add_op(g, "MatMul", mods[i], mm, 2)));
  }
  return g;
}

/* The placement every logic-family node's output has in sg: all must have
 * `want` (Shard(1) or Replicate) on the one mesh axis. */
static void expect_logic_outputs(ccg_graph *sg, ccg_placement_kind want) {
  int seen = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++) {
    ccg_node_id n = (ccg_node_id)i;
    if (ccg_op_family_of(ccg_node_op(sg, n)) != CCG_OP_FAMILY_LOGIC)
      continue;
    ccg_placement p[CCG_MAX_MESH_AXES];
    assert_int_equal(ccg_value_placements(sg, ccg_node_output(sg, n, 0), p), 1);
    if (p[0].kind != want || (want == CCG_PLACEMENT_SHARD && p[0].dim != 1))
      fail_msg("%s: placement kind %d dim %d", ccg_node_name(sg, n),
               (int)p[0].kind, p[0].dim);
    seen++;
  }
  assert_int_equal(seen, 8);
}

static void sharded_matches(const char *plan_text, ccg_placement_kind want) {
  ccg_graph *g = sharding_model();
  float xv[SX * SK], ref[3][SX * SO];
  fill_same(0, 0, xv, SX * SK);
  ccg_exec_tensor xin = XT_F32("x", xv, SX, SK), out[3];
  for (int i = 0; i < 3; i++)
    out[i] = xt_out(ccg_value_name(g, ccg_graph_output(g, (size_t)i)), ref[i],
                    sizeof ref[i]);
  assert_ok(g, xt_run1(g, &xin, 1, out, 3));

  ccg_graph *sg = xt_shard(g, plan_text, "tp=2");
  expect_logic_outputs(sg, want);
  xr_result res;
  xr_run(sg, 0, 2, fill_same, &res);
  for (int r = 0; r < res.n; r++)
    for (int i = 0; i < 3; i++) {
      assert_int_equal(res.R[r].got_bytes[i], sizeof ref[i]);
      xt_close(res.R[r].got[i], ref[i], SX * SO, 1e-4, 1e-5,
               ccg_value_name(g, ccg_graph_output(g, (size_t)i)));
    }
  xr_free(&res);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

/* The unsharded values depend on every op: Equal picks Sum on columns 0..3
 * and Max elsewhere, Greater PRelu on 4..7 and Min elsewhere. */
static void sharding_model_is_sensitive(void **state) {
  (void)state;
  ccg_graph *g = sharding_model();
  float xv[SX * SK], a[SX * SN], wc[SX * SN];
  fill_same(0, 0, xv, SX * SK);
  /* read a and WhereC's output by making them outputs too */
  ccg_value_id va, vc;
  assert_ok(g, ccg_graph_find_value(g, "/fc1/MatMul_output_0", &va));
  assert_ok(g, ccg_graph_find_value(g, "/WhereC_output_0", &vc));
  assert_ok(g, ccg_graph_add_output(g, va));
  assert_ok(g, ccg_graph_add_output(g, vc));
  ccg_exec_tensor xin = XT_F32("x", xv, SX, SK);
  ccg_exec_tensor out[2] = {xt_out("/fc1/MatMul_output_0", a, sizeof a),
                            xt_out("/WhereC_output_0", wc, sizeof wc)};
  assert_ok(g, xt_run1(g, &xin, 1, out, 2));
  for (int i = 0; i < SX; i++) {
    float rs = 0;
    for (int k = 0; k < SK; k++)
      rs += xv[i * SK + k];
    for (int j = 0; j < SN; j++) {
      float av = a[i * SN + j];
      /* columns 0..3: b == a, Sum = 3a; others: Max = b = a + rs */
      float want = j < 4 ? 3 * av : av + rs;
      if (fabsf(wc[i * SN + j] - want) > 1e-4f * (1 + fabsf(want)))
        fail_msg("WhereC[%d,%d] is %g, expected %g", i, j,
                 (double)wc[i * SN + j], (double)want);
    }
  }
  ccg_graph_free(g);
}

static void sharded_shard_operands(void **state) {
  (void)state;
  sharded_matches("{\"fc1\": \"colwise\", \"fc2\": \"colwise\", "
                  "\"fc3\": \"rowwise\", \"fc4\": \"rowwise\", "
                  "\"fc5\": \"rowwise\"}",
                  CCG_PLACEMENT_SHARD);
}

static void sharded_partial_operands(void **state) {
  (void)state;
  sharded_matches("{\"fc[12]\": {\"style\": \"rowwise\", \"input_layouts\": "
                  "\"Replicate\", \"output_layouts\": \"Partial\"}, "
                  "\"fc[345]\": \"rowwise\"}",
                  CCG_PLACEMENT_REPLICATE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(compare_f32_broadcast),
      cmocka_unit_test(compare_ints_bool_halves),
      cmocka_unit_test(logic_ops),
      cmocka_unit_test(isnan_isinf),
      cmocka_unit_test(variadic_f32),
      cmocka_unit_test(variadic_other_dtypes),
      cmocka_unit_test(minmax_folds_known_ints),
      cmocka_unit_test(compare_folds_known_shapes),
      cmocka_unit_test(mod_values),
      cmocka_unit_test(prelu_values),
      cmocka_unit_test(bitwise_values),
      cmocka_unit_test(bad_inputs),
      cmocka_unit_test(registry_entries),
      cmocka_unit_test(gradients),
      cmocka_unit_test(minmax_ties_split),
      cmocka_unit_test(gradient_skips_bool_paths),
      cmocka_unit_test(sharding_model_is_sensitive),
      cmocka_unit_test(sharded_shard_operands),
      cmocka_unit_test(sharded_partial_operands),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
