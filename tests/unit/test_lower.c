/* ccg_lower for ONNX Runtime: a ShardSlice with uneven split sizes becomes
 * a Slice of this rank's chunk (run and compared), a ReduceScatter over the
 * whole mesh an AllReduce then that Slice, one over part of the mesh is
 * kept; names, outputs, placements and tags go through; bad ranks are
 * refused naming them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

static size_t count_op(ccg_graph *g, ccg_op op) {
  size_t n = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++)
    n += ccg_node_op(g, (ccg_node_id)i) == op;
  return n;
}

static void shard_slice_becomes_slice(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]"), y;
  const int64_t sizes[2] = {2, 4};
  assert_ok(g, ccg_shard_slice(g, x, "tp", 1, sizes, &y));
  ccg_placement s1 = {CCG_PLACEMENT_SHARD, 1, CCG_REDUCE_SUM};
  assert_ok(g, ccg_value_set_placements(g, y, &s1, 1));
  assert_ok(g, ccg_graph_add_output(g, y));
  const char *yname = ccg_value_name(g, y);
  for (int r = 0; r < 2; r++) {
    ccg_graph *l = NULL;
    assert_ok(g, ccg_lower(g, r, CCG_LOWER_ORT, &l));
    assert_int_equal(count_op(l, CCG_OP_SHARD_SLICE), 0);
    assert_int_equal(count_op(l, CCG_OP_SLICE), 1);
    ccg_value_id ly;
    assert_ok(l, ccg_graph_find_value(l, yname, &ly)); /* same name */
    assert_int_equal(ccg_graph_output(l, 0), ly);
    ccg_placement pl[CCG_MAX_MESH_AXES];
    assert_int_equal(ccg_value_placements(l, ly, pl), 1);
    assert_int_equal(pl[0].kind, CCG_PLACEMENT_SHARD);
    /* rank r's columns: [0,2) or [2,6) */
    float in[24], out[16];
    xt_fill(in, 24, 3);
    ccg_exec_tensor ti = XT_F32("x", in, 4, 6);
    ccg_exec_tensor to = xt_out(yname, out, sizeof out);
    assert_ok(l, xt_run1(l, &ti, 1, &to, 1));
    int lo = r ? 2 : 0, w = r ? 4 : 2;
    assert_int_equal(to.tensor.dims[1], w);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < w; j++)
        assert_true(out[i * w + j] == in[i * 6 + lo + j]);
    ccg_graph_free(l);
  }
  ccg_graph *l = NULL;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_lower(g, 2, CCG_LOWER_ORT, &l),
               "rank 2 of a world of 2");
  assert_null(l);
  ccg_graph_free(g);
}

static void reduce_scatter_becomes_all_reduce_and_slice(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]"), y, z;
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_graph *l = NULL;
  assert_ok(g, ccg_lower(g, 1, CCG_LOWER_ORT, &l));
  assert_int_equal(count_op(l, CCG_OP_REDUCE_SCATTER), 0);
  assert_int_equal(count_op(l, CCG_OP_ALL_REDUCE), 1);
  assert_int_equal(count_op(l, CCG_OP_SLICE), 1);
  assert_string_equal(ccg_test_shape(l, ccg_graph_output(l, 0)), "[2,6]");
  ccg_graph_free(l);
  ccg_graph_free(g);
  /* over part of the mesh: ORT cannot say it either way, so it is kept */
  g = ccg_test_graph("dp=2,tp=2");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]");
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &z));
  assert_ok(g, ccg_graph_add_output(g, z));
  assert_ok(g, ccg_lower(g, 3, CCG_LOWER_ORT, &l));
  assert_int_equal(count_op(l, CCG_OP_REDUCE_SCATTER), 1);
  ccg_graph_free(l);
  ccg_graph_free(g);
}

/* The AllReduce a rewrite adds is named after its ReduceScatter: a
 * generated "AllReduce_<k>" could be the name of a node of g copied later
 * (two ReduceScatters, then an AllReduce). */
static void added_names_do_not_clash(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]"), a, b, c;
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &a));
  assert_ok(g, ccg_reduce_scatter(g, x, "tp", 0, CCG_REDUCE_SUM, NULL, &b));
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &c));
  assert_ok(g, ccg_graph_add_output(g, a));
  assert_ok(g, ccg_graph_add_output(g, b));
  assert_ok(g, ccg_graph_add_output(g, c));
  ccg_graph *l = NULL;
  assert_ok(g, ccg_lower(g, 0, CCG_LOWER_ORT, &l));
  assert_int_equal(count_op(l, CCG_OP_ALL_REDUCE), 3);
  ccg_node_id n;
  assert_ok(l, ccg_graph_find_node(
                   l, ccg_node_name(g, ccg_value_producer(g, c)), &n));
  assert_int_equal(ccg_node_output(l, n, 0), ccg_graph_output(l, 2));
  ccg_graph_free(l);
  ccg_graph_free(g);
}

/* The ONNX layer writes a graph as it is (it knows the graph only): a
 * ShardSlice in the ORT dialect is refused naming ccg_lower, and the
 * caller's lowered graph of one rank is written and reads back with a
 * constant Slice. */
static void ort_buffer_export_of_lowered(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]"), y;
  assert_ok(g, ccg_shard_slice(g, x, "tp", 1, NULL, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.dialect = CCG_ONNX_DIALECT_ORT;
  void *buf = NULL;
  size_t n = 0;
  o.rank = 1;
  assert_fails(g, CCG_STATUS_UNSUPPORTED,
               ccg_onnx_export_buffer(g, &o, &buf, &n), "ShardSlice",
               "ccg_lower");
  ccg_graph *l = NULL;
  assert_ok(g, ccg_lower(g, 1, CCG_LOWER_ORT, &l));
  o.rank = -1;
  assert_ok(l, ccg_onnx_export_buffer(l, &o, &buf, &n));
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(buf, n, NULL, NULL, &back));
  assert_int_equal(count_op(back, CCG_OP_SHARD_SLICE), 0);
  assert_int_equal(count_op(back, CCG_OP_SLICE), 1);
  free(buf);
  ccg_graph_free(back);
  ccg_graph_free(l);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shard_slice_becomes_slice),
      cmocka_unit_test(reduce_scatter_becomes_all_reduce_and_slice),
      cmocka_unit_test(ort_buffer_export_of_lowered),
      cmocka_unit_test(added_names_do_not_clash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
