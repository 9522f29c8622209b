/* Megatron-LM mappings: golden graphs (forward + backward) for every entry
 * on tp=4, dp=2 x tp=2 and tp=1 meshes (plus 3-D and uneven cases), the
 * error cases, and the typed C functions against the by-name calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "mapping_golden.h"

#define M(nm) "megatron." nm
#define TP4 "tp=4"
#define DP2TP2 "dp=2,tp=2"
#define TP1 "tp=1"
#define DPPPTP "dp=2,pp=2,tp=2"

/* A golden case: file stem, mesh, mapping, params, input shape. */
#define G(stem, mesh, map, params, shape)                                      \
  { "megatron", stem, mesh, M(map), params, {shape, NULL}, CCG_DTYPE_UNDEFINED }
/* The same entry on the three standard meshes. */
#define G3(stem, map, params, shape)                                           \
  G(stem "_tp4", TP4, map, params, shape),                                     \
      G(stem "_dp2tp2", DP2TP2, map, params, shape),                           \
      G(stem "_tp1", TP1, map, params, shape)

static const golden_case cases[] = {
    G3("copy_to_tp", "copy_to_tensor_model_parallel_region", NULL, "[8,16]"),
    G3("reduce_from_tp", "reduce_from_tensor_model_parallel_region", NULL,
       "[8,16]"),
    G3("scatter_to_tp", "scatter_to_tensor_model_parallel_region", NULL,
       "[4,2,16]"),
    G3("gather_from_tp", "gather_from_tensor_model_parallel_region", NULL,
       "[4,2,4]"),
    G3("scatter_to_sp", "scatter_to_sequence_parallel_region", NULL,
       "[16,2,8]"),
    G3("gather_from_sp", "gather_from_sequence_parallel_region", NULL,
       "[4,2,8]"),
    G3("gather_from_sp_replicated_grad", "gather_from_sequence_parallel_region",
       "{\"tensor_parallel_output_grad\": false}", "[4,2,8]"),
    G3("reduce_scatter_to_sp", "reduce_scatter_to_sequence_parallel_region",
       NULL, "[16,2,8]"),
    G3("all_gather_last_dim", "all_gather_last_dim_from_tensor_parallel_region",
       NULL, "[4,2,4]"),
    G3("reduce_scatter_last_dim",
       "reduce_scatter_last_dim_to_tensor_parallel_region", NULL, "[4,2,16]"),
    G3("all_to_all", "all_to_all", NULL, "[16,8]"),
    G3("sp2hp", "all_to_all_sp2hp", NULL, "[4,2,16]"),
    G3("hp2sp", "all_to_all_hp2sp", NULL, "[16,2,4]"),
    G3("reduce", "reduce", NULL, "[8,16]"),
    G3("split_along_last_dim", "split_along_last_dim", NULL, "[4,2,16]"),
    G3("split_along_first_dim", "split_along_first_dim", NULL, "[16,2,8]"),
    G3("gather_along_last_dim", "gather_along_last_dim", NULL, "[4,2,4]"),
    G3("gather_along_first_dim", "gather_along_first_dim", NULL, "[4,2,8]"),
    G3("reduce_scatter_along_last_dim", "reduce_scatter_along_last_dim", NULL,
       "[4,2,16]"),
    G3("reduce_scatter_along_first_dim", "reduce_scatter_along_first_dim", NULL,
       "[16,2,8]"),
    G3("sequence_parallel_param", "sequence_parallel_param", NULL, "[16]"),
    /* Uneven split sizes: the backward reuses them (swapped for A2A). */
    G("gather_from_sp_uneven_tp4", TP4, "gather_from_sequence_parallel_region",
      "{\"output_split_sizes\": [3,5,4,4]}", "[tp{3,5,4,4},8]"),
    G("gather_from_sp_uneven_replicated_grad_tp4", TP4,
      "gather_from_sequence_parallel_region",
      "{\"output_split_sizes\": [3,5,4,4], "
      "\"tensor_parallel_output_grad\": false}",
      "[tp{3,5,4,4},8]"),
    G("gather_from_sp_uneven_tp1", TP1, "gather_from_sequence_parallel_region",
      "{\"output_split_sizes\": [7]}", "[7,8]"),
    G("reduce_scatter_to_sp_uneven_tp4", TP4,
      "reduce_scatter_to_sequence_parallel_region",
      "{\"input_split_sizes\": [3,5,4,4], \"use_global_buffer\": true}",
      "[16,8]"),
    G("gather_along_first_dim_uneven_dp2tp2", DP2TP2, "gather_along_first_dim",
      "{\"output_split_sizes\": [2,6]}", "[tp{2,6},8]"),
    G("reduce_scatter_along_first_dim_uneven_dp2tp2", DP2TP2,
      "reduce_scatter_along_first_dim", "{\"input_split_sizes\": [2,6]}",
      "[8,8]"),
    G("all_to_all_uneven_tp4", TP4, "all_to_all",
      "{\"input_split_sizes\": [1,2,3,4], \"output_split_sizes\": [4,4,2,2]}",
      "[10,8]"),
    G("all_to_all_uneven_tp1", TP1, "all_to_all",
      "{\"input_split_sizes\": [6], \"output_split_sizes\": [6]}", "[6,8]"),
    /* 3-D mesh: the group is one axis or several. */
    G("copy_to_tp_dp2pp2tp2", DPPPTP, "copy_to_tensor_model_parallel_region",
      NULL, "[8,16]"),
    G("reduce_from_dptp_dp2pp2tp2", DPPPTP,
      "reduce_from_tensor_model_parallel_region", "{\"group\": \"dp,tp\"}",
      "[8,16]"),
    G("reduce_scatter_to_sp_dp2pp2tp2", DPPPTP,
      "reduce_scatter_to_sequence_parallel_region", NULL, "[16,2,8]"),
    G("sp2hp_dp2pp2tp2", DPPPTP, "all_to_all_sp2hp", NULL, "[4,2,16]"),
    G("gather_from_sp_dptp_dp2pp2tp2", DPPPTP,
      "gather_from_sequence_parallel_region", "{\"group\": \"dp,tp\"}",
      "[2,8]"),
    /* Symbolic dims divide exactly. */
    G("scatter_to_sp_symbolic_tp4", TP4, "scatter_to_sequence_parallel_region",
      NULL, "[seq,batch,8]"),
    G("gather_from_tp_symbolic_tp4", TP4,
      "gather_from_tensor_model_parallel_region", NULL, "[seq,batch,4]"),
};

#define N_CASES (sizeof cases / sizeof cases[0])

static void run_case(void **state) { golden_check(*state); }

/* ---- errors -------------------------------------------------------------- */

#define E(map, mesh, params, shape)                                            \
  (&(const golden_case){                                                       \
      "megatron", "error", mesh, M(map), params, {shape, NULL}, 0})

static void test_not_divisible(void **state) {
  (void)state;
  golden_fails(
      E("scatter_to_tensor_model_parallel_region", TP4, NULL, "[4,2,10]"),
      CCG_STATUS_SHAPE, "megatron.scatter_to_tensor_model_parallel_region",
      "dim 2", "'x' [4,2,10]", "size 10", "group size 4");
  golden_fails(E("scatter_to_sequence_parallel_region", DP2TP2, NULL, "[5,8]"),
               CCG_STATUS_SHAPE, "megatron.scatter_to_sequence_parallel_region",
               "dim 0", "size 5", "group size 2");
  golden_fails(
      E("reduce_scatter_to_sequence_parallel_region", TP4, NULL, "[10,8]"),
      CCG_STATUS_SHAPE, "reduce_scatter_to_sequence_parallel_region", "dim 0",
      "size 10");
  golden_fails(E("reduce_scatter_last_dim_to_tensor_parallel_region", TP4, NULL,
                 "[4,6]"),
               CCG_STATUS_SHAPE, "dim 1", "size 6", "group size 4");
  golden_fails(E("split_along_last_dim", TP4, NULL, "[4,6]"), CCG_STATUS_SHAPE,
               "megatron.split_along_last_dim", "dim 1", "size 6");
  golden_fails(E("split_along_first_dim", TP4, NULL, "[6,4]"), CCG_STATUS_SHAPE,
               "megatron.split_along_first_dim", "dim 0");
  golden_fails(E("reduce_scatter_along_last_dim", TP4, NULL, "[4,6]"),
               CCG_STATUS_SHAPE, "megatron.reduce_scatter_along_last_dim");
  golden_fails(E("reduce_scatter_along_first_dim", TP4, NULL, "[6,4]"),
               CCG_STATUS_SHAPE, "megatron.reduce_scatter_along_first_dim");
  golden_fails(E("all_to_all", TP4, NULL, "[10,8]"), CCG_STATUS_SHAPE,
               "megatron.all_to_all", "dim 0", "size 10");
  golden_fails(E("all_to_all_sp2hp", TP4, NULL, "[4,2,10]"), CCG_STATUS_SHAPE,
               "megatron.all_to_all_sp2hp", "dim 1", "size 10", "group size 4");
  golden_fails(E("all_to_all_hp2sp", TP4, NULL, "[3,2,4]"), CCG_STATUS_SHAPE,
               "megatron.all_to_all_hp2sp", "dim 0", "size 6", "group size 4");
}

static void test_bad_split_sizes(void **state) {
  (void)state;
  golden_fails(E("reduce_scatter_to_sequence_parallel_region", TP4,
                 "{\"input_split_sizes\": [3,5,4,5]}", "[16,8]"),
               CCG_STATUS_SHAPE, "reduce_scatter_to_sequence_parallel_region",
               "input_split_sizes [3,5,4,5]", "sum to 17", "dim 0");
  golden_fails(E("gather_from_sequence_parallel_region", TP4,
                 "{\"output_split_sizes\": [3,5,4]}", "[tp{3,5,4},8]"),
               CCG_STATUS_INVALID_ARG, "gather_from_sequence_parallel_region",
               "output_split_sizes [3,5,4] has 3 entries", "4 ranks");
  golden_fails(E("gather_along_first_dim", DP2TP2,
                 "{\"output_split_sizes\": [-1,9]}", "[tp{2,6},8]"),
               CCG_STATUS_INVALID_ARG, "output_split_sizes [-1,9]", "entry 0");
  golden_fails(E("all_to_all", TP4,
                 "{\"input_split_sizes\": [1,2,3,3], "
                 "\"output_split_sizes\": [4,4,2,2]}",
                 "[10,8]"),
               CCG_STATUS_SHAPE, "megatron.all_to_all",
               "input_split_sizes [1,2,3,3]", "sum to 9");
  golden_fails(
      E("all_to_all", TP4, "{\"output_split_sizes\": [4,4,2]}", "[12,8]"),
      CCG_STATUS_INVALID_ARG, "output_split_sizes [4,4,2]", "3 entries");
  golden_fails(E("all_to_all", TP1, "{\"output_split_sizes\": [5]}", "[6,8]"),
               CCG_STATUS_SHAPE, "output_split_sizes [5]", "sum to 5");
  golden_fails(E("gather_from_sequence_parallel_region", TP1,
                 "{\"output_split_sizes\": [5]}", "[6,8]"),
               CCG_STATUS_SHAPE, "output_split_sizes [5]");
}

static void test_bad_group(void **state) {
  (void)state;
  golden_fails(E("copy_to_tensor_model_parallel_region", TP4,
                 "{\"group\": \"sp\"}", "[8]"),
               CCG_STATUS_INVALID_ARG,
               "megatron.copy_to_tensor_model_parallel_region", "group 'sp'",
               "[tp=4]");
  golden_fails(E("reduce", DP2TP2, "{\"group\": \"tp,tp\"}", "[8]"),
               CCG_STATUS_INVALID_ARG, "group 'tp,tp'");
  golden_fails(E("reduce", NULL, NULL, "[8]"), CCG_STATUS_INVALID_ARG,
               "megatron.reduce", "no device mesh");
  golden_fails(E("scatter_to_tensor_model_parallel_region", TP4, NULL, "[]"),
               CCG_STATUS_INVALID_ARG, "last dim -1", "rank 0");
}

static void test_sp2hp_symbolic_leading(void **state) {
  (void)state;
  golden_fails(E("all_to_all_sp2hp", TP4, NULL, "[seq,2,16]"),
               CCG_STATUS_UNSUPPORTED, "megatron.all_to_all_sp2hp",
               "symbolic leading dims");
}

/* ---- typed functions ------------------------------------------------------
 */

typedef ccg_status (*typed_fn)(ccg_graph *, ccg_value_id, const char *,
                               ccg_value_id *);

/* The typed call and the by-name call give the same dump. */
static void same_as_by_name(const char *map, const char *params,
                            const char *mesh, const char *shape,
                            ccg_status (*call)(ccg_graph *, ccg_value_id,
                                               ccg_value_id *)) {
  golden_case c = {"megatron", "typed", mesh, map, params, {shape, NULL}, 0};
  golden_same_as_typed(&c, call, false);
}

static const int64_t sizes4[] = {3, 5, 4, 4};
static const int64_t in4[] = {1, 2, 3, 4};
static const int64_t out4[] = {4, 4, 2, 2};

static ccg_status call_gather_sp(ccg_graph *g, ccg_value_id x,
                                 ccg_value_id *y) {
  return ccg_megatron_gather_from_sequence_parallel_region(g, x, "tp", false,
                                                           sizes4, 4, y);
}
static ccg_status call_rs_sp(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return ccg_megatron_reduce_scatter_to_sequence_parallel_region(g, x, NULL,
                                                                 sizes4, 4, y);
}
static ccg_status call_a2a(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return ccg_megatron_all_to_all(g, x, "tp", out4, 4, in4, 4, y);
}
static ccg_status call_gather_first(ccg_graph *g, ccg_value_id x,
                                    ccg_value_id *y) {
  return ccg_megatron_gather_along_first_dim(g, x, "tp", sizes4, 4, y);
}
static ccg_status call_rs_first(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return ccg_megatron_reduce_scatter_along_first_dim(g, x, "tp", NULL, 0, y);
}
static ccg_status call_mark(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return ccg_mark_sequence_parallel_param(g, x, NULL, y);
}

/* Group-only typed functions, called with group "tp". */
static const struct {
  const char *map;
  typed_fn fn;
  const char *shape;
} group_only[] = {
    {M("copy_to_tensor_model_parallel_region"),
     ccg_megatron_copy_to_tensor_model_parallel_region, "[8,16]"},
    {M("reduce_from_tensor_model_parallel_region"),
     ccg_megatron_reduce_from_tensor_model_parallel_region, "[8,16]"},
    {M("scatter_to_tensor_model_parallel_region"),
     ccg_megatron_scatter_to_tensor_model_parallel_region, "[4,16]"},
    {M("gather_from_tensor_model_parallel_region"),
     ccg_megatron_gather_from_tensor_model_parallel_region, "[4,4]"},
    {M("scatter_to_sequence_parallel_region"),
     ccg_megatron_scatter_to_sequence_parallel_region, "[16,4]"},
    {M("all_gather_last_dim_from_tensor_parallel_region"),
     ccg_megatron_all_gather_last_dim_from_tensor_parallel_region, "[4,4]"},
    {M("reduce_scatter_last_dim_to_tensor_parallel_region"),
     ccg_megatron_reduce_scatter_last_dim_to_tensor_parallel_region, "[4,16]"},
    {M("all_to_all_sp2hp"), ccg_megatron_all_to_all_sp2hp, "[4,2,16]"},
    {M("all_to_all_hp2sp"), ccg_megatron_all_to_all_hp2sp, "[16,2,4]"},
    {M("reduce"), ccg_megatron_reduce, "[8]"},
    {M("split_along_last_dim"), ccg_megatron_split_along_last_dim, "[4,16]"},
    {M("split_along_first_dim"), ccg_megatron_split_along_first_dim, "[16,4]"},
    {M("gather_along_last_dim"), ccg_megatron_gather_along_last_dim, "[4,4]"},
    {M("reduce_scatter_along_last_dim"),
     ccg_megatron_reduce_scatter_along_last_dim, "[4,16]"},
};

static typed_fn current;
static ccg_status call_current(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return current(g, x, "tp", y);
}

static void test_typed_equals_by_name(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof group_only / sizeof group_only[0]; i++) {
    current = group_only[i].fn;
    same_as_by_name(group_only[i].map, "{\"group\": \"tp\"}", TP4,
                    group_only[i].shape, call_current);
  }
  same_as_by_name(M("gather_from_sequence_parallel_region"),
                  "{\"output_split_sizes\": [3,5,4,4], "
                  "\"tensor_parallel_output_grad\": false}",
                  TP4, "[tp{3,5,4,4},8]", call_gather_sp);
  same_as_by_name(M("reduce_scatter_to_sequence_parallel_region"),
                  "{\"input_split_sizes\": [3,5,4,4]}", TP4, "[16,8]",
                  call_rs_sp);
  same_as_by_name(M("all_to_all"),
                  "{\"input_split_sizes\": [1,2,3,4], "
                  "\"output_split_sizes\": [4,4,2,2]}",
                  TP4, "[10,8]", call_a2a);
  same_as_by_name(M("gather_along_first_dim"),
                  "{\"output_split_sizes\": [3,5,4,4]}", TP4, "[tp{3,5,4,4},8]",
                  call_gather_first);
  same_as_by_name(M("reduce_scatter_along_first_dim"), NULL, TP4, "[16,8]",
                  call_rs_first);
  same_as_by_name(M("sequence_parallel_param"), NULL, TP4, "[16]", call_mark);
}

/* The typed call reports failures like the by-name one and changes
 * nothing. */
static void test_typed_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(TP4);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]"), y;
  assert_fails(
      g, CCG_STATUS_SHAPE,
      ccg_megatron_scatter_to_tensor_model_parallel_region(g, x, NULL, &y),
      "megatron.scatter_to_tensor_model_parallel_region", "size 6");
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  ccg_graph_free(g);
}

/* ---- layers ----------------------------------------------------------------
 */

/* A weight or bias as a graph input (shapes only matter here). */
static ccg_value_id param(ccg_graph *g, const char *name, const char *shape) {
  return ccg_test_input(g, name, CCG_DTYPE_F32, shape);
}

typedef struct layer_case {
  const char *name, *mesh, *x, *w, *b;
  bool row, sequence_parallel, gather_output, input_is_parallel;
} layer_case;

static const layer_case layer_cases[] = {
    {"column_parallel_linear_tp4", TP4, "[8,16]", "[16,8]", "[8]", false, false,
     false, true},
    {"column_parallel_linear_gather_output_tp4", TP4, "[8,16]", "[16,8]", NULL,
     false, false, true, true},
    {"column_parallel_linear_sequence_parallel_dp2tp2", DP2TP2, "[4,2,16]",
     "[16,16]", "[16]", false, true, false, true},
    {"row_parallel_linear_tp4", TP4, "[8,8]", "[8,16]", "[16]", true, false,
     false, true},
    {"row_parallel_linear_scatter_input_tp4", TP4, "[8,32]", "[8,16]", NULL,
     true, false, false, false},
    {"row_parallel_linear_sequence_parallel_tp4", TP4, "[8,2,8]", "[8,16]",
     "[16]", true, true, false, true},
    {"row_parallel_linear_sequence_parallel_tp1", TP1, "[8,2,32]", "[32,16]",
     "[16]", true, true, false, true},
};

static ccg_status build_layer(ccg_graph *g, const layer_case *c,
                              ccg_value_id *y) {
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, c->x);
  ccg_value_id w = param(g, "w", c->w);
  ccg_value_id b = c->b ? param(g, "b", c->b) : CCG_NONE;
  ccg_megatron_linear_options o = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  o.sequence_parallel = c->sequence_parallel;
  o.gather_output = c->gather_output;
  o.input_is_parallel = c->input_is_parallel;
  return c->row ? ccg_megatron_row_parallel_linear(g, x, w, b, &o, y)
                : ccg_megatron_column_parallel_linear(g, x, w, b, &o, y);
}

/* The forward graph of each layer, golden. */
static void test_layers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof layer_cases / sizeof layer_cases[0]; i++) {
    const layer_case *c = &layer_cases[i];
    ccg_graph *g = ccg_test_graph_named(c->name, c->mesh);
    ccg_value_id y;
    assert_ok(g, build_layer(g, c, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    assert_ok(g, ccg_graph_validate(g));
    char *text = NULL;
    assert_ok(g, ccg_graph_dump_string(g, CCG_DUMP_JSON, &text));
    golden_check_text("megatron", c->name, text);
    ccg_graph_free(g);
  }
}

static void layer_fails(const layer_case *c, ccg_status want, const char *f1,
                        const char *f2) {
  ccg_graph *g = ccg_test_graph_named(c->name, c->mesh);
  ccg_value_id y;
  ccg_status st = build_layer(g, c, &y);
  ccg_test_assert_fails(g, want, st, c->name, __FILE__, __LINE__,
                        (const char *[]){f1, f2, NULL});
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  ccg_graph_free(g);
}

static void test_layer_errors(void **state) {
  (void)state;
  layer_case c = {"e",   TP4,  "[8,2,16]", "[16,8]", NULL,
                  false, true, true,       true};
  layer_fails(&c, CCG_STATUS_INVALID_ARG, "megatron ColumnParallelLinear",
              "gather_output cannot be combined with sequence_parallel");
  c = (layer_case){"e",  TP4,  "[8,2,32]", "[8,16]", NULL,
                   true, true, false,      false};
  layer_fails(&c, CCG_STATUS_INVALID_ARG, "megatron RowParallelLinear",
              "sequence_parallel needs input_is_parallel");
  /* A failure after the first mapping undoes it: the MatMul refuses. */
  c = (layer_case){"e",   TP4,   "[8,16]", "[12,8]", NULL,
                   false, false, false,    true};
  layer_fails(&c, CCG_STATUS_SHAPE, "megatron ColumnParallelLinear", "MatMul");
  /* Sequence-parallel reduce-scatter of 6 rows over 4 ranks. */
  c = (layer_case){"e",  TP4,  "[6,2,8]", "[8,16]", NULL,
                   true, true, false,     true};
  layer_fails(&c, CCG_STATUS_SHAPE, "reduce_scatter_to_sequence_parallel",
              "size 6");
}

int main(void) {
  const struct CMUnitTest more[] = {
      cmocka_unit_test(test_not_divisible),
      cmocka_unit_test(test_bad_split_sizes),
      cmocka_unit_test(test_bad_group),
      cmocka_unit_test(test_sp2hp_symbolic_leading),
      cmocka_unit_test(test_typed_equals_by_name),
      cmocka_unit_test(test_typed_errors),
      cmocka_unit_test(test_layers),
      cmocka_unit_test(test_layer_errors),
  };
  return golden_run("megatron", cases, N_CASES, run_case, more,
                    sizeof more / sizeof more[0]);
}
