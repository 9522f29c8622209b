/* A Megatron GPT block (LayerNorm, causal self-attention, LayerNorm, Gelu
 * MLP, two residuals) with tensor and sequence parallelism over tp=W:
 *   x [S/W, B, H]        each rank holds S/W of the sequence
 *   -> LayerNorm -> all-gather S (gather_from_sequence_parallel_region)
 *   -> QKV MatMul with the rank's heads' columns [H, 3H/W] -> attention
 *   -> projection with the rank's rows [H/W, H]
 *   -> reduce-scatter S (reduce_scatter_to_sequence_parallel_region)
 *   -> + residual -> the same for the MLP (fc1 columns, fc2 rows)
 *   y [S/W, B, H]
 * The forward and the backward (ccg_backward, loss = sum of y) run on W
 * local ranks, each with its own weight shards stored in the graph
 * (ccg_graph_set_initializer_rank_data), and are compared with the
 * unsharded block run on one rank: the output, the input gradient and the
 * sharded weights' gradients. With --out DIR it also writes one ONNX model
 * per rank, which `ccgraph verify DIR` checks.
 * usage: transformer_block_sp [--tp W] [--out DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

enum { S = 8, B = 2, H = 16, HEADS = 4, F = 64, NP = 13, MAXW = 8 };

/* How tp splits a parameter, seen as [rows, cols]: copied, by columns, by
 * columns within each of the Q, K and V thirds, or by rows. */
typedef enum { REP, COL, COL3, ROW } split;
typedef struct param {
  const char *name;
  int nd;
  int64_t rows, cols;
  split how;
} param;
static const param params[NP] = {
    {"ln1.scale", 1, 1, H, REP},       {"ln1.bias", 1, 1, H, REP},
    {"qkv.weight", 2, H, 3 * H, COL3}, {"qkv.bias", 1, 1, 3 * H, COL3},
    {"proj.weight", 2, H, H, ROW},     {"proj.bias", 1, 1, H, REP},
    {"ln2.scale", 1, 1, H, REP},       {"ln2.bias", 1, 1, H, REP},
    {"fc1.weight", 2, H, F, COL},      {"fc1.bias", 1, 1, F, COL},
    {"fc2.weight", 2, F, H, ROW},      {"fc2.bias", 1, 1, H, REP},
    {"attn_mask", 2, S, S, REP}};
/* The sharded weights whose gradients are compared (and x's). */
static const char *const wrt[] = {"x", "qkv.weight", "proj.weight",
                                  "fc1.weight", "fc2.weight"};
enum { NW = sizeof wrt / sizeof *wrt };

static int64_t local_rows(const param *p, int w) {
  return p->how == ROW ? p->rows / w : p->rows;
}
static int64_t local_cols(const param *p, int w) {
  return p->how == COL || p->how == COL3 ? p->cols / w : p->cols;
}
/* Where element (i, j) of rank r's shard lies in the full parameter. */
static int64_t full_index(const param *p, int w, int r, int64_t i, int64_t j) {
  int64_t lc = local_cols(p, w);
  switch (p->how) {
  case ROW:
    return (r * (p->rows / w) + i) * p->cols + j;
  case COL:
    return i * p->cols + r * lc + j;
  case COL3: {
    int64_t part = lc / 3; /* this rank's width in each of Q, K, V */
    return i * p->cols + (j / part) * (p->cols / 3) + r * part + j % part;
  }
  default:
    return i * p->cols + j;
  }
}

/* Deterministic data: the sample's output does not depend on a seed. */
static void fill(float *v, int64_t n, int seed, float scale, float shift) {
  for (int64_t i = 0; i < n; i++)
    v[i] = shift + scale * (float)((i * 7919 + seed * 104729) % 97 - 48) / 48;
}

static float *full_data(int i) {
  const param *p = &params[i];
  float *v = malloc((size_t)(p->rows * p->cols) * sizeof *v);
  if (!v)
    return NULL;
  if (strcmp(p->name, "attn_mask") == 0) {
    for (int a = 0; a < S; a++) /* causal: a position sees itself and before */
      for (int b = 0; b < S; b++)
        v[a * S + b] = b <= a ? 0.0f : -1e9f;
  } else {
    fill(v, p->rows * p->cols, i, strstr(p->name, "scale") ? 0.2f : 0.3f,
         strstr(p->name, "scale") ? 1.0f : 0.0f);
  }
  return v;
}

static ccg_tensor shard_of(const param *p, const float *full, int w, int r,
                           float *dst) {
  int64_t lr = local_rows(p, w), lc = local_cols(p, w);
  for (int64_t i = 0; i < lr; i++)
    for (int64_t j = 0; j < lc; j++)
      dst[i * lc + j] = full[full_index(p, w, r, i, j)];
  ccg_tensor t = {CCG_DTYPE_F32, p->nd, {0}, dst};
  t.dims[0] = p->nd == 1 ? lc : lr;
  t.dims[1] = lc;
  return t;
}

/* The block and its backward on mesh tp=w, rank r's shards stored for
 * every rank. Returns the status; the message is on *out. */
static ccg_status build(int w, float *const *full, float *tmp,
                        ccg_graph **out) {
  ccg_graph *g;
  ccg_status st = ccg_graph_new(NULL, &g);
  if (st != CCG_STATUS_OK)
    return st;
  *out = g;
  char spec[16];
  snprintf(spec, sizeof spec, "tp=%d", w);
  ccg_mesh mesh;
  if ((st = ccg_mesh_parse(spec, &mesh)) || (st = ccg_graph_set_mesh(g, &mesh)))
    return st;
  bool sp = w > 1;
  ccg_shape xs = {3, {ccg_dim_num(S / w), ccg_dim_num(B), ccg_dim_num(H)}};
  ccg_value_id x, y, v[NP];
  if ((st = ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x)))
    return st;
  for (int i = 0; i < NP; i++) {
    ccg_tensor t = shard_of(&params[i], full[i], w, 0, tmp);
    if ((st = ccg_graph_add_initializer(g, params[i].name, &t, &v[i])))
      return st;
    for (int r = 0; r < w && w > 1; r++) {
      t = shard_of(&params[i], full[i], w, r, tmp);
      if ((st = ccg_graph_set_initializer_rank_data(g, v[i], r, &t)))
        return st;
    }
  }
  ccg_megatron_gpt_block_params p = {v[0], v[1], v[2], v[3],  v[4],  v[5], v[6],
                                     v[7], v[8], v[9], v[10], v[11], v[12]};
  ccg_megatron_gpt_block_options o = CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT;
  o.sequence_parallel = sp;
  o.heads = HEADS;
  ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
  bo.wrt = wrt;
  bo.n_wrt = NW;
  if ((st = ccg_megatron_gpt_block(g, x, &p, &o, &y)) ||
      (st = ccg_graph_add_output(g, y)))
    return st;
  bo.loss = y;
  if ((st = ccg_backward(g, &bo)) || (st = ccg_graph_validate(g)))
    return st;
  return CCG_STATUS_OK;
}

/* Runs g on w ranks: x's rows of rank r in, y and the gradients out. */
static ccg_status run(ccg_graph *g, int w, const float *x, float **res) {
  ccg_exec_tensor in[MAXW], outs[MAXW][NW + 1];
  const ccg_exec_tensor *inp[MAXW];
  ccg_exec_tensor *outp[MAXW];
  char names[NW][32];
  for (int k = 0; k < NW; k++)
    snprintf(names[k], sizeof names[k], "grad/%s", wrt[k]);
  for (int r = 0; r < w; r++) {
    int64_t n = (int64_t)S / w * B * H;
    memset(&in[r], 0, sizeof in[r]);
    in[r].name = "x";
    in[r].tensor = (ccg_tensor){CCG_DTYPE_F32, 3, {S / w, B, H}, x + r * n};
    memset(outs[r], 0, sizeof outs[r]);
    for (int k = 0; k <= NW; k++) {
      outs[r][k].name =
          k == 0 ? ccg_value_name(g, ccg_graph_output(g, 0)) : names[k - 1];
      outs[r][k].dst = res[r * (NW + 1) + k];
      outs[r][k].dst_bytes = (size_t)S * B * F * sizeof(float);
    }
    inp[r] = &in[r];
    outp[r] = outs[r];
  }
  return ccg_exec_run_local(g, w, NULL, inp, 1, outp, NW + 1, NULL);
}

int main(int argc, char **argv) {
  int w = 2;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tp") == 0 && i + 1 < argc) {
      w = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fprintf(stderr, "usage: transformer_block_sp [--tp W] [--out DIR]\n");
      return 1;
    }
  }
  if (w < 2 || w > MAXW || HEADS % w != 0 || S % w != 0) {
    fprintf(stderr,
            "transformer_block_sp: tp=%d must be 2..%d and divide %d heads "
            "and sequence %d\n",
            w, MAXW, HEADS, S);
    return 2;
  }
  float *full[NP], *tmp = malloc((size_t)S * B * F * sizeof *tmp);
  float *x = malloc((size_t)S * B * H * sizeof *x);
  float *res[(MAXW + 1) * (NW + 1)];
  int nres = (w + 1) * (NW + 1), rc = 0;
  for (int i = 0; i < NP; i++)
    full[i] = full_data(i);
  bool oom = !tmp || !x;
  for (int i = 0; i < NP; i++)
    oom |= !full[i];
  for (int i = 0; i < nres; i++)
    oom |= !(res[i] = malloc((size_t)S * B * F * sizeof(float)));
  ccg_graph *ref = NULL, *g = NULL;
  ccg_status st = oom ? CCG_STATUS_OOM : CCG_STATUS_OK;
  if (x)
    fill(x, S * B * H, 99, 1.0f, 0.0f);
  if (!st && (st = build(1, full, tmp, &ref)) == CCG_STATUS_OK)
    st = run(ref, 1, x, res);
  if (!st && (st = build(w, full, tmp, &g)) == CCG_STATUS_OK)
    st = run(g, w, x, res + NW + 1);
  if (!st && out)
    st = ccg_onnx_export_ranks(g, out, "transformer_block_sp", NULL);
  if (st) {
    const char *msg = ccg_last_error(g ? g : ref);
    fprintf(stderr, "transformer_block_sp: %s: %s\n", ccg_status_name(st),
            msg && *msg ? msg : ccg_last_error(NULL));
    rc = 3;
  }
  /* Rank r's y, grad/x: rows r*S/W.. of the reference; its weight
   * gradients: its shard of the reference's. */
  double worst[NW + 1] = {0}, big[NW + 1] = {0};
  for (int r = 0; r < w && !rc; r++)
    for (int k = 0; k <= NW; k++) {
      const float *got = res[(r + 1) * (NW + 1) + k], *want = res[k];
      const param *p = &params[0];
      for (int i = 0; k >= 2 && i < NP; i++)
        if (strcmp(params[i].name, wrt[k - 1]) == 0)
          p = &params[i];
      int64_t n =
          k < 2 ? (int64_t)S / w * B * H : local_rows(p, w) * local_cols(p, w);
      for (int64_t e = 0; e < n; e++) {
        int64_t lc = local_cols(p, w);
        int64_t f = k < 2 ? r * n + e : full_index(p, w, r, e / lc, e % lc);
        double d = fabs((double)got[e] - want[f]);
        worst[k] = d > worst[k] || d != d ? d : worst[k];
        big[k] = fmax(big[k], fabs((double)want[f]));
      }
    }
  for (int k = 0; k <= NW && !rc; k++) {
    printf("max |difference| %-16s %.3g (values up to %.3g)\n",
           k ? wrt[k - 1] : "y", worst[k], big[k]);
    if (!(worst[k] <= 1e-4))
      rc = 3;
  }
  if (!st)
    printf("%s: tp=%d sequence-parallel block, forward and backward, "
           "%s the unsharded block within 1e-4\n",
           rc ? "FAIL" : "ok", w, rc ? "differs from" : "equals");
  ccg_graph_free(g);
  ccg_graph_free(ref);
  for (int i = 0; i < NP; i++)
    free(full[i]);
  for (int i = 0; i < nres; i++)
    free(res[i]);
  free(tmp);
  free(x);
  return rc;
}
