/* The shard pass's styles on small graphs built in memory: a
 * vocab_parallel module holding more than its Gather (a scaled embedding)
 * shards the Gather and leaves the other nodes to the propagation rules. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static size_t count_op(ccg_graph *g, ccg_op op) {
  size_t n = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++)
    n += ccg_node_op(g, (ccg_node_id)i) == op;
  return n;
}

static void vocab_parallel_module_with_a_mul(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id ids = ccg_test_input(g, "ids", CCG_DTYPE_I64, "[2,3]");
  float wdata[8 * 4] = {0}, two = 2.0f;
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {8, 4}, wdata};
  ccg_tensor st = {CCG_DTYPE_F32, 0, {0}, &two};
  ccg_value_id w, s, e, y;
  assert_ok(g, ccg_graph_add_initializer(g, "wte.weight", &wt, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "wte.scale", &st, &s));
  ccg_value_id gin[2] = {w, ids};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Gather";
  d.name = "/wte/Gather";
  d.inputs = gin;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  e = ccg_node_output(g, n, 0);
  ccg_value_id min[2] = {e, s};
  d.op = "Mul";
  d.name = "/wte/Mul";
  d.inputs = min;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  y = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_plan *plan = NULL;
  assert_ok(NULL, ccg_plan_parse("{\"wte\": \"vocab_parallel\"}", &plan));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  ccg_graph *out = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, NULL, &out, NULL));
  assert_int_equal(count_op(out, CCG_OP_WHERE), 1);
  assert_int_equal(count_op(out, CCG_OP_MUL), 1);
  assert_string_equal(ccg_test_shape(out, ccg_graph_output(out, 0)), "[2,3,4]");
  ccg_graph_free(out);
  ccg_plan_free(plan);
  ccg_graph_free(g);
}

/* A colwise weight whose unnamed MatMul is a graph output with the default
 * name '<node>_output_0': the shard's own copy of the node took that name,
 * and the output gathered from it gets it back (the local shard becomes
 * '..._local'). */
static void colwise_output_with_default_name(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]"), w;
  float wdata[4 * 6] = {0};
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, 6}, wdata};
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &wt, &w));
  ccg_value_id in[2] = {x, w};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "MatMul"; /* unnamed: "MatMul_0", output "MatMul_0_output_0" */
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  ccg_value_id y = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  const char *yname = ccg_value_name(g, y);
  ccg_plan *plan = NULL;
  assert_ok(NULL, ccg_plan_parse("{\"fc\": \"colwise\"}", &plan));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  ccg_graph *out = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, NULL, &out, NULL));
  ccg_value_id o = ccg_graph_output(out, 0);
  assert_string_equal(ccg_value_name(out, o), yname);
  assert_string_equal(ccg_test_shape(out, o), "[2,6]");
  assert_int_equal(count_op(out, CCG_OP_ALL_GATHER), 1);
  char local[256];
  snprintf(local, sizeof local, "%s_local", yname);
  ccg_value_id l;
  assert_ok(out, ccg_graph_find_value(out, local, &l));
  assert_string_equal(ccg_test_shape(out, l), "[2,3]");
  ccg_graph_free(out);
  ccg_plan_free(plan);
  ccg_graph_free(g);
}

/* torch's dynamo exporter names nodes "node_<op>_<n>" and gives the module
 * path in metadata: the plan's module "blocks.0.fc" matches through it
 * (the weight's own name, "w", says nothing), and the metadata goes with
 * the node into the sharded graph. */
static void module_from_dynamo_metadata(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]"), w;
  float wdata[4 * 6] = {0};
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, 6}, wdata};
  assert_ok(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  ccg_value_id in[2] = {x, w};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "MatMul";
  d.name = "node_MatMul_0";
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  const char *scopes = "['', 'blocks.0', 'blocks.0.fc', 'linear']";
  assert_ok(g, ccg_node_set_meta(g, n, "pkg.torch.onnx.name_scopes", scopes));
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  ccg_plan *plan = NULL;
  assert_ok(NULL, ccg_plan_parse("{\"blocks.*.fc\": \"colwise\"}", &plan));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  ccg_graph *out = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, NULL, &out, NULL));
  ccg_value_id sw;
  assert_ok(out, ccg_graph_find_value(out, "w", &sw));
  assert_string_equal(ccg_test_shape(out, sw), "[4,3]");
  assert_int_equal(count_op(out, CCG_OP_ALL_GATHER), 1);
  ccg_node_id sn = 0;
  while (ccg_node_op(out, sn) != CCG_OP_MATMUL)
    sn++;
  assert_string_equal(ccg_node_meta(out, sn, "pkg.torch.onnx.name_scopes"),
                      scopes);
  ccg_graph_free(out);
  /* without the metadata nothing matches: the plan entry is unused */
  assert_ok(g, ccg_node_set_meta(g, n, "pkg.torch.onnx.name_scopes", "[]"));
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_shard_apply(g, plan, &m, NULL, &out, NULL), "blocks.*.fc",
               "matches no module");
  ccg_plan_free(plan);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(vocab_parallel_module_with_a_mul),
      cmocka_unit_test(colwise_output_with_default_name),
      cmocka_unit_test(module_from_dynamo_metadata),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
