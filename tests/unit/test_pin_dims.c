/* ccg_graph_pin_dims: a graph with inputs x [batch, seq, 4] and m
 * [2*seq] whose Reshape target is computed from Shape(x) (as dynamic-axes
 * exports write it): pinned, every shape and the computed target are
 * numbers, partly pinned the other symbol stays, ids, names, node metadata
 * and placements stay; a name no input has, a size below 1, one name with
 * two sizes, a size a fixed shape contradicts (naming the node) and a
 * symbol that would not be whole are errors that leave the graph as it
 * was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

typedef struct model {
  ccg_graph *g;
  ccg_value_id x, m, flat, sum;
  ccg_node_id reshape;
} model;

/* x [batch, seq, 4] -> Reshape to [batch * seq, 4] (target from Shape);
 * m [mdim]; and when `fixed` x reshaped to a constant [6, 4]. */
static model build(bool fixed, const char *mdim) {
  model md;
  ccg_graph *g;
  assert_ok(NULL, ccg_graph_new(NULL, &g));
  ccg_mesh mesh;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &mesh));
  assert_ok(g, ccg_graph_set_mesh(g, &mesh));
  ccg_shape xs = {3,
                  {ccg_dim_sym("batch"), ccg_dim_sym("seq"), ccg_dim_num(4)}};
  ccg_shape ms = {1, {ccg_dim_sym(mdim)}};
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &md.x));
  assert_ok(g, ccg_graph_add_input(g, "m", CCG_DTYPE_F32, &ms, &md.m));
  ccg_placement r = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  assert_ok(g, ccg_value_set_placements(g, md.x, &r, 1));
  ccg_value_id bs, sq, last, target;
  assert_ok(g, ccg_shape_of(g, md.x, 0, 1, &bs));
  assert_ok(g, ccg_shape_of(g, md.x, 1, 2, &sq));
  assert_ok(g, ccg_mul(g, bs, sq, &bs));
  int64_t four = 4;
  ccg_tensor t4 = {CCG_DTYPE_I64, 1, {1}, &four};
  assert_ok(g, ccg_constant(g, &t4, &last));
  ccg_value_id parts[2] = {bs, last};
  assert_ok(g, ccg_concat(g, parts, 2, 0, &target));
  assert_ok(g, ccg_reshape(g, md.x, target, &md.flat));
  md.reshape = ccg_value_producer(g, md.flat);
  assert_ok(g, ccg_node_set_meta(g, md.reshape, "module", "h.0"));
  assert_ok(g, ccg_graph_add_output(g, md.flat));
  if (fixed) {
    const int64_t six[2] = {6, 4};
    assert_ok(g, ccg_reshape_to(g, md.x, six, 2, &md.sum));
    assert_ok(g, ccg_graph_add_output(g, md.sum));
  }
  md.g = g;
  return md;
}

static void assert_dims(const ccg_shape *s, int rank, const int64_t *d) {
  assert_int_equal(s->rank, rank);
  for (int i = 0; i < rank; i++) {
    assert_false(ccg_dim_is_sym(s->dims[i]));
    assert_int_equal(s->dims[i].size, d[i]);
  }
}

static void test_pin(void **state) {
  (void)state;
  model md = build(false, "2*seq");
  ccg_graph *g = md.g, *before = g;
  size_t nn = ccg_graph_num_nodes(g), nv = ccg_graph_num_values(g);
  const char *names[] = {"batch", "seq"};
  const int64_t values[] = {3, 5};
  assert_ok(g, ccg_graph_pin_dims(&g, names, values, 2));
  assert_ptr_not_equal(g, before);
  assert_int_equal(ccg_graph_num_nodes(g), nn);
  assert_int_equal(ccg_graph_num_values(g), nv);
  assert_dims(ccg_value_shape(g, md.x), 3, (const int64_t[]){3, 5, 4});
  assert_dims(ccg_value_shape(g, md.m), 1, (const int64_t[]){10});
  assert_dims(ccg_value_shape(g, md.flat), 2, (const int64_t[]){15, 4});
  assert_string_equal(ccg_value_name(g, md.flat),
                      ccg_value_name(before, md.flat));
  assert_string_equal(ccg_node_meta(g, md.reshape, "module"), "h.0");
  ccg_placement p[CCG_MAX_MESH_AXES];
  assert_int_equal(ccg_value_placements(g, md.x, p), 1);
  assert_int_equal(p[0].kind, CCG_PLACEMENT_REPLICATE);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g); /* and the graph it was made from */

  /* one symbol pinned: the other stays */
  md = build(false, "2*seq");
  g = md.g;
  assert_ok(g, ccg_graph_pin_dims(&g, names, values, 1));
  const ccg_shape *xs = ccg_value_shape(g, md.x);
  assert_int_equal(xs->dims[0].size, 3);
  assert_true(ccg_dim_is_sym(xs->dims[1]));
  assert_string_equal(xs->dims[1].sym, "seq");
  assert_string_equal(ccg_value_shape(g, md.m)->dims[0].sym, "2*seq");
  ccg_graph_free(g);
}

static void test_errors(void **state) {
  (void)state;
  model md = build(true, "seq/2");
  ccg_graph *g = md.g;
  const char *names[] = {"batch", "seq", "batch"};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_pin_dims(&g, (const char *[]){"sequence"},
                                  (const int64_t[]){4}, 1),
               "no input of graph", "'sequence'", "batch, seq");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_pin_dims(&g, names, (const int64_t[]){0, 4}, 2),
               "dim 'batch' = 0", "1 or more");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_pin_dims(&g, names, (const int64_t[]){1, 4, 2}, 3),
               "dim 'batch' is given twice, as 1 and 2");
  /* the constant target fixes batch * seq = 6 */
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_pin_dims(&g, names, (const int64_t[]){2, 4}, 2),
               "a shape rule refuses the pinned sizes", "(Reshape)");
  /* m is seq/2 */
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_pin_dims(&g, names, (const int64_t[]){2, 3}, 2),
               "input 'm' dim 0 is 'seq/2'", "not a whole number");
  assert_ptr_equal(g, md.g);
  assert_true(ccg_dim_is_sym(ccg_value_shape(g, md.x)->dims[0]));
  /* after the failures the same graph pins */
  assert_ok(g, ccg_graph_pin_dims(&g, names, (const int64_t[]){3, 2}, 2));
  assert_dims(ccg_value_shape(g, md.sum), 2, (const int64_t[]){6, 4});
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pin),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
