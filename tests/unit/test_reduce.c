/* ReduceSum, ReduceMean, ReduceMax: axes (negative, empty = all, noop),
 * keepdims, the attributes the builders write, and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

typedef ccg_status (*reduce_fn)(ccg_graph *, ccg_value_id, const int64_t *,
                                size_t, bool, ccg_value_id *);

static const reduce_fn reducers[] = {ccg_reduce_sum, ccg_reduce_mean,
                                     ccg_reduce_max};
static const ccg_op reducer_ops[] = {CCG_OP_REDUCE_SUM, CCG_OP_REDUCE_MEAN,
                                     CCG_OP_REDUCE_MAX};

static void test_reduce_shapes(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  const int64_t last[] = {-1}, outer[] = {0, 2};
  ccg_value_id y;
  for (size_t k = 0; k < 3; k++) {
    assert_ok(g, reducers[k](g, x, last, 1, true, &y));
    assert_string_equal(ccg_test_shape(g, y), "[batch,seq,1]");
    ccg_node_id n = ccg_value_producer(g, y);
    assert_int_equal(ccg_node_op(g, n), reducer_ops[k]);
    const ccg_attr *axes = ccg_node_attr(g, n, "axes");
    assert_non_null(axes);
    assert_int_equal(axes->n, 1);
    assert_int_equal(axes->ints[0], -1);
    assert_int_equal(ccg_node_attr(g, n, "keepdims")->i, 1);
    assert_ok(g, reducers[k](g, x, last, 1, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[batch,seq]");
    assert_int_equal(ccg_node_attr(g, ccg_value_producer(g, y), "keepdims")->i,
                     0);
    assert_ok(g, reducers[k](g, x, outer, 2, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[seq]");
    assert_ok(g, reducers[k](g, x, outer, 2, true, &y));
    assert_string_equal(ccg_test_shape(g, y), "[1,seq,1]");
    /* No axes: everything is reduced, and no axes attribute is written. */
    assert_ok(g, reducers[k](g, x, NULL, 0, true, &y));
    assert_string_equal(ccg_test_shape(g, y), "[1,1,1]");
    assert_null(ccg_node_attr(g, ccg_value_producer(g, y), "axes"));
    assert_ok(g, reducers[k](g, x, last, 0, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[]");
    assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
  }
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[4,5]");
  assert_ok(g, ccg_reduce_max(g, i, last, 1, false, &y));
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  assert_string_equal(ccg_test_shape(g, y), "[4]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_ok(g, ccg_reduce_sum(g, s, NULL, 0, true, &y));
  assert_string_equal(ccg_test_shape(g, y), "[]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* Adds a ReduceSum through the generic path with the given attributes. */
static ccg_status add_reduce(ccg_graph *g, ccg_value_id x,
                             const ccg_attr *attrs, size_t n,
                             ccg_value_id *out) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "ReduceSum";
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = attrs;
  d.n_attrs = n;
  ccg_node_id node;
  ccg_status st = ccg_graph_add_node(g, &d, &node);
  if (st == CCG_STATUS_OK)
    *out = ccg_node_output(g, node, 0);
  return st;
}

static void test_reduce_defaults(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F16, "[2,seq,8]");
  ccg_value_id y;
  assert_ok(g, add_reduce(g, x, NULL, 0, &y)); /* keepdims defaults to 1 */
  assert_string_equal(ccg_test_shape(g, y), "[1,1,1]");
  ccg_attr noop = CCG_ATTR_I("noop_with_empty_axes", 1);
  assert_ok(g, add_reduce(g, x, &noop, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,seq,8]");
  /* noop only applies to empty axes. */
  const int64_t ax[] = {1};
  ccg_attr both[2] = {noop, CCG_ATTR_IS("axes", ax, 1)};
  assert_ok(g, add_reduce(g, x, both, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,1,8]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_reduce_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  ccg_value_id y;
  size_t nodes = ccg_graph_num_nodes(g);
  const int64_t dup[] = {1, -2}, out_of_range[] = {0, 3}, neg[] = {-4};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce_sum(g, x, dup, 2, true, &y), "ReduceSum_",
               "(ReduceSum)", "dim 1 twice", "-2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce_mean(g, x, out_of_range, 2, true, &y), "(ReduceMean)",
               "reduction axis 3", "rank 3");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce_max(g, x, neg, 1, true, &y), "(ReduceMax)",
               "reduction axis -4");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_BOOL, "[4]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_reduce_max(g, b, NULL, 0, true, &y),
               "'b'", "bool", "numeric");
  ccg_attr keep = CCG_ATTR_I("keepdims", 2);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_reduce(g, x, &keep, 1, &y),
               "keepdims is 2", "0 or 1");
  ccg_attr noop = CCG_ATTR_I("noop_with_empty_axes", -1);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_reduce(g, x, &noop, 1, &y),
               "noop_with_empty_axes is -1");
  ccg_attr wrong = CCG_ATTR_I("axes", 1);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_reduce(g, x, &wrong, 1, &y),
               "'axes'", "ints");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_shapes),
      cmocka_unit_test(test_reduce_defaults),
      cmocka_unit_test(test_reduce_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
