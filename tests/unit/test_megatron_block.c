/* The Megatron GPT block (ccg_megatron_gpt_block): built on tp = 2 and 4,
 * with and without sequence parallelism, and run on local ranks, each
 * rank's output equals its part of the unsharded block run on one rank;
 * plus the block's argument errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "test_util.h"
#include "exec_test_util.h"

enum { S = 8, B = 2, H = 16, HEADS = 4, F = 64, NP = 13 };

static const char *const names[NP] = {
    "ln1.scale",  "ln1.bias",  "qkv.weight", "qkv.bias",   "proj.weight",
    "proj.bias",  "ln2.scale", "ln2.bias",   "fc1.weight", "fc1.bias",
    "fc2.weight", "fc2.bias",  "attn_mask"};

/* The unsharded parameters. */
typedef struct full {
  float ln1s[H], ln1b[H], wq[H * H], wk[H * H], wv[H * H], bq[H], bk[H], bv[H],
      wo[H * H], bo[H], ln2s[H], ln2b[H], w1[H * F], b1[F], w2[F * H], b2[H],
      mask[S * S], x[S * B * H];
} full;

/* One rank's parameter shards and their shapes. */
typedef struct shard {
  float *data[NP];
  int rank[NP];
  int64_t dims[NP][2];
} shard;

static void make_full(full *p) {
  float *all[] = {p->ln1s, p->ln1b, p->wq, p->wk, p->wv,   p->bq,
                  p->bk,   p->bv,   p->wo, p->bo, p->ln2s, p->ln2b,
                  p->w1,   p->b1,   p->w2, p->b2, p->x};
  size_t n[] = {H, H, H * H, H * H, H * H, H,     H, H,        H * H,
                H, H, H,     H * F, F,     F * H, H, S * B * H};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    xt_fill(all[i], n[i], (uint32_t)(17 + i));
  for (int i = 0; i < H; i++) { /* LayerNorm scales near 1 */
    p->ln1s[i] += 1.5f;
    p->ln2s[i] += 1.5f;
  }
  for (int i = 0; i < S; i++)
    for (int j = 0; j < S; j++)
      p->mask[i * S + j] = j <= i ? 0.0f : -1e9f;
}

static float *fdup(const float *v, size_t n) {
  float *c = malloc(n * sizeof *c);
  assert_non_null(c);
  memcpy(c, v, n * sizeof *c);
  return c;
}

/* Columns [c0, c0+nc) of a [rows, cols] matrix. */
static float *cols(const float *m, int rows, int ncols, int c0, int nc) {
  float *c = malloc((size_t)rows * nc * sizeof *c);
  assert_non_null(c);
  for (int r = 0; r < rows; r++)
    memcpy(c + (size_t)r * nc, m + (size_t)r * ncols + c0, nc * sizeof *c);
  return c;
}

static void set(shard *s, int i, float *d, int rank, int64_t d0, int64_t d1) {
  s->data[i] = d;
  s->rank[i] = rank;
  s->dims[i][0] = d0;
  s->dims[i][1] = d1;
}

/* Rank r of w: its heads' query, key and value columns side by side, its
 * rows of the projection, its columns of fc1 and rows of fc2. */
static void make_shard(const full *p, int w, int r, shard *s) {
  int hc = H / w, fc = F / w;
  set(s, 0, fdup(p->ln1s, H), 1, H, 0);
  set(s, 1, fdup(p->ln1b, H), 1, H, 0);
  float *qkv = malloc((size_t)H * 3 * hc * sizeof *qkv);
  float *bqkv = malloc((size_t)3 * hc * sizeof *bqkv);
  assert_non_null(qkv);
  assert_non_null(bqkv);
  const float *ws[3] = {p->wq, p->wk, p->wv}, *bs[3] = {p->bq, p->bk, p->bv};
  for (int k = 0; k < 3; k++) {
    for (int row = 0; row < H; row++)
      memcpy(qkv + (size_t)row * 3 * hc + k * hc, ws[k] + row * H + r * hc,
             hc * sizeof *qkv);
    memcpy(bqkv + k * hc, bs[k] + r * hc, hc * sizeof *bqkv);
  }
  set(s, 2, qkv, 2, H, 3 * hc);
  set(s, 3, bqkv, 1, 3 * hc, 0);
  set(s, 4, fdup(p->wo + r * hc * H, (size_t)hc * H), 2, hc, H);
  set(s, 5, fdup(p->bo, H), 1, H, 0);
  set(s, 6, fdup(p->ln2s, H), 1, H, 0);
  set(s, 7, fdup(p->ln2b, H), 1, H, 0);
  set(s, 8, cols(p->w1, H, F, r * fc, fc), 2, H, fc);
  set(s, 9, fdup(p->b1 + r * fc, fc), 1, fc, 0);
  set(s, 10, fdup(p->w2 + r * fc * H, (size_t)fc * H), 2, fc, H);
  set(s, 11, fdup(p->b2, H), 1, H, 0);
  set(s, 12, fdup(p->mask, S * S), 2, S, S);
}

static void free_shard(shard *s) {
  for (int i = 0; i < NP; i++)
    free(s->data[i]);
}

/* The block on mesh tp=w with rank 0's shards as initializer data. */
static ccg_graph *build(const shard *s0, int w, bool sp) {
  ccg_graph *g;
  assert_ok(NULL, ccg_graph_new(NULL, &g));
  ccg_mesh m;
  char spec[16];
  snprintf(spec, sizeof spec, "tp=%d", w);
  assert_ok(NULL, ccg_mesh_parse(spec, &m));
  assert_ok(g, ccg_graph_set_mesh(g, &m));
  ccg_shape xs = {
      3, {ccg_dim_num(sp ? S / w : S), ccg_dim_num(B), ccg_dim_num(H)}};
  ccg_value_id x, y, v[NP];
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  for (int i = 0; i < NP; i++) {
    ccg_tensor t = {CCG_DTYPE_F32,
                    s0->rank[i],
                    {s0->dims[i][0], s0->dims[i][1]},
                    s0->data[i]};
    assert_ok(g, ccg_graph_add_initializer(g, names[i], &t, &v[i]));
  }
  ccg_megatron_gpt_block_params p = {v[0], v[1], v[2], v[3],  v[4],  v[5], v[6],
                                     v[7], v[8], v[9], v[10], v[11], v[12]};
  ccg_megatron_gpt_block_options o = CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT;
  o.sequence_parallel = sp;
  o.heads = HEADS;
  assert_ok(g, ccg_megatron_gpt_block(g, x, &p, &o, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  assert_ok(g, ccg_graph_validate(g));
  return g;
}

/* rank_data: each rank's shards are stored in the graph
 * (ccg_graph_set_initializer_rank_data) instead of given to the run. */
static void check(int w, bool sp, bool rank_data) {
  full *p = malloc(sizeof *p);
  assert_non_null(p);
  make_full(p);
  /* The reference: the whole block on one rank. */
  shard one;
  make_shard(p, 1, 0, &one);
  ccg_graph *ref = build(&one, 1, false);
  static float want[S * B * H];
  ccg_exec_tensor in1 = XT_F32("x", p->x, S, B, H);
  ccg_exec_tensor out1 =
      xt_out(ccg_value_name(ref, ccg_graph_output(ref, 0)), want, sizeof want);
  assert_ok(ref, xt_run1(ref, &in1, 1, &out1, 1));

  shard sh[4];
  for (int r = 0; r < w; r++)
    make_shard(p, w, r, &sh[r]);
  ccg_graph *g = build(&sh[0], w, sp);
  if (rank_data) {
    for (int r = 0; r < w; r++)
      for (int i = 0; i < NP; i++) {
        ccg_value_id v;
        assert_ok(g, ccg_graph_find_value(g, names[i], &v));
        ccg_tensor t = {CCG_DTYPE_F32,
                        sh[r].rank[i],
                        {sh[r].dims[i][0], sh[r].dims[i][1]},
                        sh[r].data[i]};
        assert_ok(g, ccg_graph_set_initializer_rank_data(g, v, r, &t));
      }
  }
  const char *yname = ccg_value_name(g, ccg_graph_output(g, 0));
  int rows = sp ? S / w : S;
  static float got[4][S * B * H];
  ccg_exec_tensor ins[4][NP + 1], outs[4][1];
  const ccg_exec_tensor *inp[4];
  ccg_exec_tensor *outp[4];
  for (int r = 0; r < w; r++) {
    ins[r][0] =
        XT_F32("x", p->x + (sp ? (size_t)r * rows * B * H : 0), rows, B, H);
    for (int i = 0; i < NP; i++)
      ins[r][i + 1] = xt_in(names[i], CCG_DTYPE_F32, sh[r].data[i],
                            sh[r].rank[i], sh[r].dims[i]);
    outs[r][0] = xt_out(yname, got[r], (size_t)rows * B * H * sizeof(float));
    inp[r] = ins[r];
    outp[r] = outs[r];
  }
  assert_ok(g, ccg_exec_run_local(g, w, NULL, inp, rank_data ? 1 : NP + 1, outp,
                                  1, NULL));
  char what[64];
  for (int r = 0; r < w; r++) {
    snprintf(what, sizeof what, "tp=%d%s rank %d", w, sp ? " sp" : "", r);
    xt_close(got[r], want + (sp ? (size_t)r * rows * B * H : 0),
             (size_t)rows * B * H, 1e-5, 1e-4, what);
  }
  ccg_graph_free(g);
  ccg_graph_free(ref);
  for (int r = 0; r < w; r++)
    free_shard(&sh[r]);
  free_shard(&one);
  free(p);
}

static void test_tp2(void **state) {
  (void)state;
  check(2, false, false);
}
static void test_tp4(void **state) {
  (void)state;
  check(4, false, false);
}
static void test_tp2_sp(void **state) {
  (void)state;
  check(2, true, false);
}
static void test_tp4_sp(void **state) {
  (void)state;
  check(4, true, false);
}
/* The executor takes each rank's own initializer data from the graph. */
static void test_tp4_sp_rank_data(void **state) {
  (void)state;
  check(4, true, true);
}

/* The block exported as one ONNX model per rank (each with its own
 * shards), imported back and run one graph per rank: the same outputs as
 * the SPMD graph, several steps, a step time; and the runner's errors. */
static void test_per_rank_models(void **state) {
  (void)state;
  enum { W = 2 };
  full *p = malloc(sizeof *p);
  assert_non_null(p);
  make_full(p);
  shard sh[W];
  for (int r = 0; r < W; r++)
    make_shard(p, W, r, &sh[r]);
  ccg_graph *g = build(&sh[0], W, true);
  for (int r = 0; r < W; r++)
    for (int i = 0; i < NP; i++) {
      ccg_value_id v;
      assert_ok(g, ccg_graph_find_value(g, names[i], &v));
      ccg_tensor t = {CCG_DTYPE_F32,
                      sh[r].rank[i],
                      {sh[r].dims[i][0], sh[r].dims[i][1]},
                      sh[r].data[i]};
      assert_ok(g, ccg_graph_set_initializer_rank_data(g, v, r, &t));
    }
  char dir[] = "/tmp/ccg_block_XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_ok(g, ccg_onnx_export_ranks(g, dir, "block", NULL));
  ccg_graph *ranks[W];
  for (int r = 0; r < W; r++) {
    char path[128];
    snprintf(path, sizeof path, "%s/block.rank%d.onnx", dir, r);
    assert_ok(NULL, ccg_onnx_import_file(path, NULL, &ranks[r]));
    unlink(path);
    snprintf(path, sizeof path, "%s/block.rank%d.onnx.data", dir, r);
    unlink(path); /* mapped weights stay valid */
  }
  rmdir(dir);
  enum { ROWS = S / W };
  const char *yname = ccg_value_name(g, ccg_graph_output(g, 0));
  static float want[W][ROWS * B * H], got[W][ROWS * B * H];
  ccg_exec_tensor ins[W][1], outs[W][1], outs2[W][1];
  const ccg_exec_tensor *inp[W];
  ccg_exec_tensor *outp[W], *outp2[W];
  for (int r = 0; r < W; r++) {
    ins[r][0] = XT_F32("x", p->x + (size_t)r * ROWS * B * H, ROWS, B, H);
    outs[r][0] = xt_out(yname, want[r], sizeof want[r]);
    outs2[r][0] = xt_out(yname, got[r], sizeof got[r]);
    inp[r] = ins[r];
    outp[r] = outs[r];
    outp2[r] = outs2[r];
  }
  assert_ok(g, ccg_exec_run_local(g, W, NULL, inp, 1, outp, 1, NULL));
  double secs = -1;
  assert_ok(NULL, ccg_exec_run_local_ranks(ranks, W, NULL, 3, inp, 1, outp2, 1,
                                           NULL, &secs));
  assert_true(secs > 0);
  for (int r = 0; r < W; r++)
    assert_memory_equal(got[r], want[r], sizeof got[r]);
  /* A rank count that is not the graphs' world, and a missing graph. */
  assert_fails(
      NULL, CCG_STATUS_INVALID_ARG,
      ccg_exec_run_local_ranks(ranks, 1, NULL, 1, inp, 1, outp2, 1, NULL, NULL),
      "world of 2 ranks, not 1");
  ccg_graph *holes[W] = {ranks[0], NULL};
  assert_fails(
      NULL, CCG_STATUS_INVALID_ARG,
      ccg_exec_run_local_ranks(holes, W, NULL, 1, inp, 1, outp2, 1, NULL, NULL),
      "no graph for rank 1");
  for (int r = 0; r < W; r++) {
    ccg_graph_free(ranks[r]);
    free_shard(&sh[r]);
  }
  ccg_graph_free(g);
  free(p);
}

/* Heads that do not divide, a QKV weight of the wrong width, no mesh: each
 * an error naming the cause, and the graph unchanged. */
static void test_errors(void **state) {
  (void)state;
  full *p = malloc(sizeof *p);
  assert_non_null(p);
  make_full(p);
  shard sh;
  make_shard(p, 2, 0, &sh);
  ccg_graph *g = build(&sh, 2, false);
  size_t nodes = ccg_graph_num_nodes(g);
  ccg_value_id v[NP];
  for (int i = 0; i < NP; i++)
    assert_ok(g, ccg_graph_find_value(g, names[i], &v[i]));
  ccg_value_id x, y;
  assert_ok(g, ccg_graph_find_value(g, "x", &x));
  ccg_megatron_gpt_block_params bp = {v[0],  v[1],  v[2], v[3], v[4],
                                      v[5],  v[6],  v[7], v[8], v[9],
                                      v[10], v[11], v[12]};
  ccg_megatron_gpt_block_options o = CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT;
  o.heads = 3;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_megatron_gpt_block(g, x, &bp, &o, &y),
               "3 attention heads do not divide over the 2 ranks");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  o.heads = 6; /* 24 QKV columns are not 3 x 3 local heads x a size */
  assert_fails(g, CCG_STATUS_SHAPE, ccg_megatron_gpt_block(g, x, &bp, &o, &y),
               "fused QKV weight has 24 columns");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  o.heads = HEADS;
  o.group = "dp";
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_megatron_gpt_block(g, x, &bp, &o, &y), "dp");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
  free_shard(&sh);
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tp2),
      cmocka_unit_test(test_tp4),
      cmocka_unit_test(test_tp2_sp),
      cmocka_unit_test(test_tp4_sp),
      cmocka_unit_test(test_tp4_sp_rank_data),
      cmocka_unit_test(test_per_rank_models),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
