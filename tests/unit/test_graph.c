/* The graph API: values, initializers, outputs, scopes, generic nodes,
 * attributes, tags, placements, validation, order, rollback, lifetime and
 * allocation failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "test_util.h"
#include "graph/internal.h"

static void test_values(void **state) {
  (void)state;
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = "mlp";
  ccg_graph *g = NULL;
  assert_int_equal(ccg_graph_new(&o, &g), CCG_STATUS_OK);
  assert_string_equal(ccg_graph_name(g), "mlp");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,16]");
  assert_int_equal(ccg_value_kind_of(g, x), CCG_VALUE_INPUT);
  assert_int_equal(ccg_value_producer(g, x), CCG_NONE);
  assert_null(ccg_value_data(g, x));
  ccg_value_id y;
  assert_fails(
      g, CCG_STATUS_INVALID_ARG,
      ccg_graph_add_input(g, "x", CCG_DTYPE_F32, ccg_value_shape(g, x), &y),
      "'x'", "already exists");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_graph_add_input(g, "q", CCG_DTYPE_UNDEFINED,
                                   ccg_value_shape(g, x), &y),
               "'q'", "no valid dtype");
  assert_fails(
      g, CCG_STATUS_INVALID_ARG,
      ccg_graph_add_input(g, "", CCG_DTYPE_F32, ccg_value_shape(g, x), &y),
      "no name");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_add_input(g, "n", CCG_DTYPE_F32, NULL, &y),
               "no shape");

  /* Initializer data is copied: changing the source changes nothing. */
  float w[6] = {1, 2, 3, 4, 5, 6};
  ccg_tensor t = {CCG_DTYPE_F32, 2, {2, 3}, w};
  ccg_value_id wv;
  assert_ok(g, ccg_graph_add_initializer(g, "w", &t, &wv));
  w[0] = 100;
  const ccg_tensor *d = ccg_value_data(g, wv);
  assert_non_null(d);
  assert_float_equal(((const float *)d->data)[0], 1.0f, 0);
  assert_int_equal((uintptr_t)d->data % 64, 0);
  assert_string_equal(ccg_test_shape(g, wv), "[2,3]");
  assert_int_equal(ccg_value_known(g, wv, NULL), -1); /* floats: no */
  int64_t sh[2] = {4, -1};
  ccg_tensor ts = {CCG_DTYPE_I64, 1, {2}, sh};
  ccg_value_id sv;
  assert_ok(g, ccg_graph_add_initializer(g, "shape", &ts, &sv));
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, sv, k), 2);
  assert_int_equal(k[0].size, 4);
  assert_int_equal(k[1].size, -1);
  ccg_tensor nodata = {CCG_DTYPE_F32, 1, {4}, NULL};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_add_initializer(g, "nd", &nodata, &y), "'nd'",
               "no data");
  ccg_tensor huge = {CCG_DTYPE_F32, 3, {INT64_MAX / 2, 4, 4}, w};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_add_initializer(g, "huge", &huge, &y), "'huge'",
               "overflows");
  ccg_tensor neg = {CCG_DTYPE_F32, 1, {-3}, w};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_add_initializer(g, "neg", &neg, &y), "'neg'", "-3");
  assert_int_equal(ccg_graph_num_initializers(g), 2);
  assert_int_equal(ccg_graph_initializer(g, 1), sv);
  assert_int_equal(ccg_graph_initializer(g, 2), CCG_NONE);

  /* Outputs. */
  assert_ok(g, ccg_graph_add_output(g, wv));
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_output(g, wv),
               "already a graph output");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_output(g, 999), "999");
  assert_int_equal(ccg_graph_num_outputs(g), 1);
  assert_int_equal(ccg_graph_output(g, 0), wv);

  /* Look-ups. */
  ccg_value_id found;
  assert_ok(g, ccg_graph_find_value(g, "w", &found));
  assert_int_equal(found, wv);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_find_value(g, "zz", &found),
               "graph 'mlp' has no value named 'zz'");
  assert_null(ccg_value_name(g, 12345));
  assert_null(ccg_value_shape(g, 12345));
  assert_int_equal(ccg_value_dtype(g, 12345), CCG_DTYPE_UNDEFINED);
  ccg_graph_free(g);

  ccg_graph_options bad = CCG_GRAPH_OPTIONS_INIT;
  bad.size = 4;
  assert_int_equal(ccg_graph_new(&bad, &g), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(NULL), "CCG_GRAPH_OPTIONS_INIT"));
}

static void test_generic_nodes_and_attrs(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Gelu";
  d.name = "act";
  d.inputs = &x;
  d.n_inputs = 1;
  const char *names[] = {"h"};
  d.output_names = names;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_string_equal(ccg_node_name(g, n), "act");
  assert_int_equal(ccg_node_op(g, n), CCG_OP_GELU);
  assert_string_equal(ccg_value_name(g, ccg_node_output(g, n, 0)), "h");
  assert_int_equal(ccg_value_producer(g, ccg_node_output(g, n, 0)), n);
  /* Defaults come from the op's attribute spec. */
  const char *ap;
  assert_ok(g, ccg_node_attr_string(g, n, "approximate", &ap));
  assert_string_equal(ap, "none");
  assert_null(ccg_node_attr(g, n, "approximate"));
  int64_t iv;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_node_attr_int(g, n, "axis", &iv),
               "node 'act' (Gelu) has no int attribute 'axis'");
  ccg_node_id found;
  assert_ok(g, ccg_graph_find_node(g, "act", &found));
  assert_int_equal(found, n);

  /* The things a generic node can get wrong, each named. */
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "node 'act' (Gelu)", "already exists");
  d.name = "act2";
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "node 'act2' (Gelu): output 0 'h'", "already exists");
  d.output_names = NULL;
  d.op = "Frobnicate";
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_graph_add_node(g, &d, &n),
               "node 'act2'", "'Frobnicate'", "ai.onnx");
  d.op = "AllReduce";
  d.domain = "com.example";
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_graph_add_node(g, &d, &n),
               "'AllReduce'", "'com.example'");
  d.domain = NULL;
  d.op = "Add";
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "node 'act2' (Add): 1 inputs given, expected 2 to 2");
  d.op = "Tanh";
  d.n_outputs = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "2 outputs asked for");
  d.n_outputs = 1;
  ccg_attr a[2] = {CCG_ATTR_I("axis", 1), CCG_ATTR_S("approximate", "tanh")};
  d.op = "Gelu";
  d.attrs = a;
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "(Gelu): unknown attribute 'axis'");
  a[0] = CCG_ATTR_I("approximate", 1);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "attribute 'approximate' is int, expected string");
  a[0] = CCG_ATTR_S("approximate", "tanh");
  d.n_attrs = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "attribute 'approximate' given twice");
  d.n_attrs = 1;
  ccg_value_id none = CCG_NONE;
  d.inputs = &none;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "required input 0 is missing");
  d.inputs = &x;
  ccg_node_desc small = d;
  small.size = 8;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &small, &n),
               "CCG_NODE_DESC_INIT");
  assert_int_equal(ccg_graph_num_nodes(g), 1);
  assert_int_equal(ccg_graph_num_values(g), 2);
  /* Attributes are copied. */
  char buf[8] = "tanh";
  a[0] = CCG_ATTR_S("approximate", buf);
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  buf[0] = 'X';
  assert_string_equal(ccg_node_attr(g, n, "approximate")->s, "tanh");
  assert_int_equal(ccg_node_num_attrs(g, n), 1);
  assert_string_equal(ccg_node_attr_at(g, n, 0)->name, "approximate");
  assert_null(ccg_node_attr_at(g, n, 1));
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_scopes_and_tags(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id y;
  assert_ok(g, ccg_graph_push_scope(g, "layers.0"));
  assert_ok(g, ccg_graph_push_scope(g, "mlp"));
  assert_ok(g, ccg_relu(g, x, &y));
  ccg_node_id n = ccg_value_producer(g, y);
  assert_string_equal(ccg_node_name(g, n), "/layers.0/mlp/Relu_0");
  assert_string_equal(ccg_value_name(g, y), "/layers.0/mlp/Relu_0_output_0");
  ccg_graph_pop_scope(g);
  assert_ok(g, ccg_relu(g, y, &y));
  assert_string_equal(ccg_node_name(g, ccg_value_producer(g, y)),
                      "/layers.0/Relu_1");
  ccg_graph_pop_scope(g);
  ccg_graph_pop_scope(g); /* popping the root is harmless */
  assert_ok(g, ccg_relu(g, y, &y));
  assert_string_equal(ccg_node_name(g, ccg_value_producer(g, y)), "Relu_2");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_push_scope(g, "a/b"),
               "'a/b'");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_push_scope(g, ""),
               "non-empty");
  /* The first node keeps its name after the scopes are gone. */
  assert_string_equal(ccg_node_name(g, n), "/layers.0/mlp/Relu_0");

  assert_null(ccg_node_tag(g, n));
  char params[] = "{\"group\": \"tp\"}";
  ccg_tag t = {"megatron.copy_to_tensor_model_parallel_region", 3, params,
               true};
  assert_ok(g, ccg_node_set_tag(g, n, &t));
  params[0] = 'X';
  const ccg_tag *got = ccg_node_tag(g, n);
  assert_string_equal(got->mapping,
                      "megatron.copy_to_tensor_model_parallel_region");
  assert_int_equal(got->instance, 3);
  assert_string_equal(got->params, "{\"group\": \"tp\"}");
  assert_true(got->backward);
  ccg_tag empty = {"", 0, NULL, false};
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_node_set_tag(g, n, &empty),
               "needs a mapping name");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_node_set_tag(g, 77, &t), "77");
  ccg_graph_free(g);
}

static void test_placements(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[seq,64]");
  ccg_placement p[2] = {{CCG_PLACEMENT_REPLICATE, 0, 0},
                        {CCG_PLACEMENT_SHARD, -1, 0}};
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_value_set_placements(g, x, p, 2),
               "'x'", "need a mesh");
  ccg_graph_free(g);

  g = ccg_test_graph("dp=2,tp=4");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[seq,64]");
  assert_ok(g, ccg_value_set_placements(g, x, p, 2));
  ccg_placement out[CCG_MAX_MESH_AXES];
  assert_int_equal(ccg_value_placements(g, x, out), 2);
  assert_int_equal(out[0].kind, CCG_PLACEMENT_REPLICATE);
  assert_int_equal(out[1].kind, CCG_PLACEMENT_SHARD);
  assert_int_equal(out[1].dim, 1); /* normalized */
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_value_set_placements(g, x, p, 1),
               "1 placements given, the mesh has 2 axes");
  p[1].dim = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_value_set_placements(g, x, p, 2),
               "Shard(2) on mesh axis 'tp' is outside its rank 2");
  p[1] = (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_OP_COUNT};
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_value_set_placements(g, x, p, 2),
               "Partial on mesh axis 'tp'");
  p[1].reduce = CCG_REDUCE_MAX;
  assert_ok(g, ccg_value_set_placements(g, x, p, 2));
  assert_int_equal(ccg_value_placements(g, x, out), 2);
  assert_int_equal(out[1].reduce, CCG_REDUCE_MAX);
  p[0].kind = (ccg_placement_kind)9;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_value_set_placements(g, x, p, 2),
               "kind 9");
  assert_ok(g, ccg_graph_validate(g));

  /* The mesh may be replaced while no collective uses it. */
  ccg_mesh m;
  assert_int_equal(ccg_mesh_parse("tp=8", &m), CCG_STATUS_OK);
  assert_ok(g, ccg_graph_set_mesh(g, &m));
  assert_int_equal(ccg_graph_mesh(g)->sizes[0], 8);
  ccg_mesh bad = m;
  bad.sizes[0] = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_set_mesh(g, &bad),
               "axis 'tp' has size 0");
  bad = m;
  bad.ndims = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_set_mesh(g, &bad),
               "1 to 4 axes");
  assert_int_equal(ccg_graph_mesh(g)->sizes[0], 8);
  /* Placements made for the old 2-axis mesh no longer fit: validate says. */
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_validate(g), "'x'",
               "the mesh has 1 axes");
  ccg_graph_free(g);
}

/* The uses of value v, in list order: node and slot pairs into nodes and
 * slots; their count. */
static size_t uses_of(const ccg_graph *g, ccg_value_id v, ccg_node_id *nodes,
                      size_t *slots) {
  size_t k = 0, cursor = 0;
  while (ccg_value_next_use(g, v, &cursor, &nodes[k], &slots[k]))
    k++;
  assert_int_equal(k, ccg_value_num_uses(g, v));
  return k;
}

/* A node's input rewired to a value made after it: the node reads it, the
 * use moves between the two values' lists (in the order the uses were
 * made, so that a rollback after it unlinks the right ones), and the order
 * is no longer taken on trust. */
static void test_set_input(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id y, w, z, u, q;
  assert_ok(g, ccg_relu(g, x, &y));    /* node 0 */
  assert_ok(g, ccg_tanh(g, y, &w));    /* node 1 */
  assert_ok(g, ccg_sigmoid(g, x, &z)); /* node 2 */
  ccg__mark mark = ccg__mark_get(g);
  assert_ok(g, ccg_neg(g, z, &u)); /* node 3, reads z */
  assert_false(g->order_unsure);
  assert_ok(g, ccg__node_set_input(g, 1, 0, z));
  assert_true(g->order_unsure);
  assert_int_equal(ccg_node_input(g, 1, 0), z);
  ccg_node_id nodes[4];
  size_t slots[4];
  assert_int_equal(uses_of(g, y, nodes, slots), 0);
  assert_int_equal(uses_of(g, z, nodes, slots), 2);
  assert_int_equal(nodes[0], 1); /* made before node 3's use */
  assert_int_equal(nodes[1], 3);
  ccg_node_id order[4];
  assert_ok(g, ccg_graph_topo_order(g, order));
  assert_int_equal(order[0], 0);
  assert_int_equal(order[1], 2);
  assert_int_equal(order[2], 1);
  /* refused: no such slot, no such value, an input that is absent */
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg__node_set_input(g, 1, 1, x),
               "input 1 of node 1");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg__node_set_input(g, 1, 0, 99),
               "value 99");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg__node_set_input(g, 9, 0, x),
               "node 9");
  assert_int_equal(ccg_node_input(g, 1, 0), z);
  /* node 3 rolled back: its use was z's last, node 1's stays */
  ccg__rollback(g, &mark);
  assert_int_equal(uses_of(g, z, nodes, slots), 1);
  assert_int_equal(nodes[0], 1);
  assert_int_equal(slots[0], 0);
  /* and back: y is read again, z by none */
  assert_ok(g, ccg__node_set_input(g, 1, 0, y));
  assert_int_equal(uses_of(g, z, nodes, slots), 0);
  assert_int_equal(uses_of(g, y, nodes, slots), 1);
  assert_int_equal(nodes[0], 1);
  assert_ok(g, ccg_exp(g, y, &q));
  assert_int_equal(uses_of(g, y, nodes, slots), 2);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_validate_and_order(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id a, b, c;
  assert_ok(g, ccg_relu(g, x, &a));   /* node 0 */
  assert_ok(g, ccg_tanh(g, x, &b));   /* node 1 */
  assert_ok(g, ccg_add(g, a, b, &c)); /* node 2 */
  assert_ok(g, ccg_graph_validate(g));
  /* Neither validation nor refused nodes grow the graph's memory. */
  ccg_value_id other = ccg_test_input(g, "other", CCG_DTYPE_F32, "[3]");
  size_t used = g->arena.used;
  for (int i = 0; i < 200; i++) {
    assert_ok(g, ccg_graph_validate(g));
    ccg_value_id bad;
    assert_fails(g, CCG_STATUS_SHAPE, ccg_add(g, a, other, &bad), "broadcast");
  }
  assert_int_equal(g->arena.used, used);
  ccg_node_id order[3];
  assert_ok(g, ccg_graph_topo_order(g, order));
  assert_int_equal(order[0], 0);
  assert_int_equal(order[1], 1);
  assert_int_equal(order[2], 2);

  /* Rewire node 1 to read node 2's output: the order puts it after, and a
   * loop through node 2 back to node 1 is a cycle. */
  assert_ok(g, ccg__node_set_input(g, 1, 0, c));
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_topo_order(g, order),
               "cycle", "'Tanh_1'");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_validate(g), "cycle");
  assert_ok(g, ccg__node_set_input(g, 1, 0, x));
  assert_ok(g, ccg_graph_validate(g));

  /* A stored shape that disagrees with the op's rule is caught. */
  const ccg_shape *stored = g->values[c].shape;
  ccg_shape wrong = *stored;
  wrong.dims[0] = ccg_dim_num(5);
  g->values[c].shape = ccg__shape_intern(g, &wrong);
  assert_non_null(g->values[c].shape);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_graph_validate(g), "node 'Add_2' (Add)",
               "f32[5]", "rule gives f32[4]");
  g->values[c].shape = stored;
  g->values[c].dtype = CCG_DTYPE_F16;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_graph_validate(g), "f16[4]");
  g->values[c].dtype = CCG_DTYPE_F32;
  /* An input id that does not exist (written in the record: the setter
   * refuses it). */
  ccg__node *n1 = &g->nodes[1];
  n1->inputs[0] = 4242;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_validate(g), "4242",
               "not defined");
  n1->inputs[0] = x;
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_rollback(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg__mark m = ccg__mark_get(g);
  ccg_value_id c, y;
  int64_t v[2] = {1, 2};
  assert_ok(g, ccg__const_i64(g, v, 2, "k", &c));
  assert_ok(g, ccg_relu(g, x, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  assert_int_equal(ccg_graph_num_values(g), 3);
  ccg__rollback(g, &m);
  assert_int_equal(ccg_graph_num_values(g), 1);
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  assert_int_equal(ccg_graph_num_initializers(g), 0);
  assert_int_equal(ccg_graph_num_outputs(g), 0);
  /* The names are free again. */
  ccg_value_id f;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_find_value(g, "k_1", &f),
               "no value named");
  assert_ok(g, ccg__const_i64(g, v, 2, "k", &c));
  assert_string_equal(ccg_value_name(g, c), "k_1");
  assert_ok(g, ccg_relu(g, x, &y));
  assert_string_equal(ccg_node_name(g, ccg_value_producer(g, y)), "Relu_0");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* The uses of v as "node:slot" in the index's order. */
static void uses_str(ccg_graph *g, ccg_value_id v, char *buf, size_t size) {
  size_t it = 0, slot, used = 0;
  ccg_node_id n;
  buf[0] = '\0';
  while (ccg_value_next_use(g, v, &it, &n, &slot) && used < size)
    used += (size_t)snprintf(buf + used, size - used, "%s%u:%zu",
                             used ? " " : "", n, slot);
}

/* The consumer index follows nodes as they are added, in node order with
 * one entry per input slot, and as a rollback removes them. */
static void test_consumer_index(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  char buf[128];
  assert_int_equal(ccg_value_num_uses(g, x), 0);
  size_t it = 0;
  assert_false(ccg_value_next_use(g, x, &it, NULL, NULL));
  ccg_value_id a, b, c, d;
  assert_ok(g, ccg_relu(g, x, &a));   /* node 0 */
  assert_ok(g, ccg_add(g, x, x, &b)); /* node 1: x twice */
  assert_ok(g, ccg_mul(g, a, x, &c)); /* node 2 */
  uses_str(g, x, buf, sizeof buf);
  assert_string_equal(buf, "0:0 1:0 1:1 2:1");
  assert_int_equal(ccg_value_num_uses(g, x), 4);
  uses_str(g, a, buf, sizeof buf);
  assert_string_equal(buf, "2:0");
  assert_int_equal(ccg_value_num_uses(g, b), 0);

  /* nodes added later, then rolled back: their uses go, the rest stay */
  ccg__mark m = ccg__mark_get(g);
  assert_ok(g, ccg_graph_add_output(g, c));
  assert_ok(g, ccg_add(g, b, x, &d)); /* node 3 */
  assert_ok(g, ccg_add(g, a, d, &d)); /* node 4 */
  uses_str(g, x, buf, sizeof buf);
  assert_string_equal(buf, "0:0 1:0 1:1 2:1 3:1");
  uses_str(g, a, buf, sizeof buf);
  assert_string_equal(buf, "2:0 4:0");
  ccg__rollback(g, &m);
  uses_str(g, x, buf, sizeof buf);
  assert_string_equal(buf, "0:0 1:0 1:1 2:1");
  uses_str(g, a, buf, sizeof buf);
  assert_string_equal(buf, "2:0");
  assert_int_equal(ccg_value_num_uses(g, b), 0);
  /* the output the rollback removed can be added again, once */
  assert_ok(g, ccg_graph_add_output(g, c));
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_output(g, c),
               "already a graph output");

  /* a builder refused half-way leaves the index as it was */
  assert_int_not_equal(
      ccg_matmul(g, x, ccg_test_input(g, "w", CCG_DTYPE_F32, "[5,3]"), &d),
      CCG_STATUS_OK);
  assert_int_equal(ccg_value_num_uses(g, x), 4);

  /* and grows again after the rollback, appending in node order */
  assert_ok(g, ccg_sub(g, c, x, &d)); /* node 3 again */
  uses_str(g, x, buf, sizeof buf);
  assert_string_equal(buf, "0:0 1:0 1:1 2:1 3:1");
  uses_str(g, c, buf, sizeof buf);
  assert_string_equal(buf, "3:0");
  /* a cursor past the end and bad ids end the walk */
  it = 999;
  assert_false(ccg_value_next_use(g, x, &it, NULL, NULL));
  it = 0;
  assert_false(ccg_value_next_use(g, CCG_NONE, &it, NULL, NULL));
  assert_int_equal(ccg_value_num_uses(g, CCG_NONE), 0);
  ccg_graph_free(g);
}

/* The same index over many nodes: every value's uses, counted from the
 * nodes' inputs, match what the index gives. */
static void test_consumer_index_many(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v[64];
  v[0] = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  for (int i = 1; i < 64; i++)
    assert_ok(g, ccg_add(g, v[i - 1], v[(i * 7) % i], &v[i]));
  for (size_t k = 0; k < ccg_graph_num_values(g); k++) {
    size_t want = 0;
    for (ccg_node_id n = 0; n < ccg_graph_num_nodes(g); n++)
      for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++)
        want += ccg_node_input(g, n, i) == (ccg_value_id)k;
    assert_int_equal(ccg_value_num_uses(g, (ccg_value_id)k), want);
    size_t it = 0, got = 0, slot;
    ccg_node_id n, last = 0;
    while (ccg_value_next_use(g, (ccg_value_id)k, &it, &n, &slot)) {
      assert_int_equal(ccg_node_input(g, n, slot), (ccg_value_id)k);
      assert_true(n >= last);
      last = n;
      got++;
    }
    assert_int_equal(got, want);
  }
  ccg_graph_free(g);
}

/* The largest mapping instance the graph keeps for new instance numbers:
 * raised by tags, recounted after a rollback removes the node that held it
 * or a retag lowers it. */
static void test_max_instance(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), a, b;
  assert_int_equal(ccg__graph_max_instance(g), 0);
  assert_ok(g, ccg_relu(g, x, &a));
  ccg_tag t = {"m", 3, NULL, false};
  assert_ok(g, ccg_node_set_tag(g, ccg_value_producer(g, a), &t));
  assert_int_equal(ccg__graph_max_instance(g), 3);
  ccg__mark m = ccg__mark_get(g);
  assert_ok(g, ccg_relu(g, a, &b));
  t.instance = 7;
  assert_ok(g, ccg_node_set_tag(g, ccg_value_producer(g, b), &t));
  assert_int_equal(ccg__graph_max_instance(g), 7);
  ccg__rollback(g, &m);
  assert_int_equal(ccg__graph_max_instance(g), 3);
  t.instance = 2; /* a retag of the node that held the largest */
  assert_ok(g, ccg_node_set_tag(g, ccg_value_producer(g, a), &t));
  assert_int_equal(ccg__graph_max_instance(g), 2);
  ccg_graph_free(g);
}

/* Removing nodes and initializers in place: the rest keep their order,
 * names, tags and metadata; values are renumbered as a fresh build numbers
 * them; the name maps, the consumer index and the largest instance follow;
 * a removal that a kept node would miss is refused and changes nothing. */
/* Reordering renumbers nodes: producers, names and the consumer index all
 * follow (a use still names the node that reads the value). */
static void test_reorder_uses(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id a, b, c;
  assert_ok(g, ccg_relu(g, x, &a)); /* node 0 */
  assert_ok(g, ccg_neg(g, x, &b));  /* node 1 */
  assert_ok(g, ccg_add(g, b, a, &c));
  assert_ok(g, ccg_graph_add_output(g, c));
  const char *relu = ccg_node_name(g, 0), *neg = ccg_node_name(g, 1);
  uint64_t key[3] = {2, 1, 3}; /* Neg first */
  assert_ok(g, ccg__graph_reorder(g, key));
  assert_string_equal(ccg_node_name(g, 0), neg);
  assert_string_equal(ccg_node_name(g, 1), relu);
  assert_int_equal(ccg_value_producer(g, a), 1);
  assert_int_equal(ccg_value_producer(g, b), 0);
  size_t cur = 0;
  ccg_node_id n;
  size_t slot;
  const char *want[2] = {relu, neg}; /* in the order the uses were added */
  for (int i = 0; i < 2; i++) {
    assert_true(ccg_value_next_use(g, x, &cur, &n, &slot));
    assert_string_equal(ccg_node_name(g, n), want[i]);
  }
  assert_false(ccg_value_next_use(g, x, &cur, &n, &slot));
  cur = 0;
  assert_true(ccg_value_next_use(g, a, &cur, &n, &slot));
  assert_int_equal(n, 2);
  assert_int_equal(slot, 1);
  ccg_graph_free(g);
}

static void test_compact(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id a, b, d, k1, k2, k3, f;
  ccg_test_input(g, "unused", CCG_DTYPE_F32, "[4]");
  float w[4] = {1, 2, 3, 4};
  ccg_tensor t = {CCG_DTYPE_F32, 1, {4}, w};
  assert_ok(g, ccg_graph_add_initializer(g, "k1", &t, &k1));
  assert_ok(g, ccg_relu(g, x, &a));    /* node 0: kept */
  assert_ok(g, ccg_add(g, x, k1, &d)); /* node 1: removed, with k1 */
  assert_ok(g, ccg_graph_add_initializer(g, "k2", &t, &k2));
  assert_ok(g, ccg_graph_add_initializer(g, "k3", &t, &k3));
  assert_ok(g, ccg_mul(g, a, k2, &b)); /* node 2: kept */
  assert_ok(g, ccg_graph_add_output(g, b));
  ccg_tag tag = {"m", 3, NULL, false};
  assert_ok(g, ccg_node_set_tag(g, 0, &tag));
  assert_ok(g, ccg_node_set_meta(g, 0, "key", "value"));
  tag.instance = 9;
  assert_ok(g, ccg_node_set_tag(g, 1, &tag));
  ccg_placement pl = {CCG_PLACEMENT_SHARD, 0, CCG_REDUCE_SUM};
  assert_ok(g, ccg_value_set_placements(g, b, &pl, 1));
  const char *dead = ccg_node_name(g, 1), *mul = ccg_node_name(g, 2);

  bool keep_node[3] = {false, false, true}, keep_init[16] = {false};
  keep_init[k2] = true;
  assert_fails(g, CCG_STATUS_INTERNAL,
               ccg__graph_compact(g, keep_node, keep_init), "reads", "Relu");
  assert_int_equal(ccg_graph_num_nodes(g), 3);
  assert_int_equal(ccg_graph_num_values(g), 8);
  keep_node[0] = true;
  assert_ok(g, ccg__graph_compact(g, keep_node, keep_init));

  assert_int_equal(ccg_graph_num_nodes(g), 2);
  assert_int_equal(ccg_graph_num_values(g), 5);
  assert_int_equal(ccg_graph_num_initializers(g), 1);
  const char *order[5] = {"x", "unused", "k2", NULL, NULL};
  order[3] = ccg_value_name(g, ccg_node_output(g, 0, 0));
  order[4] = ccg_value_name(g, ccg_node_output(g, 1, 0));
  for (ccg_value_id v = 0; v < 5; v++) {
    ccg_value_id got;
    assert_ok(g, ccg_graph_find_value(g, order[v], &got));
    assert_int_equal(got, v);
  }
  assert_int_equal(ccg_graph_initializer(g, 0), 2);
  assert_int_equal(ccg_graph_output(g, 0), 4);
  assert_int_equal(ccg_value_producer(g, 4), 1);
  assert_int_equal(ccg_node_input(g, 1, 0), 3);
  assert_int_equal(ccg_node_input(g, 1, 1), 2);
  assert_int_equal(ccg_value_placements(g, 4, &pl), 1);
  assert_int_equal(pl.kind, CCG_PLACEMENT_SHARD);
  assert_string_equal(ccg_node_meta(g, 0, "key"), "value");
  assert_int_equal(ccg_node_tag(g, 0)->instance, 3);
  assert_int_equal(ccg__graph_max_instance(g), 3);
  ccg_node_id n;
  assert_ok(g, ccg_graph_find_node(g, mul, &n));
  assert_int_equal(n, 1);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_find_node(g, dead, &n),
               "no node named");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_find_value(g, "k1", &f),
               "no value named");
  char buf[64];
  uses_str(g, 0, buf, sizeof buf);
  assert_string_equal(buf, "0:0");
  uses_str(g, 2, buf, sizeof buf);
  assert_string_equal(buf, "1:1");
  assert_ok(g, ccg_graph_validate(g));
  /* the removed names are free; new nodes append to the index */
  assert_ok(g, ccg_graph_add_initializer(g, "k1", &t, &k1));
  assert_ok(g, ccg_sub(g, 0, k1, &d));
  uses_str(g, 0, buf, sizeof buf);
  assert_string_equal(buf, "0:0 2:0");
  ccg_graph_free(g);
}

/* Counting allocator that can fail the n-th call. */
typedef struct counting {
  long live, calls, fail_at;
} counting;
static void *c_alloc(void *u, size_t n) {
  counting *c = u;
  if (++c->calls == c->fail_at)
    return NULL;
  c->live++;
  return malloc(n);
}
static void *c_realloc(void *u, void *p, size_t o, size_t n) {
  (void)o;
  counting *c = u;
  if (++c->calls == c->fail_at)
    return NULL;
  if (!p)
    c->live++;
  return realloc(p, n);
}
static void c_free(void *u, void *p, size_t n) {
  (void)n;
  counting *c = u;
  if (p)
    c->live--;
  free(p);
}

/* Tables past 2 MiB (a value is a few hundred bytes: 12,000 values) are
 * huge-page blocks with libc and grow through the caller's allocator
 * otherwise: values, producers, uses and names survive every growth and a
 * compaction, and scopes nest and unwind in their own buffer. */
static ccg_status build_chain(ccg_graph *g, int n) {
  ccg_value_id v;
  ccg_shape s = {1, {ccg_dim_num(4)}};
  CCG_CHECK(ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &v));
  for (int i = 0; i < n; i++) {
    CCG_CHECK(ccg_graph_push_scope(g, i % 2 ? "odd" : "even"));
    CCG_CHECK(ccg_graph_push_scope(g, "deeper"));
    ccg_status st = ccg_relu(g, v, &v);
    ccg_graph_pop_scope(g);
    ccg_graph_pop_scope(g);
    CCG_CHECK(st);
  }
  return ccg_graph_add_output(g, v);
}

static void check_chain(ccg_graph *g, int n) {
  assert_int_equal(ccg_graph_num_nodes(g), n);
  assert_int_equal(ccg_graph_num_values(g), n + 1);
  for (ccg_node_id k = 0; k < (ccg_node_id)n; k++) {
    ccg_value_id in = ccg_node_input(g, k, 0), out = ccg_node_output(g, k, 0);
    assert_int_equal(in, k);
    assert_int_equal(out, k + 1);
    assert_int_equal(ccg_value_producer(g, out), k);
    size_t it = 0, slot;
    ccg_node_id user;
    assert_true(ccg_value_next_use(g, in, &it, &user, &slot));
    assert_int_equal(user, k);
    assert_false(ccg_value_next_use(g, in, &it, &user, &slot));
    ccg_value_id found;
    assert_ok(g, ccg_graph_find_value(g, ccg_value_name(g, out), &found));
    assert_int_equal(found, out);
  }
  assert_string_equal(ccg_node_name(g, 1), "/odd/deeper/Relu_1");
  assert_ok(g, ccg_graph_validate(g));
}

static void test_large_tables(void **state) {
  (void)state;
  enum { N = 12000 };
  ccg_graph *g = ccg_test_graph(NULL);
  assert_ok(g, build_chain(g, N));
  check_chain(g, N);
  assert_ok(g, ccg_graph_push_scope(g, "after"));
  ccg_value_id y;
  assert_ok(g, ccg_relu(g, ccg_graph_input(g, 0), &y));
  assert_string_equal(ccg_node_name(g, N), "/after/Relu_12000");
  /* keep all but the last node: the value table is made again */
  bool *keep = malloc(N + 1), *no_inits = calloc(N + 2, sizeof *no_inits);
  assert_non_null(keep);
  assert_non_null(no_inits);
  memset(keep, 1, N);
  keep[N] = false;
  assert_ok(g, ccg__graph_compact(g, keep, no_inits));
  free(keep);
  free(no_inits);
  check_chain(g, N);
  ccg_graph_free(g);

  counting c = {0, 0, 0};
  ccg_allocator a = {c_alloc, c_realloc, c_free, &c};
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.allocator = &a;
  assert_int_equal(ccg_graph_new(&o, &g), CCG_STATUS_OK);
  assert_ok(g, build_chain(g, N));
  check_chain(g, N);
  ccg_graph_free(g);
  assert_int_equal(c.live, 0);
}

/* Values of one shape share one interned copy, which stays where it is
 * as the table grows; a shape set anew is interned, never written. */
static void test_shapes_interned(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,16]");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_F16, "[batch, 16]");
  ccg_value_id z = ccg_test_input(g, "z", CCG_DTYPE_F32, "[batch,8]");
  const ccg_shape *sx = ccg_value_shape(g, x);
  assert_ptr_equal(sx, ccg_value_shape(g, y));
  assert_ptr_not_equal(sx, ccg_value_shape(g, z));
  ccg_value_id h, r;
  assert_ok(g, ccg_relu(g, x, &h));
  assert_ptr_equal(ccg_value_shape(g, h), sx);
  /* an output of its inputs' shape takes their copy */
  assert_ok(g, ccg_add(g, z, z, &r));
  assert_ptr_equal(ccg_value_shape(g, r), ccg_value_shape(g, z));
  size_t before = g->n_shapes;
  /* many distinct shapes: the index grows, the copies stay */
  enum { K = 700 };
  ccg_value_id v[K];
  for (int i = 0; i < K; i++) {
    char name[32];
    snprintf(name, sizeof name, "in%d", i);
    ccg_shape s = CCG_SHAPE(i + 1, 3);
    assert_ok(g, ccg_graph_add_input(g, name, CCG_DTYPE_F32, &s, &v[i]));
  }
  assert_int_equal(g->n_shapes, before + K);
  assert_ptr_equal(ccg_value_shape(g, x), sx);
  assert_int_equal(sx->rank, 2);
  assert_string_equal(sx->dims[0].sym, "batch");
  for (int i = 0; i < K; i++) {
    const ccg_shape *s = ccg_value_shape(g, v[i]);
    assert_int_equal(s->rank, 2);
    assert_int_equal(s->dims[0].size, i + 1);
    assert_int_equal(s->dims[1].size, 3);
    /* dims past the rank are zero: callers copy the whole struct */
    assert_int_equal(s->dims[2].size, 0);
    assert_null(s->dims[2].sym);
  }
  ccg_shape again = CCG_SHAPE(5, 3);
  assert_ptr_equal(ccg__shape_intern(g, &again), ccg_value_shape(g, v[4]));
  assert_int_equal(g->n_shapes, before + K);
  ccg_graph_free(g);
}

/* A generated node name that is taken goes to the next free one; the shape
 * rule, which makes symbols from the name, runs under that one, and the
 * output names follow it. A taken output name is refused. */
static void test_generated_name_taken(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Relu";
  d.name = "NonZero_1";
  d.inputs = &x;
  d.n_inputs = 1;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  d.op = "NonZero";
  d.name = NULL;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_string_equal(ccg_node_name(g, n), "NonZero_2");
  ccg_value_id out = ccg_node_output(g, n, 0);
  assert_string_equal(ccg_value_name(g, out), "NonZero_2_output_0");
  const ccg_shape *s = ccg_value_shape(g, out);
  assert_int_equal(s->rank, 2);
  assert_true(ccg_dim_is_sym(s->dims[1]));
  assert_non_null(strstr(s->dims[1].sym, "NonZero_2"));
  /* an error names the name the node would have had */
  ccg_value_id y;
  assert_ok(g, ccg_relu(g, x, &y)); /* node 2, "Relu_2" */
  d.op = "Relu";
  d.name = "Add_4"; /* node 3: the first choice for node 4's Add */
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  d.op = "Add"; /* with one input: refused */
  d.name = NULL;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "node 'Add_5' (Add): 1 inputs given");
  /* a given name that is taken is the error, even with other faults */
  d.name = "Add_4";
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, &n),
               "node 'Add_4' (Add): a node of that name already exists");
  assert_int_equal(ccg_graph_num_nodes(g), 4);
  /* a taken output name is refused, the node not added */
  const char *outs[1] = {"Relu_5_output_0"};
  d.op = "Relu";
  d.name = "a";
  d.output_names = outs;
  d.n_outputs = 1;
  assert_ok(g, ccg_graph_add_node(g, &d, NULL)); /* node 4 */
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_relu(g, x, &y),
               "'Relu_5_output_0'", "already exists");
  assert_int_equal(ccg_graph_num_nodes(g), 5);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* A little of everything, stopping at the first failure. */
static ccg_status build_some(ccg_graph *g) {
  ccg_shape s = {2, {ccg_dim_sym("batch"), ccg_dim_num(16)}};
  ccg_value_id x, y, w;
  float data[16] = {0};
  ccg_tensor t = {CCG_DTYPE_F32, 1, {16}, data};
  CCG_CHECK(ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  CCG_CHECK(ccg_graph_add_initializer(g, "w", &t, &w));
  CCG_CHECK(ccg_graph_push_scope(g, "block"));
  for (int i = 0; i < 40; i++) {
    CCG_CHECK(ccg_mul(g, x, w, &y));
    CCG_CHECK(ccg_gelu(g, y, "tanh", &x));
  }
  CCG_CHECK(ccg_dropout(g, x, 0.25f, &y));
  ccg_tag tag = {"test.mapping", 1, "{}", false};
  CCG_CHECK(ccg_node_set_tag(g, ccg_value_producer(g, y), &tag));
  CCG_CHECK(ccg_graph_add_output(g, y));
  return ccg_graph_validate(g);
}

static void test_lifetime_and_oom(void **state) {
  (void)state;
  /* Everything allocated through the hook comes back. */
  counting c = {0, 0, 0};
  ccg_allocator a = {c_alloc, c_realloc, c_free, &c};
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.allocator = &a;
  ccg_graph *g = NULL;
  assert_int_equal(ccg_graph_new(&o, &g), CCG_STATUS_OK);
  assert_ok(g, build_some(g));
  assert_true(c.live > 0);
  ccg_graph_free(g);
  assert_int_equal(c.live, 0);
  long total = c.calls;

  /* Failing each allocation in turn gives OOM (or success once the failing
   * call is past the work), never a crash, and never a leak. */
  for (long k = 1; k <= total + 1; k++) {
    counting f = {0, 0, k};
    ccg_allocator fa = {c_alloc, c_realloc, c_free, &f};
    o.allocator = &fa;
    g = NULL;
    ccg_status st = ccg_graph_new(&o, &g);
    if (st == CCG_STATUS_OK) {
      st = build_some(g);
      if (st != CCG_STATUS_OK && st != CCG_STATUS_OOM)
        fail_msg("allocation %ld failing gave %s: %s", k, ccg_status_name(st),
                 ccg_last_error(g));
      ccg_graph_free(g);
    } else {
      assert_int_equal(st, CCG_STATUS_OOM);
    }
    assert_int_equal(f.live, 0);
  }
}

/* Graphs share no mutable state: threads building, checking and dumping
 * their own graphs at once get the same bytes as one thread alone. */
typedef struct thread_job {
  char *json;
  ccg_status st;
} thread_job;

static void *build_in_thread(void *arg) {
  thread_job *job = arg;
  ccg_graph *g = NULL;
  job->st = ccg_graph_new(NULL, &g);
  if (job->st == CCG_STATUS_OK)
    job->st = build_some(g);
  if (job->st == CCG_STATUS_OK)
    job->st = ccg_graph_dump_string(g, CCG_DUMP_JSON, &job->json);
  ccg_graph_free(g);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  enum { N = 4 };
  thread_job ref = {0}, jobs[N] = {{0}};
  build_in_thread(&ref);
  assert_int_equal(ref.st, CCG_STATUS_OK);
  pthread_t t[N];
  for (int i = 0; i < N; i++)
    assert_int_equal(pthread_create(&t[i], NULL, build_in_thread, &jobs[i]), 0);
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(jobs[i].st, CCG_STATUS_OK);
    assert_string_equal(jobs[i].json, ref.json);
    free(jobs[i].json);
  }
  free(ref.json);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_set_input),
      cmocka_unit_test(test_generic_nodes_and_attrs),
      cmocka_unit_test(test_scopes_and_tags),
      cmocka_unit_test(test_placements),
      cmocka_unit_test(test_validate_and_order),
      cmocka_unit_test(test_rollback),
      cmocka_unit_test(test_consumer_index),
      cmocka_unit_test(test_consumer_index_many),
      cmocka_unit_test(test_max_instance),
      cmocka_unit_test(test_reorder_uses),
      cmocka_unit_test(test_compact),
      cmocka_unit_test(test_lifetime_and_oom),
      cmocka_unit_test(test_large_tables),
      cmocka_unit_test(test_shapes_interned),
      cmocka_unit_test(test_generated_name_taken),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
