/* Every collective primitive on the local communicator (ranks as threads),
 * on 2 and 4 ranks and on a dp=2,tp=2 mesh, with uneven splits, against
 * results computed here from the mesh's groups. Reductions run in group
 * order, so sums are compared bit for bit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec/kernels_math.h"

#define MAXR 4
#define MAXN 64

typedef struct ranks {
  int n;
  float in[MAXR][MAXN];
  int64_t dims[MAXR][CCG_MAX_RANK];
  int rank_of_in;
  float out[MAXR][MAXN];
  int64_t out_dims[MAXR][CCG_MAX_RANK];
} ranks;

/* Runs g on every rank with input "x" (per-rank dims) and reads `y`. */
static void run_ranks(ccg_graph *g, ranks *R, ccg_value_id y) {
  ccg_exec_tensor tin[MAXR], tout[MAXR];
  const ccg_exec_tensor *pin[MAXR];
  ccg_exec_tensor *pout[MAXR];
  bool is_output = false;
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    is_output = is_output || ccg_graph_output(g, i) == y;
  if (!is_output)
    assert_ok(g, ccg_graph_add_output(g, y));
  for (int r = 0; r < R->n; r++) {
    tin[r] = xt_in("x", CCG_DTYPE_F32, R->in[r], R->rank_of_in, R->dims[r]);
    tout[r] = xt_out(ccg_value_name(g, y), R->out[r], sizeof R->out[r]);
    pin[r] = &tin[r];
    pout[r] = &tout[r];
  }
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.deadline_s = 20;
  assert_ok(g, ccg_exec_run_local(g, R->n, &o, pin, 1, pout, 1, NULL));
  for (int r = 0; r < R->n; r++)
    memcpy(R->out_dims[r], tout[r].tensor.dims, sizeof R->out_dims[r]);
}

static void fill_inputs(ranks *R, int n, int rank, const int64_t *dims) {
  memset(R, 0, sizeof *R);
  R->n = n;
  R->rank_of_in = rank;
  for (int r = 0; r < n; r++) {
    memcpy(R->dims[r], dims, (size_t)rank * sizeof(int64_t));
    for (int i = 0; i < MAXN; i++)
      R->in[r][i] = (float)((i + 1) * (r + 1)) * 0.37f - (float)r;
  }
}

static ccg_mesh mesh_of(ccg_graph *g) { return *ccg_graph_mesh(g); }

static void group_of(ccg_graph *g, const char *axes, int rank, int64_t *ranks_,
                     int *size, int *idx) {
  ccg_mesh m = mesh_of(g);
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(&m, axes, &mask));
  *size = (int)ccg_mesh_group_size(&m, mask);
  *idx = (int)ccg_mesh_rank_in_group(&m, rank, mask);
  assert_ok(NULL, ccg_mesh_group_ranks(&m, rank, mask, ranks_));
}

/* ---- AllReduce ------------------------------------------------------------
 */

static float red(ccg_reduce_op op, float a, float b) {
  switch (op) {
  case CCG_REDUCE_PROD:
    return a * b;
  case CCG_REDUCE_MIN:
    return b < a ? b : a;
  case CCG_REDUCE_MAX:
    return b > a ? b : a;
  default:
    return a + b;
  }
}

static void check_all_reduce(const char *mesh, const char *axes) {
  for (int op = 0; op < CCG_REDUCE_OP_COUNT; op++) {
    ccg_graph *g = ccg_test_graph(mesh);
    int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[37]"), y;
    assert_ok(g, ccg_all_reduce(g, x, axes, (ccg_reduce_op)op, &y));
    ranks R;
    fill_inputs(&R, n, 1, (const int64_t[]){37});
    run_ranks(g, &R, y);
    for (int r = 0; r < n; r++) {
      int64_t grp[MAXR];
      int gs, gi;
      group_of(g, axes, r, grp, &gs, &gi);
      for (int i = 0; i < 37; i++) {
        float acc = R.in[grp[0]][i];
        for (int k = 1; k < gs; k++)
          acc = red((ccg_reduce_op)op, acc, R.in[grp[k]][i]);
        if (op == CCG_REDUCE_AVG)
          acc *= 1.0f / (float)gs;
        if (memcmp(&acc, &R.out[r][i], sizeof acc) != 0)
          fail_msg("%s over %s, %s: rank %d element %d is %.9g, expected "
                   "%.9g",
                   mesh, axes, ccg_reduce_op_name((ccg_reduce_op)op), r, i,
                   (double)R.out[r][i], (double)acc);
      }
    }
    ccg_graph_free(g);
  }
}

static void test_all_reduce(void **state) {
  (void)state;
  check_all_reduce("tp=2", "tp");
  check_all_reduce("tp=4", "tp");
  check_all_reduce("dp=2,tp=2", "tp");
  check_all_reduce("dp=2,tp=2", "dp");
  check_all_reduce("dp=2,tp=2", "dp,tp");
}

/* Above the small-message size each rank reduces one share and copies the
 * others': the same bits as the reduction in group order. */
static void check_all_reduce_large(const char *mesh, ccg_reduce_op op) {
  enum { COUNT = 5003 };
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[5003]"), y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", op, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  float *in = malloc(4 * COUNT * sizeof(float));
  float *out = malloc(4 * COUNT * sizeof(float));
  assert_non_null(in);
  assert_non_null(out);
  ccg_exec_tensor tin[4], tout[4];
  const ccg_exec_tensor *pin[4];
  ccg_exec_tensor *pout[4];
  for (int r = 0; r < 4; r++) {
    xt_fill(in + r * COUNT, COUNT, (uint32_t)r + 70);
    tin[r] =
        xt_in("x", CCG_DTYPE_F32, in + r * COUNT, 1, (const int64_t[]){COUNT});
    tout[r] =
        xt_out(ccg_value_name(g, y), out + r * COUNT, COUNT * sizeof(float));
    pin[r] = &tin[r];
    pout[r] = &tout[r];
  }
  assert_ok(g, ccg_exec_run_local(g, 4, NULL, pin, 1, pout, 1, NULL));
  for (int r = 0; r < 4; r++) {
    int64_t grp[MAXR];
    int gs, gi;
    group_of(g, "tp", r, grp, &gs, &gi);
    for (int i = 0; i < COUNT; i++) {
      float acc = in[grp[0] * COUNT + i];
      for (int k = 1; k < gs; k++)
        acc = red(op, acc, in[grp[k] * COUNT + i]);
      if (op == CCG_REDUCE_AVG)
        acc *= 1.0f / (float)gs;
      if (memcmp(&acc, &out[r * COUNT + i], sizeof acc) != 0)
        fail_msg("%s large %s: rank %d element %d", mesh,
                 ccg_reduce_op_name(op), r, i);
    }
  }
  free(in);
  free(out);
  ccg_graph_free(g);
}

static void test_all_reduce_large(void **state) {
  (void)state;
  check_all_reduce_large("tp=4", CCG_REDUCE_SUM);
  check_all_reduce_large("tp=4", CCG_REDUCE_AVG);
  check_all_reduce_large("tp=4", CCG_REDUCE_MAX);
  check_all_reduce_large("dp=2,tp=2", CCG_REDUCE_SUM);
  check_all_reduce_large("dp=2,tp=2", CCG_REDUCE_PROD);
}

/* Same inputs, same bits, every run. */
static void test_all_reduce_deterministic(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[64]"), y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  ranks R, S;
  fill_inputs(&R, 4, 1, (const int64_t[]){64});
  for (int r = 0; r < 4; r++)
    xt_fill(R.in[r], MAXN, (uint32_t)r + 40);
  S = R;
  run_ranks(g, &R, y);
  ccg_graph_free(g);
  g = ccg_test_graph("tp=4");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[64]");
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  for (int k = 0; k < 5; k++) {
    ranks T = S;
    run_ranks(g, &T, y);
    for (int r = 0; r < 4; r++)
      assert_memory_equal(T.out[r], R.out[r], 64 * sizeof(float));
  }
  ccg_graph_free(g);
}

/* ---- AllGather, ReduceScatter, ShardSlice ---------------------------------
 */

/* Rank r holds [2, sizes[r]] (axis 1) or [sizes[r], 3] (axis 0). */
static void check_all_gather(const char *mesh, const char *axes, int axis,
                             const int64_t *sizes) {
  ccg_graph *g = ccg_test_graph(mesh);
  int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
  int64_t grp[MAXR];
  int gs, gi;
  group_of(g, axes, 0, grp, &gs, &gi);
  char sym[64] = "", shape[96];
  int len = snprintf(sym, sizeof sym, "%s{", axes);
  bool even = true;
  for (int k = 0; k < gs; k++) {
    len += snprintf(sym + len, sizeof sym - (size_t)len, "%s%lld", k ? "," : "",
                    (long long)sizes[k]);
    even = even && sizes[k] == sizes[0];
  }
  snprintf(sym + len, sizeof sym - (size_t)len, "}");
  if (even)
    snprintf(sym, sizeof sym, "%lld", (long long)sizes[0]);
  snprintf(shape, sizeof shape, axis ? "[2,%s]" : "[%s,3]", sym);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, shape), y;
  assert_ok(g, ccg_all_gather(g, x, axes, axis, even ? NULL : sizes, &y));
  ranks R;
  fill_inputs(&R, n, 2, (const int64_t[]){2, 3});
  int64_t total = 0;
  for (int k = 0; k < gs; k++)
    total += sizes[k];
  for (int r = 0; r < n; r++) {
    group_of(g, axes, r, grp, &gs, &gi);
    R.dims[r][axis] = sizes[gi];
  }
  run_ranks(g, &R, y);
  for (int r = 0; r < n; r++) {
    group_of(g, axes, r, grp, &gs, &gi);
    assert_int_equal(R.out_dims[r][axis], total);
    int64_t at = 0;
    for (int k = 0; k < gs; k++) {
      const float *src = R.in[grp[k]];
      for (int64_t i = 0; i < (axis ? 2 : sizes[k]); i++)
        for (int64_t j = 0; j < (axis ? sizes[k] : 3); j++) {
          float got =
              axis ? R.out[r][i * total + at + j] : R.out[r][(at + i) * 3 + j];
          float want = src[i * (axis ? sizes[k] : 3) + j];
          if (got != want)
            fail_msg("%s AllGather axis %d: rank %d chunk %d (%lld,%lld)", mesh,
                     axis, r, k, (long long)i, (long long)j);
        }
      at += sizes[k];
    }
  }
  ccg_graph_free(g);
}

static void test_all_gather(void **state) {
  (void)state;
  check_all_gather("tp=2", "tp", 0, (const int64_t[]){2, 2});
  check_all_gather("tp=4", "tp", 1, (const int64_t[]){3, 3, 3, 3});
  check_all_gather("tp=4", "tp", 1, (const int64_t[]){1, 3, 0, 2});
  check_all_gather("tp=4", "tp", 0, (const int64_t[]){4, 1, 2, 3});
  check_all_gather("dp=2,tp=2", "tp", 1, (const int64_t[]){1, 4});
  check_all_gather("dp=2,tp=2", "dp", 0, (const int64_t[]){3, 1});
}

/* x is [2, total] (axis 1) or [total, 3]; rank keeps its reduced chunk. */
static void check_reduce_scatter(const char *mesh, const char *axes, int axis,
                                 const int64_t *sizes, ccg_reduce_op op,
                                 bool shard_slice) {
  ccg_graph *g = ccg_test_graph(mesh);
  int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
  int64_t grp[MAXR];
  int gs, gi;
  group_of(g, axes, 0, grp, &gs, &gi);
  int64_t total = 0;
  bool even = true;
  for (int k = 0; k < gs; k++) {
    total += sizes[k];
    even = even && sizes[k] == sizes[0];
  }
  char shape[64];
  snprintf(shape, sizeof shape, axis ? "[2,%lld]" : "[%lld,3]",
           (long long)total);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, shape), y;
  if (shard_slice)
    assert_ok(g, ccg_shard_slice(g, x, axes, axis, even ? NULL : sizes, &y));
  else
    assert_ok(
        g, ccg_reduce_scatter(g, x, axes, axis, op, even ? NULL : sizes, &y));
  ranks R;
  fill_inputs(&R, n, 2,
              axis ? (const int64_t[]){2, total} : (const int64_t[]){total, 3});
  run_ranks(g, &R, y);
  int64_t cols = axis ? total : 3;
  for (int r = 0; r < n; r++) {
    group_of(g, axes, r, grp, &gs, &gi);
    int64_t before = 0;
    for (int k = 0; k < gi; k++)
      before += sizes[k];
    int64_t rows = axis ? 2 : sizes[gi], w = axis ? sizes[gi] : 3;
    assert_int_equal(R.out_dims[r][axis], sizes[gi]);
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < w; j++) {
        int64_t src = axis ? i * cols + before + j : (before + i) * cols + j;
        float acc = R.in[shard_slice ? r : grp[0]][src];
        for (int k = 1; k < gs && !shard_slice; k++)
          acc = red(op, acc, R.in[grp[k]][src]);
        if (op == CCG_REDUCE_AVG && !shard_slice)
          acc *= 1.0f / (float)gs;
        if (R.out[r][i * w + j] != acc)
          fail_msg("%s %s axis %d: rank %d (%lld,%lld) is %g, expected %g",
                   mesh, shard_slice ? "ShardSlice" : "ReduceScatter", axis, r,
                   (long long)i, (long long)j, (double)R.out[r][i * w + j],
                   (double)acc);
      }
  }
  ccg_graph_free(g);
}

static void test_reduce_scatter(void **state) {
  (void)state;
  check_reduce_scatter("tp=2", "tp", 0, (const int64_t[]){2, 2}, CCG_REDUCE_SUM,
                       false);
  check_reduce_scatter("tp=4", "tp", 1, (const int64_t[]){1, 3, 2, 2},
                       CCG_REDUCE_SUM, false);
  check_reduce_scatter("tp=4", "tp", 0, (const int64_t[]){2, 2, 2, 2},
                       CCG_REDUCE_MAX, false);
  check_reduce_scatter("tp=4", "tp", 1, (const int64_t[]){2, 2, 2, 2},
                       CCG_REDUCE_AVG, false);
  check_reduce_scatter("dp=2,tp=2", "tp", 1, (const int64_t[]){3, 1},
                       CCG_REDUCE_SUM, false);
  check_reduce_scatter("dp=2,tp=2", "dp,tp", 0, (const int64_t[]){1, 2, 1, 1},
                       CCG_REDUCE_MIN, false);
  check_reduce_scatter("dp=2,tp=2", "tp", 1, (const int64_t[]){3, 1},
                       CCG_REDUCE_SUM, true);
  check_reduce_scatter("tp=4", "tp", 0, (const int64_t[]){1, 1, 1, 1},
                       CCG_REDUCE_SUM, true);
}

/* ---- AllToAll -------------------------------------------------------------
 */

/* Two axes: rank r holds [out_splits[r], 6]; column chunk j (in_splits[j]
 * wide) goes to rank j, which stacks what arrives along dim 0. */
static void test_all_to_all_uneven(void **state) {
  (void)state;
  const int64_t ins[4] = {1, 2, 1, 2}, outs[4] = {2, 1, 3, 1};
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[tp{2,1,3,1},6]"), y;
  assert_ok(g, ccg_all_to_all(g, x, "tp", 1, 0, ins, outs, &y));
  assert_string_equal(ccg_test_shape(g, y), "[7,tp{1,2,1,2}]");
  ranks R;
  fill_inputs(&R, 4, 2, (const int64_t[]){0, 6});
  for (int r = 0; r < 4; r++)
    R.dims[r][0] = outs[r];
  run_ranks(g, &R, y);
  for (int r = 0; r < 4; r++) {
    int64_t col0 = 0;
    for (int k = 0; k < r; k++)
      col0 += ins[k];
    assert_int_equal(R.out_dims[r][0], 7);
    assert_int_equal(R.out_dims[r][1], ins[r]);
    int64_t row = 0;
    for (int j = 0; j < 4; j++)
      for (int64_t i = 0; i < outs[j]; i++, row++)
        for (int64_t c = 0; c < ins[r]; c++)
          if (R.out[r][row * ins[r] + c] != R.in[j][i * 6 + col0 + c])
            fail_msg("rank %d row %lld col %lld", r, (long long)row,
                     (long long)c);
  }
  ccg_graph_free(g);
}

/* Even splits: [4, 8] split on dim 1, concatenated on dim 0, over tp of a
 * dp=2,tp=2 mesh and over all 4 ranks. */
static void check_all_to_all_even(const char *mesh, const char *axes) {
  ccg_graph *g = ccg_test_graph(mesh);
  int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]"), y;
  assert_ok(g, ccg_all_to_all(g, x, axes, 1, 0, NULL, NULL, &y));
  ranks R;
  fill_inputs(&R, n, 2, (const int64_t[]){4, 8});
  run_ranks(g, &R, y);
  for (int r = 0; r < n; r++) {
    int64_t grp[MAXR];
    int gs, gi;
    group_of(g, axes, r, grp, &gs, &gi);
    int w = 8 / gs;
    for (int j = 0; j < gs; j++)
      for (int i = 0; i < 4; i++)
        for (int c = 0; c < w; c++)
          assert_true(R.out[r][(j * 4 + i) * w + c] ==
                      R.in[grp[j]][i * 8 + gi * w + c]);
  }
  ccg_graph_free(g);
}

static void test_all_to_all_even(void **state) {
  (void)state;
  check_all_to_all_even("tp=2", "tp");
  check_all_to_all_even("tp=4", "tp");
  check_all_to_all_even("dp=2,tp=2", "tp");
  check_all_to_all_even("dp=2,tp=2", "dp,tp");
}

/* ---- rooted, point-to-point, permute --------------------------------------
 */

static void test_broadcast_reduce(void **state) {
  (void)state;
  const char *meshes[3] = {"tp=2", "tp=4", "dp=2,tp=2"};
  for (int m = 0; m < 3; m++) {
    ccg_graph *g = ccg_test_graph(meshes[m]);
    int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[5]"), b, rd, s;
    assert_ok(g, ccg_broadcast(g, x, "tp", 1, &b));
    assert_ok(g, ccg_reduce(g, x, "tp", 0, CCG_REDUCE_SUM, &rd));
    assert_ok(g, ccg_concat(g, (const ccg_value_id[]){b, rd}, 2, 0, &s));
    ranks R;
    fill_inputs(&R, n, 1, (const int64_t[]){5});
    run_ranks(g, &R, s);
    for (int r = 0; r < n; r++) {
      int64_t grp[MAXR];
      int gs, gi;
      group_of(g, "tp", r, grp, &gs, &gi);
      for (int i = 0; i < 5; i++) {
        assert_true(R.out[r][i] == R.in[grp[1]][i]);
        if (gi != 0)
          continue;
        float acc = R.in[grp[0]][i];
        for (int k = 1; k < gs; k++)
          acc += R.in[grp[k]][i];
        assert_true(R.out[r][5 + i] == acc);
      }
    }
    ccg_graph_free(g);
  }
}

/* A ring along one mesh axis: every rank sends two tensors forward and
 * receives two from behind, matched by tag. */
static void check_send_recv(const char *mesh, const char *axis) {
  ccg_graph *g = ccg_test_graph(mesh);
  int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[6]"), d, a, b, s;
  ccg_node_id n1, n2;
  assert_ok(g, ccg_neg(g, x, &d));
  assert_ok(g, ccg_send(g, x, axis, 1, 7, &n1));
  assert_ok(g, ccg_send(g, d, axis, 1, 8, &n2));
  ccg_shape sh = CCG_SHAPE(6);
  assert_ok(g, ccg_recv(g, axis, -1, 7, CCG_DTYPE_F32, &sh, &a));
  assert_ok(g, ccg_recv(g, axis, -1, 8, CCG_DTYPE_F32, &sh, &b));
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){a, b}, 2, 0, &s));
  ranks R;
  fill_inputs(&R, n, 1, (const int64_t[]){6});
  run_ranks(g, &R, s);
  for (int r = 0; r < n; r++) {
    int64_t grp[MAXR];
    int gs, gi;
    group_of(g, axis, r, grp, &gs, &gi);
    int64_t from = grp[(gi + gs - 1) % gs];
    for (int i = 0; i < 6; i++) {
      assert_true(R.out[r][i] == R.in[from][i]);
      assert_true(R.out[r][6 + i] == -R.in[from][i]);
    }
  }
  ccg_graph_free(g);
}

static void test_send_recv(void **state) {
  (void)state;
  check_send_recv("pp=2", "pp");
  check_send_recv("pp=4", "pp");
  check_send_recv("dp=2,tp=2", "tp");
  check_send_recv("dp=2,tp=2", "dp");
}

static void check_permute(const char *mesh, int64_t shift, bool rotate) {
  ccg_graph *g = ccg_test_graph(mesh);
  int n = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3]"), y;
  assert_ok(g, ccg_collective_permute(g, x, "tp", shift, rotate, &y));
  ranks R;
  fill_inputs(&R, n, 1, (const int64_t[]){3});
  run_ranks(g, &R, y);
  for (int r = 0; r < n; r++) {
    int64_t grp[MAXR];
    int gs, gi;
    group_of(g, "tp", r, grp, &gs, &gi);
    int64_t src = gi - shift;
    if (rotate)
      src = ((src % gs) + gs) % gs;
    for (int i = 0; i < 3; i++) {
      float want = src >= 0 && src < gs ? R.in[grp[src]][i] : 0.0f;
      if (R.out[r][i] != want)
        fail_msg("%s permute shift %lld rotate %d: rank %d element %d", mesh,
                 (long long)shift, rotate, r, i);
    }
  }
  ccg_graph_free(g);
}

static void test_collective_permute(void **state) {
  (void)state;
  check_permute("tp=4", 1, true);
  check_permute("tp=4", 1, false);
  check_permute("tp=4", -2, true);
  check_permute("dp=2,tp=2", 1, true);
  check_permute("dp=2,tp=2", 1, false);
  check_permute("tp=2", 1, true);
}

/* Reductions in other dtypes: i64 exactly, bf16 rounded once. */
static void test_all_reduce_dtypes(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id x = ccg_test_input(g, "n", CCG_DTYPE_I64, "[3]"), y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  int64_t in[4][3], out[4][3];
  ccg_exec_tensor tin[4], tout[4];
  const ccg_exec_tensor *pin[4];
  ccg_exec_tensor *pout[4];
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 3; i++)
      in[r][i] = (int64_t)(r + 1) * 1000000000000LL + i;
    tin[r] = xt_in("n", CCG_DTYPE_I64, in[r], 1, (const int64_t[]){3});
    tout[r] = xt_out(ccg_value_name(g, y), out[r], sizeof out[r]);
    pin[r] = &tin[r];
    pout[r] = &tout[r];
  }
  assert_ok(g, ccg_exec_run_local(g, 4, NULL, pin, 1, pout, 1, NULL));
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < 3; i++)
      assert_int_equal(out[r][i], 10000000000000LL + 4 * i);
  ccg_graph_free(g);

  /* bf16: summed in f32 in group order, rounded once */
  g = ccg_test_graph("tp=4");
  x = ccg_test_input(g, "h", CCG_DTYPE_BF16, "[5]");
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  uint16_t hin[4][5], hout[4][5];
  float f[20];
  xt_fill(f, 20, 90);
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 5; i++)
      hin[r][i] = ccg__f32_to_bf16(f[r * 5 + i] * 3.0f);
    tin[r] = xt_in("h", CCG_DTYPE_BF16, hin[r], 1, (const int64_t[]){5});
    tout[r] = xt_out(ccg_value_name(g, y), hout[r], sizeof hout[r]);
  }
  assert_ok(g, ccg_exec_run_local(g, 4, NULL, pin, 1, pout, 1, NULL));
  for (int i = 0; i < 5; i++) {
    float acc = ccg__bf16_to_f32(hin[0][i]);
    for (int r = 1; r < 4; r++)
      acc += ccg__bf16_to_f32(hin[r][i]);
    for (int r = 0; r < 4; r++)
      assert_int_equal(hout[r][i], ccg__f32_to_bf16(acc));
  }
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_all_reduce_large),
      cmocka_unit_test(test_all_reduce_deterministic),
      cmocka_unit_test(test_all_reduce_dtypes),
      cmocka_unit_test(test_all_gather),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_all_to_all_uneven),
      cmocka_unit_test(test_all_to_all_even),
      cmocka_unit_test(test_broadcast_reduce),
      cmocka_unit_test(test_send_recv),
      cmocka_unit_test(test_collective_permute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
