/* ColossalAI mappings: golden graphs (forward + backward) of the
 * collectives on tp=4, dp=2 x tp=2 and tp=1, of the pipeline functions on
 * the first, a middle and the last stage of pp=4, on dp=2 x pp=2 and pp=1,
 * scatter_gather_tensors over tp, tensor meta, errors, and typed calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "mapping_golden.h"

#define CA(nm) "colossal." nm
#define TP4 "tp=4"
#define DP2TP2 "dp=2,tp=2"
#define TP1 "tp=1"

#define G(stem, mesh, map, params, ...)                                        \
  { "colossal", stem, mesh, CA(map), params, {__VA_ARGS__, NULL}, 0 }
#define G3(stem, map, params, shape)                                           \
  G(stem "_tp4", TP4, map, params, shape),                                     \
      G(stem "_dp2tp2", DP2TP2, map, params, shape),                           \
      G(stem "_tp1", TP1, map, params, shape)

/* Pipeline params for stage s: both receive shapes [2,8]. */
#define PP(s, extra)                                                           \
  "{\"stage\": " #s ", \"input_tensor_shape\": [2,8], "                        \
  "\"output_grad_shape\": [2,8]" extra "}"
/* An entry on the first, a middle and the last stage of pp=4, on the last
 * stage of dp=2 x pp=2 and on pp=1. */
#define P5(map, ...)                                                           \
  G(map "_first_pp4", "pp=4", map, PP(0, ""), __VA_ARGS__),                    \
      G(map "_middle_pp4", "pp=4", map, PP(1, ""), __VA_ARGS__),               \
      G(map "_last_pp4", "pp=4", map, PP(3, ""), __VA_ARGS__),                 \
      G(map "_last_dp2pp2", "dp=2,pp=2", map, PP(1, ""), __VA_ARGS__),         \
      G(map "_pp1", "pp=1", map, PP(0, ""), __VA_ARGS__)

static const golden_case cases[] = {
    G3("all_gather", "all_gather", "{\"dim\": 1}", "[4,8]"),
    G("all_gather_last_tp4", TP4, "all_gather", "{\"dim\": -1}", "[2,4,8]"),
    G3("reduce_scatter", "reduce_scatter", "{\"dim\": 0}", "[8,8]"),
    G("reduce_scatter_max_tp4", TP4, "reduce_scatter",
      "{\"dim\": 1, \"op\": \"max\"}", "[2,8]"),
    G3("all_reduce", "all_reduce", NULL, "[4,8]"),
    G("all_reduce_avg_tp4", TP4, "all_reduce", "{\"op\": \"avg\"}", "[4,8]"),
    G("broadcast_tp4", TP4, "broadcast", "{\"src\": 1}", "[4,8]"),
    G("broadcast_dp2tp2", DP2TP2, "broadcast", "{\"src\": 1}", "[4,8]"),
    G("broadcast_tp1", TP1, "broadcast", NULL, "[4,8]"),
    {"colossal",
     "broadcast_f16_dp2tp2",
     DP2TP2,
     CA("broadcast"),
     "{\"src\": 0}",
     {"[4,8]", NULL},
     CCG_DTYPE_F16},
    G("reduce_tp4", TP4, "reduce", "{\"dst\": 2}", "[4,8]"),
    G("reduce_dp2tp2", DP2TP2, "reduce", "{\"dst\": 1, \"op\": \"max\"}",
      "[4,8]"),
    G("reduce_tp1", TP1, "reduce", NULL, "[4,8]"),
    G3("ring_forward", "ring_forward", NULL, "[4,8]"),
    G("ring_forward_sp_dp2sp2", "dp=2,sp=2", "ring_forward",
      "{\"group\": \"sp\"}", "[4,8]"),

    P5("send_forward", "[2,8]"),
    P5("recv_forward", NULL),
    P5("send_backward", "[2,8]"),
    P5("recv_backward", NULL),
    P5("send_forward_recv_backward", "[2,8]"),
    P5("send_backward_recv_forward", "[2,8]"),
    P5("send_forward_recv_forward", "[2,8]"),
    P5("send_backward_recv_backward", "[2,8]"),
    P5("send_forward_backward_recv_forward_backward", "[2,8]", "[2,8]"),
    /* Middle stage of dp x pp x tp, bf16 received. */
    G("send_forward_recv_forward_middle_dp2pp3tp2", "dp=2,pp=3,tp=2",
      "send_forward_recv_forward", PP(1, ", \"dtype\": \"bf16\""), "[2,8]"),
    /* scatter_gather_tensors: flat 1/tp slices, all-gathered on arrival;
     * a numel tp does not divide goes whole. */
    G("send_forward_sg_pp2tp2", "pp=2,tp=2", "send_forward",
      PP(0, ", \"scatter_gather_tensors\": true"), "[2,8]"),
    G("recv_forward_sg_pp2tp2", "pp=2,tp=2", "recv_forward",
      PP(1, ", \"scatter_gather_tensors\": true"), NULL),
    G("send_forward_recv_backward_sg_middle_pp3tp2", "pp=3,tp=2",
      "send_forward_recv_backward", PP(1, ", \"scatter_gather_tensors\": true"),
      "[2,8]"),
    G("send_forward_sg_indivisible_pp2tp2", "pp=2,tp=2", "send_forward",
      "{\"stage\": 0, \"scatter_gather_tensors\": true}", "[3,3]"),
    G("send_forward_sg_tp1_pp2tp1", "pp=2,tp=1", "send_forward",
      "{\"stage\": 0, \"scatter_gather_tensors\": true}", "[2,8]"),
    /* Tensor meta: count, then ndims, dims, dtype per tensor. */
    G("send_tensor_meta_first_pp2", "pp=2", "send_tensor_meta",
      "{\"stage\": 0}", "[2,8]", "[batch,16,4]"),
    G("send_tensor_meta_last_pp2", "pp=2", "send_tensor_meta", "{\"stage\": 1}",
      "[2,8]"),
    G("recv_tensor_meta_last_pp2", "pp=2", "recv_tensor_meta",
      "{\"stage\": 1, \"ndims\": [2, 3]}", NULL),
    G("recv_tensor_meta_first_pp2", "pp=2", "recv_tensor_meta",
      "{\"stage\": 0, \"ndims\": [2]}", NULL),
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* An edge stage's no-op send reads its input in no node. */
static void run_case(void **state) {
  const golden_case *c = *state;
  ccg_value_id in[GOLDEN_MAX_IO], out[GOLDEN_MAX_IO];
  size_t n_in, n_out;
  ccg_graph *g = golden_forward(c, in, &n_in, out, &n_out);
  golden_backward_of(g, c, in, n_in, out, n_out, true);
  golden_check_text(c->system, c->name, golden_dump_of(g));
}

#define E(map, mesh, params, ...)                                              \
  (&(const golden_case){                                                       \
      "colossal", "error", mesh, CA(map), params, {__VA_ARGS__, NULL}, 0})

static void test_errors(void **state) {
  (void)state;
  golden_fails(E("reduce_scatter", TP4, "{\"dim\": 0}", "[6,8]"),
               CCG_STATUS_SHAPE, "colossal.reduce_scatter", "dim 0", "size 6",
               "group size 4");
  golden_fails(E("all_gather", TP4, "{\"dim\": 2}", "[6,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'dim' 2 is out of range");
  golden_fails(E("broadcast", TP4, "{\"src\": 4}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "colossal.broadcast",
               "params key 'src' is 4", "ranks 0..3");
  golden_fails(E("reduce", DP2TP2, "{\"dst\": -1}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'dst' is -1");
  golden_fails(E("all_reduce", TP4, "{\"op\": \"mean\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "params key 'op' is 'mean'");
  golden_fails(E("ring_forward", DP2TP2, "{\"group\": \"dp,tp\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "colossal.ring_forward",
               "group 'dp,tp' must be one mesh axis");
  golden_fails(E("all_gather", TP4, "{\"group\": \"sp\"}", "[4,8]"),
               CCG_STATUS_INVALID_ARG, "group 'sp'", "[tp=4]");
  golden_fails(E("send_forward", "pp=4", "{\"stage\": 4}", "[2,8]"),
               CCG_STATUS_INVALID_ARG, "colossal.send_forward",
               "params key 'stage' is 4", "stages 0..3");
  golden_fails(E("send_forward", "pp=4", NULL, "[2,8]"), CCG_STATUS_INVALID_ARG,
               "params key 'stage' is required");
  golden_fails(
      E("send_forward", "pp=4", "{\"stage\": 0, \"num_stages\": 3}", "[2,8]"),
      CCG_STATUS_INVALID_ARG, "params key 'num_stages' is 3",
      "mesh axis 'pp' has 4 stages");
  golden_fails(E("recv_forward", "pp=4", "{\"stage\": 1}", NULL),
               CCG_STATUS_INVALID_ARG, "colossal.recv_forward",
               "params key 'input_tensor_shape' is needed");
  golden_fails(E("recv_backward", "pp=4",
                 "{\"stage\": 1, \"output_grad_shape\": [2,-1]}", NULL),
               CCG_STATUS_INVALID_ARG, "'output_grad_shape': dim 1 is -1");
  golden_fails(E("recv_forward", "pp=4",
                 "{\"stage\": 1, \"input_tensor_shape\": [2], \"dtype\": "
                 "\"f8\"}",
                 NULL),
               CCG_STATUS_INVALID_ARG, "params key 'dtype' is 'f8'");
  golden_fails(E("send_forward", "dp=2,pp=2",
                 "{\"stage\": 0, \"group\": "
                 "\"dp,pp\"}",
                 "[2,8]"),
               CCG_STATUS_INVALID_ARG, "group 'dp,pp' must be one mesh axis");
  golden_fails(E("send_forward", TP4, "{\"stage\": 0}", "[2,8]"),
               CCG_STATUS_INVALID_ARG, "group 'pp'", "[tp=4]");
  golden_fails(E("recv_tensor_meta", "pp=2", "{\"stage\": 1}", NULL),
               CCG_STATUS_INVALID_ARG, "params key 'ndims' is required");
  golden_fails(
      E("recv_tensor_meta", "pp=2", "{\"stage\": 1, \"ndims\": [9]}", NULL),
      CCG_STATUS_INVALID_ARG, "'ndims': entry 0 is 9");
  golden_fails(E("send_forward_backward_recv_forward_backward", "pp=2",
                 "{\"stage\": 0}", "[2,8]"),
               CCG_STATUS_INVALID_ARG, "1 inputs given");
}

/* The p2p ops of neighbouring stages pair up: what stage s sends to +1
 * with tag t, stage s+1 receives from -1 with tag t, in the same order. */
static void p2p_ops(const char *map, const char *params, const char *shape,
                    char *out, size_t size) {
  golden_case c = {"colossal", "pair", "pp=2", map, params, {shape, NULL}, 0};
  ccg_value_id in[GOLDEN_MAX_IO], o[GOLDEN_MAX_IO];
  size_t n_in, n_out;
  ccg_graph *g = golden_forward(&c, in, &n_in, o, &n_out);
  golden_backward_of(g, &c, in, n_in, o, n_out, true);
  out[0] = '\0';
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++) {
    ccg_op op = ccg_node_op(g, (ccg_node_id)i);
    if (op != CCG_OP_SEND && op != CCG_OP_RECV)
      continue;
    int64_t peer, tag;
    assert_ok(g, ccg_node_attr_int(g, (ccg_node_id)i, "peer_offset", &peer));
    assert_ok(g, ccg_node_attr_int(g, (ccg_node_id)i, "tag", &tag));
    size_t n = strlen(out);
    snprintf(out + n, size - n, "%s%+lld/%lld ", op == CCG_OP_SEND ? "S" : "R",
             (long long)peer, (long long)tag);
  }
  ccg_graph_free(g);
}

static void test_neighbours_pair_up(void **state) {
  (void)state;
  char a[256], b[256];
  /* 1F1B steady state: stage 0 sends activations and receives gradients,
   * stage 1 receives activations and sends gradients. Each op of one has
   * its counterpart (opposite op, opposite offset, same tag) in the same
   * batch of the other: forward, then backward. */
  p2p_ops(CA("send_forward_recv_backward"), PP(0, ""), "[2,8]", a, sizeof a);
  p2p_ops(CA("send_backward_recv_forward"), PP(1, ""), "[2,8]", b, sizeof b);
  assert_string_equal(a, "S+1/0 R+1/1 S+1/1 R+1/0 ");
  assert_string_equal(b, "R-1/0 S-1/1 R-1/1 S-1/0 ");
}

/* One application, one instance: the batch an executor posts together. */
static void test_batch_shares_instance(void **state) {
  (void)state;
  golden_case c = {
      "colossal", "batch",
      "pp=4",     CA("send_forward_backward_recv_forward_backward"),
      PP(1, ""),  {"[2,8]", "[2,8]", NULL},
      0};
  ccg_value_id in[GOLDEN_MAX_IO], o[GOLDEN_MAX_IO];
  size_t n_in, n_out;
  ccg_graph *g = golden_forward(&c, in, &n_in, o, &n_out);
  assert_int_equal(n_out, 2);
  assert_int_equal(ccg_graph_num_nodes(g), 4);
  const ccg_op want[] = {CCG_OP_SEND, CCG_OP_RECV, CCG_OP_SEND, CCG_OP_RECV};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(ccg_node_op(g, (ccg_node_id)i), want[i]);
    assert_int_equal(ccg_node_tag(g, (ccg_node_id)i)->instance, 1);
  }
  ccg_graph_free(g);
}

/* ---- typed functions = by name ------------------------------------------ */

static char *finish(ccg_graph *g, const ccg_value_id *outs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (outs[i] != CCG_NONE)
      assert_ok(g, ccg_graph_add_output(g, outs[i]));
  return golden_dump_of(g);
}

static char *by_name(const char *mesh, const char *map, const char *params,
                     const char *const *shapes, size_t n_in) {
  ccg_graph *g = ccg_test_graph_named("typed", mesh);
  ccg_value_id in[4], out[8];
  for (size_t i = 0; i < n_in; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "x%zu", i);
    in[i] = ccg_test_input(g, nm, CCG_DTYPE_F32, shapes[i]);
  }
  size_t n = 8;
  assert_ok(g, ccg_mapping_apply(g, map, params, in, n_in, out, &n));
  return finish(g, out, n);
}

static void test_typed_equals_by_name(void **state) {
  (void)state;
  const char *x2[] = {"[2,8]", "[2,8]"};
  ccg_graph *g = ccg_test_graph_named("typed", TP4);
  ccg_value_id x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[2,8]"), y[2];
  assert_ok(g, ccg_colossal_reduce_scatter(g, x, "tp", 1, CCG_REDUCE_MAX, y));
  golden_same_text(finish(g, y, 1),
                   by_name(TP4, CA("reduce_scatter"),
                           "{\"dim\": 1, \"op\": \"max\"}", x2, 1),
                   "reduce_scatter");
  g = ccg_test_graph_named("typed", TP4);
  x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[2,8]");
  assert_ok(g, ccg_colossal_broadcast(g, x, NULL, 3, y));
  golden_same_text(finish(g, y, 1),
                   by_name(TP4, CA("broadcast"), "{\"src\": 3}", x2, 1),
                   "broadcast");
  /* The quad on a middle stage, with both shapes. */
  ccg_shape sh = CCG_SHAPE(2, 8);
  ccg_colossal_stage st = CCG_COLOSSAL_STAGE_INIT;
  st.stage = 1;
  st.input_tensor_shape = &sh;
  st.output_grad_shape = &sh;
  g = ccg_test_graph_named("typed", "pp=4");
  x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[2,8]");
  ccg_value_id dx = ccg_test_input(g, "x1", CCG_DTYPE_F32, "[2,8]");
  assert_ok(g, ccg_colossal_send_forward_backward_recv_forward_backward(
                   g, x, dx, &st, &y[0], &y[1]));
  assert_int_not_equal(y[0], CCG_NONE);
  assert_int_not_equal(y[1], CCG_NONE);
  golden_same_text(finish(g, y, 2),
                   by_name("pp=4",
                           CA("send_forward_backward_recv_forward_backward"),
                           PP(1, ""), x2, 2),
                   "send_forward_backward_recv_forward_backward");
  /* Last stage: nothing from a next stage. */
  st.stage = 3;
  g = ccg_test_graph_named("typed", "pp=4");
  x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[2,8]");
  assert_ok(g, ccg_colossal_send_forward_recv_backward(g, x, &st, &y[0]));
  assert_int_equal(y[0], CCG_NONE);
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  ccg_graph_free(g);
  /* First stage of send_backward_recv_forward: nothing from before. */
  st.stage = 0;
  g = ccg_test_graph_named("typed", "pp=4");
  x = ccg_test_input(g, "x0", CCG_DTYPE_F32, "[2,8]");
  assert_ok(g, ccg_colossal_send_backward_recv_forward(g, x, &st, &y[0]));
  assert_int_equal(y[0], CCG_NONE);
  ccg_graph_free(g);
  /* Tensor meta. */
  g = ccg_test_graph_named("typed", "pp=2");
  st.stage = 1;
  int64_t nd[2] = {2, 3};
  ccg_value_id outs[8];
  size_t n = 0;
  assert_ok(g, ccg_colossal_recv_tensor_meta(g, nd, 2, &st, outs, &n));
  assert_int_equal(n, 7);
  golden_same_text(finish(g, outs, n),
                   by_name("pp=2", CA("recv_tensor_meta"),
                           "{\"stage\": 1, \"ndims\": [2, 3]}", x2, 0),
                   "recv_tensor_meta");
  ccg_shape sym = {1, {ccg_dim_sym("seq")}};
  st.input_tensor_shape = &sym;
  g = ccg_test_graph_named("typed", "pp=2");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_colossal_recv_forward(g, &st, y),
               "input_tensor_shape must be static");
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest more[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_neighbours_pair_up),
      cmocka_unit_test(test_batch_shares_instance),
      cmocka_unit_test(test_typed_equals_by_name),
  };
  return golden_run("tests", cases, N_CASES, run_case, more,
                    sizeof more / sizeof more[0]);
}
