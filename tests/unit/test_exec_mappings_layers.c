/* Multi-rank numerics of the mapping entries that take several inputs or a
 * graph per pipeline stage (mapping_numerics.h lists them): ColossalAI's
 * pipeline send/recv functions and tensor meta on pp = 2 and 4, dp=2 x
 * pp=2 and one stage, and the DTensor Linear and LayerNorm styles on tp = 2
 * and 4, dp=2 x tp=2 and tp=1, forward and backward.
 * Pipeline: each received tensor (and each gradient sent back) is the
 * peer's tensor exactly. Styles: each rank's outputs are its part of the
 * unsharded layer (global inputs, plain ops, one rank) within 1e-5
 * absolute + 1e-5 relative for the Linear styles (the sharded MatMul sums
 * in another order) and 1e-4 for the LayerNorm backward (the kernel works
 * in double, the reference in f32 ops). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "mapping_numerics.h"

static bool ran[MN_N_LAYER_ENTRIES];

static void mark(const char *name) {
  for (size_t i = 0; i < MN_N_LAYER_ENTRIES; i++)
    if (strcmp(mn_layer_entries[i], name) == 0)
      ran[i] = true;
}

static const char *const meshes_pp[] = {"pp=2", "pp=4", "dp=2,pp=2", "pp=1"};
static const char *const meshes_tp[] = {"tp=2", "tp=4", "dp=2,tp=2", "tp=1"};

/* ---- pipeline ----------------------------------------------------------- */

enum { PREV = 1, NEXT = 2 };

/* One application: its inputs (1: the activation a, 2: the gradient b, in
 * that order) and what it receives (PREV: the previous stage's a; NEXT:
 * the next stage's b, in that order). */
typedef struct pop {
  const char *name;
  int inputs, recv;
} pop;

typedef struct pcase {
  pop ops[2];
  int n;
} pcase;

static const pcase pcases[] = {
    {{{"colossal.send_forward", 1, 0}, {"colossal.recv_forward", 0, PREV}}, 2},
    {{{"colossal.send_backward", 2, 0}, {"colossal.recv_backward", 0, NEXT}},
     2},
    {{{"colossal.send_forward_recv_backward", 1, NEXT},
      {"colossal.send_backward_recv_forward", 2, PREV}},
     2},
    {{{"colossal.send_forward_recv_forward", 1, PREV}}, 1},
    {{{"colossal.send_backward_recv_backward", 2, NEXT}}, 1},
    {{{"colossal.send_forward_backward_recv_forward_backward", 3, PREV | NEXT}},
     1},
};

/* What one stage's graph holds: outputs (received tensors, then the
 * gradients of a and b when the rule gives them) and where each came
 * from. */
typedef struct stage {
  ccg_graph *g;
  int n_recv;
  int src[4];      /* PREV or NEXT for received tensor k */
  int d_in[4];     /* io input index of its gradient d<k> */
  int grad_out[3]; /* io output index of the gradient of a (1), b (2); -1 */
} stage;

static void build_stage(const pcase *pc, const char *mesh, int rank, stage *st,
                        mn_io *io) {
  ccg_graph *g = ccg_test_graph(mesh);
  const ccg_mesh *m = ccg_graph_mesh(g);
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(m, "pp", &mask));
  int s = (int)ccg_mesh_rank_in_group(m, rank, mask);
  int P = (int)ccg_mesh_group_size(m, mask);
  char params[256];
  snprintf(params, sizeof params,
           "{\"stage\": %d, \"input_tensor_shape\": [2,3], "
           "\"output_grad_shape\": [3,2]}",
           s);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,3]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[3,2]");
  memset(st, 0, sizeof *st);
  memset(io, 0, sizeof *io);
  st->g = g;
  st->grad_out[1] = st->grad_out[2] = -1;
  mn_add_input(g, a, rank, io, (uint32_t)(100 * rank + 1));
  mn_add_input(g, b, rank, io, (uint32_t)(100 * rank + 2));
  ccg_value_id outs[2][4], ins[2][2], dys[2][4];
  size_t n_outs[2], n_ins[2];
  for (int i = 0; i < pc->n; i++) {
    const pop *o = &pc->ops[i];
    n_ins[i] = 0;
    if (o->inputs & 1)
      ins[i][n_ins[i]++] = a;
    if (o->inputs & 2)
      ins[i][n_ins[i]++] = b;
    n_outs[i] = 4;
    if (ccg_mapping_apply(g, o->name, params, ins[i], n_ins[i], outs[i],
                          &n_outs[i]) != CCG_STATUS_OK)
      fail_msg("%s on %s stage %d: %s", o->name, mesh, s, ccg_last_error(g));
    size_t want = 0;
    for (int dir = PREV; dir <= NEXT; dir++)
      if ((o->recv & dir) && (dir == PREV ? s > 0 : s < P - 1))
        st->src[st->n_recv + (int)want++] = dir;
    assert_int_equal(n_outs[i], want);
    for (size_t k = 0; k < n_outs[i]; k++) {
      int r = st->n_recv++;
      assert_ok(g, ccg_graph_add_output(g, outs[i][k]));
      io->out_name[io->n_out++] = ccg_value_name(g, outs[i][k]);
      ccg_shape sh = *ccg_value_shape(g, outs[i][k]);
      char dn[8];
      snprintf(dn, sizeof dn, "d%d", r);
      assert_ok(g, ccg_graph_add_input(g, dn, CCG_DTYPE_F32, &sh, &dys[i][k]));
      st->d_in[r] = io->n_in;
      mn_add_input(g, dys[i][k], rank, io, (uint32_t)(100 * rank + 10 + r));
    }
  }
  for (int i = pc->n - 1; i >= 0; i--) {
    const pop *o = &pc->ops[i];
    ccg_mapping_grad_args ga = CCG_MAPPING_GRAD_ARGS_INIT;
    ga.params = params;
    ga.inputs = ins[i];
    ga.n_inputs = n_ins[i];
    ga.outputs = outs[i];
    ga.n_outputs = n_outs[i];
    ga.grad_outputs = dys[i];
    ccg_value_id gin[2];
    if (ccg_mapping_apply_backward(g, o->name, &ga, gin) != CCG_STATUS_OK)
      fail_msg("%s backward on %s stage %d: %s", o->name, mesh, s,
               ccg_last_error(g));
    for (size_t k = 0; k < n_ins[i]; k++) {
      int which = ins[i][k] == a ? 1 : 2;
      /* a goes to the next stage, b to the previous: without that peer
       * there is no gradient */
      bool peer = which == 1 ? s < P - 1 : s > 0;
      assert_true(peer ? gin[k] != CCG_NONE : gin[k] == CCG_NONE);
      if (gin[k] == CCG_NONE)
        continue;
      assert_ok(g, ccg_graph_add_output(g, gin[k]));
      st->grad_out[which] = io->n_out;
      io->out_name[io->n_out++] = ccg_value_name(g, gin[k]);
    }
  }
}

/* Rank of the stage `s` in rank's pipeline group. */
static int stage_rank(const ccg_mesh *m, int rank, int s) {
  unsigned mask;
  int64_t grp[MN_MAXR];
  assert_ok(NULL, ccg_mesh_axes_mask(m, "pp", &mask));
  assert_ok(NULL, ccg_mesh_group_ranks(m, rank, mask, grp));
  return (int)grp[s];
}

/* Output k of io equals input i of peer (same numel). */
static void same_as(const mn_io *me, int k, const mn_io *peer, int i,
                    const char *what) {
  size_t n = mn_numel(peer->in_rank[i], peer->in_dims[i]);
  assert_int_equal(mn_numel(me->out_t[k].tensor.rank, me->out_t[k].tensor.dims),
                   n);
  xt_close(me->out[k], peer->in[i], n, 0, 0, what);
}

static void run_pcase(const pcase *pc, const char *mesh) {
  ccg_graph *probe = ccg_test_graph(mesh);
  const ccg_mesh m = *ccg_graph_mesh(probe);
  ccg_graph_free(probe);
  int n = (int)ccg_mesh_world_size(&m);
  static mn_io io[MN_MAXR];
  stage st[MN_MAXR];
  ccg_graph *gs[MN_MAXR] = {NULL};
  for (int r = 0; r < n; r++) {
    build_stage(pc, mesh, r, &st[r], &io[r]);
    gs[r] = st[r].g;
  }
  char what[256];
  snprintf(what, sizeof what, "%s on %s", pc->ops[0].name, mesh);
  mn_run(gs, n, io, what);
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(&m, "pp", &mask));
  for (int r = 0; r < n; r++) {
    int s = (int)ccg_mesh_rank_in_group(&m, r, mask);
    snprintf(what, sizeof what, "%s on %s, stage %d", pc->ops[0].name, mesh, s);
    for (int k = 0; k < st[r].n_recv; k++) {
      bool prev = st[r].src[k] == PREV;
      int peer = stage_rank(&m, r, prev ? s - 1 : s + 1);
      same_as(&io[r], k, &io[peer], prev ? 0 : 1, what);
    }
    for (int which = 1; which <= 2; which++) {
      int k = st[r].grad_out[which];
      if (k < 0)
        continue;
      /* the peer that received this input sends back its gradient */
      int ps = which == 1 ? s + 1 : s - 1, peer = stage_rank(&m, r, ps);
      int want = which == 1 ? PREV : NEXT, kk = -1;
      for (int j = 0; j < st[peer].n_recv; j++)
        if (st[peer].src[j] == want)
          kk = j;
      assert_true(kk >= 0);
      same_as(&io[r], k, &io[peer], st[peer].d_in[kk], what);
    }
  }
  for (int r = 0; r < n; r++)
    ccg_graph_free(st[r].g);
  for (int i = 0; i < pc->n; i++)
    mark(pc->ops[i].name);
}

static void test_pipeline(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pcases / sizeof pcases[0]; i++)
    for (int k = 0; k < 4; k++)
      run_pcase(&pcases[i], meshes_pp[k]);
}

/* send_tensor_meta(a, b) then recv_tensor_meta: every stage but the first
 * receives 2, then per tensor its rank, dims and ONNX dtype code (FLOAT =
 * 1) as i64; shapes have no gradient. */
static void test_tensor_meta(void **state) {
  (void)state;
  for (int k = 0; k < 4; k++) {
    ccg_graph *probe = ccg_test_graph(meshes_pp[k]);
    const ccg_mesh m = *ccg_graph_mesh(probe);
    ccg_graph_free(probe);
    int n = (int)ccg_mesh_world_size(&m);
    unsigned mask;
    assert_ok(NULL, ccg_mesh_axes_mask(&m, "pp", &mask));
    static mn_io io[MN_MAXR];
    ccg_graph *gs[MN_MAXR] = {NULL};
    int n_recv[MN_MAXR];
    for (int r = 0; r < n; r++) {
      ccg_graph *g = gs[r] = ccg_test_graph(meshes_pp[k]);
      int s = (int)ccg_mesh_rank_in_group(&m, r, mask);
      char p[96], pr[128];
      snprintf(p, sizeof p, "{\"stage\": %d}", s);
      snprintf(pr, sizeof pr, "{\"stage\": %d, \"ndims\": [2,2]}", s);
      ccg_value_id in[2] = {ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,3]"),
                            ccg_test_input(g, "b", CCG_DTYPE_F32, "[3,2]")};
      ccg_value_id out[7], gin[2], none[7];
      size_t n0 = 0, n1 = 7;
      memset(&io[r], 0, sizeof io[r]);
      mn_add_input(g, in[0], r, &io[r], 1);
      mn_add_input(g, in[1], r, &io[r], 2);
      assert_ok(g, ccg_mapping_apply(g, "colossal.send_tensor_meta", p, in, 2,
                                     out, &n0));
      assert_ok(g, ccg_mapping_apply(g, "colossal.recv_tensor_meta", pr, NULL,
                                     0, out, &n1));
      assert_int_equal(n1, s > 0 ? 7 : 0);
      n_recv[r] = (int)n1;
      for (size_t i = 0; i < n1; i++) {
        assert_ok(g, ccg_graph_add_output(g, out[i]));
        io[r].out_name[io[r].n_out++] = ccg_value_name(g, out[i]);
        none[i] = CCG_NONE;
      }
      ccg_mapping_grad_args ga = CCG_MAPPING_GRAD_ARGS_INIT;
      ga.params = p;
      ga.inputs = in;
      ga.n_inputs = 2;
      assert_ok(g, ccg_mapping_apply_backward(g, "colossal.send_tensor_meta",
                                              &ga, gin));
      assert_true(gin[0] == CCG_NONE && gin[1] == CCG_NONE);
      ga.params = pr;
      ga.inputs = NULL;
      ga.n_inputs = 0;
      ga.outputs = out;
      ga.n_outputs = n1;
      ga.grad_outputs = none;
      assert_ok(g, ccg_mapping_apply_backward(g, "colossal.recv_tensor_meta",
                                              &ga, gin));
    }
    mn_run(gs, n, io, meshes_pp[k]);
    static const int64_t want[] = {2, 2, 2, 3, 1, 2, 3, 2, 1};
    for (int r = 0; r < n; r++) {
      const int64_t *w = want;
      for (int i = 0; i < n_recv[r]; i++) {
        const ccg_tensor *t = &io[r].out_t[i].tensor;
        assert_int_equal(t->dtype, CCG_DTYPE_I64);
        size_t cnt = mn_numel(t->rank, t->dims);
        for (size_t e = 0; e < cnt; e++, w++)
          if (((const int64_t *)io[r].out[i])[e] != *w)
            fail_msg("tensor meta on %s rank %d: output %d element %zu is "
                     "%lld, expected %lld",
                     meshes_pp[k], r, i, e,
                     (long long)((const int64_t *)io[r].out[i])[e],
                     (long long)*w);
      }
      if (n_recv[r])
        assert_true(w == want + 9);
      ccg_graph_free(gs[r]);
    }
  }
  mark("colossal.send_tensor_meta");
  mark("colossal.recv_tensor_meta");
}

/* ---- megatron.all_to_all with uneven splits ------------------------------ */

/* Rows group rank i sends to group rank j: S[i][j]. Rank r's parameters
 * are its row of S (input_split_sizes) and its column (output_split_sizes),
 * so each rank has its own graph. Rank r receives rows
 * [sum_{j<r} S[g][j], + S[g][r]) of each g's input, in group order; the
 * backward sends them back (the lists swapped). Exact. */
static const int64_t *a2a_splits(int W) {
  static const int64_t s1[] = {3}, s2[] = {1, 3, 2, 1},
                       s4[] = {1, 2, 0, 1, 2, 1, 1, 0, 0, 3, 1, 2, 1, 1, 2, 1};
  return W == 1 ? s1 : W == 2 ? s2 : s4;
}

/* Rows [sum_{j<k} sizes[j*stride], + sizes[k*stride]) of each group
 * member's tensor, concatenated: what rank k gets from an all-to-all whose
 * member g sends sizes[g*gs + j*js] rows to j. */
static void a2a_expect(const mn_io *io, const int64_t *grp, int W, int k,
                       int in, bool back, float *want, size_t *n_want) {
  const int64_t *S = a2a_splits(W);
  size_t at = 0;
  for (int g = 0; g < W; g++) {
    const mn_io *m = &io[grp[g]];
    int64_t cols = m->in_dims[in][1], start = 0;
    for (int j = 0; j < k; j++)
      start += back ? S[j * W + g] : S[g * W + j];
    int64_t rows = back ? S[k * W + g] : S[g * W + k];
    memcpy(want + at, m->in[in] + start * cols,
           (size_t)(rows * cols) * sizeof(float));
    at += (size_t)(rows * cols);
  }
  *n_want = at;
}

static void test_all_to_all_uneven(void **state) {
  (void)state;
  for (int k = 0; k < 4; k++) {
    const char *mesh = meshes_tp[k];
    ccg_graph *probe = ccg_test_graph(mesh);
    const ccg_mesh m = *ccg_graph_mesh(probe);
    ccg_graph_free(probe);
    int n = (int)ccg_mesh_world_size(&m);
    unsigned mask;
    assert_ok(NULL, ccg_mesh_axes_mask(&m, "tp", &mask));
    int W = (int)ccg_mesh_group_size(&m, mask);
    const int64_t *S = a2a_splits(W);
    static mn_io io[MN_MAXR];
    ccg_graph *gs[MN_MAXR] = {NULL};
    for (int r = 0; r < n; r++) {
      int gi = (int)ccg_mesh_rank_in_group(&m, r, mask);
      int64_t rows_in = 0, rows_out = 0;
      char params[256], shape[32];
      int at = snprintf(params, sizeof params, "{\"input_split_sizes\": [");
      for (int j = 0; j < W; j++) {
        rows_in += S[gi * W + j];
        at += snprintf(params + at, sizeof params - (size_t)at, "%s%lld",
                       j ? "," : "", (long long)S[gi * W + j]);
      }
      at += snprintf(params + at, sizeof params - (size_t)at,
                     "], \"output_split_sizes\": [");
      for (int j = 0; j < W; j++) {
        rows_out += S[j * W + gi];
        at += snprintf(params + at, sizeof params - (size_t)at, "%s%lld",
                       j ? "," : "", (long long)S[j * W + gi]);
      }
      snprintf(params + at, sizeof params - (size_t)at, "]}");
      ccg_graph *g = gs[r] = ccg_test_graph(mesh);
      snprintf(shape, sizeof shape, "[%lld,3]", (long long)rows_in);
      ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, shape), y, dy, dx;
      size_t no = 1;
      if (ccg_mapping_apply(g, "megatron.all_to_all", params, &x, 1, &y, &no) !=
          CCG_STATUS_OK)
        fail_msg("%s: %s", mesh, ccg_last_error(g));
      assert_int_equal(ccg_value_shape(g, y)->dims[0].size, rows_out);
      assert_ok(g, ccg_graph_add_output(g, y));
      ccg_shape ys = *ccg_value_shape(g, y);
      assert_ok(g, ccg_graph_add_input(g, "dy", CCG_DTYPE_F32, &ys, &dy));
      ccg_mapping_grad_args ga = CCG_MAPPING_GRAD_ARGS_INIT;
      ga.params = params;
      ga.inputs = &x;
      ga.n_inputs = 1;
      ga.outputs = &y;
      ga.n_outputs = 1;
      ga.grad_outputs = &dy;
      assert_ok(g,
                ccg_mapping_apply_backward(g, "megatron.all_to_all", &ga, &dx));
      assert_ok(g, ccg_graph_add_output(g, dx));
      memset(&io[r], 0, sizeof io[r]);
      mn_add_input(g, x, r, &io[r], (uint32_t)(100 * r + 5));
      mn_add_input(g, dy, r, &io[r], (uint32_t)(100 * r + 6));
      io[r].n_out = 2;
      io[r].out_name[0] = ccg_value_name(g, y);
      io[r].out_name[1] = ccg_value_name(g, dx);
    }
    mn_run(gs, n, io, mesh);
    for (int r = 0; r < n; r++) {
      int64_t grp[MN_MAXR];
      assert_ok(NULL, ccg_mesh_group_ranks(&m, r, mask, grp));
      int gi = (int)ccg_mesh_rank_in_group(&m, r, mask);
      static float want[MN_MAXN];
      size_t nw;
      char what[128];
      for (int pass = 0; pass < 2; pass++) {
        a2a_expect(io, grp, W, gi, pass, pass == 1, want, &nw);
        const ccg_tensor *t = &io[r].out_t[pass].tensor;
        assert_int_equal(mn_numel(t->rank, t->dims), nw);
        snprintf(what, sizeof what,
                 "megatron.all_to_all uneven on %s, rank %d %s", mesh, r,
                 pass ? "backward" : "forward");
        xt_close(io[r].out[pass], want, nw, 0, 0, what);
      }
      ccg_graph_free(gs[r]);
    }
  }
}

/* ---- DTensor styles ----------------------------------------------------- */

#define MAXT 8

/* A global tensor and how a rank holds it: chunk gidx on `dim`, or whole
 * (dim -1). Data depends on the name only: replicated values are the same
 * on every rank. */
typedef struct gtensor {
  const char *name;
  int rank;
  int64_t dims[3];
  int dim;
} gtensor;

/* The sharded layer's outputs (y, then the gradient of each input) are
 * compared with chunk gidx of the reference's on `out_dim[k]` (-1:
 * whole). */
typedef struct style {
  const char *name;
  const char *params;
  gtensor in[6]; /* inputs of the mapping, then "dy" last */
  int n_in;      /* mapping inputs (dy not counted) */
  int out_dim[6];
  /* builds the reference from the global inputs; outputs in order */
  void (*ref)(ccg_graph *g, const ccg_value_id *in, ccg_value_id *out);
  double tol;
} style;

static ccg_value_id mm(ccg_graph *g, ccg_value_id a, ccg_value_id b) {
  ccg_value_id y;
  assert_ok(g, ccg_matmul(g, a, b, &y));
  return y;
}
static ccg_value_id tr(ccg_graph *g, ccg_value_id a) {
  ccg_value_id y;
  assert_ok(g, ccg_transpose(g, a, NULL, 0, &y));
  return y;
}
static ccg_value_id add(ccg_graph *g, ccg_value_id a, ccg_value_id b) {
  ccg_value_id y;
  assert_ok(g, ccg_add(g, a, b, &y));
  return y;
}
static ccg_value_id rsum(ccg_graph *g, ccg_value_id a, int n_axes) {
  static const int64_t axes[] = {0, 1};
  ccg_value_id y;
  assert_ok(g, ccg_reduce_sum(g, a, axes, (size_t)n_axes, false, &y));
  return y;
}

/* y = x W + b; dx = dy W^T, dW = x^T dy, db = sum dy. */
static void ref_linear(ccg_graph *g, const ccg_value_id *in,
                       ccg_value_id *out) {
  ccg_value_id x = in[0], w = in[1], b = in[2], dy = in[3];
  out[0] = add(g, mm(g, x, w), b);
  out[1] = mm(g, dy, tr(g, w));
  out[2] = mm(g, tr(g, x), dy);
  out[3] = rsum(g, dy, 1);
}

/* Two Linears (no activation between): h = x W1 + b1, y = h W2 + b2. */
static void ref_pairwise(ccg_graph *g, const ccg_value_id *in,
                         ccg_value_id *out) {
  ccg_value_id x = in[0], w1 = in[1], b1 = in[2], w2 = in[3], b2 = in[4],
               dy = in[5];
  ccg_value_id h = add(g, mm(g, x, w1), b1);
  out[0] = add(g, mm(g, h, w2), b2);
  ccg_value_id dh = mm(g, dy, tr(g, w2));
  out[1] = mm(g, dh, tr(g, w1));
  out[2] = mm(g, tr(g, x), dh);
  out[3] = rsum(g, dh, 1);
  out[4] = mm(g, tr(g, h), dy);
  out[5] = rsum(g, dy, 1);
}

/* LayerNorm over the last dim and its backward, in f32 ops:
 * xhat = (x - mean) rstd; dx = rstd (g - mean(g) - xhat mean(g xhat)) with
 * g = dy scale; dscale = sum dy xhat, dbias = sum dy over the rows. */
static void ref_layer_norm(ccg_graph *g, const ccg_value_id *in,
                           ccg_value_id *out) {
  ccg_value_id x = in[0], sc = in[1], bi = in[2], dy = in[3];
  int64_t last = -1;
  ccg_value_id mean, xc, var, rstd, xhat, gg, mg, mgx, t, eps;
  assert_ok(g, ccg_layer_norm(g, x, sc, bi, -1, 1e-5f, &out[0]));
  assert_ok(g, ccg_reduce_mean(g, x, &last, 1, true, &mean));
  assert_ok(g, ccg_sub(g, x, mean, &xc));
  assert_ok(g, ccg_mul(g, xc, xc, &var));
  assert_ok(g, ccg_reduce_mean(g, var, &last, 1, true, &var));
  eps = mn_const(g, 1e-5f);
  assert_ok(g, ccg_add(g, var, eps, &var));
  assert_ok(g, ccg_sqrt(g, var, &rstd));
  assert_ok(g, ccg_div(g, mn_const(g, 1.0f), rstd, &rstd));
  assert_ok(g, ccg_mul(g, xc, rstd, &xhat));
  assert_ok(g, ccg_mul(g, dy, sc, &gg));
  assert_ok(g, ccg_reduce_mean(g, gg, &last, 1, true, &mg));
  assert_ok(g, ccg_mul(g, gg, xhat, &t));
  assert_ok(g, ccg_reduce_mean(g, t, &last, 1, true, &mgx));
  assert_ok(g, ccg_mul(g, xhat, mgx, &t));
  assert_ok(g, ccg_sub(g, gg, mg, &gg));
  assert_ok(g, ccg_sub(g, gg, t, &gg));
  assert_ok(g, ccg_mul(g, gg, rstd, &out[1]));
  assert_ok(g, ccg_mul(g, dy, xhat, &t));
  out[2] = rsum(g, t, 2);
  out[3] = rsum(g, dy, 2);
}

static const style styles[] = {
    {"dtensor.colwise_parallel",
     NULL,
     {{"x", 2, {3, 4}, -1},
      {"w", 2, {4, 8}, 1},
      {"b", 1, {8}, 0},
      {"dy", 2, {3, 8}, 1}},
     3,
     {1, -1, 1, 0},
     ref_linear,
     1e-5},
    {"dtensor.rowwise_parallel",
     NULL,
     {{"x", 2, {3, 8}, 1},
      {"w", 2, {8, 4}, 0},
      {"b", 1, {4}, -1},
      {"dy", 2, {3, 4}, -1}},
     3,
     {-1, 1, 0, -1},
     ref_linear,
     1e-5},
    {"dtensor.sequence_parallel",
     NULL,
     {{"x", 3, {2, 8, 6}, 1},
      {"scale", 1, {6}, -1},
      {"bias", 1, {6}, -1},
      {"dy", 3, {2, 8, 6}, 1}},
     3,
     {1, 1, -1, -1},
     ref_layer_norm,
     1e-4},
    {"dtensor.pairwise_parallel",
     NULL,
     {{"x", 2, {3, 4}, -1},
      {"w1", 2, {4, 8}, 1},
      {"b1", 1, {8}, 0},
      {"w2", 2, {8, 4}, 0},
      {"b2", 1, {4}, -1},
      {"dy", 2, {3, 4}, -1}},
     5,
     {-1, -1, 1, 0, 0, -1},
     ref_pairwise,
     1e-5},
};

/* Chunk k of W of a row-major tensor on dim d (d < 0: a copy). */
static void take_chunk(const float *src, int rank, const int64_t *dims, int d,
                       int W, int k, float *dst, int64_t *out_dims) {
  memcpy(out_dims, dims, (size_t)rank * sizeof *dims);
  if (d < 0) {
    memcpy(dst, src, mn_numel(rank, dims) * sizeof(float));
    return;
  }
  size_t outer = 1, inner = 1;
  for (int i = 0; i < d; i++)
    outer *= (size_t)dims[i];
  for (int i = d + 1; i < rank; i++)
    inner *= (size_t)dims[i];
  size_t len = (size_t)dims[d] / (size_t)W;
  out_dims[d] = (int64_t)len;
  for (size_t o = 0; o < outer; o++)
    memcpy(dst + o * len * inner,
           src + (o * (size_t)dims[d] + (size_t)k * len) * inner,
           len * inner * sizeof(float));
}

static void run_style(const style *sy, const char *mesh) {
  ccg_graph *g = ccg_test_graph(mesh);
  const ccg_mesh *m = ccg_graph_mesh(g);
  int n = (int)ccg_mesh_world_size(m);
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(m, "tp", &mask));
  int W = (int)ccg_mesh_group_size(m, mask);
  char what[256];
  snprintf(what, sizeof what, "%s on %s", sy->name, mesh);
  /* global data, the same on every rank */
  static float full[6][MN_MAXN];
  ccg_value_id v[6], y, gin[5];
  for (int i = 0; i <= sy->n_in; i++) {
    const gtensor *t = &sy->in[i];
    xt_fill(full[i], mn_numel(t->rank, t->dims), (uint32_t)(7 + i));
    int64_t local[3];
    memcpy(local, t->dims, sizeof local);
    if (t->dim >= 0)
      local[t->dim] /= W;
    ccg_shape s = ccg_shape_make(t->rank, local);
    assert_ok(g, ccg_graph_add_input(g, t->name, CCG_DTYPE_F32, &s, &v[i]));
  }
  size_t no = 1;
  if (ccg_mapping_apply(g, sy->name, sy->params, v, (size_t)sy->n_in, &y,
                        &no) != CCG_STATUS_OK)
    fail_msg("%s: %s", what, ccg_last_error(g));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_mapping_grad_args ga = CCG_MAPPING_GRAD_ARGS_INIT;
  ga.params = sy->params;
  ga.inputs = v;
  ga.n_inputs = (size_t)sy->n_in;
  ga.outputs = &y;
  ga.n_outputs = 1;
  ga.grad_outputs = &v[sy->n_in];
  if (ccg_mapping_apply_backward(g, sy->name, &ga, gin) != CCG_STATUS_OK)
    fail_msg("%s: backward: %s", what, ccg_last_error(g));
  for (int i = 0; i < sy->n_in; i++) {
    assert_true(gin[i] != CCG_NONE);
    assert_ok(g, ccg_graph_add_output(g, gin[i]));
  }
  static mn_io io[MN_MAXR];
  ccg_graph *gs[MN_MAXR] = {NULL};
  for (int r = 0; r < n; r++) {
    int gi = (int)ccg_mesh_rank_in_group(m, r, mask);
    memset(&io[r], 0, sizeof io[r]);
    for (int i = 0; i <= sy->n_in; i++) {
      const gtensor *t = &sy->in[i];
      io[r].in_name[i] = t->name;
      io[r].in_rank[i] = t->rank;
      take_chunk(full[i], t->rank, t->dims, t->dim, W, gi, io[r].in[i],
                 io[r].in_dims[i]);
    }
    io[r].n_in = sy->n_in + 1;
    io[r].out_name[0] = ccg_value_name(g, y);
    for (int i = 0; i < sy->n_in; i++)
      io[r].out_name[i + 1] = ccg_value_name(g, gin[i]);
    io[r].n_out = sy->n_in + 1;
    gs[r] = g;
  }
  mn_run(gs, n, io, what);
  /* the unsharded layer on one rank */
  ccg_graph *rg = ccg_test_graph(NULL);
  ccg_value_id rv[6], ro[6];
  ccg_exec_tensor tin[6], tout[6];
  static float want[6][MN_MAXN];
  for (int i = 0; i <= sy->n_in; i++) {
    const gtensor *t = &sy->in[i];
    ccg_shape s = ccg_shape_make(t->rank, t->dims);
    assert_ok(rg, ccg_graph_add_input(rg, t->name, CCG_DTYPE_F32, &s, &rv[i]));
    tin[i] = xt_in(t->name, CCG_DTYPE_F32, full[i], t->rank, t->dims);
  }
  sy->ref(rg, rv, ro);
  for (int i = 0; i <= sy->n_in; i++) {
    assert_ok(rg, ccg_graph_add_output(rg, ro[i]));
    tout[i] = xt_out(ccg_value_name(rg, ro[i]), want[i], sizeof want[i]);
  }
  if (xt_run1(rg, tin, (size_t)sy->n_in + 1, tout, (size_t)sy->n_in + 1) !=
      CCG_STATUS_OK)
    fail_msg("%s: reference: %s", what, ccg_last_error(rg));
  for (int r = 0; r < n; r++) {
    int gi = (int)ccg_mesh_rank_in_group(m, r, mask);
    for (int k = 0; k <= sy->n_in; k++) {
      static float part[MN_MAXN];
      int64_t pd[CCG_MAX_RANK];
      take_chunk(want[k], tout[k].tensor.rank, tout[k].tensor.dims,
                 sy->out_dim[k], W, gi, part, pd);
      char w2[320];
      snprintf(w2, sizeof w2, "%s, rank %d, %s", what, r,
               k ? "gradient of an input" : "output");
      if (k)
        snprintf(w2 + strlen(w2), sizeof w2 - strlen(w2), " '%s'",
                 sy->in[k - 1].name);
      mn_compare(io[r].out[k], io[r].out_t[k].tensor.dims,
                 io[r].out_t[k].tensor.rank, part, pd, tout[k].tensor.rank,
                 sy->tol, sy->tol, w2);
    }
  }
  ccg_graph_free(rg);
  ccg_graph_free(g);
  mark(sy->name);
}

static void test_styles(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof styles / sizeof styles[0]; i++)
    for (int k = 0; k < 4; k++)
      run_style(&styles[i], meshes_tp[k]);
}

/* Runs last: every entry of the list had a case above. */
static void test_all_listed_entries_ran(void **state) {
  (void)state;
  for (size_t i = 0; i < MN_N_LAYER_ENTRIES; i++)
    if (!ran[i])
      fail_msg("%s has no numeric case here", mn_layer_entries[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline),
      cmocka_unit_test(test_tensor_meta),
      cmocka_unit_test(test_styles),
      cmocka_unit_test(test_all_to_all_uneven),
      cmocka_unit_test(test_all_listed_entries_ran),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
