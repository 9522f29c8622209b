/* The executor's intra-op threads: results are the same bytes at 1, 2 and
 * 3 threads (GEMM tiles, element ranges and rows are fixed by the shapes),
 * for single kernels and a whole transformer block; GEMM epilogues fused
 * at plan time against the unfused nodes; options, CCG_THREADS,
 * CCG_PAR_MIN_WORK and CCG_GEMM are checked. Each loop here has more work than
 * CCG__PAR_MIN_WORK, under which a loop stays on the calling thread. */
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

/* g's first output at `threads` threads, into new memory of *bytes; the
 * plan's naive bytes into *naive (may be NULL). */
static float *run_at(ccg_graph *g, const inputs *in, int threads, size_t *bytes,
                     size_t *naive) {
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
  if (naive) {
    ccg_exec_memory mem;
    assert_ok(x, ccg_exec_memory_info(x, &mem));
    *naive = mem.naive_bytes;
  }
  ccg_exec_free(x);
  *bytes = nb;
  return r;
}

/* What the output must be, from the inputs' data (in graph input order),
 * with the tolerance to hold it to. */
typedef struct reference {
  void (*fn)(float *const *in, float *want);
  double atol, rtol;
} reference;

/* The output at 1, 2 and 3 threads: the same bytes, and (where ref is
 * given) close to the reference: the splits cut the work correctly. */
static void same_at_any_threads(ccg_graph *g, const reference *ref) {
  inputs in;
  make_inputs(g, &in);
  size_t b1, b2, b3;
  float *r1 = run_at(g, &in, 1, &b1, NULL);
  float *r2 = run_at(g, &in, 2, &b2, NULL);
  float *r3 = run_at(g, &in, 3, &b3, NULL);
  assert_true(b1 == b2 && b1 == b3 && b1 > 0);
  assert_memory_equal(r1, r2, b1);
  assert_memory_equal(r1, r3, b1);
  /* something was computed: not all zeros */
  bool any = false;
  for (size_t i = 0; i < b1 / sizeof(float) && !any; i++)
    any = r1[i] != 0.0f;
  assert_true(any);
  if (ref) {
    float *want = malloc(b1);
    assert_non_null(want);
    ref->fn(in.data, want);
    xt_close(r3, want, b1 / sizeof(float), ref->atol, ref->rtol, "output");
    free(want);
  }
  free(r1);
  free(r2);
  free(r3);
  free_inputs(&in);
}

/* ---- references ---------------------------------------------------------- */

/* want[M,N] = a[M,K] b[K,N] (b[N,K] when tb), in double. */
static void mm_ref(const float *a, const float *b, float *want, int64_t M,
                   int64_t K, int64_t N, bool tb) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += (double)a[i * K + k] * (tb ? b[j * K + k] : b[k * N + j]);
      want[i * N + j] = (float)acc;
    }
}

static void ref_gemm(float *const *in, float *want) {
  mm_ref(in[0], in[1], want, 256, 64, 512, false);
}

/* a[3,2,40,32] x b[2,32,300]: b broadcast over the leading 3 */
static void ref_batched(float *const *in, float *want) {
  for (int t = 0; t < 6; t++)
    mm_ref(in[0] + t * 40 * 32, in[1] + (t % 2) * 32 * 300, want + t * 40 * 300,
           40, 32, 300, false);
}

/* 0.5 a b^T + 2 c (c broadcast over rows) */
static void ref_gemm_t(float *const *in, float *want) {
  mm_ref(in[0], in[1], want, 100, 80, 520, true);
  for (int i = 0; i < 100; i++)
    for (int j = 0; j < 520; j++)
      want[i * 520 + j] = 0.5f * want[i * 520 + j] + 2.0f * in[2][j];
}

static void ref_gelu(float *const *in, float *want) {
  for (int i = 0; i < 70003; i++)
    want[i] = (float)(0.5 * in[0][i] * (1.0 + erf(in[0][i] / sqrt(2.0))));
}

static void ref_add_tanh(float *const *in, float *want) {
  for (int i = 0; i < 300; i++)
    for (int j = 0; j < 257; j++)
      want[i * 257 + j] = (float)tanh((double)(in[0][i * 257 + j] + in[1][j]));
}

static void ref_softmax(float *const *in, float *want) {
  for (int i = 0; i < 300; i++) {
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < 257; j++)
      m = fmax(m, in[0][i * 257 + j]);
    for (int j = 0; j < 257; j++)
      sum += exp(in[0][i * 257 + j] - m);
    for (int j = 0; j < 257; j++)
      want[i * 257 + j] = (float)(exp(in[0][i * 257 + j] - m) / sum);
  }
}

static void ref_layer_norm(float *const *in, float *want) {
  for (int i = 0; i < 300; i++) {
    double mean = 0, var = 0;
    for (int j = 0; j < 257; j++)
      mean += in[0][i * 257 + j] / 257.0;
    for (int j = 0; j < 257; j++)
      var += (in[0][i * 257 + j] - mean) * (in[0][i * 257 + j] - mean) / 257.0;
    for (int j = 0; j < 257; j++)
      want[i * 257 + j] =
          (float)((in[0][i * 257 + j] - mean) / sqrt(var + 1e-5) * in[1][j] +
                  in[2][j]);
  }
}

static void ref_mean(float *const *in, float *want) {
  for (int i = 0; i < 300; i++) {
    double acc = 0;
    for (int j = 0; j < 257; j++)
      acc += in[0][i * 257 + j];
    want[i] = (float)(acc / 257);
  }
}

/* The sums of the [300,257] data in double: over its rows (one per
 * column, cols) or along them (one per row). */
static void ref_sum(const float *in, bool cols, float *want) {
  for (int k = 0; k < (cols ? 257 : 300); k++) {
    double acc = 0;
    for (int m = 0; m < (cols ? 300 : 257); m++)
      acc += in[cols ? m * 257 + k : k * 257 + m];
    want[k] = (float)acc;
  }
}

/* sum over the first axis of [300,257] (the columns) */
static void ref_colsum(float *const *in, float *want) {
  ref_sum(in[0], true, want);
}

/* sum over the last axis of [1,300,257] (the rows), kept */
static void ref_rowsum(float *const *in, float *want) {
  ref_sum(in[0], false, want);
}

/* max over the middle axis of [40,10,257] */
static void ref_max(float *const *in, float *want) {
  for (int i = 0; i < 40; i++)
    for (int c = 0; c < 257; c++) {
      float m = -INFINITY;
      for (int r = 0; r < 10; r++)
        m = fmaxf(m, in[0][(i * 10 + r) * 257 + c]);
      want[i * 257 + c] = m;
    }
}

/* table[1000,64] gathered by the indices of test_copies, transposed */
static int64_t copy_index(int i) {
  return (i * 37) % 1000 - (i % 3 == 0 ? 1000 : 0);
}

static void ref_copies(float *const *in, float *want) {
  for (int i = 0; i < 1100; i++) {
    int64_t k = copy_index(i);
    k = k < 0 ? k + 1000 : k;
    for (int c = 0; c < 64; c++)
      want[c * 1100 + i] = in[0][k * 64 + c];
  }
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

/* 256x64 by 64x512: 2 panels of 256 columns. */
static void test_gemm(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  /* inputs one statement each: their order is the references' */
  ccg_value_id a = in2(g, "a", 256, 64), b = in2(g, "b", 64, 512);
  assert_ok(g, ccg_matmul(g, a, b, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_gemm, 1e-4, 1e-4});
  ccg_graph_free(g);
}

/* Batched with a broadcast B, and Gemm with transposed B, alpha and C. */
static void test_gemm_batched_and_gemm(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_shape as = CCG_SHAPE(3, 2, 40, 32), bs = CCG_SHAPE(2, 32, 300);
  ccg_value_id a, b, y;
  assert_ok(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &as, &a));
  assert_ok(g, ccg_graph_add_input(g, "b", CCG_DTYPE_F32, &bs, &b));
  assert_ok(g, ccg_matmul(g, a, b, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_batched, 1e-4, 1e-4});
  ccg_graph_free(g);

  g = new_graph();
  ccg_value_id in[3];
  in[0] = in2(g, "a", 100, 80);
  in[1] = in2(g, "b", 520, 80);
  in[2] = in2(g, "c", 520, 0);
  ccg_attr at[3] = {CCG_ATTR_I("transB", 1), CCG_ATTR_F("alpha", 0.5f),
                    CCG_ATTR_F("beta", 2.0f)};
  assert_ok(g, xt_node(g, "Gemm", "gemm", in, 3, at, 3, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_gemm_t, 1e-4, 1e-4});
  ccg_graph_free(g);
}

/* Gelu over 70,003 elements (5 chunks, the last short) and a broadcast
 * Add (chunks that start inside rows). */
static void test_elementwise(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_gelu(g, in2(g, "x", 70003, 0), "none", &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_gelu, 1e-6, 1e-5});
  ccg_graph_free(g);

  g = new_graph();
  ccg_value_id a = in2(g, "a", 300, 257), b = in2(g, "b", 257, 0);
  assert_ok(g, ccg_add(g, a, b, &y));
  assert_ok(g, ccg_tanh(g, y, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_add_tanh, 1e-6, 1e-5});
  ccg_graph_free(g);
}

static void test_softmax_layernorm(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  assert_ok(g, ccg_softmax(g, in2(g, "x", 300, 257), -1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_softmax, 1e-7, 1e-5});
  ccg_graph_free(g);

  g = new_graph();
  ccg_value_id x = in2(g, "x", 300, 257), sc = in2(g, "s", 257, 0);
  ccg_value_id bi = in2(g, "b", 257, 0);
  assert_ok(g, ccg_layer_norm(g, x, sc, bi, -1, 1e-5f, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_layer_norm, 1e-5, 1e-5});
  ccg_graph_free(g);
}

/* Reductions split by their kept leading dim (past a leading dim of 1),
 * or by blocks of their kept last dim when the first is reduced (a bias's
 * gradient); f32 sums whose rows run in lanes, with a tail. */
static void test_reduce(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id y;
  int64_t ax = 1;
  assert_ok(g, ccg_reduce_mean(g, in2(g, "x", 300, 257), &ax, 1, true, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_mean, 1e-7, 1e-6});
  ccg_graph_free(g);

  g = new_graph();
  ccg_shape xs = CCG_SHAPE(40, 10, 257);
  ccg_value_id x;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  assert_ok(g, ccg_reduce_max(g, x, &ax, 1, false, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_max, 0, 0});
  ccg_graph_free(g);

  g = new_graph();
  int64_t first = 0, last = -1;
  assert_ok(g, ccg_reduce_sum(g, in2(g, "x", 300, 257), &first, 1, false, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_colsum, 1e-5, 1e-6});
  ccg_graph_free(g);

  g = new_graph();
  xs = (ccg_shape)CCG_SHAPE(1, 300, 257);
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  assert_ok(g, ccg_reduce_sum(g, x, &last, 1, true, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_rowsum, 1e-5, 1e-6});
  ccg_graph_free(g);
}

/* Gather of 1100 rows of 64 from a table (indices with repeats and negative
 * ones), then Transpose: copies split by rows. */
static void test_copies(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  int64_t idx[1100];
  for (int i = 0; i < 1100; i++)
    idx[i] = copy_index(i);
  ccg_tensor it = {CCG_DTYPE_I64, 1, {1100}, idx};
  ccg_value_id k, y;
  assert_ok(g, ccg_constant(g, &it, &k));
  assert_ok(g, ccg_gather(g, in2(g, "table", 1000, 64), k, 0, &y));
  assert_ok(g, ccg_transpose(g, y, NULL, 0, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_copies, 0, 0});
  ccg_graph_free(g);
}

/* x[2,61,6,90] transposed by TR_PERM (output dims in input dims' order). */
static const int64_t tr_in[4] = {2, 61, 6, 90};
static int64_t tr_perm[4];

static void ref_transpose(float *const *in, float *want) {
  int64_t od[4], ist[4] = {61 * 6 * 90, 6 * 90, 90, 1}, i[4];
  for (int d = 0; d < 4; d++)
    od[d] = tr_in[tr_perm[d]];
  size_t k = 0;
  for (i[0] = 0; i[0] < od[0]; i[0]++)
    for (i[1] = 0; i[1] < od[1]; i[1]++)
      for (i[2] = 0; i[2] < od[2]; i[2]++)
        for (i[3] = 0; i[3] < od[3]; i[3]++) {
          int64_t off = 0;
          for (int d = 0; d < 4; d++)
            off += i[d] * ist[tr_perm[d]];
          want[k++] = in[0][off];
        }
}

/* Transposes of attention's shapes, batch 2 and sizes off the tile of 16:
 * K to [b, heads, dim, seq] (square tiles of (dim, seq) planes), Q to
 * [b, heads, seq, dim] (whole rows), and every dim moved (tiles whose
 * contiguous dim is not next to the last). */
static void test_transposes(void **state) {
  (void)state;
  static const int64_t perms[3][4] = {{0, 2, 3, 1}, {0, 2, 1, 3}, {3, 0, 2, 1}};
  for (int t = 0; t < 3; t++) {
    memcpy(tr_perm, perms[t], sizeof tr_perm);
    ccg_graph *g = new_graph();
    ccg_shape s = CCG_SHAPE(tr_in[0], tr_in[1], tr_in[2], tr_in[3]);
    ccg_value_id v, y;
    assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &v));
    assert_ok(g, ccg_transpose(g, v, tr_perm, 4, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    same_at_any_threads(g, &(reference){ref_transpose, 0, 0});
    ccg_graph_free(g);
  }
}

/* where(a > b, f32(f64(clip(a, -0.5, 0.5))), b) for a[300,257], b[257] */
static void ref_select(float *const *in, float *want) {
  for (int i = 0; i < 300; i++)
    for (int j = 0; j < 257; j++) {
      float a = in[0][i * 257 + j], b = in[1][j];
      want[i * 257 + j] = a > b ? fminf(fmaxf(a, -0.5f), 0.5f) : b;
    }
}

/* Clip, Cast both ways and Where with a broadcast operand: element ranges
 * (Where's start inside rows). */
static void test_select_clip_cast(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_value_id a = in2(g, "a", 300, 257), b = in2(g, "b", 257, 0);
  float bounds[2] = {-0.5f, 0.5f};
  ccg_tensor lo_t = {CCG_DTYPE_F32, 0, {0}, &bounds[0]};
  ccg_tensor hi_t = {CCG_DTYPE_F32, 0, {0}, &bounds[1]};
  ccg_value_id clip_in[3] = {a}, cond, y;
  assert_ok(g, ccg_constant(g, &lo_t, &clip_in[1]));
  assert_ok(g, ccg_constant(g, &hi_t, &clip_in[2]));
  assert_ok(g, xt_node(g, "Clip", "clip", clip_in, 3, NULL, 0, 1, &y));
  /* a Neg after each Cast: the f32 Cast's output may take the Clip's
   * buffer, where a Cast that wrote nothing would still read right */
  assert_ok(g, ccg_cast(g, y, CCG_DTYPE_F64, &y));
  assert_ok(g, ccg_neg(g, y, &y));
  assert_ok(g, ccg_cast(g, y, CCG_DTYPE_F32, &y));
  assert_ok(g, ccg_neg(g, y, &y));
  ccg_value_id gt_in[2] = {a, b};
  assert_ok(g, xt_node(g, "Greater", "gt", gt_in, 2, NULL, 0, 1, &cond));
  assert_ok(g, ccg_where(g, cond, y, b, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  same_at_any_threads(g, &(reference){ref_select, 0, 0});
  /* unfused too: fused, the Casts and Clip run inside one elementwise
   * chain and their own parallel kernels never would */
  setenv("CCG_EXEC_FUSE", "0", 1);
  same_at_any_threads(g, &(reference){ref_select, 0, 0});
  unsetenv("CCG_EXEC_FUSE");
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
  block_forward(g, 256, 64, 1, &f);
  same_at_any_threads(g, NULL);
  ccg_graph_free(g);
}

/* The block at tp=2 on a local communicator: two executors in one
 * process, each with a pool of its own, give the same bytes at 1 and 2
 * threads each (every rank gets the same inputs). */
static void test_local_ranks(void **state) {
  (void)state;
  ccg_graph *g = new_graph();
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  assert_ok(g, ccg_graph_set_mesh(g, &m));
  tb_fwd f;
  block_forward(g, 256, 128, 2, &f);
  inputs in;
  make_inputs(g, &in);
  const size_t nb = 256 * 128 * sizeof(float);
  float *got[2][2];
  for (int t = 0; t < 2; t++) {
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.threads = t + 1;
    ccg_exec_tensor out[2], *outs[2] = {&out[0], &out[1]};
    const ccg_exec_tensor *ins[2] = {in.t, in.t};
    for (int r = 0; r < 2; r++) {
      got[t][r] = malloc(nb);
      assert_non_null(got[t][r]);
      out[r] = xt_out(ccg_value_name(g, f.y), got[t][r], nb);
    }
    assert_ok(g, ccg_exec_run_local(g, 2, &o, ins, in.n, outs, 1, NULL));
  }
  for (int r = 0; r < 2; r++) {
    assert_memory_equal(got[0][r], got[1][r], nb);
    free(got[0][r]);
    free(got[1][r]);
  }
  free_inputs(&in);
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
  float *r = run_at(g, in, threads, bytes, naive);
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
  const int64_t M = 200, K = 40, N = 520;
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

  /* the Add's output read twice: MatMul + Add fuse, the Tanh stays out of
   * the epilogue (it and the Mul then run as one elementwise chain,
   * cpu/fuse.c, which saves the Tanh's output too) */
  g = new_graph();
  ccg_value_id u, t;
  assert_ok(g, ccg_matmul(g, in2(g, "a", M, K), in2(g, "b", K, N), &y));
  assert_ok(g, ccg_add(g, y, in2(g, "bias", N, 0), &u));
  assert_ok(g, ccg_tanh(g, u, &t));
  assert_ok(g, ccg_mul(g, t, u, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, 2 * mat);
  ccg_graph_free(g);

  /* the MatMul's output read twice: no epilogue (the Add and the Mul run
   * as one elementwise chain, which saves the Add's output) */
  g = new_graph();
  assert_ok(g, ccg_matmul(g, in2(g, "a", M, K), in2(g, "b", K, N), &u));
  assert_ok(g, ccg_add(g, u, in2(g, "bias", N, 0), &y));
  assert_ok(g, ccg_mul(g, y, u, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  check_fusion(g, mat);
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
  setenv("CCG_PAR_MIN_WORK", "-5", 1);
  assert_int_equal(ccg_exec_create(g, &o, &x), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(g), "CCG_PAR_MIN_WORK"));
  setenv("CCG_PAR_MIN_WORK", "0", 1);
  assert_ok(g, ccg_exec_create(g, &o, &x));
  ccg_exec_free(x);
  unsetenv("CCG_PAR_MIN_WORK");
  const char *was = getenv("CCG_GEMM");
  char *keep = was ? strdup(was) : NULL;
  setenv("CCG_GEMM", "mkl", 1);
  assert_int_equal(ccg_exec_create(g, &o, &x), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(g), "CCG_GEMM"));
  /* ccgraph's own kernels below AVX2: refused, naming both settings */
  const char *isa_was = getenv("CCG_CPU_ISA");
  char *isa_keep = isa_was ? strdup(isa_was) : NULL;
  setenv("CCG_GEMM", "ccgraph", 1);
  setenv("CCG_CPU_ISA", "scalar", 1);
  assert_int_equal(ccg_exec_create(g, &o, &x), CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(ccg_last_error(g), "CCG_GEMM='ccgraph'"));
  assert_non_null(strstr(ccg_last_error(g), "scalar"));
  if (isa_keep)
    setenv("CCG_CPU_ISA", isa_keep, 1);
  else
    unsetenv("CCG_CPU_ISA");
  free(isa_keep);
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
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_copies),
      cmocka_unit_test(test_transposes),
      cmocka_unit_test(test_select_clip_cast),
      cmocka_unit_test(test_transformer_block),
      cmocka_unit_test(test_local_ranks),
      cmocka_unit_test(test_epilogue),
      cmocka_unit_test(test_bad_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
