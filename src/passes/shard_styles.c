/* The plan's styles applied to one node of the source graph: colwise and
 * rowwise Linears (MatMul or Gemm with a weight) through the dtensor styles
 * of the mapping library, sequence-parallel LayerNorms, vocab-parallel
 * embeddings. replicate and ulysses act on every node of their module
 * (shard.c). */
#include <stdlib.h>
#include <string.h>

#include "passes/shard_internal.h"

static int norm_dim(int d, int rank) { return d < 0 ? d + rank : d; }

/* The entry's first output layout, or `dflt`; Shard dims normalized. Under
 * sequence parallel a Replicate output (rowwise's and vocab_parallel's
 * default) becomes `dflt`, the sequence shard (sh NULL: no override). */
static ccg_placement out_layout(const shard *sh, const ccg_plan_entry *e,
                                ccg_placement dflt, int rank) {
  ccg_placement p = dflt;
  if (e && e->output_layouts.n > 0 && e->output_layouts.present[0])
    p = e->output_layouts.p[0];
  if (sh && sh->sp && p.kind == CCG_PLACEMENT_REPLICATE &&
      dflt.kind == CCG_PLACEMENT_SHARD)
    p = dflt;
  if (p.kind == CCG_PLACEMENT_SHARD)
    p.dim = norm_dim(p.dim, rank);
  return p;
}

/* How many equal blocks a colwise output is used in: a Split of its last
 * dim into k parts, possibly after a bias Add or unary ops. */
static int split_blocks(const shard *sh, ccg_value_id v) {
  for (int step = 0; step < 4; step++) {
    size_t it = 0;
    ccg_node_id c;
    if (ccg_value_num_uses(sh->g, v) != 1 || sh->is_output[v] ||
        !ccg_value_next_use(sh->g, v, &it, &c, NULL))
      return 1;
    ccg_op op = ccg_node_op(sh->g, c);
    if (op == CCG_OP_SPLIT) {
      int64_t axis = 0;
      ccg_node_attr_int(sh->g, c, "axis", &axis);
      int rank = ccg_value_shape(sh->g, v)->rank;
      return norm_dim((int)axis, rank) == rank - 1
                 ? (int)ccg_node_num_outputs(sh->g, c)
                 : 1;
    }
    if (op != CCG_OP_ADD && op != CCG_OP_MUL && op != CCG_OP_IDENTITY &&
        op != CCG_OP_GELU && op != CCG_OP_RELU)
      return 1;
    v = ccg_node_output(sh->g, c, 0);
  }
  return 1;
}

/* Grouped-query attention: a colwise output reshaped (after a bias Add or
 * Cast) into h heads of its last dim. h dividing W, h < W, gives rep W / h
 * (each head on W / h ranks, docs/shard.md). Otherwise 1: W dividing h
 * gives each rank h / W heads; neither has the Reshape gather the heads
 * (ccgraph plan leaves such attention out). */
static ccg_status kv_rep(shard *sh, ccg_value_id v, int *rep) {
  ccg_graph *g = sh->g;
  *rep = 1;
  for (int step = 0; step < 4; step++) {
    size_t cursor = 0;
    ccg_node_id c = CCG_NONE;
    if (ccg_value_num_uses(g, v) != 1 || sh->is_output[v] ||
        !ccg_value_next_use(g, v, &cursor, &c, NULL))
      return CCG_STATUS_OK;
    ccg_op op = ccg_node_op(g, c);
    if (op == CCG_OP_ADD || op == CCG_OP_CAST || op == CCG_OP_IDENTITY) {
      v = ccg_node_output(g, c, 0);
      continue;
    }
    if (op != CCG_OP_RESHAPE || ccg_node_input(g, c, 0) != v)
      return CCG_STATUS_OK;
    const ccg_shape *in = ccg_value_shape(g, v);
    const ccg_shape *out = ccg_value_shape(g, ccg_node_output(g, c, 0));
    ccg_dim last = in->dims[in->rank - 1];
    if (ccg_dim_is_sym(last))
      return CCG_STATUS_OK;
    int64_t prod = 1;
    int j = out->rank;
    while (j > 0 && prod < last.size && !ccg_dim_is_sym(out->dims[j - 1]))
      prod *= out->dims[--j].size;
    if (prod != last.size || j == out->rank)
      return CCG_STATUS_OK;
    /* one head ([.., 1, head_dim]: multi-query attention) */
    if (j == out->rank - 1 && j > 0 && !ccg_dim_is_sym(out->dims[j - 1]) &&
        out->dims[j - 1].size == 1)
      j--;
    int64_t h = out->dims[j].size, W = sh->W;
    if (h % W == 0)
      return CCG_STATUS_OK;
    if (W % h != 0)
      return CCG_STATUS_OK; /* the Reshape gathers the heads */
    *rep = (int)(W / h);
    return CCG_STATUS_OK;
  }
  return CCG_STATUS_OK;
}

/* A Linear node: x @ w (MatMul) or Gemm(x, w, c) with transA = 0 and
 * alpha = beta = 1. false if n is not one with a weight. */
static ccg_status linear_parts(shard *sh, ccg_node_id n, bool *is_linear,
                               bool *trans_w, ccg_value_id *bias) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  *is_linear = false;
  *trans_w = false;
  *bias = CCG_NONE;
  if ((op != CCG_OP_MATMUL && op != CCG_OP_GEMM) ||
      !sh_is_weight(sh, ccg_node_input(g, n, 1)) ||
      ccg_value_shape(g, ccg_node_input(g, n, 1))->rank != 2)
    return CCG_STATUS_OK;
  if (op == CCG_OP_GEMM) {
    int64_t ta = 0, tb = 0;
    float alpha = 1, beta = 1;
    CCG_CHECK(ccg_node_attr_int(g, n, "transA", &ta));
    CCG_CHECK(ccg_node_attr_int(g, n, "transB", &tb));
    CCG_CHECK(ccg_node_attr_float(g, n, "alpha", &alpha));
    CCG_CHECK(ccg_node_attr_float(g, n, "beta", &beta));
    if (ta || alpha != 1.0f || beta != 1.0f)
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                     "a parallel Gemm needs transA = 0 and alpha = beta = 1");
    *trans_w = tb != 0;
    if (ccg_node_num_inputs(g, n) > 2)
      *bias = ccg_node_input(g, n, 2);
    if (*bias != CCG_NONE &&
        (!sh_is_weight(sh, *bias) || ccg_value_shape(g, *bias)->rank != 1))
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                     "a parallel Gemm's C must be a 1-D weight");
  }
  *is_linear = true;
  return CCG_STATUS_OK;
}

static ccg_dtensor_style_options style_opts(shard *sh, const ccg_plan_entry *e,
                                            ccg_placement in,
                                            ccg_placement out) {
  ccg_dtensor_style_options o = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  o.mesh_axis = sh->axis_name;
  o.has_input_layout = true;
  o.input_layout = in;
  o.has_output_layout = true;
  o.output_layout = out;
  o.use_local_output = e ? e->use_local_output : true;
  return o;
}

static ccg_status colwise(shard *sh, ccg_node_id n, const ccg_plan_entry *e,
                          bool *done) {
  ccg_graph *g = sh->g;
  bool lin, tw;
  ccg_value_id bias;
  CCG_CHECK(linear_parts(sh, n, &lin, &tw, &bias));
  if (!lin)
    return CCG_STATUS_OK;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  int ry = ccg_value_shape(g, y)->rank;
  int blocks = split_blocks(sh, y);
  ccg_placement out = out_layout(NULL, e, sh_S(ry - 1), ry);
  if (blocks > 1 && !(out.kind == CCG_PLACEMENT_SHARD && out.dim == ry - 1))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "a fused projection (split in %d) must keep its output "
                   "Shard(-1)",
                   blocks);
  int rep = 1;
  CCG_CHECK(kv_rep(sh, y, &rep));
  if (rep > 1 &&
      (blocks > 1 || out.kind != CCG_PLACEMENT_SHARD || out.dim != ry - 1))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "key/value heads shared by %d ranks need their own "
                   "projection with output Shard(-1)",
                   rep);
  ccg_value_id xs, w, b = CCG_NONE, ys;
  /* gathered once, shared by every Linear that reads x (Q, K and V) */
  CCG_CHECK(sh_get(sh, x, sh_R(), 1, false, &xs));
  if (rep > 1) {
    CCG_CHECK(
        sh_weight_grouped(sh, ccg_node_input(g, n, 1), sh_S(1), rep, tw, &w));
    if (bias != CCG_NONE)
      CCG_CHECK(sh_weight_grouped(sh, bias, sh_S(0), rep, false, &b));
  } else {
    CCG_CHECK(
        sh_weight(sh, ccg_node_input(g, n, 1), sh_S(1), blocks, tw, false, &w));
    if (bias != CCG_NONE)
      CCG_CHECK(sh_weight(sh, bias, sh_S(0), blocks, false, false, &b));
  }
  ccg_dtensor_style_options o = style_opts(sh, e, sh_R(), out);
  size_t before = ccg_graph_num_nodes(sh->s);
  int pushed = sh_push_scopes(sh, n);
  ccg_status st = ccg_dtensor_colwise_parallel(sh->s, xs, w, b, &o, &ys);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return sh_from_s(sh, st);
  (void)before;
  *done = true;
  sh->cur_rep = rep;
  return sh_set(sh, y, ys, out, blocks);
}

static ccg_status rowwise(shard *sh, ccg_node_id n, const ccg_plan_entry *e,
                          bool *done) {
  ccg_graph *g = sh->g;
  bool lin, tw;
  ccg_value_id bias;
  CCG_CHECK(linear_parts(sh, n, &lin, &tw, &bias));
  if (!lin)
    return CCG_STATUS_OK;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  int ry = ccg_value_shape(g, y)->rank;
  /* a 2-D output ([batch*seq, hidden], as GPT-2's Conv1D and OPT's fc2
   * flatten tokens) has no sequence dim before the last: Replicate */
  int seq = norm_dim((int)sh->seq_dim, ry);
  ccg_placement dflt = sh->sp && seq >= 0 && seq < ry - 1 ? sh_S(seq) : sh_R();
  ccg_placement out = out_layout(sh, e, dflt, ry);
  if (out.kind == CCG_PLACEMENT_SHARD) {
    ccg_dim d = ccg_value_shape(g, y)->dims[out.dim];
    if (!ccg_dim_is_sym(d) && d.size % sh->W != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "output '%s' dim %d (size %lld) is not divisible by "
                     "%s=%lld",
                     ccg_value_name(g, y), out.dim, (long long)d.size,
                     sh->axis_name, (long long)sh->W);
  }
  int xb;
  ccg_placement xp = sh_cur(sh, x, &xb);
  ccg_value_id xs, w, b = CCG_NONE, ys;
  CCG_CHECK(sh_get(sh, x, xp, 1, false, &xs));
  CCG_CHECK(sh_weight(sh, ccg_node_input(g, n, 1), sh_S(0), 1, tw, false, &w));
  if (bias != CCG_NONE)
    CCG_CHECK(sh_weight(sh, bias, sh_R(), 1, false, false, &b));
  ccg_dtensor_style_options o = style_opts(sh, e, xp, out);
  int pushed = sh_push_scopes(sh, n);
  ccg_status st = ccg_dtensor_rowwise_parallel(sh->s, xs, w, b, &o, &ys);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return sh_from_s(sh, st);
  *done = true;
  return sh_set(sh, y, ys, out, 1);
}

/* sequence_parallel on a node other than a LayerNormalization: an
 * RMSNormalization, or a node of an RMSNorm written out (Pow, ReduceMean,
 * Add, Sqrt, Reciprocal or Div, Mul, Cast). Its float activations of rank
 * >= 2 enter on their sequence shard (a slice of a replicated value, a
 * reduce-scatter of a Partial one) and the rules carry it: a reduction
 * over the last dim keeps it, and the scale, replicated beside a shard, is
 * marked so that its gradient is all-reduced. */
static ccg_status sequence_parallel_rules(shard *sh, ccg_node_id n,
                                          const ccg_plan_entry *e, bool *done) {
  ccg_graph *g = sh->g;
  for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++) {
    ccg_value_id gv = ccg_node_input(g, n, i), v;
    if (gv == CCG_NONE || sh_is_weight(sh, gv) ||
        !ccg_dtype_is_float(ccg_value_dtype(g, gv)))
      continue;
    const ccg_shape *xs = ccg_value_shape(g, gv);
    if (xs->rank < 2)
      continue;
    int seq = norm_dim((int)(e ? e->sequence_dim : sh->seq_dim), xs->rank);
    if (seq < 0 || seq >= xs->rank - 1)
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "sequence_dim %d is not a dim of '%s' before the last",
                     seq, ccg_value_name(g, gv));
    int blocks;
    ccg_placement cur = sh_cur(sh, gv, &blocks);
    if (cur.kind == CCG_PLACEMENT_SHARD && cur.dim == seq)
      continue;
    ccg_dim sd = xs->dims[seq];
    if (!ccg_dim_is_sym(sd) && sd.size % sh->W != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "value '%s' sequence dim %d (size %lld) is not "
                     "divisible by %s=%lld",
                     ccg_value_name(g, gv), seq, (long long)sd.size,
                     sh->axis_name, (long long)sh->W);
    CCG_CHECK(sh_get(sh, gv, sh_S(seq), 1, false, &v));
    CCG_CHECK(sh_set(sh, gv, v, sh_S(seq), 1));
  }
  CCG_CHECK(sh_rule(sh, n));
  *done = true;
  return CCG_STATUS_OK;
}

static ccg_status sequence_parallel(shard *sh, ccg_node_id n,
                                    const ccg_plan_entry *e, bool *done) {
  ccg_graph *g = sh->g;
  if (ccg_node_op(g, n) != CCG_OP_LAYER_NORM)
    return sequence_parallel_rules(sh, n, e, done);
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  int rx = ccg_value_shape(g, x)->rank;
  int64_t axis = -1;
  float eps = 1e-5f;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  CCG_CHECK(ccg_node_attr_float(g, n, "epsilon", &eps));
  if (norm_dim((int)axis, rx) != rx - 1 || ccg_node_num_outputs(g, n) > 1)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "sequence parallel needs a LayerNormalization over the "
                   "last dim with one output");
  int seq = norm_dim((int)(e ? e->sequence_dim : sh->seq_dim), rx);
  if (!e && (seq < 0 || seq >= rx - 1))
    return CCG_STATUS_OK; /* not named, no sequence dim ([batch*seq,
                             hidden]): it propagates */
  ccg_dim sd = ccg_value_shape(g, x)->dims[seq];
  if (seq < 0 || seq >= rx - 1)
    return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                   "sequence_dim %d is not a dim of '%s' before the last", seq,
                   ccg_value_name(g, x));
  if (!ccg_dim_is_sym(sd) && sd.size % sh->W != 0)
    return sh_fail(sh, CCG_STATUS_SHAPE,
                   "value '%s' sequence dim %d (size %lld) is not divisible "
                   "by %s=%lld",
                   ccg_value_name(g, x), seq, (long long)sd.size, sh->axis_name,
                   (long long)sh->W);
  int xb;
  ccg_placement xp = sh_cur(sh, x, &xb);
  ccg_value_id xs, scale, bias = CCG_NONE, ys;
  CCG_CHECK(sh_get(sh, x, xp, 1, false, &xs));
  CCG_CHECK(sh_get(sh, ccg_node_input(g, n, 1), sh_R(), 1, false, &scale));
  if (ccg_node_num_inputs(g, n) > 2)
    CCG_CHECK(sh_get(sh, ccg_node_input(g, n, 2), sh_R(), 1, false, &bias));
  ccg_dtensor_style_options o = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  o.mesh_axis = sh->axis_name;
  o.sequence_dim = seq;
  o.epsilon = eps;
  o.use_local_output = e ? e->use_local_output : false;
  int pushed = sh_push_scopes(sh, n);
  ccg_status st =
      ccg_dtensor_sequence_parallel(sh->s, xs, scale, bias, &o, &ys);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return sh_from_s(sh, st);
  *done = true;
  return sh_set(sh, y, ys, sh_S(seq), 1);
}

/* Embedding rows split over the ranks: rank r holds rows [r*V/W, (r+1)*V/W)
 * of the weight, nothing more (its gradient is that slice of the unsharded
 * one). Per rank, `<weight>.vocab_map` sends a global id to its local row
 * (another rank's ids to row 0) and `<weight>.vocab_mask` (bool) says
 * whether this rank holds it; the gathered rows of foreign ids are zeroed
 * by Where, so neither they nor their gradients reach row 0. The result is
 * Partial (each row comes from one rank) and goes to the output layout. */
static ccg_status vocab_parallel(shard *sh, ccg_node_id n,
                                 const ccg_plan_entry *e, bool *done) {
  ccg_graph *g = sh->g;
  ccg_value_id wv = ccg_node_input(g, n, 0), ids = ccg_node_input(g, n, 1);
  int64_t axis = 0;
  if (ccg_node_op(g, n) != CCG_OP_GATHER || !sh_is_weight(sh, wv))
    return CCG_STATUS_OK; /* the module's other nodes: the rules */
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  if (axis != 0)
    return CCG_STATUS_OK;
  ccg_tensor tbuf;
  void *tmem = NULL;
  const ccg_tensor *t = sh_weight_data(sh, wv, &tbuf, &tmem);
  const char *wname = ccg_value_name(g, wv);
  if (!t)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory for embedding '%s'",
                   wname);
  int64_t V = t->dims[0], W = sh->W, c = V / W;
  if (t->rank < 1 || V % W != 0) {
    free(tmem);
    return sh_fail(sh, CCG_STATUS_SHAPE,
                   "embedding '%s' dim 0 (size %lld) is not divisible by "
                   "%s=%lld",
                   wname, (long long)V, sh->axis_name, (long long)W);
  }
  size_t es = ccg_dtype_size(t->dtype), row = es;
  for (int i = 1; i < t->rank; i++)
    row *= (size_t)t->dims[i];
  size_t mbytes = (size_t)V * sizeof(int64_t), kbytes = (size_t)V;
  size_t per = mbytes + kbytes;
  unsigned char *mem = calloc((size_t)W, per);
  unsigned char **wch = calloc((size_t)W, sizeof *wch);
  unsigned char **mch = calloc((size_t)W, sizeof *mch);
  unsigned char **kch = calloc((size_t)W, sizeof *kch);
  ccg_status st = CCG_STATUS_OK;
  if (!mem || !wch || !mch || !kch) {
    st = sh_fail(sh, CCG_STATUS_OOM, "out of memory for embedding '%s'", wname);
    goto out;
  }
  for (int64_t r = 0; r < W; r++) {
    /* the weight's rows are the graph's own data: chunk r starts there */
    wch[r] = (unsigned char *)(uintptr_t)t->data + (size_t)(r * c) * row;
    mch[r] = mem + (size_t)r * per;
    kch[r] = mch[r] + mbytes;
    for (int64_t i = 0; i < V; i++) {
      bool mine = i >= r * c && i < (r + 1) * c;
      int64_t local = mine ? i - r * c : 0;
      memcpy(mch[r] + (size_t)i * sizeof local, &local, sizeof local);
      kch[r][i] = mine;
    }
  }
  int64_t wd[CCG_MAX_RANK], md[1] = {V};
  memcpy(wd, t->dims, sizeof wd);
  wd[0] = c;
  char mname[512], kname[512];
  snprintf(mname, sizeof mname, "%s.vocab_map", wname);
  snprintf(kname, sizeof kname, "%s.vocab_mask", wname);
  ccg_value_id w, map, mask, idr, lid, part, keep, zero, y;
  CCG_CHECK_GOTO(
      sh_add_rank_weight(sh, wname, t->dtype, t->rank, wd, wch, sh_S(0), &w),
      st, out);
  CCG_CHECK_GOTO(sh_origin_add(sh, w, wv, false, 0, 1), st, out);
  CCG_CHECK_GOTO(
      sh_add_rank_weight(sh, mname, CCG_DTYPE_I64, 1, md, mch, sh_R(), &map),
      st, out);
  CCG_CHECK_GOTO(
      sh_add_rank_weight(sh, kname, CCG_DTYPE_BOOL, 1, md, kch, sh_R(), &mask),
      st, out);
  sh->rep.n_sharded_params -= 2; /* the map and mask are not parameters */
  CCG_CHECK_GOTO(sh_get(sh, ids, sh_R(), 1, false, &idr), st, out);
  int pushed = sh_push_scopes(sh, n);
  /* keep: the ids' mask with the row's dims as 1s, for Where */
  int ri = ccg_value_shape(sh->s, idr)->rank;
  int64_t axes[CCG_MAX_RANK];
  for (int i = 0; i < t->rank - 1; i++)
    axes[i] = ri + i;
  unsigned char zbytes[16] = {0};
  ccg_tensor zt = {t->dtype, 0, {0}, zbytes};
  st = ccg_gather(sh->s, map, idr, 0, &lid);
  if (st == CCG_STATUS_OK)
    st = ccg_gather(sh->s, w, lid, 0, &part);
  if (st == CCG_STATUS_OK)
    st = ccg_gather(sh->s, mask, idr, 0, &keep);
  if (st == CCG_STATUS_OK && t->rank > 1)
    st = ccg_unsqueeze(sh->s, keep, axes, (size_t)t->rank - 1, &keep);
  if (st == CCG_STATUS_OK)
    st = ccg_constant(sh->s, &zt, &zero);
  if (st == CCG_STATUS_OK)
    st = ccg_where(sh->s, keep, part, zero, &part);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK) {
    st = sh_from_s(sh, st);
    goto out;
  }
  ccg_value_id gy = ccg_node_output(g, n, 0);
  int ry = ccg_value_shape(g, gy)->rank;
  ccg_placement to =
      out_layout(sh, e, sh->sp ? sh_S((int)sh->seq_dim) : sh_R(), ry);
  CCG_CHECK_GOTO(sh_set(sh, gy, part, sh_P(), 1), st, out);
  CCG_CHECK_GOTO(sh_move(sh, part, sh_P(), to, &y), st, out);
  CCG_CHECK_GOTO(sh_set(sh, gy, y, to, 1), st, out);
  *done = true;
out:
  free(tmem);
  free(mem);
  free(wch);
  free(mch);
  free(kch);
  return st;
}

ccg_status sh_style(shard *sh, ccg_node_id n, const ccg_plan_entry *e,
                    size_t entry, const char *module, bool *done) {
  (void)entry;
  (void)module;
  *done = false;
  ccg_plan_style style = e ? e->style : CCG_PLAN_SEQUENCE_PARALLEL;
  switch (style) {
  case CCG_PLAN_COLWISE:
    return colwise(sh, n, e, done);
  case CCG_PLAN_ROWWISE:
    return rowwise(sh, n, e, done);
  case CCG_PLAN_SEQUENCE_PARALLEL:
    return sequence_parallel(sh, n, e, done);
  case CCG_PLAN_VOCAB_PARALLEL:
    return vocab_parallel(sh, n, e, done);
  default:
    return CCG_STATUS_OK; /* replicate and ulysses: shard.c */
  }
}
