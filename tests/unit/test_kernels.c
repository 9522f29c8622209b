/* CPU kernels against straightforward reference loops: hand-checked small
 * cases and random ones with stated tolerances, broadcasting, f16/bf16
 * storage, integer and bool types. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec/kernels_math.h"

/* Runs g with inputs and reads one output value into dst. */
static void run_into(ccg_graph *g, const ccg_exec_tensor *in, size_t n_in,
                     ccg_value_id out, void *dst, size_t bytes) {
  ccg_exec_tensor t = xt_out(ccg_value_name(g, out), dst, bytes);
  assert_ok(g, ccg_graph_add_output(g, out));
  assert_ok(g, xt_run1(g, in, n_in, &t, 1));
}

/* ---- unary -------------------------------------------------------------- */

typedef ccg_status (*unary_builder)(ccg_graph *, ccg_value_id, ccg_value_id *);

static double ref_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2))); }
static double ref_gelu_tanh(double x) {
  return 0.5 * x *
         (1 +
          tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_relu(double x) { return x > 0 ? x : 0; }
static double ref_neg(double x) { return -x; }

static ccg_status gelu_erf(ccg_graph *g, ccg_value_id x, ccg_value_id *o) {
  return ccg_gelu(g, x, "none", o);
}
static ccg_status gelu_tanh(ccg_graph *g, ccg_value_id x, ccg_value_id *o) {
  return ccg_gelu(g, x, "tanh", o);
}

static void test_unary_f32(void **state) {
  (void)state;
  struct {
    const char *name;
    unary_builder b;
    double (*ref)(double);
    bool positive;
  } cases[] = {
      {"Neg", ccg_neg, ref_neg, false},
      {"Relu", ccg_relu, ref_relu, false},
      {"Gelu", gelu_erf, ref_gelu, false},
      {"Gelu(tanh)", gelu_tanh, ref_gelu_tanh, false},
      {"Tanh", ccg_tanh, tanh, false},
      {"Erf", ccg_erf, erf, false},
      {"Sigmoid", ccg_sigmoid, ref_sigmoid, false},
      {"Exp", ccg_exp, exp, false},
      {"Log", ccg_log, log, true},
      {"Sqrt", ccg_sqrt, sqrt, true},
  };
  enum { N = 515 };
  float in[N], out[N], want[N];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    xt_fill(in, N, (uint32_t)c + 10);
    for (int i = 0; i < N; i++) {
      in[i] *= 6.0f;
      if (cases[c].positive)
        in[i] = fabsf(in[i]) + 1e-3f;
    }
    if (!cases[c].positive) {
      in[0] = 0.0f;
      in[1] = -80.0f; /* sigmoid and gelu far out: no NaN */
      in[2] = 80.0f;
    }
    for (int i = 0; i < N; i++)
      want[i] = (float)cases[c].ref(in[i]);
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[515]"), y;
    assert_ok(g, cases[c].b(g, x, &y));
    ccg_exec_tensor ti = XT_F32("x", in, N);
    run_into(g, &ti, 1, y, out, sizeof out);
    xt_close(out, want, N, 1e-6, 4e-6, cases[c].name);
    ccg_graph_free(g);
  }
}

/* ---- binary with broadcasting ---------------------------------------------
 */

typedef ccg_status (*binary_builder)(ccg_graph *, ccg_value_id, ccg_value_id,
                                     ccg_value_id *);

static double ref_bin(int op, double a, double b) {
  switch (op) {
  case 0:
    return a + b;
  case 1:
    return a - b;
  case 2:
    return a * b;
  case 3:
    return a / b;
  default:
    return pow(a, b);
  }
}

/* a [2,3,4] with b of each shape; b's index from the output's coordinates. */
static void test_binary_broadcast(void **state) {
  (void)state;
  binary_builder ops[] = {ccg_add, ccg_sub, ccg_mul, ccg_div, ccg_pow};
  const char *bshapes[] = {"[3,1]", "[4]", "[]", "[2,1,4]", "[2,3,4]"};
  int64_t bdims[][3] = {{3, 1}, {4}, {0}, {2, 1, 4}, {2, 3, 4}};
  int brank[] = {2, 1, 0, 3, 3};
  float a[24], b[24], out[24], want[24];
  for (int op = 0; op < 5; op++)
    for (int s = 0; s < 5; s++) {
      xt_fill(a, 24, (uint32_t)(op * 7 + s));
      xt_fill(b, 24, (uint32_t)(op * 7 + s + 100));
      for (int i = 0; i < 24; i++) {
        a[i] = fabsf(a[i]) + 0.5f; /* Pow: positive bases */
        b[i] = b[i] * 2.0f + (b[i] >= 0 ? 0.25f : -0.25f);
      }
      int64_t bd[3] = {1, 1, 1};
      for (int d = 0; d < brank[s]; d++)
        bd[3 - brank[s] + d] = bdims[s][d];
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
          for (int k = 0; k < 4; k++) {
            int64_t bi = (bd[0] == 1 ? 0 : i) * bd[1] * bd[2] +
                         (bd[1] == 1 ? 0 : j) * bd[2] + (bd[2] == 1 ? 0 : k);
            want[i * 12 + j * 4 + k] =
                (float)ref_bin(op, a[i * 12 + j * 4 + k], b[bi]);
          }
      ccg_graph *g = ccg_test_graph(NULL);
      ccg_value_id x = ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,3,4]");
      ccg_value_id y = ccg_test_input(g, "b", CCG_DTYPE_F32, bshapes[s]), z;
      assert_ok(g, ops[op](g, x, y, &z));
      ccg_exec_tensor in[2] = {
          XT_F32("a", a, 2, 3, 4),
          xt_in("b", CCG_DTYPE_F32, b, brank[s], bdims[s])};
      run_into(g, in, 2, z, out, sizeof out);
      char what[64];
      snprintf(what, sizeof what, "binary op %d with b %s", op, bshapes[s]);
      xt_close(out, want, 24, 1e-6, 1e-5, what);
      /* b on the left broadcasts the same way */
      ccg_graph_free(g);
    }
}

static void test_int64_arithmetic(void **state) {
  (void)state;
  int64_t a[4] = {7, -7, 9, INT64_MAX}, b[2] = {2, -3};
  binary_builder ops[] = {ccg_add, ccg_sub, ccg_mul, ccg_div};
  int64_t want[4][4] = {
      {9, -10, 11, (int64_t)((uint64_t)INT64_MAX - 3)},
      {5, -4, 7, (int64_t)((uint64_t)INT64_MAX + 3)},
      {14, 21, 18, (int64_t)((uint64_t)INT64_MAX * (uint64_t)-3)},
      {3, 2, 4, INT64_MAX / -3}};
  for (int op = 0; op < 4; op++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "a", CCG_DTYPE_I64, "[2,2]");
    ccg_value_id y = ccg_test_input(g, "b", CCG_DTYPE_I64, "[2]"), z;
    assert_ok(g, ops[op](g, x, y, &z));
    ccg_exec_tensor in[2] = {
        xt_in("a", CCG_DTYPE_I64, a, 2, (const int64_t[]){2, 2}),
        xt_in("b", CCG_DTYPE_I64, b, 1, (const int64_t[]){2})};
    int64_t out[4];
    run_into(g, in, 2, z, out, sizeof out);
    for (int i = 0; i < 4; i++)
      if (out[i] != want[op][i])
        fail_msg("op %d element %d: %lld, expected %lld", op, i,
                 (long long)out[i], (long long)want[op][i]);
    ccg_graph_free(g);
  }
  /* an integer base to a float power (ONNX Pow allows mixed types) */
  {
    ccg_graph *gp = ccg_test_graph(NULL);
    ccg_value_id base = ccg_test_input(gp, "base", CCG_DTYPE_I64, "[3]");
    ccg_value_id ex = ccg_test_input(gp, "e", CCG_DTYPE_F32, "[3]"), pw;
    assert_ok(gp, ccg_pow(gp, base, ex, &pw));
    int64_t bv[3] = {4, 2, 10}, po[3];
    float ev[3] = {0.5f, 3.0f, -1.0f};
    ccg_exec_tensor pin[2] = {
        xt_in("base", CCG_DTYPE_I64, bv, 1, (const int64_t[]){3}),
        xt_in("e", CCG_DTYPE_F32, ev, 1, (const int64_t[]){3})};
    run_into(gp, pin, 2, pw, po, sizeof po);
    assert_int_equal(po[0], 2);
    assert_int_equal(po[1], 8);
    assert_int_equal(po[2], 0);
    ccg_graph_free(gp);
  }
  /* integer division by zero is an error naming the node, not a crash */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "a", CCG_DTYPE_I64, "[2,2]");
  ccg_value_id y = ccg_test_input(g, "den", CCG_DTYPE_I64, "[2]"), z;
  assert_ok(g, ccg_div(g, x, y, &z));
  assert_ok(g, ccg_graph_add_output(g, z));
  int64_t zero[2] = {1, 0}, out[4];
  ccg_exec_tensor in[2] = {
      xt_in("a", CCG_DTYPE_I64, a, 2, (const int64_t[]){2, 2}),
      xt_in("den", CCG_DTYPE_I64, zero, 1, (const int64_t[]){2})};
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, NULL, &ex));
  ccg_exec_tensor t = xt_out(ccg_value_name(g, z), out, sizeof out);
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, in, 2, &t, 1),
               "(Div)", "division by zero", "'den'");
  ccg_exec_free(ex);
  ccg_graph_free(g);
}

/* ---- f16 / bf16 ------------------------------------------------------------
 */

static void test_half_conversions(void **state) {
  (void)state;
  assert_int_equal(ccg__f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(ccg__f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(ccg__f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(ccg__f32_to_f16(65520.0f), 0x7c00); /* rounds to inf */
  assert_int_equal(ccg__f32_to_f16(5.9604644775390625e-8f), 0x0001);
  assert_int_equal(ccg__f32_to_f16(2.9802322387695312e-8f), 0x0000); /* tie */
  assert_int_equal(ccg__f32_to_f16(1.0009765625f), 0x3c01);
  assert_int_equal(ccg__f32_to_f16(1.00048828125f), 0x3c00); /* tie to even */
  assert_int_equal(ccg__f32_to_f16(1.00146484375f), 0x3c02); /* tie to even */
  assert_true(isnan(ccg__f16_to_f32(ccg__f32_to_f16(NAN))));
  /* every f16 survives a round trip through f32 */
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = ccg__f16_to_f32((uint16_t)h);
    if (isnan(f))
      continue;
    if (ccg__f32_to_f16(f) != h)
      fail_msg("f16 0x%04x -> %g -> 0x%04x", h, (double)f, ccg__f32_to_f16(f));
  }
  assert_int_equal(ccg__f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(ccg__f32_to_bf16(ccg__bits_f32(0x3f808000u)), 0x3f80);
  assert_int_equal(ccg__f32_to_bf16(ccg__bits_f32(0x3f818000u)), 0x3f82);
  assert_int_equal(ccg__f32_to_bf16(ccg__bits_f32(0x3f808001u)), 0x3f81);
  assert_true(isnan(ccg__bf16_to_f32(ccg__f32_to_bf16(NAN))));
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    float f = ccg__bf16_to_f32((uint16_t)b);
    if (!isnan(f))
      assert_int_equal(ccg__f32_to_bf16(f), b);
  }
}

/* f16 and bf16 storage: the result is the f32 result rounded once. */
static void test_half_kernels(void **state) {
  (void)state;
  ccg_dtype dts[2] = {CCG_DTYPE_F16, CCG_DTYPE_BF16};
  for (int t = 0; t < 2; t++) {
    ccg_dtype dt = dts[t];
    uint16_t (*to)(float) = t ? ccg__f32_to_bf16 : ccg__f32_to_f16;
    float (*from)(uint16_t) = t ? ccg__bf16_to_f32 : ccg__f16_to_f32;
    enum { N = 300 };
    float fa[N], fb[N];
    uint16_t a[N], b[N], out[N];
    xt_fill(fa, N, 50u + (uint32_t)t);
    xt_fill(fb, N, 60u + (uint32_t)t);
    for (int i = 0; i < N; i++) {
      a[i] = to(fa[i] * 4);
      b[i] = to(fb[i] * 4);
    }
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "a", dt, "[300]");
    ccg_value_id y = ccg_test_input(g, "b", dt, "[300]"), s, e;
    assert_ok(g, ccg_mul(g, x, y, &s));
    assert_ok(g, ccg_gelu(g, s, "none", &e));
    ccg_exec_tensor in[2] = {xt_in("a", dt, a, 1, (const int64_t[]){N}),
                             xt_in("b", dt, b, 1, (const int64_t[]){N})};
    run_into(g, in, 2, e, out, sizeof out);
    for (int i = 0; i < N; i++) {
      uint16_t prod = to(from(a[i]) * from(b[i]));
      uint16_t want = to(ccg__gelu_erff(from(prod)));
      if (out[i] != want)
        fail_msg("%s element %d: 0x%04x, expected 0x%04x", ccg_dtype_name(dt),
                 i, out[i], want);
    }
    ccg_graph_free(g);
  }
}

/* ---- Where, Cast ------------------------------------------------------------
 */

static void test_where_broadcast(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_BOOL, "[2,1]");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_I64, "[2,3]");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_I64, "[]"), w;
  assert_ok(g, ccg_where(g, c, x, y, &w));
  uint8_t cv[2] = {1, 0};
  int64_t xv[6] = {1, 2, 3, 4, 5, 6}, yv = -9, out[6];
  ccg_exec_tensor in[3] = {
      xt_in("c", CCG_DTYPE_BOOL, cv, 2, (const int64_t[]){2, 1}),
      xt_in("x", CCG_DTYPE_I64, xv, 2, (const int64_t[]){2, 3}),
      xt_in("y", CCG_DTYPE_I64, &yv, 0, NULL)};
  run_into(g, in, 3, w, out, sizeof out);
  int64_t want[6] = {1, 2, 3, -9, -9, -9};
  assert_memory_equal(out, want, sizeof want);
  ccg_graph_free(g);
}

static void test_cast(void **state) {
  (void)state;
  float fv[6] = {-1.7f, 0.0f, 2.5f, 1e20f, NAN, 0.25f};
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[6]"), i, b, h, f;
  assert_ok(g, ccg_cast(g, x, CCG_DTYPE_I64, &i));
  assert_ok(g, ccg_cast(g, x, CCG_DTYPE_BOOL, &b));
  assert_ok(g, ccg_cast(g, i, CCG_DTYPE_F16, &h));
  assert_ok(g, ccg_cast(g, b, CCG_DTYPE_F32, &f));
  assert_ok(g, ccg_graph_add_output(g, i));
  assert_ok(g, ccg_graph_add_output(g, b));
  assert_ok(g, ccg_graph_add_output(g, h));
  assert_ok(g, ccg_graph_add_output(g, f));
  int64_t iv[6];
  uint8_t bv[6];
  uint16_t hv[6];
  float fo[6];
  ccg_exec_tensor in = XT_F32("x", fv, 6);
  ccg_exec_tensor out[4] = {xt_out(ccg_value_name(g, i), iv, sizeof iv),
                            xt_out(ccg_value_name(g, b), bv, sizeof bv),
                            xt_out(ccg_value_name(g, h), hv, sizeof hv),
                            xt_out(ccg_value_name(g, f), fo, sizeof fo)};
  assert_ok(g, xt_run1(g, &in, 1, out, 4));
  int64_t wi[6] = {-1, 0, 2, INT64_MAX, 0, 0};
  uint8_t wb[6] = {1, 0, 1, 1, 1, 1};
  assert_memory_equal(iv, wi, sizeof wi);
  assert_memory_equal(bv, wb, sizeof wb);
  assert_int_equal(hv[0], 0xbc00); /* -1 */
  assert_int_equal(hv[2], 0x4000); /* 2 */
  assert_int_equal(hv[3], 0x7c00); /* too large: inf */
  float wf[6] = {1, 0, 1, 1, 1, 1};
  assert_memory_equal(fo, wf, sizeof wf);
  ccg_graph_free(g);
}

/* Identity copies; inference Dropout copies and keeps every element. */
static void test_identity_dropout(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[5]"), i, d;
  assert_ok(g, ccg_identity(g, x, &i));
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = "Dropout";
  nd.inputs = &i;
  nd.n_inputs = 1;
  nd.n_outputs = 2;
  nd.output_names = (const char *[]){"y", "mask"};
  ccg_node_id node;
  assert_ok(g, ccg_graph_add_node(g, &nd, &node));
  assert_ok(g, ccg_graph_find_value(g, "y", &d));
  assert_ok(g, ccg_graph_add_output(g, d));
  ccg_value_id mv;
  assert_ok(g, ccg_graph_find_value(g, "mask", &mv));
  assert_ok(g, ccg_graph_add_output(g, mv));
  uint16_t in[5] = {0x3f80, 0xbf80, 0x4000, 0, 0x7fc0}, out[5];
  uint8_t mask[5];
  ccg_exec_tensor t = xt_in("x", CCG_DTYPE_BF16, in, 1, (const int64_t[]){5});
  ccg_exec_tensor o[2] = {xt_out("y", out, sizeof out),
                          xt_out("mask", mask, sizeof mask)};
  assert_ok(g, xt_run1(g, &t, 1, o, 2));
  assert_memory_equal(out, in, sizeof in);
  for (int k = 0; k < 5; k++)
    assert_int_equal(mask[k], 1);
  ccg_graph_free(g);
}

/* Training-mode Dropout (a random mask) is refused as unsupported, at run
 * time when training_mode is run-time data and at create when it is a
 * constant; training_mode false or ratio 0 copy. It used to copy silently
 * whatever the mode. */
/* Dropout "drop" over in[0..2] with its output "y" as a graph output. */
static void add_dropout(ccg_graph *g, const ccg_value_id *in) {
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = "Dropout";
  nd.name = "drop";
  nd.inputs = in;
  nd.n_inputs = 3;
  nd.output_names = (const char *[]){"y"};
  ccg_node_id node;
  ccg_value_id y;
  assert_ok(g, ccg_graph_add_node(g, &nd, &node));
  assert_ok(g, ccg_graph_find_value(g, "y", &y));
  assert_ok(g, ccg_graph_add_output(g, y));
}

static void test_dropout_training_mode(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in3[3] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"),
                         ccg_test_input(g, "ratio", CCG_DTYPE_F32, "[]"),
                         ccg_test_input(g, "training", CCG_DTYPE_BOOL, "[]")};
  add_dropout(g, in3);
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, NULL, &x));
  float xs[4] = {1, -2, 3, 4}, out[4];
  struct {
    float ratio;
    uint8_t training;
    bool runs;
  } cases[] = {{0.75f, 0, true}, {0.0f, 1, true}, {0.75f, 1, false}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ccg_exec_tensor in[3] = {
        XT_F32("x", xs, 4),
        xt_in("ratio", CCG_DTYPE_F32, &cases[c].ratio, 0, NULL),
        xt_in("training", CCG_DTYPE_BOOL, &cases[c].training, 0, NULL)};
    ccg_exec_tensor o = xt_out("y", out, sizeof out);
    memset(out, 0, sizeof out);
    if (cases[c].runs) {
      assert_ok(x, ccg_exec_run(x, in, 3, &o, 1));
      assert_memory_equal(out, xs, sizeof xs);
    } else {
      assert_fails(x, CCG_STATUS_UNSUPPORTED, ccg_exec_run(x, in, 3, &o, 1),
                   "node 'drop' (Dropout)", "training mode with ratio 0.75");
    }
  }
  ccg_exec_free(x);
  ccg_graph_free(g);

  /* a constant training_mode = true: refused when compiled */
  g = ccg_test_graph(NULL);
  uint8_t yes = 1;
  ccg_tensor tt = {CCG_DTYPE_BOOL, 0, {0}, &yes};
  ccg_value_id in[3] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), CCG_NONE,
                        CCG_NONE};
  assert_ok(g, ccg_constant(g, &tt, &in[2]));
  add_dropout(g, in);
  x = NULL;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_exec_create(g, NULL, &x),
               "node 'drop' (Dropout)", "training mode with ratio 0.5");
  assert_null(x);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_f32),
      cmocka_unit_test(test_binary_broadcast),
      cmocka_unit_test(test_int64_arithmetic),
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_half_kernels),
      cmocka_unit_test(test_where_broadcast),
      cmocka_unit_test(test_cast),
      cmocka_unit_test(test_identity_dropout),
      cmocka_unit_test(test_dropout_training_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
