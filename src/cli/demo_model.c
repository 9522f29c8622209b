/* The demo's model: a Megatron GPT block (ccg_megatron_gpt_block) with
 * deterministic parameters, how each parameter is sharded over the
 * tensor-parallel ranks (the same rule cuts a gradient of the unsharded
 * model into the part a rank must hold), and the graph of one rank's
 * forward step with its loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/demo.h"

const char *const demo_param_names[DEMO_NP] = {
    "ln1.scale",   "ln1.bias",  "qkv.weight", "qkv.bias",
    "proj.weight", "proj.bias", "ln2.scale",  "ln2.bias",
    "fc1.weight",  "fc1.bias",  "fc2.weight", "fc2.bias"};

/* The unsharded shape of parameter i. */
static void full_dims(const demo_sizes *z, int i, int *rank, int64_t d[2]) {
  int64_t H = z->hidden, F = z->ffn;
  static const int ranks[DEMO_NP] = {1, 1, 2, 1, 2, 1, 1, 1, 2, 1, 2, 1};
  int64_t d0[DEMO_NP] = {H, H, H, 3 * H, H, H, H, H, H, F, F, H};
  int64_t d1[DEMO_NP] = {0, 0, 3 * H, 0, H, 0, 0, 0, F, 0, H, 0};
  *rank = ranks[i];
  d[0] = d0[i];
  d[1] = d1[i];
}

/* Deterministic values in [-1, 1) (a linear congruential generator). */
static void fill(float *v, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
  }
}

int demo_params_new(const demo_sizes *z, uint32_t seed, demo_tensor *p) {
  memset(p, 0, DEMO_NP * sizeof *p);
  for (int i = 0; i < DEMO_NP; i++) {
    full_dims(z, i, &p[i].rank, p[i].dims);
    size_t n =
        (size_t)p[i].dims[0] * (size_t)(p[i].rank == 2 ? p[i].dims[1] : 1);
    if (!(p[i].data = malloc(n * sizeof(float))))
      return -1;
    fill(p[i].data, n, seed + (uint32_t)i);
    bool scale = i == 0 || i == 6; /* LayerNorm scales near 1 */
    bool weight = p[i].rank == 2;  /* weights scaled by 1/sqrt(fan-in) */
    float k = weight ? 1.0f / sqrtf((float)p[i].dims[0]) : 0.1f;
    for (size_t e = 0; e < n; e++)
      p[i].data[e] = scale ? 1.0f + 0.1f * p[i].data[e] : k * p[i].data[e];
  }
  return 0;
}

void demo_tensors_free(demo_tensor *p, int n) {
  for (int i = 0; i < n; i++) {
    free(p[i].data);
    p[i].data = NULL;
  }
}

/* Columns [c0, c0 + nc) of a [rows, cols] matrix into out. */
static void take_cols(const float *m, int64_t rows, int64_t cols, int64_t c0,
                      int64_t nc, float *out) {
  for (int64_t r = 0; r < rows; r++)
    memcpy(out + r * nc, m + r * cols + c0, (size_t)nc * sizeof *out);
}

size_t demo_shard_dims(const demo_sizes *z, int i, int w, demo_tensor *out) {
  int64_t H = z->hidden, F = z->ffn, hc = H / w, fc = F / w;
  full_dims(z, i, &out->rank, out->dims);
  out->data = NULL;
  switch (i) {
  case DEMO_QKV_W: /* this rank's heads of q, k and v, side by side */
    out->dims[1] = 3 * hc;
    break;
  case DEMO_QKV_B:
    out->dims[0] = 3 * hc;
    break;
  case DEMO_PROJ_W: /* rows of the row-parallel weights */
    out->dims[0] = hc;
    break;
  case DEMO_FC1_W:
    out->dims[1] = fc;
    break;
  case DEMO_FC1_B:
  case DEMO_FC2_W:
    out->dims[0] = fc;
    break;
  default: /* replicated */
    break;
  }
  return (size_t)out->dims[0] * (size_t)(out->rank == 2 ? out->dims[1] : 1);
}

int demo_shard(const demo_sizes *z, int i, const float *full, int w, int r,
               demo_tensor *out) {
  int64_t H = z->hidden, F = z->ffn, hc = H / w, fc = F / w;
  size_t n = demo_shard_dims(z, i, w, out);
  if (!(out->data = malloc(n * sizeof(float))))
    return -1;
  switch (i) {
  case DEMO_QKV_W:
    for (int k = 0; k < 3; k++)
      for (int64_t row = 0; row < H; row++)
        memcpy(out->data + row * 3 * hc + k * hc,
               full + row * 3 * H + k * H + r * hc, (size_t)hc * sizeof(float));
    break;
  case DEMO_QKV_B:
    for (int k = 0; k < 3; k++)
      memcpy(out->data + k * hc, full + k * H + r * hc,
             (size_t)hc * sizeof(float));
    break;
  case DEMO_PROJ_W:
    memcpy(out->data, full + r * hc * H, n * sizeof(float));
    break;
  case DEMO_FC1_W:
    take_cols(full, H, F, r * fc, fc, out->data);
    break;
  case DEMO_FC1_B:
    memcpy(out->data, full + r * fc, n * sizeof(float));
    break;
  case DEMO_FC2_W:
    memcpy(out->data, full + r * fc * H, n * sizeof(float));
    break;
  default:
    memcpy(out->data, full, n * sizeof(float));
    break;
  }
  return 0;
}

/* An Identity whose output is called `name`: the demo's values get names
 * a user can ask for. */
static ccg_status named(ccg_graph *g, ccg_value_id v, const char *name,
                        ccg_value_id *out) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  const char *names[1] = {name};
  d.op = "Identity";
  d.inputs = &v;
  d.n_inputs = 1;
  d.output_names = names;
  ccg_node_id n;
  ccg_status st = ccg_graph_add_node(g, &d, &n);
  if (st == CCG_STATUS_OK)
    *out = ccg_node_output(g, n, 0);
  return st;
}

/* A causal mask [S, S]: 0 on and below the diagonal, -1e9 above. */
static ccg_status add_mask(ccg_graph *g, int64_t S, ccg_value_id *out) {
  float *m = malloc((size_t)(S * S) * sizeof *m);
  if (!m)
    return CCG_STATUS_OOM;
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < S; j++)
      m[i * S + j] = j <= i ? 0.0f : -1e9f;
  ccg_tensor t = {CCG_DTYPE_F32, 2, {S, S}, m};
  ccg_status st = ccg_graph_add_initializer(g, "attn_mask", &t, out);
  free(m);
  return st;
}

ccg_status demo_build(const demo_sizes *z, int w, const demo_tensor *full,
                      ccg_graph **out) {
  ccg_graph_options go = CCG_GRAPH_OPTIONS_INIT;
  go.name = "gpt_block";
  ccg_graph *g;
  ccg_status st = ccg_graph_new(&go, &g);
  if (st != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph demo: %s\n", ccg_last_error(NULL));
    return st;
  }
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%d", w);
  ccg_mesh mesh;
  bool sp = w > 1;
  int64_t rows = sp ? z->seq / w : z->seq;
  ccg_shape xs = {
      3, {ccg_dim_num(rows), ccg_dim_num(z->batch), ccg_dim_num(z->hidden)}};
  ccg_value_id x, dy, v[DEMO_NP + 1], y, loss;
  if ((st = ccg_mesh_parse(spec, &mesh)) != CCG_STATUS_OK) {
    fprintf(stderr, "ccgraph demo: %s\n", ccg_last_error(NULL));
    ccg_graph_free(g);
    return st;
  }
  if ((st = ccg_graph_set_mesh(g, &mesh)) != CCG_STATUS_OK ||
      (st = ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x)) ||
      (st = ccg_graph_add_input(g, "dy", CCG_DTYPE_F32, &xs, &dy)))
    goto fail;
  /* Each parameter with every rank's shard as that rank's own data. */
  for (int i = 0; i < DEMO_NP; i++) {
    for (int r = 0; r < w; r++) {
      demo_tensor s;
      if (demo_shard(z, i, full[i].data, w, r, &s) != 0) {
        st = CCG_STATUS_OOM;
        goto fail;
      }
      ccg_tensor t = {CCG_DTYPE_F32, s.rank, {s.dims[0], s.dims[1]}, s.data};
      st = r == 0 ? ccg_graph_add_initializer(g, demo_param_names[i], &t, &v[i])
                  : ccg_graph_set_initializer_rank_data(g, v[i], r, &t);
      free(s.data);
      if (st != CCG_STATUS_OK)
        goto fail;
    }
  }
  if ((st = add_mask(g, z->seq, &v[DEMO_NP])) != CCG_STATUS_OK)
    goto fail;
  ccg_megatron_gpt_block_params bp = {v[0],  v[1],  v[2],      v[3], v[4],
                                      v[5],  v[6],  v[7],      v[8], v[9],
                                      v[10], v[11], v[DEMO_NP]};
  ccg_megatron_gpt_block_options bo = CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT;
  bo.sequence_parallel = sp;
  bo.heads = z->heads;
  /* loss = sum(y * dy): its gradient with respect to y is dy. Each rank
   * sums its own sequence shard; the model's loss is the sum over ranks. */
  if ((st = ccg_megatron_gpt_block(g, x, &bp, &bo, &y)) != CCG_STATUS_OK ||
      (st = named(g, y, "y", &y)) != CCG_STATUS_OK ||
      (st = ccg_mul(g, y, dy, &loss)) != CCG_STATUS_OK ||
      (st = ccg_reduce_sum(g, loss, NULL, 0, false, &loss)) != CCG_STATUS_OK ||
      (st = named(g, loss, "loss", &loss)) != CCG_STATUS_OK ||
      (st = ccg_graph_add_output(g, y)) != CCG_STATUS_OK ||
      (st = ccg_graph_add_output(g, loss)) != CCG_STATUS_OK)
    goto fail;
  /* The backward: "grad/<name>" of every parameter and of x, from the
   * mapping rules of the block's collectives and the ops' own rules. */
  const char *wrt[DEMO_NP + 1];
  for (int i = 0; i < DEMO_NP; i++)
    wrt[i] = demo_param_names[i];
  wrt[DEMO_NP] = "x";
  ccg_backward_options bw = CCG_BACKWARD_OPTIONS_INIT;
  bw.loss = loss;
  bw.wrt = wrt;
  bw.n_wrt = DEMO_NP + 1;
  bw.add_outputs = true;
  if ((st = ccg_backward(g, &bw)) != CCG_STATUS_OK)
    goto fail;
  *out = g;
  return CCG_STATUS_OK;
fail:
  fprintf(stderr, "ccgraph demo: building the block on %s: %s\n", spec,
          ccg_last_error(g));
  ccg_graph_free(g);
  return st;
}
