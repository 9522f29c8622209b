/* Open-Sora mappings: golden graphs (forward + backward) on tp=4,
 * dp=2 x tp=2 and tp=1 meshes, the Ulysses all-to-all on middle dims,
 * gradient scaling, errors, and the typed functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "mapping_golden.h"

#define O(nm) "opensora." nm
#define TP4 "tp=4"
#define DP2TP2 "dp=2,tp=2"
#define TP1 "tp=1"

#define GD(stem, mesh, map, params, shape, dt)                                 \
  { "opensora", stem, mesh, O(map), params, {shape, NULL}, dt }
#define G(stem, mesh, map, params, shape)                                      \
  GD(stem, mesh, map, params, shape, CCG_DTYPE_UNDEFINED)
#define G3(stem, map, params, shape)                                           \
  G(stem "_tp4", TP4, map, params, shape),                                     \
      G(stem "_dp2tp2", DP2TP2, map, params, shape),                           \
      G(stem "_tp1", TP1, map, params, shape)

static const golden_case cases[] = {
    /* [B, N/W, H, D] -> [B, N, H/W, D] with the defaults (2, 1). */
    G3("all_to_all", "all_to_all", "{\"group\": \"tp\"}", "[2,4,8,16]"),
    /* Ulysses qkv [B, N/W, 3, H, D]: scatter heads (3), gather sequence. */
    G3("all_to_all_qkv", "all_to_all",
       "{\"group\": \"tp\", \"scatter_dim\": 3, \"gather_dim\": 1}",
       "[2,4,3,8,16]"),
    /* Back: [B, N, H/W, D] -> [B, N/W, H, D]. */
    G("all_to_all_back_tp4", TP4, "all_to_all",
      "{\"group\": \"tp\", \"scatter_dim\": 1, \"gather_dim\": 2}",
      "[2,16,2,16]"),
    G("all_to_all_dim0_tp4", TP4, "all_to_all",
      "{\"group\": \"tp\", \"scatter_dim\": 0, \"gather_dim\": 0}", "[8,4]"),
    G("all_to_all_negative_dims_tp4", TP4, "all_to_all",
      "{\"group\": \"tp\", \"scatter_dim\": -2, \"gather_dim\": -3}",
      "[2,4,8,16]"),
    G("all_to_all_sp_group_dp2sp2", "dp=2,sp=2", "all_to_all", NULL,
      "[2,4,8,16]"),
    G("all_to_all_symbolic_batch_tp4", TP4, "all_to_all", "{\"group\": \"tp\"}",
      "[batch,4,8,16]"),
    G3("split_forward_gather_backward", "split_forward_gather_backward",
       "{\"group\": \"tp\", \"dim\": 1}", "[2,16,8]"),
    G3("split_forward_gather_backward_up", "split_forward_gather_backward",
       "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": \"up\"}", "[2,16,8]"),
    G3("split_forward_gather_backward_down", "split_forward_gather_backward",
       "{\"group\": \"tp\", \"dim\": -1, \"grad_scale\": \"down\"}",
       "[2,16,8]"),
    G3("split_forward_gather_backward_factor", "split_forward_gather_backward",
       "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": 0.5}", "[2,16,8]"),
    G3("gather_forward_split_backward", "gather_forward_split_backward",
       "{\"group\": \"tp\", \"dim\": 1}", "[2,4,8]"),
    G3("gather_forward_split_backward_up", "gather_forward_split_backward",
       "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": \"up\"}", "[2,4,8]"),
    G3("gather_forward_split_backward_down", "gather_forward_split_backward",
       "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": \"down\"}", "[2,4,8]"),
    GD("gather_forward_split_backward_down_f16_tp4", TP4,
       "gather_forward_split_backward",
       "{\"group\": \"tp\", \"dim\": 0, \"grad_scale\": \"down\"}", "[4,8]",
       CCG_DTYPE_F16),
    GD("split_forward_gather_backward_up_bf16_tp4", TP4,
       "split_forward_gather_backward",
       "{\"group\": \"tp\", \"dim\": 0, \"grad_scale\": \"up\"}", "[16,8]",
       CCG_DTYPE_BF16),
    GD("split_forward_gather_backward_factor_f64_tp4", TP4,
       "split_forward_gather_backward",
       "{\"group\": \"tp\", \"dim\": 0, \"grad_scale\": 3}", "[16,8]",
       CCG_DTYPE_F64),
};

#define N_CASES (sizeof cases / sizeof cases[0])

static void run_case(void **state) { golden_check(*state); }

#define E(map, mesh, params, shape)                                            \
  (&(const golden_case){                                                       \
      "opensora", "error", mesh, O(map), params, {shape, NULL}, 0})

static void test_errors(void **state) {
  (void)state;
  golden_fails(E("split_forward_gather_backward", TP4,
                 "{\"group\": \"tp\", \"dim\": 1}", "[2,6,8]"),
               CCG_STATUS_SHAPE, "opensora.split_forward_gather_backward",
               "dim 1", "'x' [2,6,8]", "size 6", "group size 4");
  golden_fails(E("all_to_all", TP4, "{\"group\": \"tp\"}", "[2,4,6,16]"),
               CCG_STATUS_SHAPE, "opensora.all_to_all", "dim 2", "size 6");
  golden_fails(E("all_to_all", TP4, "{\"group\": \"tp\", \"scatter_dim\": 4}",
                 "[2,4,8,16]"),
               CCG_STATUS_INVALID_ARG, "scatter_dim 4 is out of range",
               "rank 4");
  golden_fails(E("gather_forward_split_backward", TP4,
                 "{\"group\": \"tp\", \"dim\": -4}", "[2,4,8]"),
               CCG_STATUS_INVALID_ARG, "dim -4 is out of range");
  golden_fails(
      E("split_forward_gather_backward", TP4, "{\"group\": \"tp\"}", "[2,4,8]"),
      CCG_STATUS_INVALID_ARG, "opensora.split_forward_gather_backward",
      "params key 'dim' is required");
  golden_fails(E("split_forward_gather_backward", TP4,
                 "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": \"left\"}",
                 "[2,4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'grad_scale'",
               "\"up\", \"down\" or a finite number", "got \"left\"");
  golden_fails(E("all_to_all", TP4, NULL, "[2,4,8,16]"), CCG_STATUS_INVALID_ARG,
               "group 'sp'", "[tp=4]");
  golden_fails(
      E("all_to_all", "tp=4,sp=1", "{\"group\": \"tp\"}", "[2,4,8,16,2,2,2,2]"),
      CCG_STATUS_UNSUPPORTED, "rank 8", "one more dim");
}

/* Scaling needs a float gradient; the failed backward leaves nothing. */
static void test_scale_needs_float(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(TP4);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_I32, "[16,8]"), y;
  const char *p = "{\"group\": \"tp\", \"dim\": 0, \"grad_scale\": \"up\"}";
  size_t n = 1;
  assert_ok(g, ccg_mapping_apply(g, O("split_forward_gather_backward"), p, &x,
                                 1, &y, &n));
  ccg_value_id gy = ccg_test_input(g, "gy", CCG_DTYPE_I32, "[4,8]"), gx;
  ccg_mapping_grad_args a = CCG_MAPPING_GRAD_ARGS_INIT;
  a.params = p;
  a.inputs = &x;
  a.n_inputs = 1;
  a.outputs = &y;
  a.n_outputs = 1;
  a.grad_outputs = &gy;
  size_t nodes = ccg_graph_num_nodes(g), values = ccg_graph_num_values(g);
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_mapping_apply_backward(g, O("split_forward_gather_backward"),
                                          &a, &gx),
               "opensora.split_forward_gather_backward", "'gy' is i32",
               "float");
  assert_int_equal(gx, CCG_NONE);
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_int_equal(ccg_graph_num_values(g), values);
  ccg_graph_free(g);
}

/* ---- typed functions ------------------------------------------------------
 */

static void
same_as_by_name(const char *map, const char *params, const char *shape,
                ccg_status (*call)(ccg_graph *, ccg_value_id, ccg_value_id *)) {
  golden_case c = {"opensora", "typed", TP4, map, params, {shape, NULL}, 0};
  golden_same_as_typed(&c, call, true);
}

static ccg_status call_a2a(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return ccg_opensora_all_to_all(g, x, "tp", 3, 1, y);
}
static ccg_status call_split(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  ccg_grad_scale s = {CCG_GRAD_SCALE_DOWN, 0};
  return ccg_opensora_split_forward_gather_backward(g, x, "tp", 1, s, y);
}
static ccg_status call_gather(ccg_graph *g, ccg_value_id x, ccg_value_id *y) {
  return ccg_opensora_gather_forward_split_backward(g, x, "tp", 1,
                                                    CCG_GRAD_SCALE_NONE, y);
}
static ccg_status call_gather_factor(ccg_graph *g, ccg_value_id x,
                                     ccg_value_id *y) {
  ccg_grad_scale s = {CCG_GRAD_SCALE_FACTOR, 2};
  return ccg_opensora_gather_forward_split_backward(g, x, "tp", 1, s, y);
}

static void test_typed_equals_by_name(void **state) {
  (void)state;
  same_as_by_name(O("all_to_all"),
                  "{\"group\": \"tp\", \"scatter_dim\": 3, \"gather_dim\": 1}",
                  "[2,4,3,8,16]", call_a2a);
  same_as_by_name(O("split_forward_gather_backward"),
                  "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": \"down\"}",
                  "[2,16,8]", call_split);
  /* grad_scale 1 (an integer) and 1.0 are the same canonical params. */
  same_as_by_name(O("gather_forward_split_backward"),
                  "{\"dim\": 1, \"group\": \"tp\", \"grad_scale\": 1}",
                  "[2,4,8]", call_gather);
  same_as_by_name(O("gather_forward_split_backward"),
                  "{\"group\": \"tp\", \"dim\": 1, \"grad_scale\": 2}",
                  "[2,4,8]", call_gather_factor);
}

int main(void) {
  const struct CMUnitTest more[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_scale_needs_float),
      cmocka_unit_test(test_typed_equals_by_name),
  };
  return golden_run("opensora", cases, N_CASES, run_case, more,
                    sizeof more / sizeof more[0]);
}
