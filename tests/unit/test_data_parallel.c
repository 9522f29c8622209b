/* Data parallelism after the backward (docs/parallelism.md): DDP's gradient
 * buckets (ccg_ddp_bucket_gradients) give the same gradients as one
 * all-reduce per parameter, with fewer calls, each bucket right after its
 * last gradient; FSDP's reshard_after_forward gathers a parameter again
 * just before the backward node that reads it; node order stays
 * topological. Run on dp=2 local ranks, f32, exact (the same additions in
 * the same order). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

/* Every node's inputs are made by earlier nodes. */
static void assert_topological(ccg_graph *g) {
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++)
    for (size_t i = 0; i < ccg_node_num_inputs(g, (ccg_node_id)n); i++) {
      ccg_value_id v = ccg_node_input(g, (ccg_node_id)n, i);
      ccg_node_id p = v == CCG_NONE ? CCG_NONE : ccg_value_producer(g, v);
      if (p != CCG_NONE && p >= n)
        fail_msg("node %zu (%s) reads '%s' of node %u", n,
                 ccg_node_name(g, (ccg_node_id)n), ccg_value_name(g, v), p);
    }
}

static size_t count_op(ccg_graph *g, ccg_op op) {
  size_t c = 0;
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++)
    c += ccg_node_op(g, (ccg_node_id)n) == op;
  return c;
}

static const float W_DATA[6] = {1, -2, 0.5f, 3, -1, 2};
static const float B_DATA[2] = {0.25f, -0.5f};

/* loss = sum(x @ W + b + x @ V), W, b and V through ddp.all_reduce_grad; x
 * is [2,3] on each rank. */
static ccg_graph *ddp_model(void) {
  ccg_graph *g = ccg_test_graph("dp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]"), w, b, v;
  ccg_tensor tw = {CCG_DTYPE_F32, 2, {3, 2}, (void *)W_DATA};
  ccg_tensor tb = {CCG_DTYPE_F32, 1, {2}, (void *)B_DATA};
  assert_ok(g, ccg_graph_add_initializer(g, "w", &tw, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "b", &tb, &b));
  assert_ok(g, ccg_graph_add_initializer(g, "v", &tw, &v));
  ccg_value_id wd, bd, vd, y, z, u, loss;
  assert_ok(g, ccg_ddp_all_reduce_grad(g, w, NULL, false, &wd));
  assert_ok(g, ccg_ddp_all_reduce_grad(g, b, NULL, false, &bd));
  assert_ok(g, ccg_ddp_all_reduce_grad(g, v, NULL, false, &vd));
  assert_ok(g, ccg_matmul(g, x, wd, &y));
  assert_ok(g, ccg_add(g, y, bd, &z));
  assert_ok(g, ccg_matmul(g, x, vd, &u));
  assert_ok(g, ccg_add(g, z, u, &z));
  assert_ok(g, ccg_reduce_sum(g, z, NULL, 0, false, &loss));
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  assert_ok(g, ccg_backward(g, &o));
  return g;
}

/* grad/w, grad/b, grad/v of both ranks (x differs per rank) into out. */
static void run_grads(ccg_graph *g, float out[2][14]) {
  float x[2][6] = {{1, 2, 3, 4, 5, 6}, {-1, 0.5f, 2, 0, 1, -3}};
  ccg_exec_tensor in[2][1], o[2][3];
  const char *names[3] = {"grad/w", "grad/b", "grad/v"};
  size_t off[3] = {0, 6, 8}, len[3] = {6, 2, 6};
  for (int r = 0; r < 2; r++) {
    in[r][0] =
        (ccg_exec_tensor){"x", {CCG_DTYPE_F32, 2, {2, 3}, x[r]}, NULL, 0};
    for (int k = 0; k < 3; k++)
      o[r][k] = (ccg_exec_tensor){
          names[k], {0}, out[r] + off[k], len[k] * sizeof(float)};
  }
  const ccg_exec_tensor *ip[2] = {in[0], in[1]};
  ccg_exec_tensor *op[2] = {o[0], o[1]};
  assert_ok(g, ccg_exec_run_local(g, 2, NULL, ip, 1, op, 3, NULL));
}

static void test_buckets(void **state) {
  (void)state;
  ccg_graph *plain = ddp_model(), *one = ddp_model(), *tiny = ddp_model();
  size_t n = 9;
  assert_int_equal(count_op(plain, CCG_OP_ALL_REDUCE), 3);
  assert_ok(one, ccg_ddp_bucket_gradients(one, 1 << 20, &n));
  assert_int_equal(n, 1);
  assert_int_equal(count_op(one, CCG_OP_ALL_REDUCE), 1);
  assert_topological(one);
  /* a cap below each gradient: every gradient alone, nothing changes */
  assert_ok(tiny, ccg_ddp_bucket_gradients(tiny, 4, &n));
  assert_int_equal(n, 0);
  assert_int_equal(count_op(tiny, CCG_OP_ALL_REDUCE), 3);
  /* 32 bytes hold v's and b's gradients (24 + 8) but not w's as well */
  ccg_graph *two = ddp_model();
  assert_ok(two, ccg_ddp_bucket_gradients(two, 32, &n));
  assert_int_equal(n, 1);
  assert_int_equal(count_op(two, CCG_OP_ALL_REDUCE), 2);
  assert_topological(two);
  float a[2][14], b[2][14], c[2][14];
  run_grads(plain, a);
  run_grads(one, b);
  run_grads(two, c);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 14; i++) {
      assert_float_equal(a[r][i], b[r][i], 0);
      assert_float_equal(a[r][i], c[r][i], 0);
    }
  /* the mean over the ranks of x_r^T 1: w's [0][0] is (1+4 + -1+0)/2 */
  assert_float_equal(a[0][0], 2.0f, 1e-6);
  assert_float_equal(a[1][6], 2.0f, 1e-6); /* b: two rows, averaged */
  ccg_graph_free(plain);
  ccg_graph_free(one);
  ccg_graph_free(tiny);
  ccg_graph_free(two);
}

/* y = x @ AllGather(w_shard); the gradient of x reads the gathered weight:
 * with reshard_after_forward it reads a second gather, placed just before
 * it. */
static ccg_graph *fsdp_model(bool reshard) {
  ccg_graph *g = ccg_test_graph("dp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]"), ws, w, y, l;
  ccg_tensor t = {CCG_DTYPE_F32, 2, {2, 3}, (void *)W_DATA};
  assert_ok(g, ccg_graph_add_initializer(g, "w", &t, &ws));
  assert_ok(g, ccg_fsdp_all_gather_param(g, ws, NULL, 0, false, reshard, &w));
  assert_ok(g, ccg_matmul(g, x, w, &y));
  assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &l));
  const char *wrt[] = {"w", "x"};
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = l;
  o.wrt = wrt;
  o.n_wrt = 2;
  assert_ok(g, ccg_backward(g, &o));
  return g;
}

static void test_reshard_after_forward(void **state) {
  (void)state;
  ccg_graph *keep = fsdp_model(false), *g = fsdp_model(true);
  assert_int_equal(count_op(keep, CCG_OP_ALL_GATHER), 1);
  assert_int_equal(count_op(g, CCG_OP_ALL_GATHER), 2);
  assert_int_equal(count_op(g, CCG_OP_REDUCE_SCATTER), 1);
  assert_topological(g);
  /* the second gather is tagged as the mapping's backward and read by the
   * very next node, which no forward node is */
  ccg_node_id first = CCG_NONE, second = CCG_NONE;
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++)
    if (ccg_node_op(g, (ccg_node_id)n) == CCG_OP_ALL_GATHER) {
      if (first == CCG_NONE)
        first = (ccg_node_id)n;
      else
        second = (ccg_node_id)n;
    }
  const ccg_tag *t = ccg_node_tag(g, second);
  assert_non_null(t);
  assert_true(t->backward);
  assert_string_equal(t->mapping, "fsdp.all_gather_param");
  ccg_value_id z = ccg_node_output(g, second, 0);
  bool next_reads = false;
  for (size_t i = 0; i < ccg_node_num_inputs(g, second + 1); i++)
    next_reads = next_reads || ccg_node_input(g, second + 1, i) == z;
  assert_true(next_reads);
  assert_non_null(strstr(ccg_node_name(g, second + 1), "grad"));
  /* the forward's gathered value has no backward reader left */
  ccg_value_id y = ccg_node_output(g, first, 0);
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++)
    for (size_t i = 0; i < ccg_node_num_inputs(g, (ccg_node_id)n); i++)
      if (ccg_node_input(g, (ccg_node_id)n, i) == y)
        assert_null(strstr(ccg_node_name(g, (ccg_node_id)n), "grad"));
  ccg_graph_free(keep);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buckets),
      cmocka_unit_test(test_reshard_after_forward),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
