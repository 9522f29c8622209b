/* ccg_verify_placements: every wrong move a collective or an elementwise op
 * can be labelled with is caught, naming the node, the axis, both values
 * and what the node does; right ones (each collective's own move, values
 * without placements, a mapping-built forward+backward graph) pass. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static const ccg_placement R = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
static const ccg_placement P = {CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM};
static ccg_placement S(int d) {
  ccg_placement p = {CCG_PLACEMENT_SHARD, d, CCG_REDUCE_SUM};
  return p;
}

static void label(ccg_graph *g, ccg_value_id v, ccg_placement p) {
  assert_ok(g, ccg_value_set_placements(g, v, &p, 1));
}

typedef enum which { AR, AG, RS, SS, A2A, RELU } which;

/* x [4,4] on tp=2 through one node, x labelled pin and the result pout. */
static ccg_status one(which w, ccg_placement pin, ccg_placement pout,
                      ccg_verify_report *r) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,4]"), y;
  switch (w) {
  case AR:
    assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
    break;
  case AG:
    assert_ok(g, ccg_all_gather(g, x, "tp", 0, NULL, &y));
    break;
  case RS:
    assert_ok(g, ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &y));
    break;
  case SS:
    assert_ok(g, ccg_shard_slice(g, x, "tp", 0, NULL, &y));
    break;
  case A2A:
    assert_ok(g, ccg_all_to_all(g, x, "tp", 0, 1, NULL, NULL, &y));
    break;
  default:
    assert_ok(g, ccg_relu(g, x, &y));
    break;
  }
  label(g, x, pin);
  label(g, y, pout);
  ccg_status st = ccg_verify_placements(g, r);
  ccg_graph_free(g);
  return st;
}

static void expect_bad(which w, ccg_placement pin, ccg_placement pout,
                       const char *op, const char *why) {
  ccg_verify_report r;
  assert_int_equal(one(w, pin, pout, &r), CCG_STATUS_INVALID_ARG);
  assert_int_equal(r.kind, CCG_VERIFY_PLACEMENT);
  assert_string_equal(r.group, "tp");
  assert_non_null(strstr(r.message, op));
  assert_non_null(strstr(r.message, why));
  assert_non_null(strstr(r.message, "mesh axis 'tp'"));
  assert_non_null(strstr(r.message, "'x'"));
  assert_string_equal(r.message, ccg_last_error(NULL));
}

static void right_moves_pass(void **state) {
  (void)state;
  ccg_verify_report r;
  assert_int_equal(one(AR, P, R, &r), CCG_STATUS_OK);
  assert_int_equal(r.kind, CCG_VERIFY_OK);
  assert_int_equal(one(AG, S(0), R, &r), CCG_STATUS_OK);
  assert_int_equal(one(RS, P, S(0), &r), CCG_STATUS_OK);
  assert_int_equal(one(SS, R, S(0), &r), CCG_STATUS_OK);
  assert_int_equal(one(A2A, S(1), S(0), &r), CCG_STATUS_OK);
  assert_int_equal(one(RELU, S(1), S(1), &r), CCG_STATUS_OK);
  assert_int_equal(one(RELU, P, P, &r), CCG_STATUS_OK);
}

static void wrong_moves_are_named(void **state) {
  (void)state;
  /* a gradient that should have been reduce-scattered but was sliced */
  expect_bad(SS, P, S(0), "(ShardSlice)", "a reduce-scatter was meant");
  expect_bad(SS, S(1), S(0), "(ShardSlice)", "already sharded");
  expect_bad(AR, S(0), R, "(AllReduce)", "shards are different slices");
  expect_bad(AR, P, S(0), "(AllReduce)", "same whole value");
  expect_bad(AG, P, R, "(AllGather)", "concatenates them unreduced");
  expect_bad(AG, S(1), R, "(AllGather)", "another dim than the shards'");
  expect_bad(RS, S(0), S(0), "(ReduceScatter)", "shards are not partial sums");
  expect_bad(RS, P, S(1), "(ReduceScatter)", "slice along the node's axis");
  expect_bad(A2A, P, S(0), "(AllToAll)", "partial sums stay unreduced");
  expect_bad(A2A, S(0), S(0), "(AllToAll)", "along the concat axis");
  expect_bad(RELU, R, S(0), "(Relu)", "takes a collective");
  expect_bad(RELU, P, R, "(Relu)", "takes a collective");
  /* max partials reduced by the node's sum */
  const ccg_placement pmax = {CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_MAX};
  expect_bad(AR, pmax, R, "(AllReduce)",
             "combine by max but the node "
             "reduces with sum");
  expect_bad(RS, pmax, S(0), "(ReduceScatter)", "combine by max");
}

/* Unlabelled values are not judged; a graph without a mesh has nothing to
 * check. */
static void unlabelled_pass(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,4]"), y;
  assert_ok(g, ccg_shard_slice(g, x, "tp", 0, NULL, &y));
  assert_ok(g, ccg_verify_placements(g, NULL));
  ccg_graph_free(g);
  g = ccg_test_graph(NULL);
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  assert_ok(g, ccg_relu(g, x, &y));
  assert_ok(g, ccg_verify_placements(g, NULL));
  ccg_graph_free(g);
  assert_int_equal(ccg_verify_placements(NULL, NULL), CCG_STATUS_INVALID_ARG);
}

/* The first wrong node in the executor's order is named: with schedule
 * slots that put the second node first, it is the second. Ops that are
 * not judged (MatMul) may take and give any placements. */
static ccg_graph *two_wrong(bool swap) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,4]");
  ccg_value_id z = ccg_test_input(g, "z", CCG_DTYPE_F32, "[4,4]"), y, w, m;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_relu(g, z, &w));
  assert_ok(g, ccg_matmul(g, x, z, &m));
  label(g, x, S(0));
  label(g, y, R);
  label(g, z, R);
  label(g, w, S(0));
  label(g, m, P);
  if (swap) {
    assert_ok(g, ccg_node_set_meta(g, 0, CCG_META_SLOT, "2"));
    assert_ok(g, ccg_node_set_meta(g, 1, CCG_META_SLOT, "0"));
    assert_ok(g, ccg_node_set_meta(g, 2, CCG_META_SLOT, "1"));
  }
  return g;
}

static void first_wrong_in_order(void **state) {
  (void)state;
  for (int swap = 0; swap < 2; swap++) {
    ccg_graph *g = two_wrong(swap);
    ccg_verify_report r;
    assert_int_equal(ccg_verify_placements(g, &r), CCG_STATUS_INVALID_ARG);
    assert_int_equal(r.kind, CCG_VERIFY_PLACEMENT);
    assert_string_equal(r.node_a, ccg_node_name(g, swap ? 1 : 0));
    assert_non_null(strstr(r.message, swap ? "(Relu)" : "(AllReduce)"));
    ccg_graph_free(g);
  }
}

/* Mapping-built forwards and their backwards, labelled by the mappings
 * (DTensor's colwise and rowwise pair with a Replicate input; the
 * sequence-parallel pair: an all-gather in, a reduce-scatter out) agree
 * with their collectives. */
static void mappings_agree(void **state) {
  (void)state;
  for (int sp = 0; sp < 2; sp++) {
    ccg_graph *g = ccg_test_graph("tp=2");
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,4]");
    ccg_value_id w1 = ccg_test_input(g, "w1", CCG_DTYPE_F32, "[4,6]");
    ccg_value_id w2 = ccg_test_input(g, "w2", CCG_DTYPE_F32, "[6,4]"), h, y;
    const char *colw = sp ? "{\"input_layouts\":\"Shard(0)\"}" : NULL;
    const char *roww = sp ? "{\"output_layouts\":\"Shard(0)\"}" : NULL;
    ccg_value_id ci[2] = {x, w1}, ri[2];
    size_t n = 1;
    assert_ok(g, ccg_mapping_apply(g, "dtensor.colwise_parallel", colw, ci, 2,
                                   &h, &n));
    assert_ok(g, ccg_relu(g, h, &h));
    ri[0] = h, ri[1] = w2, n = 1;
    assert_ok(g, ccg_mapping_apply(g, "dtensor.rowwise_parallel", roww, ri, 2,
                                   &y, &n));
    ccg_value_id loss;
    assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &loss));
    ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
    const char *wrt[3] = {"x", "w1", "w2"};
    o.loss = loss;
    o.wrt = wrt;
    o.n_wrt = 3;
    assert_ok(g, ccg_backward(g, &o));
    /* the mappings label their values: the check has something to judge */
    int labelled = 0;
    ccg_placement pl[CCG_MAX_MESH_AXES];
    for (size_t v = 0; v < ccg_graph_num_values(g); v++)
      labelled += ccg_value_placements(g, (ccg_value_id)v, pl) > 0;
    print_message("sequence parallel %d: %d labelled values\n", sp, labelled);
    assert_true(labelled >= 4);
    assert_ok(g, ccg_verify_placements(g, NULL));
    ccg_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(right_moves_pass),
      cmocka_unit_test(wrong_moves_are_named),
      cmocka_unit_test(unlabelled_pass),
      cmocka_unit_test(mappings_agree),
      cmocka_unit_test(first_wrong_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
