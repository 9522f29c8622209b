/* The executor: create/run/free, symbol binding (named, solved from input
 * shapes, rank-dependent), the memory plan's figures on a chain and a
 * diamond, errors that name what is at fault, no allocation while running,
 * and ccg_exec_run_local. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "test_util.h"
#include "exec_test_util.h"

/* An executor of g planned for the inputs in[0..n) whose memory plan is
 * the one given: naive and peak bytes, the most bytes live at once, and
 * the steps that write over an input. */
static ccg_exec *planned(ccg_graph *g, const ccg_exec_tensor *in, size_t n,
                         size_t naive, size_t peak, size_t live,
                         size_t inplace) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = n;
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &ex));
  ccg_exec_memory m;
  assert_ok(ex, ccg_exec_memory_info(ex, &m));
  assert_int_equal(m.naive_bytes, naive);
  assert_int_equal(m.peak_bytes, peak);
  assert_int_equal(m.max_live_bytes, live);
  assert_int_equal(m.n_inplace, inplace);
  return ex;
}

/* Element (i, j) of a [., k] @ b [k, n], summed in double. */
static double dot(const float *a, const float *b, int i, int j, int k, int n) {
  double s = 0;
  for (int q = 0; q < k; q++)
    s += (double)a[i * k + q] * b[q * n + j];
  return s;
}

/* ---- an unary chain: every op after the first writes over its input ----
 * (with fusion off: fused, the chain is one step, test_vecmath.c) */

static void test_chain_inplace(void **state) {
  (void)state;
  assert_int_equal(setenv("CCG_EXEC_FUSE", "0", 1), 0);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[1024]"), a, b, c, d;
  assert_ok(g, ccg_relu(g, x, &a));
  assert_ok(g, ccg_exp(g, a, &b));
  assert_ok(g, ccg_neg(g, b, &c));
  assert_ok(g, ccg_tanh(g, c, &d));
  assert_ok(g, ccg_graph_add_output(g, d));
  float in[1024], out[1024], want[1024];
  xt_fill(in, 1024, 1);
  for (int i = 0; i < 1024; i++)
    want[i] = tanhf(-expf(in[i] > 0 ? in[i] : 0));
  ccg_exec_tensor ti = XT_F32("x", in, 1024);
  ccg_exec *ex = planned(g, &ti, 1, 4 * 4096, 4096, 4096, 3);
  ccg_exec_tensor to = xt_out(ccg_value_name(g, d), out, sizeof out);
  assert_ok(ex, ccg_exec_run(ex, &ti, 1, &to, 1));
  xt_close(out, want, 1024, 1e-6, 1e-5, "chain");
  assert_int_equal(to.tensor.rank, 1);
  assert_int_equal(to.tensor.dims[0], 1024);
  ccg_exec_free(ex);
  ccg_graph_free(g);
  assert_int_equal(unsetenv("CCG_EXEC_FUSE"), 0);
}

/* MatMul chain: no op may write over its input; the third product reuses
 * the first's block. */
static void test_chain_reuse(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,8]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[8,8]"), h1, h2, h3;
  assert_ok(g, ccg_matmul(g, x, w, &h1));
  assert_ok(g, ccg_matmul(g, h1, w, &h2));
  assert_ok(g, ccg_matmul(g, h2, w, &h3));
  assert_ok(g, ccg_graph_add_output(g, h3));
  float xv[64], wv[64], out[64], t1[64], t2[64], want[64];
  xt_fill(xv, 64, 2);
  xt_fill(wv, 64, 3);
  const float *src[3] = {xv, t1, t2};
  float *dst[3] = {t1, t2, want};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 8; j++)
        dst[k][i * 8 + j] = (float)dot(src[k], wv, i, j, 8, 8);
  ccg_exec_tensor in[2] = {XT_F32("x", xv, 8, 8), XT_F32("w", wv, 8, 8)};
  ccg_exec *ex = planned(g, in, 2, 3 * 256, 2 * 256, 2 * 256, 0);
  ccg_exec_tensor to = xt_out(ccg_value_name(g, h3), out, sizeof out);
  assert_ok(ex, ccg_exec_run(ex, in, 2, &to, 1));
  xt_close(out, want, 64, 1e-5, 1e-4, "matmul chain");
  ccg_exec_free(ex);
  ccg_graph_free(g);
}

/* a -> (tanh, sigmoid) -> add: sigmoid takes a's block once a dies there,
 * add takes tanh's (fusion off: fused, sigmoid and add are one step). */
static void test_diamond(void **state) {
  (void)state;
  assert_int_equal(setenv("CCG_EXEC_FUSE", "0", 1), 0);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,16]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[16,16]"), a, b, c, d;
  assert_ok(g, ccg_matmul(g, x, w, &a));
  assert_ok(g, ccg_tanh(g, a, &b));
  assert_ok(g, ccg_sigmoid(g, a, &c));
  assert_ok(g, ccg_add(g, b, c, &d));
  assert_ok(g, ccg_graph_add_output(g, d));
  float xv[64], wv[256], out[64], want[64];
  xt_fill(xv, 64, 4);
  xt_fill(wv, 256, 5);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 16; j++) {
      double s = dot(xv, wv, i, j, 16, 16);
      want[i * 16 + j] = (float)(tanh(s) + 1.0 / (1.0 + exp(-s)));
    }
  ccg_exec_tensor in[2] = {XT_F32("x", xv, 4, 16), XT_F32("w", wv, 16, 16)};
  ccg_exec *ex = planned(g, in, 2, 4 * 256, 2 * 256, 2 * 256, 2);
  size_t n_sched;
  const ccg_node_id *sched = ccg_exec_schedule(ex, &n_sched);
  assert_int_equal(n_sched, 4);
  assert_int_equal(sched[0], ccg_value_producer(g, a));
  assert_int_equal(sched[3], ccg_value_producer(g, d));
  ccg_exec_tensor to = xt_out(ccg_value_name(g, d), out, sizeof out);
  assert_ok(ex, ccg_exec_run(ex, in, 2, &to, 1));
  xt_close(out, want, 64, 1e-5, 1e-4, "diamond");
  /* the same again: runs repeat exactly */
  float again[64];
  to = xt_out(ccg_value_name(g, d), again, sizeof again);
  assert_ok(ex, ccg_exec_run(ex, in, 2, &to, 1));
  assert_memory_equal(out, again, sizeof out);
  ccg_exec_free(ex);
  ccg_graph_free(g);
  assert_int_equal(unsetenv("CCG_EXEC_FUSE"), 0);
}

/* ---- binding ------------------------------------------------------------ */

static void test_bind_from_inputs_and_dims(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,4]");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_F32, "[4]"), s;
  assert_ok(g, ccg_add(g, x, y, &s));
  assert_ok(g, ccg_graph_add_output(g, s));
  float xv[12], yv[4] = {1, 2, 3, 4}, out[12];
  for (int i = 0; i < 12; i++)
    xv[i] = (float)i;
  ccg_exec_tensor in[2] = {XT_F32("x", xv, 3, 4), XT_F32("y", yv, 4)};
  ccg_exec_tensor to = xt_out(ccg_value_name(g, s), out, sizeof out);
  assert_ok(g, xt_run1(g, in, 2, &to, 1));
  assert_int_equal(to.tensor.dims[0], 3);
  for (int i = 0; i < 12; i++)
    assert_true(out[i] == (float)i + yv[i % 4]);

  /* a named binding instead of shapes */
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec_dim dim = {"batch", 3};
  o.dims = &dim;
  o.n_dims = 1;
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &ex));
  assert_ok(ex, ccg_exec_run(ex, in, 2, &to, 1));
  /* run with another batch than the named dim: refused, naming the input,
   * the dim and the binding */
  ccg_exec_tensor wrong = XT_F32("x", xv, 2, 4);
  ccg_exec_tensor in2[2] = {wrong, in[1]};
  assert_fails(ex, CCG_STATUS_SHAPE, ccg_exec_run(ex, in2, 2, &to, 1),
               "input 'x' dim 0", "given 2", "'batch' is 3");
  /* an input left out */
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, in, 1, &to, 1),
               "input 'y' was not given");
  ccg_exec_free(ex);

  /* without run-time specialization: another batch than compiled is
   * refused, and nothing binding batch fails at create */
  o.max_specializations = -1;
  assert_ok(g, ccg_exec_create(g, &o, &ex));
  assert_fails(ex, CCG_STATUS_SHAPE, ccg_exec_run(ex, in2, 2, &to, 1),
               "input 'x'", "[2,4]", "[3,4]");
  ccg_exec_free(ex);
  o.n_dims = 0;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_exec_create(g, &o, &ex), "'batch'",
               "value 'x'");
  assert_null(ex);
  ccg_graph_free(g);
}

/* seq is solved from an input of shape [2*seq]; a scaled symbol elsewhere
 * follows. */
static void test_bind_solves_monomials(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2*seq]");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_F32, "[seq,2]"), r, s;
  assert_ok(g, ccg_reshape_to(g, y, (const int64_t[]){-1}, 1, &r));
  assert_ok(g, ccg_add(g, x, r, &s));
  assert_ok(g, ccg_graph_add_output(g, s));
  float xv[10], yv[10], out[10];
  xt_fill(xv, 10, 6);
  xt_fill(yv, 10, 7);
  ccg_exec_tensor in[2] = {XT_F32("x", xv, 10), XT_F32("y", yv, 5, 2)};
  ccg_exec_tensor to = xt_out(ccg_value_name(g, s), out, sizeof out);
  assert_ok(g, xt_run1(g, in, 2, &to, 1));
  for (int i = 0; i < 10; i++)
    assert_true(out[i] == xv[i] + yv[i]);
  /* an odd size cannot be 2*seq */
  ccg_exec_tensor bad[2] = {XT_F32("x", xv, 9), XT_F32("y", yv, 5, 2)};
  assert_fails(g, CCG_STATUS_SHAPE, xt_run1(g, bad, 2, &to, 1), "'x'", "2*seq");
  ccg_graph_free(g);
}

/* An uneven ShardSlice: its output is [tp{5,3},3]; rank 1 keeps rows 5..7
 * and needs no communicator for it. */
static void test_rank_dependent_dims(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,3]"), s;
  assert_ok(g, ccg_shard_slice(g, x, "tp", 0, (const int64_t[]){5, 3}, &s));
  assert_string_equal(ccg_test_shape(g, s), "[tp{5,3},3]");
  assert_ok(g, ccg_graph_add_output(g, s));
  float xv[24], out[9];
  for (int i = 0; i < 24; i++)
    xv[i] = (float)i;
  ccg_exec_tensor in = XT_F32("x", xv, 8, 3);
  for (int rank = 0; rank < 2; rank++) {
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.rank = rank;
    ccg_exec *ex = NULL;
    assert_ok(g, ccg_exec_create(g, &o, &ex));
    float big[15];
    ccg_exec_tensor to = xt_out(ccg_value_name(g, s), big, sizeof big);
    assert_ok(ex, ccg_exec_run(ex, &in, 1, &to, 1));
    assert_int_equal(to.tensor.dims[0], rank ? 3 : 5);
    for (int i = 0; i < (rank ? 9 : 15); i++)
      assert_true(big[i] == (float)(i + (rank ? 15 : 0)));
    ccg_exec_free(ex);
  }
  (void)out;
  ccg_graph_free(g);
}

/* ---- errors ------------------------------------------------------------- */

static void test_errors_name_the_fault(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "table", CCG_DTYPE_F32, "[5,2]");
  ccg_value_id i = ccg_test_input(g, "idx", CCG_DTYPE_I64, "[3]"), y, z;
  assert_ok(g, ccg_gather(g, x, i, 0, &y));
  assert_ok(g, ccg_relu(g, y, &z));
  assert_ok(g, ccg_graph_add_output(g, z));
  float tv[10] = {0};
  int64_t iv[3] = {0, 7, 1};
  ccg_exec_tensor in[2] = {
      XT_F32("table", tv, 5, 2),
      xt_in("idx", CCG_DTYPE_I64, iv, 1, (const int64_t[]){3})};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &ex));
  float out[6];
  ccg_exec_tensor to = xt_out(ccg_value_name(g, z), out, sizeof out);
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, in, 2, &to, 1),
               "(Gather)", "index 7", "'idx'", "size 5");
  iv[1] = -5; /* negative indices count from the end */
  assert_ok(ex, ccg_exec_run(ex, in, 2, &to, 1));
  /* an intermediate is not kept */
  ccg_exec_tensor mid = xt_out(ccg_value_name(g, y), out, sizeof out);
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, in, 2, &mid, 1),
               "not a graph output");
  /* dst too small */
  to.dst_bytes = 8;
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, in, 2, &to, 1),
               "needs 24 bytes");
  /* an unknown name */
  ccg_exec_tensor ghost = XT_F32("ghost", tv, 5, 2);
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, &ghost, 1, NULL, 0),
               "'ghost'");
  ccg_exec_free(ex);
  /* bad options */
  o.deadline_s = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_exec_create(g, &o, &ex),
               "deadline_s");
  o = (ccg_exec_options)CCG_EXEC_OPTIONS_INIT;
  o.rank = 3;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_exec_create(g, &o, &ex),
               "rank 3");
  ccg_graph_free(g);
}

/* A collective over more than one rank needs a communicator. */
static void test_collective_needs_comm(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  ccg_exec *ex = NULL;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_exec_create(g, NULL, &ex),
               "(AllReduce)", "communicator");
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_local_new(3, &c));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.comm = c;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_exec_create(g, &o, &ex),
               "3 ranks", "has 2");
  ccg_comm_free(c);
  assert_fails(NULL, CCG_STATUS_INVALID_ARG, ccg_comm_local_new(0, &c),
               "0 ranks");
  ccg_graph_free(g);
}

/* ---- no allocation on the run path --------------------------------------- */

static void test_run_allocates_nothing(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F16, "[4,8]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F16, "[8,8]"), h, s, r;
  assert_ok(g, ccg_matmul(g, x, w, &h));
  assert_ok(g, ccg_softmax(g, h, -1, &s));
  assert_ok(g, ccg_reduce_sum(g, s, (const int64_t[]){1}, 1, false, &r));
  assert_ok(g, ccg_graph_add_output(g, r));
  uint16_t xv[32], wv[64];
  for (int i = 0; i < 32; i++)
    xv[i] = 0x3c00; /* 1.0 */
  for (int i = 0; i < 64; i++)
    wv[i] = (uint16_t)(0x3000 + i); /* small positive values */
  xt_counting cnt = {0};
  ccg_allocator al = XT_COUNTING_ALLOCATOR(&cnt);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.allocator = &al;
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &ex));
  size_t after_create = cnt.allocs;
  assert_true(after_create > 0);
  ccg_exec_tensor in[2] = {
      xt_in("x", CCG_DTYPE_F16, xv, 2, (const int64_t[]){4, 8}),
      xt_in("w", CCG_DTYPE_F16, wv, 2, (const int64_t[]){8, 8})};
  uint16_t out[4];
  for (int k = 0; k < 3; k++) {
    ccg_exec_tensor to = xt_out(ccg_value_name(g, r), out, sizeof out);
    assert_ok(ex, ccg_exec_run(ex, in, 2, &to, 1));
    for (int i = 0; i < 4; i++) /* softmax rows sum to 1 (f16: 0x3c00) */
      assert_true(out[i] >= 0x3bfe && out[i] <= 0x3c01);
  }
  assert_int_equal(cnt.allocs, after_create);
  ccg_exec_free(ex);
  ccg_graph_free(g);
}

/* ---- several ranks ---------------------------------------------------------
 */

static void test_run_local_all_reduce(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,3]"), y, z;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_relu(g, y, &z));
  assert_ok(g, ccg_graph_add_output(g, z));
  float in[4][6], out[4][6];
  ccg_exec_tensor tin[4], tout[4];
  const ccg_exec_tensor *pin[4];
  ccg_exec_tensor *pout[4];
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 6; i++)
      in[r][i] = (float)(i - 2) * (float)(r + 1);
    tin[r] = XT_F32("x", in[r], 2, 3);
    tout[r] = xt_out(ccg_value_name(g, z), out[r], sizeof out[r]);
    pin[r] = &tin[r];
    pout[r] = &tout[r];
  }
  ccg_status rs[4];
  assert_ok(g, ccg_exec_run_local(g, 4, NULL, pin, 1, pout, 1, rs));
  for (int r = 0; r < 4; r++) {
    assert_int_equal(rs[r], CCG_STATUS_OK);
    for (int i = 0; i < 6; i++)
      assert_true(out[r][i] == (i > 2 ? (float)(i - 2) * 10.0f : 0.0f));
  }
  /* the world must match the mesh */
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_exec_run_local(g, 2, NULL, pin, 1, pout, 1, NULL),
               "world of 4");
  ccg_graph_free(g);
}

/* A Megatron-style MLP: W1 split by columns, W2 by rows, AllReduce after
 * the second product. Two ranks give the one-rank result. */
static ccg_graph *mlp(int tp, ccg_value_id *out) {
  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", tp);
  ccg_graph *g = ccg_test_graph(mesh);
  char w1s[32], w2s[32];
  snprintf(w1s, sizeof w1s, "[8,%d]", 32 / tp);
  snprintf(w2s, sizeof w2s, "[%d,8]", 32 / tp);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[tokens,8]");
  ccg_value_id w1 = ccg_test_input(g, "w1", CCG_DTYPE_F32, w1s);
  ccg_value_id w2 = ccg_test_input(g, "w2", CCG_DTYPE_F32, w2s), h;
  assert_ok(g, ccg_matmul(g, x, w1, &h));
  assert_ok(g, ccg_gelu(g, h, "none", &h));
  assert_ok(g, ccg_matmul(g, h, w2, &h));
  assert_ok(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &h));
  assert_ok(g, ccg_add(g, h, x, &h));
  assert_ok(g, ccg_graph_add_output(g, h));
  *out = h;
  return g;
}

static void test_tensor_parallel_mlp(void **state) {
  (void)state;
  float x[5 * 8], w1[8 * 32], w2[32 * 8], one[40], two[2][40];
  xt_fill(x, 40, 20);
  xt_fill(w1, 256, 21);
  xt_fill(w2, 256, 22);
  ccg_value_id y1, y2;
  ccg_graph *g1 = mlp(1, &y1), *g2 = mlp(2, &y2);
  ccg_exec_tensor in1[3] = {XT_F32("x", x, 5, 8), XT_F32("w1", w1, 8, 32),
                            XT_F32("w2", w2, 32, 8)};
  ccg_exec_tensor o1 = xt_out(ccg_value_name(g1, y1), one, sizeof one);
  assert_ok(g1, xt_run1(g1, in1, 3, &o1, 1));
  float w1s[2][8 * 16];
  ccg_exec_tensor in2[2][3], o2[2];
  const ccg_exec_tensor *pin[2];
  ccg_exec_tensor *pout[2];
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 8; i++)
      memcpy(w1s[r] + i * 16, w1 + i * 32 + r * 16, 16 * sizeof(float));
    in2[r][0] = XT_F32("x", x, 5, 8);
    in2[r][1] = XT_F32("w1", w1s[r], 8, 16);
    in2[r][2] = XT_F32("w2", w2 + r * 16 * 8, 16, 8);
    o2[r] = xt_out(ccg_value_name(g2, y2), two[r], sizeof two[r]);
    pin[r] = in2[r];
    pout[r] = &o2[r];
  }
  assert_ok(g2, ccg_exec_run_local(g2, 2, NULL, pin, 3, pout, 1, NULL));
  xt_close(two[0], one, 40, 1e-5, 1e-5, "tp=2 rank 0 vs tp=1");
  assert_memory_equal(two[0], two[1], sizeof two[0]);
  ccg_graph_free(g1);
  ccg_graph_free(g2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_inplace),
      cmocka_unit_test(test_chain_reuse),
      cmocka_unit_test(test_diamond),
      cmocka_unit_test(test_bind_from_inputs_and_dims),
      cmocka_unit_test(test_bind_solves_monomials),
      cmocka_unit_test(test_rank_dependent_dims),
      cmocka_unit_test(test_errors_name_the_fault),
      cmocka_unit_test(test_collective_needs_comm),
      cmocka_unit_test(test_run_allocates_nothing),
      cmocka_unit_test(test_run_local_all_reduce),
      cmocka_unit_test(test_tensor_parallel_mlp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
