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
#include <string.h>

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

/* Three gradients of both ranks (x [2, cols], rank r's row x[r]) into
 * out[r], each at its offset and length. */
static void run_two(ccg_graph *g, const float *x0, const float *x1,
                    int64_t cols, const char *const names[3],
                    const size_t off[3], const size_t len[3], float *out0,
                    float *out1) {
  const float *x[2] = {x0, x1};
  float *out[2] = {out0, out1};
  ccg_exec_tensor in[2][1], o[2][3];
  for (int r = 0; r < 2; r++) {
    in[r][0] = (ccg_exec_tensor){
        "x", {CCG_DTYPE_F32, 2, {2, cols}, (void *)x[r]}, NULL, 0};
    for (int k = 0; k < 3; k++)
      o[r][k] = (ccg_exec_tensor){
          names[k], {0}, out[r] + off[k], len[k] * sizeof(float)};
  }
  const ccg_exec_tensor *ip[2] = {in[0], in[1]};
  ccg_exec_tensor *op[2] = {o[0], o[1]};
  assert_ok(g, ccg_exec_run_local(g, 2, NULL, ip, 1, op, 3, NULL));
}

/* grad/w, grad/b, grad/v of both ranks (x differs per rank) into out. */
static void run_grads(ccg_graph *g, float out[2][14]) {
  static const float x[2][6] = {{1, 2, 3, 4, 5, 6}, {-1, 0.5f, 2, 0, 1, -3}};
  static const char *const names[3] = {"grad/w", "grad/b", "grad/v"};
  static const size_t off[3] = {0, 6, 8}, len[3] = {6, 2, 6};
  run_two(g, x[0], x[1], 3, names, off, len, out[0], out[1]);
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

static const float A_DATA[6] = {0.5f, -1, 2, 1.5f, 0.25f, -3};
static const float C_DATA[4] = {1, -1, 0.5f, 2};

/* ZeRO: loss = sum((x @ A) @ B * c) with A stored as its dp shard of dim 0
 * ([4,3] whole), B as its shard of dim 1 ([3,4] whole: the bucket moves its
 * rank parts to the front) and c all-reduced (a bias between them in the
 * backward's order); x is [2,4] on each rank. */
static ccg_graph *zero_model(bool reshard) {
  ccg_graph *g = ccg_test_graph("dp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]"), a, b, c;
  ccg_tensor ta = {CCG_DTYPE_F32, 2, {2, 3}, (void *)A_DATA};
  ccg_tensor tb = {CCG_DTYPE_F32, 2, {3, 2}, (void *)W_DATA};
  ccg_tensor tc = {CCG_DTYPE_F32, 1, {4}, (void *)C_DATA};
  assert_ok(g, ccg_graph_add_initializer(g, "a", &ta, &a));
  assert_ok(g, ccg_graph_add_initializer(g, "b", &tb, &b));
  assert_ok(g, ccg_graph_add_initializer(g, "c", &tc, &c));
  ccg_value_id aw, bw, cw, y, z, l;
  assert_ok(g, ccg_fsdp_all_gather_param(g, a, NULL, 0, false, reshard, &aw));
  assert_ok(g, ccg_fsdp_all_gather_param(g, b, NULL, 1, false, reshard, &bw));
  assert_ok(g, ccg_ddp_all_reduce_grad(g, c, NULL, false, &cw));
  assert_ok(g, ccg_matmul(g, x, aw, &y));
  assert_ok(g, ccg_matmul(g, y, bw, &z));
  assert_ok(g, ccg_mul(g, z, cw, &z));
  assert_ok(g, ccg_reduce_sum(g, z, NULL, 0, false, &l));
  const char *wrt[] = {"a", "b", "c"};
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = l;
  o.wrt = wrt;
  o.n_wrt = 3;
  assert_ok(g, ccg_backward(g, &o));
  return g;
}

/* grad/a (6), grad/b (6), grad/c (4) of both ranks. */
static void run_zero_grads(ccg_graph *g, float out[2][16]) {
  static const float x[2][8] = {{1, 2, 3, 4, 5, 6, 7, 8},
                                {-1, 0.5f, 2, 0, 1, -3, 2, 1}};
  static const char *const names[3] = {"grad/a", "grad/b", "grad/c"};
  static const size_t off[3] = {0, 6, 12}, len[3] = {6, 6, 4};
  run_two(g, x[0], x[1], 4, names, off, len, out[0], out[1]);
}

/* The node of op `op` tagged as mapping `map`, or CCG_NONE. */
static ccg_node_id find_tagged(ccg_graph *g, ccg_op op, const char *map) {
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++) {
    const ccg_tag *t = ccg_node_tag(g, (ccg_node_id)n);
    if (ccg_node_op(g, (ccg_node_id)n) == op && t && t->mapping &&
        strcmp(t->mapping, map) == 0)
      return (ccg_node_id)n;
  }
  return CCG_NONE;
}

/* ZeRO 1 and 3: one ReduceScatter for both weights gives each rank the
 * same shard of each as its own ReduceScatter; the bias, all-reduced, is
 * alone in its kind and stays as it was; a cap below the two weights'
 * 48 + 48 bytes makes no bucket. */
static void test_zero_buckets(void **state) {
  (void)state;
  for (int reshard = 0; reshard < 2; reshard++) {
    ccg_graph *plain = zero_model(reshard), *one = zero_model(reshard),
              *tiny = zero_model(reshard);
    size_t n = 9;
    assert_int_equal(count_op(plain, CCG_OP_REDUCE_SCATTER), 2);
    assert_ok(one, ccg_ddp_bucket_gradients(one, 1 << 20, &n));
    assert_int_equal(n, 1);
    assert_int_equal(count_op(one, CCG_OP_REDUCE_SCATTER), 1);
    assert_int_equal(count_op(one, CCG_OP_ALL_REDUCE), 1);
    assert_topological(one);
    ccg_node_id rs =
        find_tagged(one, CCG_OP_REDUCE_SCATTER, "fsdp.reduce_scatter_bucket");
    assert_int_not_equal(rs, CCG_NONE);
    /* [W, 6 + 6]: the two gradients' rank parts side by side */
    const ccg_shape *s = ccg_value_shape(one, ccg_node_input(one, rs, 0));
    assert_int_equal(s->rank, 2);
    assert_int_equal(s->dims[0].size, 2);
    assert_int_equal(s->dims[1].size, 12);
    assert_int_not_equal(
        find_tagged(one, CCG_OP_TRANSPOSE, "fsdp.reduce_scatter_bucket"),
        CCG_NONE);
    assert_ok(tiny, ccg_ddp_bucket_gradients(tiny, 64, &n));
    assert_int_equal(n, 0);
    assert_int_equal(count_op(tiny, CCG_OP_REDUCE_SCATTER), 2);
    float a[2][16], b[2][16];
    run_zero_grads(plain, a);
    run_zero_grads(one, b);
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < 16; i++)
        assert_float_equal(a[r][i], b[r][i], 0);
    /* by hand (numpy) from the whole A, B and both ranks' x: rank 0 has
     * rows 0..1 of grad A, rank 1 rows 2..3; rank 1 columns 2..3 of
     * grad B */
    static const float want[2][12] = {
        {-1.5f, 11.25f, 1.5f, -1.375f, 10.3125f, 1.375f, 18.875f, -18.875f,
         -7.6875f, 7.6875f, -7.75f, 7.75f},
        {-3.5f, 26.25f, 3.5f, -3.25f, 24.375f, 3.25f, 9.4375f, 37.75f,
         -3.84375f, -15.375f, -3.875f, -15.5f}};
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < 12; i++)
        assert_float_equal(a[r][i], want[r][i], 1e-5);
    ccg_graph_free(plain);
    ccg_graph_free(one);
    ccg_graph_free(tiny);
  }
}

/* The bucket refuses what would not give each rank its shard, naming the
 * mapping and the value, and adds nothing. */
static void test_zero_bucket_refusals(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2");
  ccg_value_id in[2] = {ccg_test_input(g, "ga", CCG_DTYPE_F32, "[4,3]"),
                        ccg_test_input(g, "gb", CCG_DTYPE_F32, "[3,5]")};
  ccg_value_id out[2];
  size_t n_out = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_mapping_apply(g, "fsdp.reduce_scatter_bucket",
                                 "{\"dims\": [0]}", in, 2, out, &n_out),
               "fsdp.reduce_scatter_bucket", "'dims' has 1 entries",
               "2 inputs");
  n_out = 2;
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_mapping_apply(g, "fsdp.reduce_scatter_bucket",
                                 "{\"dims\": [0, 1]}", in, 2, out, &n_out),
               "fsdp.reduce_scatter_bucket", "gb", "5");
  assert_int_equal(ccg_graph_num_nodes(g), 0);
  ccg_graph_free(g);
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
      cmocka_unit_test(test_zero_buckets),
      cmocka_unit_test(test_zero_bucket_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
