/* The shard pass's propagation rules: how a placement on the plan's axis
 * goes through an ordinary op (docs/shard.md, "Propagation"). Each rule
 * picks the placement every input must have and the output's; inputs are
 * then fetched (weights split, computed values redistributed) and the node
 * copied. An op without a rule sees replicated inputs: always correct,
 * perhaps not the least communication. Here: the dispatch, elementwise and
 * layout ops; shard_rules_reshape.c and shard_rules_ops.c hold the others. */
#include "passes/op_kinds.h"
#include "passes/shard_internal.h"

ccg_status sh_fetch_emit(shard *sh, ccg_node_id n, const ccg_placement *want,
                         const int *blocks, const ccg_attr *attrs,
                         size_t n_attrs, ccg_placement outp, int out_blocks) {
  size_t nin = ccg_node_num_inputs(sh->g, n);
  ccg_value_id in[64];
  if (nin > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 inputs");
  bool sharded = sh_any_sharded(want, nin);
  for (size_t i = 0; i < nin; i++)
    CCG_CHECK(sh_get(sh, ccg_node_input(sh->g, n, i), want[i],
                     blocks ? blocks[i] : 1, sharded, &in[i]));
  return sh_emit(sh, n, in, attrs, n_attrs, outp, out_blocks);
}

ccg_status sh_replicate(shard *sh, ccg_node_id n) {
  ccg_placement want[64];
  size_t nin = ccg_node_num_inputs(sh->g, n);
  for (size_t i = 0; i < nin && i < 64; i++)
    want[i] = sh_R();
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, sh_R(), 1);
}

/* ---- elementwise ----------------------------------------------------------
 */

static bool linear_unary(ccg_op op) {
  return op == CCG_OP_IDENTITY || op == CCG_OP_NEG || op == CCG_OP_DROPOUT;
}

static ccg_status rule_unary(shard *sh, ccg_node_id n) {
  ccg_op op = ccg_node_op(sh->g, n);
  size_t nin = ccg_node_num_inputs(sh->g, n);
  ccg_placement want[3];
  int blocks[3] = {1, 1, 1};
  ccg_placement p = sh_cur(sh, ccg_node_input(sh->g, n, 0), &blocks[0]);
  if (sh_is_partial(p) && !linear_unary(op))
    p = sh_R();
  want[0] = p;
  for (size_t i = 1; i < nin && i < 3; i++)
    want[i] = sh_R(); /* Dropout's ratio and training mode */
  return sh_fetch_emit(sh, n, want, blocks, NULL, 0, p, blocks[0]);
}

/* Whether a Partial input may pass through a broadcasting op. */
static bool partial_ok(ccg_op op, const ccg_placement *p, size_t nin) {
  size_t np = 0;
  for (size_t i = 0; i < nin; i++)
    np += sh_is_partial(p[i]);
  if (!np || sh_any_sharded(p, nin))
    return false;
  if (op == CCG_OP_ADD || op == CCG_OP_SUB)
    return np == nin;
  if (op == CCG_OP_MUL)
    return np == 1;
  return op == CCG_OP_DIV && np == 1 && sh_is_partial(p[0]);
}

/* Variadic ops (Sum, Min, ...) with more inputs see them replicated. */
#define BROADCAST_MAX_IN 8

static ccg_status rule_broadcast(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_placement p[BROADCAST_MAX_IN], want[BROADCAST_MAX_IN];
  int blocks[BROADCAST_MAX_IN], wblocks[BROADCAST_MAX_IN];
  if (nin > BROADCAST_MAX_IN)
    return sh_replicate(sh, n);
  for (size_t i = 0; i < nin; i++)
    p[i] = sh_cur(sh, ccg_node_input(g, n, i), &blocks[i]);
  if (partial_ok(op, p, nin)) {
    for (size_t i = 0; i < nin; i++)
      wblocks[i] = 1;
    return sh_fetch_emit(sh, n, p, wblocks, NULL, 0, sh_P(), 1);
  }
  int ro = sh_rank_of(sh, ccg_node_output(g, n, 0));
  int od = -1, blk = 1;
  for (size_t i = 0; i < nin && od < 0; i++)
    if (sh_is_shard(p[i])) {
      od = p[i].dim + ro - sh_rank_of(sh, ccg_node_input(g, n, i));
      blk = blocks[i];
    }
  for (size_t i = 0; i < nin; i++) {
    ccg_value_id gv = ccg_node_input(g, n, i);
    int k = od < 0 ? -1 : od - (ro - sh_rank_of(sh, gv));
    wblocks[i] = 1;
    want[i] = sh_R();
    if (k >= 0 && sh_gdim(sh, gv, k) != 1) {
      want[i] = sh_S(k);
      wblocks[i] = blk;
    }
  }
  return sh_fetch_emit(sh, n, want, wblocks, NULL, 0,
                       od < 0 ? sh_R() : sh_S(od), blk);
}

/* ---- shape ops ------------------------------------------------------------
 */

static ccg_status rule_transpose(shard *sh, ccg_node_id n) {
  ccg_value_id x = ccg_node_input(sh->g, n, 0);
  int rank = sh_rank_of(sh, x);
  const ccg_attr *a = ccg_node_attr(sh->g, n, "perm");
  ccg_placement p = sh_cur(sh, x, NULL), out = p;
  if (sh_is_shard(p)) {
    for (int j = 0; j < rank; j++) {
      int from = a && (size_t)j < a->n ? (int)a->ints[j] : rank - 1 - j;
      if (from == p.dim)
        out = sh_S(j);
    }
  }
  return sh_fetch_emit(sh, n, &p, NULL, NULL, 0, out, 1);
}

/* Split sizes of n (its "split" attribute, else equal parts). */
static void split_sizes(shard *sh, ccg_node_id n, int64_t dim, size_t n_out,
                        int64_t *sizes) {
  const ccg_attr *a = ccg_node_attr(sh->g, n, "split");
  for (size_t i = 0; i < n_out; i++)
    sizes[i] = a && i < a->n ? a->ints[i] : dim / (int64_t)n_out;
}

static ccg_status rule_split(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  int ax = sh_norm_axis(axis, sh_rank_of(sh, x));
  int blocks;
  ccg_placement p = sh_cur(sh, x, &blocks);
  size_t n_out = ccg_node_num_outputs(g, n);
  if (!sh_is_shard(p) || p.dim != ax) {
    if (blocks > 1)
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                     "splits the fused value '%s' on dim %d, not on the dim "
                     "its blocks lie on",
                     ccg_value_name(g, x), ax);
    return sh_fetch_emit(sh, n, &p, &blocks, NULL, 0, p, 1);
  }
  if (blocks == 1) {
    p = sh_R();
    return sh_fetch_emit(sh, n, &p, NULL, NULL, 0, p, 1);
  }
  int64_t sizes[64];
  if (n_out > 64 || (size_t)blocks != n_out)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "splits the fused value '%s' into %zu parts, but it was "
                   "sharded in %d blocks",
                   ccg_value_name(g, x), n_out, blocks);
  split_sizes(sh, n, sh_gdim(sh, x, ax), n_out, sizes);
  int64_t first = sizes[0];
  for (size_t i = 0; i < n_out; i++) {
    if (sizes[i] != first || sizes[i] % sh->W != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "split part %zu (size %lld) of '%s' is not an equal part "
                     "divisible by %s=%lld",
                     i, (long long)sizes[i], ccg_value_name(g, x),
                     sh->axis_name, (long long)sh->W);
    sizes[i] /= sh->W;
  }
  ccg_attr attrs[2] = {CCG_ATTR_I("axis", ax),
                       CCG_ATTR_IS("split", sizes, n_out)};
  return sh_fetch_emit(sh, n, &p, &blocks, attrs, 2, p, 1);
}

static ccg_status rule_concat(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  ccg_value_id y = ccg_node_output(g, n, 0);
  int ax = sh_norm_axis(axis, sh_rank_of(sh, y));
  ccg_placement want[64], out = sh_R();
  size_t np = 0;
  if (nin > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 inputs");
  for (size_t i = 0; i < nin; i++) {
    ccg_placement p = sh_cur(sh, ccg_node_input(g, n, i), NULL);
    np += sh_is_partial(p);
    if (sh_is_shard(p) && p.dim != ax && !sh_is_shard(out))
      out = p;
  }
  if (np == nin)
    out = sh_P();
  for (size_t i = 0; i < nin; i++)
    want[i] = out;
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* Unsqueeze (insert) or Squeeze (remove) of `axes`: the output dim of input
 * dim d. */
static ccg_status rule_squeeze(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL), out = p;
  if (sh_is_shard(p)) {
    bool unsq = ccg_node_op(g, n) == CCG_OP_UNSQUEEZE;
    int rx = sh_rank_of(sh, x), ry = sh_rank_of(sh, y);
    bool hit[CCG_MAX_RANK] = {false};
    const ccg_attr *a = ccg_node_attr(g, n, "axes");
    for (size_t i = 0; a && i < a->n; i++) {
      int k = sh_norm_axis(a->ints[i], unsq ? ry : rx);
      if (k >= 0 && k < CCG_MAX_RANK)
        hit[k] = true;
    }
    if (!a && !unsq)
      for (int k = 0; k < rx; k++)
        hit[k] = sh_gdim(sh, x, k) == 1;
    int d = 0;
    if (unsq) {
      for (int j = 0, seen = 0; j < ry; j++)
        if (!hit[j] && seen++ == p.dim)
          d = j;
    } else {
      for (int k = 0; k < p.dim; k++)
        d += !hit[k];
    }
    out = sh_S(d);
  }
  ccg_placement want[2] = {p, sh_R()};
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* ---- grouped key/value heads, dispatch -------------------------------- */

/* The rep and merged (shard_internal.h) of n's grouped inputs; false when
 * two inputs hold key/value heads grouped differently. */
static bool grouped_inputs(shard *sh, ccg_node_id n, int *rep, int *merged) {
  *rep = *merged = 1;
  bool seen = false;
  for (size_t i = 0; i < ccg_node_num_inputs(sh->g, n); i++) {
    ccg_value_id gv = ccg_node_input(sh->g, n, i);
    if (gv == CCG_NONE || sh_is_weight(sh, gv) ||
        !sh_is_shard(sh_cur(sh, gv, NULL)))
      continue;
    const sh_val *x = &sh->vals[gv];
    if (x->rep == 1 && x->merged == 1)
      continue;
    if (seen && (x->rep != *rep || x->merged != *merged))
      return false;
    seen = true;
    *rep = x->rep;
    *merged = x->merged;
  }
  return true;
}

/* The ops grouped key/value heads go through: those that keep the heads
 * apart (elementwise, layout and shape ops); a merged pair only to the
 * Reshape that joins it (and elementwise ops, Shape on the way). */
static bool grouped_op(ccg_op op, bool merged) {
  ccg_op_shard k = ccg_op_shard_rule(op);
  if (k == CCG_OP_SHARD_KEEP || op == CCG_OP_RESHAPE || op == CCG_OP_SHAPE)
    return true;
  if (merged)
    return false;
  return k == CCG_OP_SHARD_BROADCAST || op == CCG_OP_TRANSPOSE ||
         op == CCG_OP_CONCAT || op == CCG_OP_UNSQUEEZE ||
         op == CCG_OP_SQUEEZE || op == CCG_OP_SLICE || op == CCG_OP_EXPAND;
}

ccg_status sh_rule(shard *sh, ccg_node_id n) {
  ccg_op op = ccg_node_op(sh->g, n);
  int rep, merged;
  if (!grouped_inputs(sh, n, &rep, &merged))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "inputs hold key/value heads grouped differently");
  sh->cur_rep = rep;
  sh->cur_merged = merged;
  if ((rep > 1 || merged > 1) && !grouped_op(op, merged > 1))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "%s cannot take key/value heads shared by %d ranks "
                   "(grouped-query attention): only elementwise, layout and "
                   "shape ops before their repeat, and the Reshape joining "
                   "it, can",
                   ccg_op_name(op), rep > 1 ? rep : merged);
  if (sh->local && op == CCG_OP_GEMM)
    return sh_rule_gemm(sh, n);
  if (sh->local && op == CCG_OP_GATHER_ND)
    return sh_rule_gather_nd(sh, n);
  if (sh->local && op == CCG_OP_EXPAND)
    return sh_rule_data_expand(sh, n);
  if (op == CCG_OP_SLICE)
    return sh_rule_slice(sh, n);
  if (op == CCG_OP_EXPAND)
    return sh_rule_expand(sh, n);
  switch (ccg_op_shard_rule(op)) {
  case CCG_OP_SHARD_KEEP:
    return rule_unary(sh, n);
  case CCG_OP_SHARD_BROADCAST:
    return rule_broadcast(sh, n);
  case CCG_OP_SHARD_OWN:
    break;
  default:
    return sh_replicate(sh, n);
  }
  /* The ops whose def says CCG_OP_SHARD_OWN. */
  switch (op) {
  case CCG_OP_SOFTMAX:
  case CCG_OP_LOG_SOFTMAX:
  case CCG_OP_HARDMAX:
    return sh_rule_softmax(sh, n);
  case CCG_OP_LAYER_NORM:
  case CCG_OP_RMS_NORM:
    return sh_rule_layer_norm(sh, n);
  case CCG_OP_ATTENTION:
    return sh_rule_attention(sh, n);
  case CCG_OP_TRANSPOSE:
    return rule_transpose(sh, n);
  case CCG_OP_RESHAPE:
    return sh_rule_reshape(sh, n);
  case CCG_OP_SHAPE:
    return sh_rule_shape(sh, n);
  case CCG_OP_SPLIT:
    return rule_split(sh, n);
  case CCG_OP_CONCAT:
    return rule_concat(sh, n);
  case CCG_OP_UNSQUEEZE:
  case CCG_OP_SQUEEZE:
    return rule_squeeze(sh, n);
  case CCG_OP_MATMUL:
    return sh_rule_matmul(sh, n);
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_MEAN:
  case CCG_OP_REDUCE_MAX:
  case CCG_OP_REDUCE_MIN:
  case CCG_OP_REDUCE_PROD:
  case CCG_OP_REDUCE_L1:
  case CCG_OP_REDUCE_L2:
  case CCG_OP_REDUCE_SUM_SQUARE:
  case CCG_OP_REDUCE_LOG_SUM:
  case CCG_OP_REDUCE_LOG_SUM_EXP:
    return sh_rule_reduce(sh, n);
  case CCG_OP_GATHER:
    return sh_rule_gather(sh, n);
  case CCG_OP_ARG_MAX:
  case CCG_OP_ARG_MIN:
  case CCG_OP_TOP_K:
    return sh_rule_select_axis(sh, n);
  case CCG_OP_GATHER_ELEMENTS:
  case CCG_OP_SCATTER_ELEMENTS:
    return sh_rule_elements(sh, n);
  case CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
  case CCG_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    return sh_rule_loss(sh, n);
  case CCG_OP_CONV:
  case CCG_OP_CONV_TRANSPOSE:
  case CCG_OP_MAX_POOL:
  case CCG_OP_AVERAGE_POOL:
  case CCG_OP_GLOBAL_AVERAGE_POOL:
  case CCG_OP_GLOBAL_MAX_POOL:
    return sh_rule_window(sh, n);
  case CCG_OP_EINSUM:
    return sh_rule_einsum(sh, n);
  case CCG_OP_ONE_HOT:
    return sh_rule_onehot(sh, n);
  case CCG_OP_TRILU:
  case CCG_OP_CUMSUM:
  case CCG_OP_TILE:
  case CCG_OP_PAD:
  case CCG_OP_FLATTEN:
  case CCG_OP_DEPTH_TO_SPACE:
  case CCG_OP_SPACE_TO_DEPTH:
    return sh_rule_data_keep(sh, n);
  default:
    return sh_replicate(sh, n);
  }
}
