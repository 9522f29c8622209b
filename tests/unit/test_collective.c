/* Collectives: groups over 1-D and 2-D meshes (and W = 1), the attributes
 * builders write, shape rules (even, symbolic, uneven split sizes with
 * rank-dependent symbols), point-to-point ops, and every error path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static ccg_node_id producer(ccg_graph *g, ccg_value_id v) {
  return ccg_value_producer(g, v);
}

static int64_t attr_i(ccg_graph *g, ccg_value_id v, const char *name) {
  const ccg_attr *a = ccg_node_attr(g, producer(g, v), name);
  if (!a)
    fail_msg("attribute '%s' was not written", name);
  return a->i;
}

/* An f32 input [sym, n] or [n, sym]: ccg_test_input splits on every comma,
 * so rank-dependent symbols ("tp{3,5,4,4}") are given here. */
static ccg_value_id sym_input(ccg_graph *g, const char *name, const char *sym,
                              int64_t n, bool sym_first) {
  ccg_shape s = {2, {ccg_dim_sym(sym), ccg_dim_num(n)}};
  if (!sym_first)
    s = (ccg_shape){2, {ccg_dim_num(n), ccg_dim_sym(sym)}};
  ccg_value_id v = CCG_NONE;
  if (ccg_graph_add_input(g, name, CCG_DTYPE_F32, &s, &v) != CCG_STATUS_OK)
    fail_msg("input %s: %s", name, ccg_last_error(g));
  return v;
}

/* Adds a node through the generic path (as an importer would). */
static ccg_status add_node(ccg_graph *g, const char *op, ccg_value_id x,
                           const ccg_attr *attrs, size_t n) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.domain = CCG_DOMAIN_CCGRAPH;
  d.inputs = &x;
  d.n_inputs = x == CCG_NONE ? 0 : 1;
  d.attrs = attrs;
  d.n_attrs = n;
  d.n_outputs = strcmp(op, "Send") == 0 ? 0 : 1;
  return ccg_graph_add_node(g, &d, NULL);
}

static void test_registry_flags(void **state) {
  (void)state;
  static const ccg_op ops[] = {
      CCG_OP_ALL_REDUCE,     CCG_OP_ALL_GATHER,
      CCG_OP_REDUCE_SCATTER, CCG_OP_ALL_TO_ALL,
      CCG_OP_SHARD_SLICE,    CCG_OP_BROADCAST,
      CCG_OP_REDUCE,         CCG_OP_SEND,
      CCG_OP_RECV,           CCG_OP_COLLECTIVE_PERMUTE};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    assert_true(ccg_op_is_collective(ops[i]));
    assert_string_equal(ccg_op_domain(ops[i]), "ccgraph");
    assert_true(ccg_op_num_attrs(ops[i]) >= 3);
  }
  assert_false(ccg_op_is_collective(CCG_OP_MATMUL));
  assert_false(ccg_op_is_collective(CCG_OP_REDUCE_SUM));
  bool required = false;
  ccg_attr_type t;
  assert_string_equal(ccg_op_attr_info(CCG_OP_ALL_GATHER, 0, &t, &required),
                      "mesh_axes");
  assert_int_equal(t, CCG_ATTR_STRINGS);
  assert_true(required);
}

static void test_all_reduce(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,H]");
  ccg_value_id y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,seq,H]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
  ccg_node_id n = producer(g, y);
  assert_int_equal(ccg_node_op(g, n), CCG_OP_ALL_REDUCE);
  const ccg_attr *axes = ccg_node_attr(g, n, "mesh_axes");
  assert_non_null(axes);
  assert_int_equal(axes->n, 1);
  assert_string_equal(axes->strings[0], "tp");
  assert_int_equal(attr_i(g, y, "group_size"), 4);
  assert_string_equal(ccg_node_attr(g, n, "reduce_op")->s, "sum");
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_AVG, &y));
  assert_string_equal(ccg_node_attr(g, producer(g, y), "reduce_op")->s, "avg");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[4]");
  assert_ok(g, ccg_all_reduce(g, i, "tp", CCG_REDUCE_MAX, &y));
  size_t nodes = ccg_graph_num_nodes(g), values = ccg_graph_num_values(g);
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_all_reduce(g, i, "tp", CCG_REDUCE_AVG, &y), "AllReduce_",
               "(AllReduce)", "avg", "'i'", "i64");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_BOOL, "[4]");
  values++;
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_all_reduce(g, b, "tp", CCG_REDUCE_SUM, &y), "'b'", "bool");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "ep", CCG_REDUCE_SUM, &y), "(AllReduce)",
               "mesh axis 'ep'", "[tp=4]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "tp", (ccg_reduce_op)99, &y),
               "reduce_op is 'invalid'");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "", CCG_REDUCE_SUM, &y),
               "mesh_axes is empty");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, NULL, CCG_REDUCE_SUM, &y),
               "mesh_axes is empty");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "tp,", CCG_REDUCE_SUM, &y), "mesh axis ''");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "a,b,c,d,e,f,g,h,i", CCG_REDUCE_SUM, &y),
               "AllReduce", "more than 8 mesh axes");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_int_equal(ccg_graph_num_values(g), values);
  /* A mesh can no longer change once collectives use it. */
  ccg_mesh other;
  assert_int_equal(ccg_mesh_parse("tp=8", &other), CCG_STATUS_OK);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_set_mesh(g, &other),
               "already has collectives");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_no_mesh(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,4]");
  ccg_value_id y;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y), "(AllReduce)",
               "no device mesh");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_gather(g, x, "tp", 0, NULL, &y), "(AllGather)",
               "no device mesh");
  ccg_node_id n;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "pp", 1, 0, &n),
               "(Send)", "no device mesh");
  ccg_shape s = CCG_SHAPE(4);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_recv(g, "pp", 1, 0, CCG_DTYPE_F32, &s, &y), "(Recv)",
               "no device mesh");
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  ccg_graph_free(g);
}

static void test_groups_2d(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,6]");
  ccg_value_id y;
  assert_ok(g, ccg_all_gather(g, x, "tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[16,6]");
  assert_int_equal(attr_i(g, y, "group_size"), 2);
  assert_ok(g, ccg_all_gather(g, x, "dp", 1, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[8,12]");
  assert_int_equal(attr_i(g, y, "group_size"), 2);
  assert_ok(g, ccg_all_gather(g, x, "dp,tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[32,6]");
  assert_int_equal(attr_i(g, y, "group_size"), 4);
  const ccg_attr *axes = ccg_node_attr(g, producer(g, y), "mesh_axes");
  assert_int_equal(axes->n, 2);
  assert_string_equal(axes->strings[0], "dp");
  assert_string_equal(axes->strings[1], "tp");
  assert_ok(g, ccg_reduce_scatter(g, x, "dp,tp", 0, CCG_REDUCE_SUM, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,6]");
  assert_ok(g, ccg_all_reduce(g, x, "tp,dp", CCG_REDUCE_SUM, &y));
  assert_int_equal(attr_i(g, y, "group_size"), 4);
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "tp,tp", CCG_REDUCE_SUM, &y), "(AllReduce)",
               "'tp' is named twice");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, "dp,pp", CCG_REDUCE_SUM, &y), "'pp'",
               "[dp=2,tp=2]");
  /* group_size must match the mesh: both numbers are named. */
  const char *names[] = {"dp", "tp"};
  ccg_attr a[3] = {CCG_ATTR_SS("mesh_axes", names, 2),
                   CCG_ATTR_I("group_size", 3), CCG_ATTR_S("reduce_op", "sum")};
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllReduce", x, a, 3),
               "(AllReduce)", "group_size is 3", "[dp,tp]", "hold 4 ranks");
  a[1] = CCG_ATTR_I("group_size", 4);
  a[2] = CCG_ATTR_S("reduce_op", "mean");
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllReduce", x, a, 3),
               "reduce_op is 'mean'");
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllReduce", x, a, 2),
               "required attribute 'reduce_op'");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_all_gather(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[seq/4,H]");
  ccg_value_id y;
  assert_ok(g, ccg_all_gather(g, x, "tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[seq,H]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BF16);
  assert_int_equal(attr_i(g, y, "axis"), 0);
  assert_null(ccg_node_attr(g, producer(g, y), "split_sizes"));
  assert_ok(g, ccg_all_gather(g, x, "tp", -1, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[seq/4,4*H]");
  /* Uneven shards: each rank holds its own entry. */
  const int64_t sizes[] = {3, 5, 4, 4}, even[] = {4, 4, 4, 4};
  ccg_value_id u = sym_input(g, "u", "tp{3,5,4,4}", 8, true);
  assert_ok(g, ccg_all_gather(g, u, "tp", 0, sizes, &y));
  assert_string_equal(ccg_test_shape(g, y), "[16,8]");
  const ccg_attr *ss = ccg_node_attr(g, producer(g, y), "split_sizes");
  assert_non_null(ss);
  assert_int_equal(ss->n, 4);
  assert_int_equal(ss->ints[1], 5);
  ccg_value_id e = ccg_test_input(g, "e", CCG_DTYPE_F32, "[4,8]");
  assert_ok(g, ccg_all_gather(g, e, "tp", 0, even, &y));
  assert_string_equal(ccg_test_shape(g, y), "[16,8]");
  ccg_value_id flag = ccg_test_input(g, "flag", CCG_DTYPE_BOOL, "[2]");
  assert_ok(g, ccg_all_gather(g, flag, "tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[8]");
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_all_gather(g, e, "tp", 0, sizes, &y),
               "(AllGather)", "dim 0 of input 'e' is 4", "tp{3,5,4,4}");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_all_gather(g, u, "tp", 0, even, &y),
               "tp{3,5,4,4}", "gives this rank 4");
  const int64_t negative[] = {3, -1, 4, 4};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_gather(g, e, "tp", 0, negative, &y),
               "split_sizes[1] is -1");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_gather(g, e, "tp", 2, NULL, &y), "(AllGather)", "axis 2",
               "rank 2");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_gather(g, s, "tp", 0, NULL, &y), "rank 0");
  ccg_value_id big =
      ccg_test_input(g, "big", CCG_DTYPE_F32, "[4611686018427387904]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_all_gather(g, big, "tp", 0, NULL, &y),
               "4611686018427387904", "group size 4", "overflows");
  /* Lists of the wrong length, as an importer could hand them over. */
  const char *tp[] = {"tp"};
  ccg_attr a[4] = {CCG_ATTR_SS("mesh_axes", tp, 1), CCG_ATTR_I("group_size", 4),
                   CCG_ATTR_I("axis", 0), CCG_ATTR_IS("split_sizes", sizes, 3)};
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllGather", e, a, 4),
               "split_sizes has 3 entries", "[tp]", "4 ranks");
  const int64_t huge[] = {INT64_MAX, 1, 1, 1};
  a[3] = CCG_ATTR_IS("split_sizes", huge, 4);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllGather", e, a, 4),
               "overflow");
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllGather", e, a, 2),
               "required attribute 'axis'");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_reduce_scatter(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[10,16]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[seq,H]");
  ccg_value_id y;
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 1, CCG_REDUCE_SUM, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,4]");
  assert_string_equal(ccg_node_attr(g, producer(g, y), "reduce_op")->s, "sum");
  assert_int_equal(attr_i(g, y, "axis"), 1);
  assert_ok(g, ccg_reduce_scatter(g, s, "tp", 0, CCG_REDUCE_MAX, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[seq/4,H]");
  /* Back again: AllGather undoes the split symbolically. */
  assert_ok(g, ccg_all_gather(g, y, "tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[seq,H]");
  /* Uneven: the output dim is rank-dependent, and gathers back to 16. */
  const int64_t sizes[] = {3, 5, 4, 4}, even[] = {4, 4, 4, 4};
  ccg_value_id r;
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 1, CCG_REDUCE_SUM, sizes, &r));
  assert_string_equal(ccg_test_shape(g, r), "[10,tp{3,5,4,4}]");
  assert_true(ccg_dim_is_sym(ccg_value_shape(g, r)->dims[1]));
  assert_ok(g, ccg_all_gather(g, r, "tp", 1, sizes, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,16]");
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", -1, CCG_REDUCE_SUM, even, &y));
  assert_string_equal(ccg_test_shape(g, y), "[10,4]");
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &y),
               "ReduceScatter_", "(ReduceScatter)", "'x'", "[10,16]",
               "dim 0 of size 10 is not divisible by group size 4");
  const int64_t short_sum[] = {3, 5, 4, 3};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reduce_scatter(g, x, "tp", 1, CCG_REDUCE_SUM, short_sum, &y),
               "split_sizes sum to 15", "dim 1", "is 16");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_reduce_scatter(g, s, "tp", 0, CCG_REDUCE_SUM, sizes, &y),
               "sum to 16", "is seq");
  /* A symbol no rule can divide (the coefficient would overflow) gets a
   * fresh name derived from the node, stable under re-validation. */
  ccg_value_id odd = sym_input(g, "odd", "seq/4611686018427387904", 8, true);
  assert_ok(g, ccg_reduce_scatter(g, odd, "tp", 0, CCG_REDUCE_SUM, NULL, &y));
  char want[64];
  snprintf(want, sizeof want, "[%s_o0_d0,8]", ccg_node_name(g, producer(g, y)));
  assert_string_equal(ccg_test_shape(g, y), want);
  nodes = ccg_graph_num_nodes(g);
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I32, "[8]");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_reduce_scatter(g, i, "tp", 0, CCG_REDUCE_AVG, NULL, &y),
               "avg", "i32");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_BOOL, "[8]");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_reduce_scatter(g, b, "tp", 0, CCG_REDUCE_SUM, NULL, &y),
               "bool");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_shard_slice(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BOOL, "[batch,10]");
  ccg_value_id y;
  assert_ok(g, ccg_shard_slice(g, x, "dp", 1, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,5]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BOOL);
  assert_ok(g, ccg_shard_slice(g, x, "dp,tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch/4,10]");
  /* Rank-dependent symbols over two axes are named "dp.tp{...}". */
  const int64_t sizes[] = {1, 2, 3, 4};
  assert_ok(g, ccg_shard_slice(g, x, "dp,tp", 1, sizes, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,dp.tp{1,2,3,4}]");
  assert_ok(g, ccg_all_gather(g, y, "dp,tp", 1, sizes, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,10]");
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_shard_slice(g, x, "dp,tp", 1, NULL, &y),
               "(ShardSlice)",
               "dim 1 of size 10 is not divisible by group size 4");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_shard_slice(g, x, "tp", -3, NULL, &y), "axis -3");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_all_to_all(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  /* Ulysses: scatter heads, gather the sequence. */
  ccg_value_id q = ccg_test_input(g, "q", CCG_DTYPE_F16, "[b,seq/4,16,64]");
  ccg_value_id y, back;
  assert_ok(g, ccg_all_to_all(g, q, "tp", 2, 1, NULL, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,seq,4,64]");
  assert_int_equal(attr_i(g, y, "split_axis"), 2);
  assert_int_equal(attr_i(g, y, "concat_axis"), 1);
  assert_ok(g, ccg_all_to_all(g, y, "tp", 1, 2, NULL, NULL, &back));
  assert_string_equal(ccg_test_shape(g, back), "[b,seq/4,16,64]");
  /* One axis, even: the shape stays. */
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,3]");
  assert_ok(g, ccg_all_to_all(g, x, "tp", 0, 0, NULL, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[8,3]");
  /* One axis, uneven (MoE): the dim becomes what arrives. */
  ccg_value_id t = ccg_test_input(g, "t", CCG_DTYPE_F32, "[10,32]");
  const int64_t in[] = {1, 2, 3, 4}, out[] = {2, 2, 2, 3};
  assert_ok(g, ccg_all_to_all(g, t, "tp", 0, 0, in, out, &y));
  assert_string_equal(ccg_test_shape(g, y), "[9,32]");
  assert_int_equal(ccg_node_attr(g, producer(g, y), "out_splits")->n, 4);
  assert_ok(g, ccg_all_to_all(g, y, "tp", 0, 0, out, in, &back));
  assert_string_equal(ccg_test_shape(g, back), "[10,32]");
  /* Two axes, uneven: a scatter along one and a gather along the other. */
  ccg_value_id m = sym_input(g, "m", "tp{2,2,2,3}", 10, false);
  assert_ok(g, ccg_all_to_all(g, m, "tp", 0, 1, in, out, &y));
  assert_string_equal(ccg_test_shape(g, y), "[tp{1,2,3,4},9]");
  assert_ok(g, ccg_all_to_all(g, y, "tp", 1, 0, out, in, &back));
  assert_string_equal(ccg_test_shape(g, back), "[10,tp{2,2,2,3}]");
  ccg_value_id z = ccg_test_input(g, "z", CCG_DTYPE_F32, "[10,16]");
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_all_to_all(g, z, "tp", 0, 0, NULL, NULL, &y), "(AllToAll)",
               "dim 0 of size 10 is not divisible by group "
               "size 4");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_all_to_all(g, z, "tp", 0, 1, in, out, &y), "(AllToAll)",
               "dim 1 of input 'z' is 16", "out_splits", "tp{2,2,2,3}");
  const int64_t wrong[] = {1, 1, 1, 1};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_all_to_all(g, z, "tp", 0, 0, wrong, wrong, &y),
               "in_splits sum to 4", "dim 0", "is 10");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_all_to_all(g, t, "tp", 0, 0, in, NULL, &y), "not divisible");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_to_all(g, z, "tp", 2, 0, NULL, NULL, &y), "split_axis 2",
               "rank 2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_to_all(g, z, "tp", 0, -3, NULL, NULL, &y),
               "concat_axis -3");
  const char *tp[] = {"tp"};
  ccg_attr a[5] = {CCG_ATTR_SS("mesh_axes", tp, 1), CCG_ATTR_I("group_size", 4),
                   CCG_ATTR_I("split_axis", 0), CCG_ATTR_I("concat_axis", 0),
                   CCG_ATTR_IS("out_splits", in, 2)};
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_node(g, "AllToAll", t, a, 5),
               "out_splits has 2 entries", "4 ranks");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_rooted(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_I8, "[batch,4]");
  ccg_value_id y;
  assert_ok(g, ccg_broadcast(g, x, "dp,tp", 3, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,4]");
  assert_int_equal(attr_i(g, y, "root"), 3);
  assert_int_equal(attr_i(g, y, "group_size"), 4);
  assert_ok(g, ccg_reduce(g, x, "tp", 1, CCG_REDUCE_PROD, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,4]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I8);
  assert_string_equal(ccg_node_attr(g, producer(g, y), "reduce_op")->s, "prod");
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_broadcast(g, x, "tp", 2, &y),
               "(Broadcast)", "root is 2", "[tp]", "2 ranks", "0..1");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_broadcast(g, x, "tp", -1, &y),
               "root is -1");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce(g, x, "dp,tp", 4, CCG_REDUCE_SUM, &y), "(Reduce)",
               "root is 4", "4 ranks");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_reduce(g, x, "tp", 0, CCG_REDUCE_AVG, &y), "avg", "i8");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_send_recv(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("pp=2,tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  ccg_node_id n = CCG_NONE;
  assert_ok(g, ccg_send(g, x, "pp", 1, 7, &n));
  assert_int_equal(n, 0);
  assert_int_equal(ccg_node_op(g, n), CCG_OP_SEND);
  assert_int_equal(ccg_node_num_outputs(g, n), 0);
  assert_int_equal(ccg_node_input(g, n, 0), x);
  assert_string_equal(ccg_node_attr(g, n, "mesh_axis")->s, "pp");
  assert_int_equal(ccg_node_attr(g, n, "peer_offset")->i, 1);
  assert_int_equal(ccg_node_attr(g, n, "tag")->i, 7);
  ccg_shape s = CCG_SHAPE(4, 8);
  ccg_value_id y;
  assert_ok(g, ccg_recv(g, "pp", -1, 7, CCG_DTYPE_BF16, &s, &y));
  assert_string_equal(ccg_test_shape(g, y), "[4,8]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BF16);
  ccg_node_id r = producer(g, y);
  assert_int_equal(ccg_node_num_inputs(g, r), 0);
  assert_string_equal(ccg_node_attr(g, r, "dtype")->s, "bf16");
  assert_int_equal(ccg_node_attr(g, r, "shape")->n, 2);
  ccg_shape scalar = CCG_SCALAR_SHAPE;
  assert_ok(g, ccg_recv(g, "tp", 1, 0, CCG_DTYPE_I64, &scalar, &y));
  assert_string_equal(ccg_test_shape(g, y), "[]");
  size_t nodes = ccg_graph_num_nodes(g), values = ccg_graph_num_values(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "pp,tp", 1, 0, &n),
               "(Send)", "'pp,tp'", "exactly one");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "ep", 1, 0, &n),
               "mesh axis 'ep'", "[pp=2,tp=2]");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "pp", 0, 0, &n),
               "peer_offset is 0", "'pp'", "-1..1");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "pp", 2, 0, &n),
               "peer_offset is 2", "size 2");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "pp", 1, -3, &n),
               "tag is -3");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, NULL, 1, 0, &n),
               "mesh axis ''");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_recv(g, "pp", -2, 7, CCG_DTYPE_F32, &s, &y), "(Recv)",
               "peer_offset is -2");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_recv(g, "pp", 1, 7, CCG_DTYPE_UNDEFINED, &s, &y), "(Recv)",
               "'undefined'");
  ccg_shape sym = {2, {ccg_dim_sym("batch"), ccg_dim_num(8)}};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_recv(g, "pp", 1, 7, CCG_DTYPE_F32, &sym, &y), "Recv",
               "dim 0 is batch", "static");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_recv(g, "pp", 1, 7, CCG_DTYPE_F32, NULL, &y), "Recv");
  const int64_t neg[] = {4, -1};
  ccg_attr a[5] = {CCG_ATTR_S("mesh_axis", "pp"), CCG_ATTR_I("peer_offset", 1),
                   CCG_ATTR_I("tag", 0), CCG_ATTR_S("dtype", "f32"),
                   CCG_ATTR_IS("shape", neg, 2)};
  assert_fails(g, CCG_STATUS_SHAPE, add_node(g, "Recv", CCG_NONE, a, 5),
               "(Recv)", "shape dim 1 is -1");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_int_equal(ccg_graph_num_values(g), values);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_collective_permute(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,cp=4");
  ccg_value_id kv = ccg_test_input(g, "kv", CCG_DTYPE_F16, "[b,seq/4,64]");
  ccg_value_id y;
  assert_ok(g, ccg_collective_permute(g, kv, "cp", 1, true, &y));
  assert_string_equal(ccg_test_shape(g, y), "[b,seq/4,64]");
  assert_int_equal(attr_i(g, y, "shift"), 1);
  assert_int_equal(attr_i(g, y, "rotate"), 1);
  assert_ok(g, ccg_collective_permute(g, kv, "cp", -3, false, &y));
  assert_int_equal(attr_i(g, y, "rotate"), 0);
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_collective_permute(g, kv, "cp", 4, true, &y),
               "(CollectivePermute)", "shift is 4", "-3..3");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_collective_permute(g, kv, "cp", 0, true, &y), "shift is 0");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_collective_permute(g, kv, "dp,cp", 1, true, &y),
               "exactly one");
  ccg_attr a[3] = {CCG_ATTR_S("mesh_axis", "cp"), CCG_ATTR_I("shift", 1),
                   CCG_ATTR_I("rotate", 2)};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               add_node(g, "CollectivePermute", kv, a, 3), "rotate is 2");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* A group of one rank is legal everywhere and changes no shape. */
static void test_group_of_one(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=1");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[5,seq]");
  ccg_value_id y;
  const int64_t one[] = {5};
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_int_equal(attr_i(g, y, "group_size"), 1);
  assert_ok(g, ccg_all_gather(g, x, "tp", 0, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[5,seq]");
  assert_ok(g, ccg_all_gather(g, x, "tp", 0, one, &y));
  assert_string_equal(ccg_test_shape(g, y), "[5,seq]");
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[5,seq]");
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 1, CCG_REDUCE_SUM, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[5,seq]");
  assert_ok(g, ccg_shard_slice(g, x, "tp", 0, one, &y));
  assert_string_equal(ccg_test_shape(g, y), "[5,seq]");
  assert_ok(g, ccg_all_to_all(g, x, "tp", 0, 1, NULL, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[5,seq]");
  assert_ok(g, ccg_broadcast(g, x, "tp", 0, &y));
  assert_ok(g, ccg_reduce(g, x, "tp", 0, CCG_REDUCE_MIN, &y));
  ccg_node_id n;
  assert_ok(g, ccg_send(g, x, "tp", 0, 0, &n));
  assert_ok(g, ccg_collective_permute(g, x, "tp", 0, true, &y));
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send(g, x, "tp", 1, 0, &n),
               "peer_offset is 1", "1 rank", "must be 0");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_broadcast(g, x, "tp", 1, &y),
               "root is 1");
  const int64_t four[] = {4};
  assert_fails(g, CCG_STATUS_SHAPE, ccg_shard_slice(g, x, "tp", 0, four, &y),
               "sum to 4", "is 5");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* Rank-dependent symbols are kept as text, so they have a length limit. */
static void test_long_split_lists(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=64");
  int64_t sizes[64], total = 0;
  for (int i = 0; i < 64; i++)
    total += sizes[i] = 1000 + i;
  ccg_shape s = {1, {ccg_dim_num(total)}};
  ccg_value_id x, y;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_shard_slice(g, x, "tp", 0, sizes, &y), "(ShardSlice)",
               "split_sizes of 64 entries", "too long");
  /* Equal sizes need no symbol. */
  for (int i = 0; i < 64; i++)
    sizes[i] = 1000;
  ccg_shape e = CCG_SHAPE(64000);
  assert_ok(g, ccg_graph_add_input(g, "e", CCG_DTYPE_F32, &e, &x));
  assert_ok(g, ccg_shard_slice(g, x, "tp", 0, sizes, &y));
  assert_string_equal(ccg_test_shape(g, y), "[1000]");
  char axes[200];
  memset(axes, 'a', sizeof axes - 1);
  axes[sizeof axes - 1] = '\0';
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_all_reduce(g, x, axes, CCG_REDUCE_SUM, &y), "AllReduce",
               "too long (199 characters)");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* Megatron sequence parallelism: gather the sequence before the column
 * parallel MatMul, reduce-scatter it after the row parallel one. */
static void test_sequence_parallel_flow(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[seq/4,batch,H]");
  ccg_value_id w1 = ccg_test_input(g, "w1", CCG_DTYPE_BF16, "[H,F/4]");
  ccg_value_id w2 = ccg_test_input(g, "w2", CCG_DTYPE_BF16, "[F/4,H]");
  ccg_value_id full, h, o, y;
  assert_ok(g, ccg_all_gather(g, x, "tp", 0, NULL, &full));
  assert_string_equal(ccg_test_shape(g, full), "[seq,batch,H]");
  assert_ok(g, ccg_matmul(g, full, w1, &h));
  assert_string_equal(ccg_test_shape(g, h), "[seq,batch,F/4]");
  assert_ok(g, ccg_gelu(g, h, "tanh", &h));
  assert_ok(g, ccg_matmul(g, h, w2, &o));
  assert_ok(g, ccg_reduce_scatter(g, o, "tp", 0, CCG_REDUCE_SUM, NULL, &y));
  assert_string_equal(ccg_test_shape(g, y), "[seq/4,batch,H]");
  /* Data parallel gradient sync of a weight. */
  assert_ok(g, ccg_all_reduce(g, w1, "dp", CCG_REDUCE_AVG, &o));
  assert_int_equal(attr_i(g, o, "group_size"), 2);
  assert_ok(g, ccg_graph_add_output(g, y));
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* Send/Recv name their peer by offset or by index (peer), exactly one. */
static void test_p2p_peer_attribute(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("pp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  ccg_node_id n;
  assert_ok(g, ccg_send_peer(g, x, "pp", 1, 3, &n));
  assert_int_equal(ccg_node_attr(g, n, "peer")->i, 1);
  assert_null(ccg_node_attr(g, n, "peer_offset"));
  ccg_shape s = CCG_SHAPE(4);
  assert_ok(g, ccg_recv_peer(g, "pp", 1, 4, CCG_DTYPE_F32, &s, &y));
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_send_peer(g, x, "pp", 5, 3, &n),
               "peer is 5; mesh axis 'pp' has ranks 0..1");
  ccg_attr both[4] = {CCG_ATTR_S("mesh_axis", "pp"),
                      CCG_ATTR_I("peer_offset", 1), CCG_ATTR_I("peer", 1),
                      CCG_ATTR_I("tag", 0)};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Send";
  d.domain = "ccgraph";
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = both;
  d.n_attrs = 4;
  d.n_outputs = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "exactly one of peer_offset and peer (both are set)");
  d.attrs = (ccg_attr[]){CCG_ATTR_S("mesh_axis", "pp"), CCG_ATTR_I("tag", 0)};
  d.n_attrs = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "(neither is set)");
  ccg_graph_free(g);
  /* an SPMD graph whose rank 1 would send to itself */
  g = ccg_test_graph("pp=2");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  assert_ok(g, ccg_send_peer(g, x, "pp", 1, 3, &n));
  ccg_comm *c = NULL;
  assert_int_equal(ccg_comm_local_new(2, &c), CCG_STATUS_OK);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = 1;
  o.comm = c;
  ccg_exec *ex = NULL;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_exec_create(g, &o, &ex),
               "rank 1 would talk to itself");
  ccg_comm_free(c);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry_flags),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_p2p_peer_attribute),
      cmocka_unit_test(test_no_mesh),
      cmocka_unit_test(test_groups_2d),
      cmocka_unit_test(test_all_gather),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_shard_slice),
      cmocka_unit_test(test_all_to_all),
      cmocka_unit_test(test_rooted),
      cmocka_unit_test(test_send_recv),
      cmocka_unit_test(test_collective_permute),
      cmocka_unit_test(test_group_of_one),
      cmocka_unit_test(test_long_split_lists),
      cmocka_unit_test(test_sequence_parallel_flow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
