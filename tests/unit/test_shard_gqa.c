/* Grouped-query attention through the shard pass: 4 query heads, 2
 * key/value heads (v with a bias), repeat_kv as Unsqueeze, Expand and
 * Reshape, a whole-dim Slice on the way. Sharded at tp=2 (one key/value
 * head per rank) and tp=4 (each key/value head on 2 ranks), and with one
 * key/value head (multi-query: on every rank) at both, differentiated
 * by ccg_backward and run on local ranks: the loss equals the unsharded
 * one, and every rank's gradient of a key/value weight equals the columns
 * of the unsharded gradient that its head holds (the sum over the ranks
 * sharing it), within 1e-4 of the largest element. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

enum { B = 2, S = 4, H = 16, NH = 4, HD = 4, MAXW = 4 };

static ccg_value_id node(ccg_graph *g, const char *op, const char *name,
                         const ccg_value_id *in, size_t n_in,
                         const ccg_attr *attrs, size_t n_attrs) {
  ccg_value_id out;
  assert_ok(g, xt_node(g, op, name, in, n_in, attrs, n_attrs, 1, &out));
  return out;
}

static ccg_value_id weight(ccg_graph *g, const char *name, int rank,
                           const int64_t *dims, uint32_t seed) {
  size_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= (size_t)dims[i];
  float *d = malloc(n * sizeof *d);
  assert_non_null(d);
  xt_fill(d, n, seed);
  ccg_tensor t = {CCG_DTYPE_F32, rank, {0}, d};
  memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &v));
  free(d);
  return v;
}

static ccg_value_id ints(ccg_graph *g, const char *name, int64_t n,
                         const int64_t *v) {
  ccg_tensor t = {CCG_DTYPE_I64, 1, {n}, (void *)(uintptr_t)v};
  ccg_value_id out;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &out));
  return out;
}

/* [B, S, n*HD] -> [B, n, S, HD] */
static ccg_value_id heads(ccg_graph *g, const char *pfx, ccg_value_id x,
                          int64_t n) {
  char nm[64];
  int64_t shp[4] = {B, S, n, HD}, perm[4] = {0, 2, 1, 3};
  snprintf(nm, sizeof nm, "%s.shape", pfx);
  ccg_value_id in[2] = {x, ints(g, nm, 4, shp)};
  snprintf(nm, sizeof nm, "/attn/%s/Reshape", pfx);
  ccg_value_id r = node(g, "Reshape", nm, in, 2, NULL, 0);
  ccg_attr a = CCG_ATTR_IS("perm", perm, 4);
  snprintf(nm, sizeof nm, "/attn/%s/Transpose", pfx);
  return node(g, "Transpose", nm, &r, 1, &a, 1);
}

/* [B, kv, S, HD] -> [B, NH, S, HD] as transformers' repeat_kv */
static ccg_value_id repeat_kv(ccg_graph *g, const char *pfx, ccg_value_id x,
                              int64_t kv) {
  char nm[64];
  int64_t ax = 2, st = 0, en = INT64_MAX, one = 1;
  int64_t exp[5] = {B, kv, NH / kv, S, HD}, out[4] = {B, NH, S, HD};
  /* dynamo's x[:, :]: a Slice of the whole (sharded) head dim */
  snprintf(nm, sizeof nm, "%s.st", pfx);
  ccg_value_id sl[4] = {x, ints(g, nm, 1, &st), CCG_NONE, CCG_NONE};
  snprintf(nm, sizeof nm, "%s.en", pfx);
  sl[2] = ints(g, nm, 1, &en);
  snprintf(nm, sizeof nm, "%s.ax", pfx);
  sl[3] = ints(g, nm, 1, &one);
  snprintf(nm, sizeof nm, "/attn/%s/Slice", pfx);
  ccg_value_id s = node(g, "Slice", nm, sl, 4, NULL, 0);
  ccg_attr a = CCG_ATTR_IS("axes", &ax, 1);
  snprintf(nm, sizeof nm, "/attn/%s/Unsqueeze", pfx);
  ccg_value_id u = node(g, "Unsqueeze", nm, &s, 1, &a, 1);
  snprintf(nm, sizeof nm, "%s.expand", pfx);
  ccg_value_id e[2] = {u, ints(g, nm, 5, exp)};
  snprintf(nm, sizeof nm, "/attn/%s/Expand", pfx);
  ccg_value_id ex = node(g, "Expand", nm, e, 2, NULL, 0);
  snprintf(nm, sizeof nm, "%s.merge", pfx);
  ccg_value_id r[2] = {ex, ints(g, nm, 4, out)};
  snprintf(nm, sizeof nm, "/attn/%s/Reshape_rep", pfx);
  return node(g, "Reshape", nm, r, 2, NULL, 0);
}

static ccg_graph *gqa_model(int64_t kv) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4,16]");
  int64_t wq[2] = {H, NH * HD}, wk[2] = {H, kv * HD}, bk[1] = {kv * HD};
  int64_t wo[2] = {NH * HD, H}, ry[3] = {B, S, H};
  ccg_value_id in[2] = {x, weight(g, "attn.q_proj.weight", 2, wq, 1)};
  ccg_value_id q = node(g, "MatMul", "/attn/q_proj/MatMul", in, 2, NULL, 0);
  in[1] = weight(g, "attn.k_proj.weight", 2, wk, 2);
  ccg_value_id k = node(g, "MatMul", "/attn/k_proj/MatMul", in, 2, NULL, 0);
  in[1] = weight(g, "attn.v_proj.weight", 2, wk, 4);
  ccg_value_id v = node(g, "MatMul", "/attn/v_proj/MatMul", in, 2, NULL, 0);
  /* a separate bias Add, as the TorchScript exporter writes (a bias of k
   * would not change the loss: softmax ignores a shift of a row) */
  ccg_value_id va[2] = {v, weight(g, "attn.v_proj.bias", 1, bk, 3)};
  v = node(g, "Add", "/attn/v_proj/Add", va, 2, NULL, 0);
  q = heads(g, "q", q, NH);
  k = repeat_kv(g, "k", heads(g, "k", k, kv), kv);
  v = repeat_kv(g, "v", heads(g, "v", v, kv), kv);
  int64_t pk[4] = {0, 1, 3, 2}, pc[4] = {0, 2, 1, 3}, flat[3] = {B, S, H};
  ccg_attr a = CCG_ATTR_IS("perm", pk, 4);
  ccg_value_id kt = node(g, "Transpose", "/attn/Transpose_k", &k, 1, &a, 1);
  ccg_value_id qk[2] = {q, kt};
  ccg_value_id sc = node(g, "MatMul", "/attn/MatMul", qk, 2, NULL, 0);
  ccg_attr ax = CCG_ATTR_I("axis", -1);
  ccg_value_id p = node(g, "Softmax", "/attn/Softmax", &sc, 1, &ax, 1);
  ccg_value_id pv[2] = {p, v};
  ccg_value_id c = node(g, "MatMul", "/attn/MatMul_1", pv, 2, NULL, 0);
  a = (ccg_attr)CCG_ATTR_IS("perm", pc, 4);
  c = node(g, "Transpose", "/attn/Transpose_c", &c, 1, &a, 1);
  ccg_value_id cr[2] = {c, ints(g, "c.shape", 3, flat)};
  c = node(g, "Reshape", "/attn/Reshape_c", cr, 2, NULL, 0);
  in[0] = c;
  in[1] = weight(g, "attn.o_proj.weight", 2, wo, 5);
  ccg_value_id y = node(g, "MatMul", "/attn/o_proj/MatMul", in, 2, NULL, 0);
  ccg_value_id yr[2] = {y, weight(g, "loss.weights", 3, ry, 6)};
  ccg_value_id l = node(g, "Mul", "/loss/Mul", yr, 2, NULL, 0);
  ccg_attr kd = CCG_ATTR_I("keepdims", 0);
  l = node(g, "ReduceSum", "/loss/ReduceSum", &l, 1, &kd, 1);
  assert_ok(g, ccg_graph_add_output(g, xt_named(g, l, "loss")));
  return g;
}

static const char *const wrt[] = {"attn.q_proj.weight", "attn.k_proj.weight",
                                  "attn.v_proj.weight", "attn.v_proj.bias"};
enum { NWRT = 4 };
/* per parameter: full size, dim holding key/value heads (-1: q's heads) */
static const int64_t wrows[NWRT] = {H, H, H, 1};

static void differentiate(ccg_graph *g) {
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  assert_ok(g, ccg_graph_find_value(g, "loss", &o.loss));
  o.wrt = wrt;
  o.n_wrt = NWRT;
  assert_ok(g, ccg_backward(g, &o));
}

/* |got - want| <= 1e-4 * max |want| over the tensor */
static void rel_close(const float *got, const float *want, size_t n,
                      const char *what) {
  double scale = 0;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs((double)want[i]));
  xt_close(got, want, n, 1e-4 * scale, 0, what);
}

static void check_tp(int W, int64_t kv) {
  float xd[B * S * H], want_loss, want[NWRT][H * 16];
  xt_fill(xd, B * S * H, 9);
  ccg_exec_tensor in = XT_F32("x", xd, B, S, H);
  char gname[NWRT][64];
  ccg_exec_tensor out1[NWRT + 1];
  out1[0] = xt_out("loss", &want_loss, sizeof want_loss);
  for (int i = 0; i < NWRT; i++) {
    snprintf(gname[i], sizeof gname[i], "grad/%s", wrt[i]);
    out1[i + 1] = xt_out(gname[i], want[i], sizeof want[i]);
  }
  ccg_graph *g = gqa_model(kv);
  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", W);
  ccg_graph *s = xt_shard(
      g, "{\"attn.o_proj\": \"rowwise\", \"attn.*\": \"colwise\"}", mesh);
  differentiate(g);
  assert_ok(g, xt_run1(g, &in, 1, out1, NWRT + 1));
  differentiate(s);

  float loss[MAXW], got[MAXW][NWRT][H * 16];
  ccg_exec_tensor outs[MAXW][NWRT + 1], *outp[MAXW];
  const ccg_exec_tensor *ins[MAXW];
  for (int r = 0; r < W; r++) {
    outs[r][0] = xt_out("loss", &loss[r], sizeof loss[r]);
    for (int i = 0; i < NWRT; i++)
      outs[r][i + 1] = xt_out(gname[i], got[r][i], sizeof got[r][i]);
    ins[r] = &in;
    outp[r] = outs[r];
  }
  assert_ok(s, ccg_exec_run_local(s, W, NULL, ins, 1, outp, NWRT + 1, NULL));
  /* rank r holds q head block r of W and key/value block r / rep of W / rep
   * (rep: ranks per key/value head) */
  int64_t rep = W > kv ? W / kv : 1;
  const int64_t wcols[NWRT] = {NH * HD, kv * HD, kv * HD, kv * HD};
  for (int r = 0; r < W; r++) {
    rel_close(&loss[r], &want_loss, 1, "loss");
    for (int i = 0; i < NWRT; i++) {
      int64_t chunks = i == 0 ? W : W / rep, blk = i == 0 ? r : r / rep;
      int64_t c = wcols[i] / chunks;
      float exp[H * 16];
      for (int64_t row = 0; row < wrows[i]; row++)
        memcpy(exp + row * c, want[i] + row * wcols[i] + blk * c,
               (size_t)c * sizeof *exp);
      char what[160];
      snprintf(what, sizeof what, "tp=%d kv=%lld rank %d %s", W, (long long)kv,
               r, gname[i]);
      rel_close(got[r][i], exp, (size_t)(wrows[i] * c), what);
    }
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

static void gqa_tp2_one_head_per_rank(void **state) {
  (void)state;
  check_tp(2, 2);
}

static void gqa_tp4_heads_shared_by_two_ranks(void **state) {
  (void)state;
  check_tp(4, 2);
}

/* Multi-query attention: one key/value head, on every rank. */
static void mqa_tp2_and_tp4(void **state) {
  (void)state;
  check_tp(2, 1);
  check_tp(4, 1);
}

/* The key/value weights at tp=4 are each rank's head, no more: [16, 4]. */
static void gqa_tp4_weights_hold_one_head(void **state) {
  (void)state;
  ccg_graph *g = gqa_model(2);
  ccg_graph *s = xt_shard(
      g, "{\"attn.o_proj\": \"rowwise\", \"attn.*\": \"colwise\"}", "tp=4");
  ccg_value_id v;
  assert_ok(s, ccg_graph_find_value(s, "attn.k_proj.weight", &v));
  assert_string_equal(ccg_test_shape(s, v), "[16,4]");
  assert_ok(s, ccg_graph_find_value(s, "attn.v_proj.bias", &v));
  assert_string_equal(ccg_test_shape(s, v), "[4]");
  /* no key/value gather: only the rowwise output's AllReduce */
  size_t gathers = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(s); i++)
    gathers += ccg_node_op(s, (ccg_node_id)i) == CCG_OP_ALL_GATHER;
  assert_int_equal(gathers, 0);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gqa_tp2_one_head_per_rank),
      cmocka_unit_test(gqa_tp4_heads_shared_by_two_ranks),
      cmocka_unit_test(mqa_tp2_and_tp4),
      cmocka_unit_test(gqa_tp4_weights_hold_one_head),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
