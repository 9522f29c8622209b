/* Elementwise family: broadcasting, dtype rules, known-value folding, bad
 * input naming node, op and values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static void test_binary_broadcast(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[batch,1,16]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[4,1]");
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_F32, "[]");
  ccg_value_id y;
  assert_ok(g, ccg_add(g, a, b, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,4,16]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
  assert_ok(g, ccg_mul(g, c, a, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,1,16]");
  assert_ok(g, ccg_sub(g, b, b, &y));
  assert_string_equal(ccg_test_shape(g, y), "[4,1]");
  assert_ok(g, ccg_div(g, a, c, &y));
  assert_ok(g, ccg_pow(g, a, c, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,1,16]");
  ccg_value_id d = ccg_test_input(g, "d", CCG_DTYPE_F32, "[3,16]");
  size_t before = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_add(g, b, d, &y), "Add_", "(Add)",
               "[4,1]", "[3,16]", "do not broadcast");
  assert_int_equal(ccg_graph_num_nodes(g), before);
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[seq,1,16]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_add(g, a, s, &y), "batch", "seq");
  ccg_value_id h = ccg_test_input(g, "h", CCG_DTYPE_F16, "[4,1]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_mul(g, b, h, &y), "(Mul)", "'b'", "f32",
               "'h'", "f16");
  ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_BOOL, "[4,1]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_add(g, m, m, &y), "'m'", "bool");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_add(g, a, 9999, &y), "9999",
               "does not exist");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_unary(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[b,8]");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[8]");
  ccg_status (*floats[])(ccg_graph *, ccg_value_id, ccg_value_id *) = {
      ccg_tanh, ccg_erf, ccg_sigmoid, ccg_exp, ccg_log, ccg_sqrt};
  ccg_value_id y;
  for (size_t k = 0; k < sizeof floats / sizeof *floats; k++) {
    assert_ok(g, floats[k](g, x, &y));
    assert_string_equal(ccg_test_shape(g, y), "[b,8]");
    assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BF16);
    assert_fails(g, CCG_STATUS_DTYPE, floats[k](g, i, &y), "'i'", "i64",
                 "float");
  }
  assert_ok(g, ccg_neg(g, i, &y));
  assert_ok(g, ccg_relu(g, x, &y));
  assert_ok(g, ccg_identity(g, i, &y));
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  assert_ok(g, ccg_gelu(g, x, "tanh", &y));
  assert_ok(g, ccg_gelu(g, x, NULL, &y));
  assert_string_equal(
      ccg_node_attr(g, ccg_value_producer(g, y), "approximate")->s, "none");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_gelu(g, x, "fast", &y), "(Gelu)",
               "'fast'");
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_U8, "[8]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_neg(g, u, &y), "u8");
  ccg_graph_free(g);
}

static void test_where_cast_dropout(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_BOOL, "[1,seq]");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,1,1]");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_F32, "[]");
  ccg_value_id o;
  assert_ok(g, ccg_where(g, c, x, y, &o));
  assert_string_equal(ccg_test_shape(g, o), "[b,1,seq]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_where(g, x, x, y, &o), "condition");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I32, "[]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_where(g, c, x, i, &o), "i32", "f32");
  assert_ok(g, ccg_cast(g, x, CCG_DTYPE_F16, &o));
  assert_int_equal(ccg_value_dtype(g, o), CCG_DTYPE_F16);
  assert_string_equal(ccg_test_shape(g, o), "[b,1,1]");
  ccg_attr bad = CCG_ATTR_S("to", "f12");
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Cast";
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = &bad;
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_DTYPE, ccg_graph_add_node(g, &d, NULL), "'f12'");
  d.n_attrs = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "required attribute 'to'");
  size_t nvals = ccg_graph_num_values(g);
  assert_ok(g, ccg_dropout(g, x, 0.1f, &o));
  assert_string_equal(ccg_test_shape(g, o), "[b,1,1]");
  assert_int_equal(ccg_node_num_inputs(g, ccg_value_producer(g, o)), 2);
  /* A refused dropout leaves no ratio constant behind. */
  nvals = ccg_graph_num_values(g);
  size_t ninit = ccg_graph_num_initializers(g);
  assert_fails(g, CCG_STATUS_DTYPE, ccg_dropout(g, i, 0.1f, &o), "(Dropout)");
  assert_int_equal(ccg_graph_num_values(g), nvals);
  assert_int_equal(ccg_graph_num_initializers(g), ninit);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_dropout(g, x, 1.5f, &o), "1.5");
  assert_ok(g, ccg_dropout(g, x, 0.5f, &o));
  assert_int_equal(ccg_node_num_inputs(g, ccg_value_producer(g, o)), 1);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_known_folding(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  int64_t v[3] = {2, 8, 64};
  int64_t two = 2;
  ccg_tensor tv = {CCG_DTYPE_I64, 1, {3}, v};
  ccg_tensor t2 = {CCG_DTYPE_I64, 0, {0}, &two};
  ccg_value_id a, b, y;
  assert_ok(g, ccg_graph_add_initializer(g, "v", &tv, &a));
  assert_ok(g, ccg_graph_add_initializer(g, "two", &t2, &b));
  ccg_dim k[CCG_MAX_RANK];
  assert_ok(g, ccg_mul(g, a, b, &y));
  assert_int_equal(ccg_value_known(g, y, k), 3);
  assert_int_equal(k[0].size, 4);
  assert_int_equal(k[2].size, 128);
  assert_ok(g, ccg_div(g, a, b, &y));
  assert_int_equal(ccg_value_known(g, y, k), 3);
  assert_int_equal(k[1].size, 4);
  assert_ok(g, ccg_sub(g, a, b, &y));
  assert_int_equal(ccg_value_known(g, y, k), 3);
  assert_int_equal(k[0].size, 0);
  assert_ok(g, ccg_add(g, y, b, &y));
  assert_int_equal(ccg_value_known(g, y, k), 3);
  assert_int_equal(k[2].size, 64);
  int64_t m1 = -1;
  ccg_tensor tm = {CCG_DTYPE_I64, 1, {1}, &m1};
  ccg_value_id neg;
  assert_ok(g, ccg_graph_add_initializer(g, "minus_one", &tm, &neg));
  assert_ok(g, ccg_mul(g, neg, b, &y));
  assert_int_equal(ccg_value_known(g, y, k), 1);
  assert_int_equal(k[0].size, -2);
  /* Abs too: dynamo's Expand targets are Abs([1,-1,1]) */
  ccg_value_id abs_in[1] = {neg};
  ccg_node_desc ad = CCG_NODE_DESC_INIT;
  ad.op = "Abs";
  ad.name = "abs";
  ad.inputs = abs_in;
  ad.n_inputs = 1;
  ccg_node_id an;
  assert_ok(g, ccg_graph_add_node(g, &ad, &an));
  y = ccg_node_output(g, an, 0);
  assert_int_equal(ccg_value_known(g, y, k), 1);
  assert_int_equal(k[0].size, 1);
  /* Float values are never folded. */
  ccg_value_id f = ccg_test_input(g, "f", CCG_DTYPE_F32, "[3]");
  assert_ok(g, ccg_add(g, f, f, &y));
  assert_int_equal(ccg_value_known(g, y, k), -1);
  ccg_graph_free(g);
}

/* torch's reshape-target rewrite Where(Equal(shape, -1), ones, shape)
 * keeps the target known, symbols included; an unknown chosen side does
 * not. */
static void test_where_folds_known(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,4]"), s;
  assert_ok(g, ccg_shape_of(g, x, 0, INT64_MAX, &s));
  const int64_t m1[1] = {-1}, ones[2] = {1, 1};
  ccg_tensor tm = {CCG_DTYPE_I64, 1, {1}, m1},
             t1 = {CCG_DTYPE_I64, 1, {2}, ones};
  ccg_value_id vm, v1, in[2], c, w, r;
  assert_ok(g, ccg_graph_add_initializer(g, "m1", &tm, &vm));
  assert_ok(g, ccg_graph_add_initializer(g, "ones", &t1, &v1));
  in[0] = s;
  in[1] = vm;
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Equal";
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  c = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_where(g, c, v1, s, &w));
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, w, k), 2);
  assert_true(ccg_dim_is_sym(k[0]));
  assert_int_equal(k[1].size, 4);
  assert_ok(g, ccg_reshape(g, x, w, &r));
  assert_string_equal(ccg_test_shape(g, r), "[batch,4]");
  /* the chosen side unknown: unknown */
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_I64, "[2]");
  assert_ok(g, ccg_where(g, c, v1, u, &w));
  assert_int_equal(ccg_value_known(g, w, k), -1);
  ccg_graph_free(g);
}

/* dynamo's Expand target Abs(Concat(Shape(x)[0:1], [-1, -1])) stays known,
 * the symbol included, so Expand gives [batch,1,32]. */
static void test_abs_folds_known(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,4]"), s;
  assert_ok(g, ccg_shape_of(g, x, 0, 1, &s));
  const int64_t m1[2] = {-1, -1};
  float cls[32] = {0};
  ccg_tensor tm = {CCG_DTYPE_I64, 1, {2}, m1},
             tc = {CCG_DTYPE_F32, 3, {1, 1, 32}, cls};
  ccg_value_id vm, vc, c, a, e;
  assert_ok(g, ccg_graph_add_initializer(g, "m1", &tm, &vm));
  assert_ok(g, ccg_graph_add_initializer(g, "cls", &tc, &vc));
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){s, vm}, 2, 0, &c));
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Abs";
  d.inputs = &c;
  d.n_inputs = 1;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  a = ccg_node_output(g, n, 0);
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, a, k), 3);
  assert_true(ccg_dim_is_sym(k[0]));
  assert_int_equal(k[1].size, 1);
  assert_int_equal(k[2].size, 1);
  assert_ok(g, ccg_expand(g, vc, a, &e));
  assert_string_equal(ccg_test_shape(g, e), "[batch,1,32]");
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_broadcast),
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_where_folds_known),
      cmocka_unit_test(test_where_cast_dropout),
      cmocka_unit_test(test_known_folding),
      cmocka_unit_test(test_abs_folds_known),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
