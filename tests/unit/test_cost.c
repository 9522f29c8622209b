/* The cost pass: bytes, nccl-tests bus factors, per-rank sums and the step
 * time, against numbers worked out by hand below for the verify programs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "verify_programs.h"

#define EPS 1e-12

static void test_bus_factors(void **state) {
  (void)state;
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_ALL_REDUCE, 4), 1.5, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_ALL_REDUCE, 8), 1.75, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_ALL_GATHER, 4), 0.75, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_REDUCE_SCATTER, 2), 0.5, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_ALL_TO_ALL, 8), 0.875, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_BROADCAST, 4), 1.0, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_REDUCE, 4), 1.0, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_SEND, 2), 1.0, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_RECV, 2), 1.0, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_ALL_REDUCE, 1), 0.0, EPS);
  assert_float_equal(ccg_cost_bus_factor(CCG_OP_MATMUL, 4), 0.0, EPS);
}

/* Megatron MLP on tp=4, one SPMD graph, f32:
 *   Broadcast x [4,8]:  S = 32*4 = 128 B, factor 1        -> 128 bus B
 *   AllReduce y [4,8]:  S = 128 B, factor 2*3/4 = 1.5      -> 192 bus B
 *   AllGather z [2,4] -> [8,4]: S = 32*4 = 128 B, 3/4     ->  96 bus B
 * per rank 416 bus bytes (384 bytes); at 8 Gbit/s = 1e9 B/s: 416 ns. */
static void test_mlp_tp4(void **state) {
  (void)state;
  ccg_graph *g = vp_mlp("tp=4", 0, VM_NONE, -1);
  assert_non_null(g);
  ccg_cost_report *r = NULL;
  assert_ok(NULL, ccg_cost_program(&g, 1, NULL, 8.0, &r));
  assert_int_equal(r->n_items, 3);
  assert_int_equal(r->items[0].op, CCG_OP_BROADCAST);
  assert_int_equal(r->items[1].op, CCG_OP_ALL_REDUCE);
  assert_int_equal(r->items[2].op, CCG_OP_ALL_GATHER);
  const double bytes[] = {128, 128, 128}, bus[] = {128, 192, 96};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r->items[i].group_size, 4);
    assert_int_equal(r->items[i].first_rank, 0);
    assert_float_equal(r->items[i].bytes, bytes[i], EPS);
    assert_float_equal(r->items[i].bus_bytes, bus[i], EPS);
    assert_float_equal(r->items[i].time_s, bus[i] * 1e-9, 1e-18);
  }
  assert_int_equal(r->n_ranks, 4);
  for (int q = 0; q < 4; q++) {
    assert_float_equal(r->rank_bytes[q], 384, EPS);
    assert_float_equal(r->rank_bus_bytes[q], 416, EPS);
  }
  assert_float_equal(r->link_bytes_per_s, 1e9, EPS);
  assert_float_equal(r->step_bus_bytes, 416, EPS);
  assert_float_equal(r->step_time_s, 416e-9, 1e-18);
  ccg_cost_report_free(r);
  ccg_graph_free(g);
}

/* dp=2 x tp=2: two tp groups, so six items; per rank
 * 128*1 + 128*(2*1/2) + (4*4*4 = 64 B)*(1/2) = 288 bus bytes. */
static void test_mlp_dp2tp2(void **state) {
  (void)state;
  ccg_graph *g = vp_mlp("dp=2,tp=2", 0, VM_NONE, -1);
  assert_non_null(g);
  ccg_cost_report *r = NULL;
  assert_ok(NULL, ccg_cost_program(&g, 1, NULL, 100.0, &r));
  assert_int_equal(r->n_items, 6);
  assert_int_equal(r->items[3].first_rank, 2);
  assert_float_equal(r->items[5].bytes, 64, EPS);
  assert_float_equal(r->items[5].bus_bytes, 32, EPS);
  for (int q = 0; q < 4; q++)
    assert_float_equal(r->rank_bus_bytes[q], 288, EPS);
  /* 100 Gbit/s = 12.5e9 B/s */
  assert_float_equal(r->step_time_s, 288.0 / 12.5e9, 1e-18);
  ccg_cost_report_free(r);
  ccg_graph_free(g);
}

/* Pipeline, per stage: rank 0 sends the meta as i64 (count [1] 8 B, ndims
 * [1] 8 B, dims [2] 16 B, dtype [1] 8 B) and the activation [2,8] f32 64 B,
 * and receives the gradient [2,8] 64 B; rank 1 the mirror. Factor 1:
 * 104 + 64 = 168 bus bytes each; six sends. */
static void test_pipeline(void **state) {
  (void)state;
  ccg_graph *g[2] = {vp_pipeline(0, VM_NONE, -1), vp_pipeline(1, VM_NONE, -1)};
  assert_non_null(g[0]);
  assert_non_null(g[1]);
  ccg_cost_report *r = NULL;
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  o.stage_axis = "pp";
  assert_ok(NULL, ccg_cost_program(g, 2, &o, 1.0, &r));
  assert_int_equal(r->n_items, 6);
  const double sent[] = {8, 8, 16, 8, 64, 64};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(r->items[i].op, CCG_OP_SEND);
    assert_float_equal(r->items[i].bytes, sent[i], EPS);
    assert_int_equal(r->items[i].first_rank, i < 5 ? 0 : 1);
  }
  assert_float_equal(r->rank_bus_bytes[0], 168, EPS);
  assert_float_equal(r->rank_bus_bytes[1], 168, EPS);
  assert_float_equal(r->step_time_s, 168.0 / 1.25e8, 1e-15);
  ccg_cost_report_free(r);
  ccg_graph_free(g[0]);
  ccg_graph_free(g[1]);
}

/* Uneven MoE all-to-all on ep=2: rank 0 sends [5,16] f32 = 320 B, rank 1
 * [7,16] = 448 B; factor 1/2. The item takes the larger: 448 -> 224 bus
 * bytes; ranks 160 and 224; the step is the busier rank's 224. */
static void test_moe_uneven(void **state) {
  (void)state;
  ccg_graph *g[2] = {vp_moe(0, VM_NONE, -1), vp_moe(1, VM_NONE, -1)};
  ccg_cost_report *r = NULL;
  assert_ok(NULL, ccg_cost_program(g, 2, NULL, 8.0, &r));
  assert_int_equal(r->n_items, 1);
  assert_float_equal(r->items[0].bytes, 448, EPS);
  assert_float_equal(r->items[0].bus_bytes, 224, EPS);
  assert_float_equal(r->rank_bytes[0], 320, EPS);
  assert_float_equal(r->rank_bus_bytes[0], 160, EPS);
  assert_float_equal(r->rank_bus_bytes[1], 224, EPS);
  assert_float_equal(r->step_bus_bytes, 224, EPS);
  ccg_cost_report_free(r);
  ccg_graph_free(g[0]);
  ccg_graph_free(g[1]);
}

static void test_errors(void **state) {
  (void)state;
  ccg_graph *g = vp_graph("sym", "tp=2");
  ccg_shape s = {2, {ccg_dim_sym("batch"), ccg_dim_num(4)}};
  ccg_value_id x, y;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  ccg_cost_report *r = NULL;
  assert_fails(NULL, CCG_STATUS_SHAPE, ccg_cost_program(&g, 1, NULL, 1.0, &r),
               "AllReduce '", "on rank 0 moves [batch,4]",
               "the size batch is symbolic");
  assert_null(r);
  /* bound: batch = 8 gives [8,4] f32 = 128 B, factor 2*1/2 = 1 */
  const char *names[] = {"batch"};
  const int64_t values[] = {8};
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  o.dim_names = names;
  o.dim_values = values;
  o.n_dims = 1;
  assert_ok(NULL, ccg_cost_program(&g, 1, &o, 1.0, &r));
  assert_float_equal(r->items[0].bytes, 128, EPS);
  assert_float_equal(r->step_bus_bytes, 128, EPS);
  ccg_cost_report_free(r);
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_cost_program(&g, 1, NULL, 0.0, &r),
               "link bandwidth must be > 0");
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bus_factors), cmocka_unit_test(test_mlp_tp4),
      cmocka_unit_test(test_mlp_dp2tp2),  cmocka_unit_test(test_pipeline),
      cmocka_unit_test(test_moe_uneven),  cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
