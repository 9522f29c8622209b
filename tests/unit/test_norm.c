/* Softmax and LayerNormalization: axes, affine broadcasting, the optional
 * statistics outputs and their stash type, errors naming node, op, values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static void test_softmax(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F16, "[b,heads,seq,seq]");
  ccg_value_id y;
  assert_ok(g, ccg_softmax(g, x, -1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,heads,seq,seq]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F16);
  assert_int_equal(ccg_node_attr(g, ccg_value_producer(g, y), "axis")->i, -1);
  assert_ok(g, ccg_softmax(g, x, 1, &y));
  assert_ok(g, ccg_softmax(g, x, -4, &y));
  /* The default axis is -1 (opset 13). */
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Softmax";
  d.inputs = &x;
  d.n_inputs = 1;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  int64_t axis = 0;
  assert_ok(g, ccg_node_attr_int(g, n, "axis", &axis));
  assert_int_equal(axis, -1);
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_softmax(g, x, 4, &y), "(Softmax)",
               "axis 4", "rank 4", "-4..3");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_softmax(g, x, -5, &y), "axis -5");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_softmax(g, s, -1, &y), "rank 0");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[4]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_softmax(g, i, 0, &y), "'i'", "i64",
               "float");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_layer_norm(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[batch,seq,768]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_BF16, "[768]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_BF16, "[768]");
  ccg_value_id sw = ccg_test_input(g, "sw", CCG_DTYPE_BF16, "[seq,768]");
  ccg_value_id one = ccg_test_input(g, "one", CCG_DTYPE_BF16, "[1,768]");
  ccg_value_id y;
  assert_ok(g, ccg_layer_norm(g, x, w, b, -1, 1e-6f, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,seq,768]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BF16);
  ccg_node_id n = ccg_value_producer(g, y);
  assert_int_equal(ccg_node_num_inputs(g, n), 3);
  assert_int_equal(ccg_node_attr(g, n, "axis")->i, -1);
  assert_true(ccg_node_attr(g, n, "epsilon")->f == 1e-6f);
  assert_ok(g, ccg_layer_norm(g, x, w, CCG_NONE, -1, 1e-5f, &y));
  assert_int_equal(ccg_node_num_inputs(g, ccg_value_producer(g, y)), 2);
  /* Normalizing over [seq,768]: the full shape or one that broadcasts. */
  assert_ok(g, ccg_layer_norm(g, x, sw, w, 1, 1e-5f, &y));
  assert_ok(g, ccg_layer_norm(g, x, one, CCG_NONE, -2, 1e-5f, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,seq,768]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* Adds LayerNormalization with all three outputs through the generic path. */
static ccg_status add_ln3(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                          const ccg_attr *attrs, size_t n_attrs,
                          ccg_node_id *n) {
  ccg_value_id in[2] = {x, w};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "LayerNormalization";
  d.inputs = in;
  d.n_inputs = 2;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = 3;
  return ccg_graph_add_node(g, &d, n);
}

static void test_layer_norm_stats(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F16, "[batch,seq,768]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F16, "[768]");
  ccg_node_id n;
  assert_ok(g, add_ln3(g, x, w, NULL, 0, &n));
  ccg_value_id y = ccg_node_output(g, n, 0), mean = ccg_node_output(g, n, 1),
               inv = ccg_node_output(g, n, 2);
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F16);
  assert_string_equal(ccg_test_shape(g, mean), "[batch,seq,1]");
  assert_int_equal(ccg_value_dtype(g, mean), CCG_DTYPE_F32); /* stash 1 */
  assert_string_equal(ccg_test_shape(g, inv), "[batch,seq,1]");
  assert_int_equal(ccg_value_dtype(g, inv), CCG_DTYPE_F32);
  ccg_value_id sw = ccg_test_input(g, "sw", CCG_DTYPE_F16, "[seq,768]");
  ccg_attr a[2] = {CCG_ATTR_I("axis", 1), CCG_ATTR_I("stash_type", 11)};
  assert_ok(g, add_ln3(g, x, sw, a, 2, &n));
  assert_string_equal(ccg_test_shape(g, ccg_node_output(g, n, 1)),
                      "[batch,1,1]");
  assert_int_equal(ccg_value_dtype(g, ccg_node_output(g, n, 2)), CCG_DTYPE_F64);
  size_t nodes = ccg_graph_num_nodes(g);
  ccg_attr bad = CCG_ATTR_I("stash_type", 7);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_ln3(g, x, w, &bad, 1, &n),
               "(LayerNormalization)", "stash_type is 7");
  ccg_attr eps = CCG_ATTR_F("epsilon", -1.0f);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_ln3(g, x, w, &eps, 1, &n),
               "epsilon is -1");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_layer_norm_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[768]");
  ccg_value_id w512 = ccg_test_input(g, "w512", CCG_DTYPE_F32, "[512]");
  ccg_value_id wbig = ccg_test_input(g, "wbig", CCG_DTYPE_F32, "[2,seq,768]");
  ccg_value_id wh = ccg_test_input(g, "wh", CCG_DTYPE_F16, "[768]");
  ccg_value_id xi = ccg_test_input(g, "xi", CCG_DTYPE_I32, "[4,8]");
  ccg_value_id y;
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_layer_norm(g, x, w512, CCG_NONE, -1, 1e-5f, &y),
               "LayerNormalization_", "(LayerNormalization)", "Scale", "'w512'",
               "[512]", "normalized shape [768]");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_layer_norm(g, x, w, w512, -1, 1e-5f, &y), "B 'w512'");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_layer_norm(g, x, wbig, CCG_NONE, 1, 1e-5f, &y),
               "[2,seq,768]", "[seq,768]");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_layer_norm(g, x, wh, CCG_NONE, -1, 1e-5f, &y), "'wh'", "f16",
               "'x'", "f32");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_layer_norm(g, xi, w, CCG_NONE, -1, 1e-5f, &y), "'xi'",
               "i32");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_layer_norm(g, x, w, CCG_NONE, 3, 1e-5f, &y), "axis 3",
               "rank 3");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_layer_norm(g, x, CCG_NONE, CCG_NONE, -1, 1e-5f, &y),
               "required input 1");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_layer_norm_stats),
      cmocka_unit_test(test_layer_norm_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
