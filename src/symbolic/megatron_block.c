/* A Megatron GPT layer (pre-LayerNorm self-attention and MLP, each with a
 * residual) built from the tensor-parallel linear layers, so that the demo,
 * tests and benchmarks share one definition of "a transformer block". The
 * layout is Megatron's: activations [S, B, H], sequence first, so that
 * sequence parallelism shards dim 0. */
#include <math.h>

#include "graph/internal.h"
#include "symbolic/internal.h"

typedef struct blk {
  ccg_graph *g;
  const ccg_megatron_gpt_block_options *o;
  const ccg_megatron_gpt_block_params *p;
  int64_t w;                 /* tensor-parallel group size */
  int64_t heads_local, head; /* heads on this rank, head size */
} blk;

/* LayerNorm over the hidden dim; under sequence parallelism its parameters
 * see only this rank's tokens, so their gradients are all-reduced. */
static ccg_status layer_norm(blk *b, ccg_value_id x, ccg_value_id scale,
                             ccg_value_id bias, ccg_value_id *y) {
  if (b->o->sequence_parallel) {
    CCG_CHECK(
        ccg_mark_sequence_parallel_param(b->g, scale, b->o->group, &scale));
    CCG_CHECK(ccg_mark_sequence_parallel_param(b->g, bias, b->o->group, &bias));
  }
  return ccg_layer_norm(b->g, x, scale, bias, -1, b->o->epsilon, y);
}

static ccg_status scalar(ccg_graph *g, const char *name, float v,
                         ccg_value_id *out) {
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &v};
  return ccg__add_const(g, &t, name, out);
}

/* [S, B, heads*D] -> [B, heads, S, D] (or [B, heads, D, S] for keys). */
static ccg_status to_heads(blk *b, ccg_value_id x, bool keys,
                           ccg_value_id *out) {
  int64_t dims[4] = {0, 0, b->heads_local, b->head};
  static const int64_t qv[4] = {1, 2, 0, 3}, k[4] = {1, 2, 3, 0};
  CCG_CHECK(ccg_reshape_to(b->g, x, dims, 4, &x));
  return ccg_transpose(b->g, x, keys ? k : qv, 4, out);
}

static ccg_status attention(blk *b, ccg_value_id x, ccg_value_id *out) {
  ccg_graph *g = b->g;
  const ccg_megatron_gpt_block_params *p = b->p;
  ccg_megatron_linear_options lo = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  lo.group = b->o->group;
  lo.sequence_parallel = b->o->sequence_parallel;
  ccg_value_id h, qkv[3], q, k, v, s;
  CCG_CHECK(layer_norm(b, x, p->ln1_scale, p->ln1_bias, &h));
  CCG_CHECK(ccg_megatron_column_parallel_linear(g, h, p->qkv_weight,
                                                p->qkv_bias, &lo, &h));
  CCG_CHECK(ccg_split(g, h, -1, NULL, 3, qkv));
  CCG_CHECK(to_heads(b, qkv[0], false, &q));
  CCG_CHECK(to_heads(b, qkv[1], true, &k));
  CCG_CHECK(to_heads(b, qkv[2], false, &v));
  CCG_CHECK(ccg_matmul(g, q, k, &s)); /* [B, heads, S, S] */
  ccg_value_id c;
  CCG_CHECK(scalar(g, "attn_scale", 1.0f / sqrtf((float)b->head), &c));
  CCG_CHECK(ccg_mul(g, s, c, &s));
  if (p->attn_mask != CCG_NONE)
    CCG_CHECK(ccg_add(g, s, p->attn_mask, &s));
  CCG_CHECK(ccg_softmax(g, s, -1, &s));
  CCG_CHECK(ccg_matmul(g, s, v, &h)); /* [B, heads, S, D] */
  static const int64_t back[4] = {2, 0, 1, 3};
  CCG_CHECK(ccg_transpose(g, h, back, 4, &h));
  int64_t dims[3] = {0, 0, b->heads_local * b->head};
  CCG_CHECK(ccg_reshape_to(g, h, dims, 3, &h));
  CCG_CHECK(ccg_megatron_row_parallel_linear(g, h, p->proj_weight, p->proj_bias,
                                             &lo, &h));
  return ccg_add(g, x, h, out);
}

static ccg_status mlp(blk *b, ccg_value_id x, ccg_value_id *out) {
  ccg_graph *g = b->g;
  const ccg_megatron_gpt_block_params *p = b->p;
  ccg_megatron_linear_options lo = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  lo.group = b->o->group;
  lo.sequence_parallel = b->o->sequence_parallel;
  ccg_value_id h;
  CCG_CHECK(layer_norm(b, x, p->ln2_scale, p->ln2_bias, &h));
  CCG_CHECK(ccg_megatron_column_parallel_linear(g, h, p->fc1_weight,
                                                p->fc1_bias, &lo, &h));
  CCG_CHECK(ccg_gelu(g, h, b->o->gelu_tanh ? "tanh" : "none", &h));
  CCG_CHECK(ccg_megatron_row_parallel_linear(g, h, p->fc2_weight, p->fc2_bias,
                                             &lo, &h));
  return ccg_add(g, x, h, out);
}

/* The tensor-parallel group size and the per-rank head split. */
static ccg_status setup(blk *b) {
  ccg_graph *g = b->g;
  const char *axes = b->o->group ? b->o->group : "tp";
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  unsigned mask;
  if (!mesh)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "the graph has no device mesh (set one with "
                      "ccg_graph_set_mesh)");
  if (ccg_mesh_axes_mask(mesh, axes, &mask) != CCG_STATUS_OK)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG, "%s",
                      ccg_last_error(NULL));
  b->w = ccg_mesh_group_size(mesh, mask);
  const ccg_shape *qs = ccg_value_shape(g, b->p->qkv_weight);
  if (!qs || qs->rank != 2 || ccg_dim_is_sym(qs->dims[1]))
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "the fused QKV weight must be [hidden, 3*hidden/%lld] "
                      "with a numeric last dim",
                      (long long)b->w);
  int64_t cols = qs->dims[1].size, heads = b->o->heads;
  if (heads <= 0 || heads % b->w != 0)
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "%lld attention heads do not divide over the %lld ranks "
                      "of '%s'",
                      (long long)heads, (long long)b->w, axes);
  b->heads_local = heads / b->w;
  if (cols % (3 * b->heads_local) != 0)
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "the fused QKV weight has %lld columns, not 3 x %lld "
                      "local heads x a head size",
                      (long long)cols, (long long)b->heads_local);
  b->head = cols / (3 * b->heads_local);
  return CCG_STATUS_OK;
}

ccg_status ccg_megatron_gpt_block(ccg_graph *g, ccg_value_id x,
                                  const ccg_megatron_gpt_block_params *params,
                                  const ccg_megatron_gpt_block_options *opts,
                                  ccg_value_id *out) {
  if (!g || !params || !opts || !out)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "megatron GPT block: graph, params, options and out "
                      "must be given");
  if (opts->size < sizeof *opts)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "megatron GPT block: options size is wrong (use "
                      "CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT)");
  blk b = {g, opts, params, 1, 0, 0};
  ccg__mark m = ccg__mark_get(g);
  ccg_status st = setup(&b);
  ccg_value_id h = x;
  if (st == CCG_STATUS_OK)
    st = attention(&b, x, &h);
  if (st == CCG_STATUS_OK)
    st = mlp(&b, h, &h);
  if (st != CCG_STATUS_OK) {
    ccg__rollback(g, &m);
    ccg__error_prefix(&g->ctx, "megatron GPT block");
    return st;
  }
  *out = h;
  return CCG_STATUS_OK;
}
