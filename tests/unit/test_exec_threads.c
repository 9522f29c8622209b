/* The executor's intra-op threads: results are the same bytes at 1, 2 and
 * 3 threads (GEMM tiles, element ranges and rows are fixed by the shapes),
 * for single kernels and a whole transformer block; GEMM epilogues fused
 * at plan time against the unfused nodes; options, CCG_THREADS and
 * CCG_GEMM are checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "test_util.h"

#include "../../bench/transformer_block.h"
#include "exec_test_util.h"

#define MAX_IN 16

/* Inputs of g (every one f32 with static dims) filled with a fixed
 * pseudo-random pattern in [-1, 1). */
typedef struct inputs {
  ccg_exec_tensor t[MAX_IN];
  float *data[MAX_IN];
  size_t n;
} inputs;

static void make_inputs(ccg_graph *g, inputs *in) {
  in->n = ccg_graph_num_inputs(g);
  assert_true(in->n <= MAX_IN);
  uint32_t s = 12345;
  for (size_t i = 0; i < in->n; i++) {
    ccg_value_id v = ccg_graph_input(g, i);
    const ccg_shape *sh = ccg_value_shape(g, v);
    size_t numel = 1;
    int64_t dims[CCG_MAX_RANK];
    for (int d = 0; d < sh->rank; d++) {
      dims[d] = sh->dims[d].size;
      numel *= (size_t)dims[d];
    }
    in->data[i] = malloc(numel * sizeof(float) + 1);
    assert_non_null(in->data[i]);
    for (size_t k = 0; k < numel; k++) {
      s = s * 1664525u + 1013904223u;
      in->data[i][k] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
    in->t[i] =
        xt_in(ccg_value_name(g, v), CCG_DTYPE_F32, in->data[i], sh->rank, dims);
  }
}

static void free_inputs(inputs *in) {
  for (size_t i = 0; i < in->n; i++)
    free(in->data[i]);
}

/* g's first output at `threads` threads (two runs: the second must agree),
 * into new memory of *bytes. */
static float *run_at(ccg_graph *g, const inputs *in, int threads,
                     size_t *bytes) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.threads = threads;
  o.input_shapes = in->t;
  o.n_input_shapes = in->n;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  const char *name = ccg_value_name(g, ccg_graph_output(g, 0));
  ccg_exec_tensor out = xt_out(name, NULL, 0);
  assert_ok(x, ccg_exec_run(x, in->t, in->n, &out, 1));
  size_t nb = ccg_dtype_size(out.tensor.dtype);
  for (int d = 0; d < out.tensor.rank; d++)
    nb *= (size_t)out.tensor.dims[d];
  float *r = malloc(nb + 1);
  assert_non_null(r);
  memcpy(r, out.tensor.data, nb);
  assert_ok(x, ccg_exec_run(x, in->t, in->n, &out, 1));
  assert_memory_equal(r, out.tensor.data, nb);
  ccg_exec_free(x);
  *bytes = nb;
  return r;
}

/* The output at 1, 2 and 3 threads: the same bytes. */
static void same_at_any_threads(ccg_graph *g) {
  inputs in;
  make_inputs(g, &in);
  size_t b1, b2, b3;
  float *r1 = run_at(g, &in, 1, &b1);
  float *r2 = run_at(g, &in, 2, &b2);
  float *r3 = run_at(g, &in, 3, &b3);
  assert_true(b1 == b2 && b1 == b3 && b1 > 0);
  assert_memory_equal(r1, r2, b1);
  assert_memory_equal(r1, r3, b1);
  /* something was computed: not all zeros */
  bool any = false;
  for (size_t i = 0; i < b1 / sizeof(float) && !any; i++)
    any = r1[i] != 0.0f;
  assert_true(any);
  free(r1);
  free(r2);
  free(r3);
  free_inputs(&in);
}

static ccg_value_id in2(ccg_graph *g, const char *name, int64_t a, int64_t b) {
  ccg_shape s = b ? (ccg_shape)CCG_SHAPE(a, b) : (ccg_shape)CCG_SHAPE(a);
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_input(g, name, CCG_DTYPE_F32, &s, &v));
  return v;
}

static ccg_graph *new_graph(void) {
  ccg_graph *g;
  assert_ok(NULL, ccg_graph_new(NULL, &g));
  return g;
}

/* 384x256 by 256x520: 3x4 tiles, the last ones narrower. */
static void test_gemm(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_matmul(g, in2(g, "a", 384, 256), in2(g, "b", 256, 520), &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);
}

/* Batched with a broadcast B, and Gemm with transposed B, alpha and C. */
static void test_gemm_batched_and_gemm(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_shape as = CCG_SHAPE(3, 2, 130, 64), bs = CCG_SHAPE(2, 64, 300);
  ccg_value_id a, b, y;
  assert_ok(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &as, &a));
  assert_ok(g, ccg_graph_add_input(g, "b", CCG_DTYPE_F32, &bs, &b));
  assert_ok(g, ccg_matmul(g, a, b, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);

  g = new_graph();
  ccg_value_id in[3] = {in2(g, "a", 300, 96), in2(g, "b", 700, 96),
                        in2(g, "c", 700, 0)};
  ccg_attr at[3] = {CCG_ATTR_I("transB", 1), CCG_ATTR_F("alpha", 0.5f),
                    CCG_ATTR_F("beta", 2.0f)};
  assert_ok(g, xt_node(g, "Gemm", "gemm", in, 3, at, 3, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);
}

/* Gelu over 100,003 elements (7 chunks, the last short) and a broadcast
 * Add. */
static void test_elementwise(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_gelu(g, in2(g, "x", 100003, 0), "none", &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);

  g = new_graph();
  assert_ok(g, ccg_add(g, in2(g, "a", 301, 257), in2(g, "b", 257, 0), &y));
  assert_ok(g, ccg_tanh(g, y, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);
}

static void test_softmax_layernorm(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_softmax(g, in2(g, "x", 301, 257), -1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);

  g = new_graph();
  assert_ok(g, ccg_layer_norm(g, in2(g, "x", 301, 257), in2(g, "s", 257, 0),
                              in2(g, "b", 257, 0), -1, 1e-5f, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g);
  ccg_graph_free(g);
}

/* The transformer block forward (LayerNorm, attention, Gelu MLP) on one
 * rank. */
static void test_transformer_block(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=1", &m));
  assert_ok(g, ccg_graph_set_mesh(g, &m));
  tb_fwd f;
  block_forward(g, 128, 128, 1, &f);
  same_at_any_threads(g);
  ccg_graph_free(g);
}

/* ---- GEMM epilogues -------------------------------------------------------
 * The output at `threads` threads with plan-time fusion on or off
 * (CCG_EXEC_FUSE), and the naive bytes of the plan (what the fused
 * intermediates no longer take). */
static float *run_fuse(ccg_graph *g, const inputs *in, bool fuse, int threads,
                       size_t *bytes, size_t *naive) {
  if (fuse)
    unsetenv("CCG_EXEC_FUSE");
  else
    setenv("CCG_EXEC_FUSE", "0", 1);
  float *r = run_at(g, in, threads, bytes);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in->t;
  o.n_input_shapes = in->n;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  ccg_exec_memory mem;
  assert_ok(x, ccg_exec_memory_info(x, &mem));
  *naive = mem.naive_bytes;
  ccg_exec_free(x);
  unsetenv("CCG_EXEC_FUSE");
  return r;
}

/* Fused and unfused agree within 1e-6 (the same additions and activation
 * code; the activation may vectorize at other offsets) and the fused plan
 * holds `saved` fewer bytes; fused at 1 and 3 threads, the same bytes. */
static void check_fusion(ccg_graph *g, size_t saved) {
  inputs in;
  make_inputs(g, &in);
  size_t b0, b1, b3, n0, n1, n3;
  float *unfused = run_fuse(g, &in, false, 1, &b0, &n0);
  float *fused = run_fuse(g, &in, true, 1, &b1, &n1);
  float *fused3 = run_fuse(g, &in, true, 3, &b3, &n3);
  assert_true(b0 == b1 && b1 == b3);
  xt_close(fused, unfused, b0 / sizeof(float), 1e-6, 1e-6, "fused epilogue");
  assert_memory_equal(fused, fused3, b1);
  assert_int_equal(n0 - n1, saved);
  free(unfused);
  free(fused);
  free(fused3);
  free_inputs(&in);
}

static void test_epilogue(void **state) {
  (void)state;
  const int64_t M = 200, K = 96, N = 300;
  const size_t mat = (size_t)(M * N) * sizeof(float);
  /* MatMul + Add(bias) + Gelu: two intermediates gone */
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_matmul(g, in2(g, "a", M, K), in2(g, "b", K, N), &y));
  assert_ok(g, ccg_add(g, y, in2(g, "bias", N, 0), &y));
  assert_ok(g, ccg_gelu(g, y, "none", &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, 2 * mat);
  ccg_graph_free(g);

  /* the bias on the left, then Relu; Gemm with transposed B */
  g = new_graph();
  ccg_value_id in[2] = {in2(g, "a", M, K), in2(g, "b", N, K)};
  ccg_attr at[1] = {CCG_ATTR_I("transB", 1)};
  assert_ok(g, xt_node(g, "Gemm", "gemm", in, 2, at, 1, 1, &y));
  assert_ok(g, ccg_add(g, in2(g, "bias", N, 0), y, &y));
  assert_ok(g, ccg_relu(g, y, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, 2 * mat);
  ccg_graph_free(g);

  /* batched MatMul + bias, no activation: the Add's output is the graph's */
  g = new_graph();
  ccg_shape as = CCG_SHAPE(3, M, K);
  ccg_value_id a;
  assert_ok(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &as, &a));
  assert_ok(g, ccg_matmul(g, a, in2(g, "b", K, N), &y));
  assert_ok(g, ccg_add(g, y, in2(g, "bias", N, 0), &y));
  assert_ok(g, ccg_sigmoid(g, y, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, 2 * 3 * mat);
  ccg_graph_free(g);

  /* the Add's output read twice: MatMul + Add fuse, the Tanh stays */
  g = new_graph();
  ccg_value_id u, t;
  assert_ok(g, ccg_matmul(g, in2(g, "a", M, K), in2(g, "b", K, N), &y));
  assert_ok(g, ccg_add(g, y, in2(g, "bias", N, 0), &u));
  assert_ok(g, ccg_tanh(g, u, &t));
  assert_ok(g, ccg_mul(g, t, u, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, mat);
  ccg_graph_free(g);

  /* the MatMul's output read twice: nothing fuses */
  g = new_graph();
  assert_ok(g, ccg_matmul(g, in2(g, "a", M, K), in2(g, "b", K, N), &u));
  assert_ok(g, ccg_add(g, u, in2(g, "bias", N, 0), &y));
  assert_ok(g, ccg_mul(g, y, u, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, 0);
  ccg_graph_free(g);
}

/* the forward only: the block's backward is not wanted here */
static void (*const unused_backward)(ccg_graph *, int64_t, int64_t,
                                     tb_fwd *) = block_backward;

static void test_bad_threads(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_relu(g, in2(g, "x", 4, 0), &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  o.threads = -1;
  assert_int_equal(ccg_exec_create(g, &o, &x), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(g), "threads"));
  o.threads = 0;
  setenv("CCG_THREADS", "two", 1);
  assert_int_equal(ccg_exec_create(g, &o, &x), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(g), "CCG_THREADS"));
  setenv("CCG_THREADS", "2", 1);
  assert_ok(g, ccg_exec_create(g, &o, &x));
  ccg_exec_free(x);
  unsetenv("CCG_THREADS");
  const char *was = getenv("CCG_GEMM");
  char *keep = was ? strdup(was) : NULL;
  setenv("CCG_GEMM", "mkl", 1);
  assert_int_equal(ccg_exec_create(g, &o, &x), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(g), "CCG_GEMM"));
  if (keep)
    setenv("CCG_GEMM", keep, 1);
  else
    unsetenv("CCG_GEMM");
  free(keep);
  ccg_graph_free(g);
}

int main(void) {
  /* the tests choose their thread counts */
  unsetenv("CCG_THREADS");
  (void)unused_backward;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_gemm_batched_and_gemm),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_softmax_layernorm),
      cmocka_unit_test(test_transformer_block),
      cmocka_unit_test(test_epilogue),
      cmocka_unit_test(test_bad_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
