/* The shard pass's rules for ops that compute across a dim: norms and
 * attention, MatMul, Gemm and Einsum, reductions, Gather and the selecting
 * ops, losses, windowed ops and the data ops that leave a dim alone
 * (docs/shard.md, "Propagation"). */
#include <string.h>

#include "graph/einsum.h"
#include "passes/shard_internal.h"

/* ---- norms --------------------------------------------------------------- */

ccg_status sh_rule_softmax(shard *sh, ccg_node_id n) {
  ccg_value_id x = ccg_node_input(sh->g, n, 0);
  int64_t axis = -1;
  CCG_CHECK(ccg_node_attr_int(sh->g, n, "axis", &axis));
  ccg_placement p = sh_cur(sh, x, NULL);
  if (sh_is_partial(p) ||
      (sh_is_shard(p) && p.dim == sh_norm_axis(axis, sh_rank_of(sh, x))))
    p = sh_R();
  return sh_fetch_emit(sh, n, &p, NULL, NULL, 0, p, 1);
}

ccg_status sh_rule_layer_norm(shard *sh, ccg_node_id n) {
  ccg_value_id x = ccg_node_input(sh->g, n, 0);
  int64_t axis = -1;
  CCG_CHECK(ccg_node_attr_int(sh->g, n, "axis", &axis));
  ccg_placement p = sh_cur(sh, x, NULL), want[3] = {sh_R(), sh_R(), sh_R()};
  if (!sh_is_shard(p) || p.dim >= sh_norm_axis(axis, sh_rank_of(sh, x)))
    p = sh_R();
  want[0] = p;
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* 4-D Attention with Q sharded on the head dim (tensor parallelism): each
 * rank attends with its own heads (and their kv heads: grouped query heads
 * stay with theirs when the group size divides the kv heads), so K, V and
 * the cache are fetched alike and every output keeps Shard(1); a mask that
 * differs per head, or any other layout, replicates. */
ccg_status sh_rule_attention(shard *sh, ccg_node_id n) {
  ccg_value_id q = ccg_node_input(sh->g, n, 0);
  ccg_placement p = sh_cur(sh, q, NULL), want[6];
  size_t nin = ccg_node_num_inputs(sh->g, n);
  bool keep =
      nin <= 6 && sh_rank_of(sh, q) == 4 && sh_is_shard(p) && p.dim == 1;
  for (size_t i = 0; keep && i < nin; i++) {
    ccg_value_id v = ccg_node_input(sh->g, n, i);
    want[i] = i == 3 ? sh_R() : p;
    if (i == 3 && v != CCG_NONE) {
      const ccg_shape *m = ccg_value_shape(sh->g, v);
      keep = m->rank < 3 || (!ccg_dim_is_sym(m->dims[m->rank - 3]) &&
                             m->dims[m->rank - 3].size == 1);
    }
  }
  if (!keep)
    return sh_replicate(sh, n);
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* ---- MatMul, reductions, Gather ------------------------------------------ */

ccg_status sh_rule_matmul(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id a = ccg_node_input(g, n, 0), b = ccg_node_input(g, n, 1);
  int ra = sh_rank_of(sh, a), rb = sh_rank_of(sh, b);
  int ro = sh_rank_of(sh, ccg_node_output(g, n, 0));
  ccg_placement pa = sh_cur(sh, a, NULL), pb = sh_cur(sh, b, NULL);
  ccg_placement want[2] = {sh_R(), sh_R()}, out = sh_R();
  if (ra < 2 || rb < 2) {
    /* vector operands: replicate */
  } else if (sh_is_partial(pa) != sh_is_partial(pb) &&
             (sh_is_partial(pa) ? pb : pa).kind == CCG_PLACEMENT_REPLICATE) {
    want[0] = pa, want[1] = pb, out = sh_P();
  } else if (sh_is_shard(pa) && pa.dim == ra - 1 && sh_is_shard(pb) &&
             pb.dim == rb - 2) {
    want[0] = pa, want[1] = pb, out = sh_P();
  } else if (sh_is_shard(pa) && pa.dim < ra - 1) {
    int od = pa.dim + ro - ra, k = od - (ro - rb);
    want[0] = pa, out = sh_S(od);
    if (pa.dim < ra - 2 && k >= 0 && sh_gdim(sh, b, k) != 1)
      want[1] = sh_S(k);
  } else if (sh_is_shard(pb) && pb.dim != rb - 2) {
    int od = pb.dim + ro - rb, k = od - (ro - ra);
    want[1] = pb, out = sh_S(od);
    if (pb.dim < rb - 2 && k >= 0 && sh_gdim(sh, a, k) != 1)
      want[0] = sh_S(k);
  }
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* How a reduction combines over a sharded reduced dim: the sum-like ops
 * give Partial(sum) (ReduceL1 and ReduceSumSquare sum non-negative local
 * results), Max, Min and Prod give Partial of their own op; the others (Mean,
 * L2, LogSum, LogSumExp) are not a reduction of local results and see the
 * dim gathered. */
static bool reduce_combine(ccg_op op, ccg_reduce_op *rop) {
  switch (op) {
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_L1:
  case CCG_OP_REDUCE_SUM_SQUARE:
    *rop = CCG_REDUCE_SUM;
    return true;
  case CCG_OP_REDUCE_MAX:
    *rop = CCG_REDUCE_MAX;
    return true;
  case CCG_OP_REDUCE_MIN:
    *rop = CCG_REDUCE_MIN;
    return true;
  case CCG_OP_REDUCE_PROD:
    *rop = CCG_REDUCE_PROD;
    return true;
  default:
    return false;
  }
}

ccg_status sh_rule_reduce(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  ccg_value_id x = ccg_node_input(g, n, 0);
  int rx = sh_rank_of(sh, x);
  int64_t keep = 1, noop = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "keepdims", &keep));
  CCG_CHECK(ccg_node_attr_int(g, n, "noop_with_empty_axes", &noop));
  bool hit[CCG_MAX_RANK] = {false};
  const ccg_attr *a = ccg_node_attr(g, n, "axes");
  for (int k = 0; k < rx; k++)
    hit[k] = (!a || a->n == 0) && !noop;
  for (size_t i = 0; a && i < a->n; i++) {
    int k = sh_norm_axis(a->ints[i], rx);
    if (k >= 0 && k < CCG_MAX_RANK)
      hit[k] = true;
  }
  ccg_reduce_op rop = CCG_REDUCE_SUM;
  bool combine = reduce_combine(op, &rop);
  bool sum = op == CCG_OP_REDUCE_SUM; /* the only one linear in its input */
  ccg_placement p = sh_cur(sh, x, NULL), out = p;
  if (sh_is_partial(p) && !sum)
    p = out = sh_R();
  if (sh_is_shard(p) && hit[p.dim]) {
    if (combine)
      out = (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, rop};
    else if (sh->local && op == CCG_OP_REDUCE_MEAN)
      out = (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_AVG};
    else
      p = out = sh_R();
  } else if (sh_is_shard(p) && !keep) {
    int d = 0;
    for (int k = 0; k < p.dim; k++)
      d += !hit[k];
    out = sh_S(d);
  }
  CCG_CHECK(sh_fetch_emit(sh, n, &p, NULL, NULL, 0, out, 1));
  if (!sh_is_partial(out) || out.reduce == CCG_REDUCE_SUM ||
      (sh->local && out.reduce == CCG_REDUCE_AVG))
    return CCG_STATUS_OK;
  /* The other rules take a Partial for a sum: Partial(max/min/prod) is
   * reduced at once (AllReduce of its op). */
  ccg_value_id y = ccg_node_output(g, n, 0), v;
  CCG_CHECK(sh_get(sh, y, sh_R(), 1, false, &v));
  return sh_set(sh, y, v, sh_R(), 1);
}

ccg_status sh_rule_gather(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id idx = ccg_node_input(g, n, 1);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  int ax = sh_norm_axis(axis, sh_rank_of(sh, ccg_node_input(g, n, 0)));
  ccg_placement pi = sh_cur(sh, idx, NULL), out = sh_R();
  ccg_placement pd = sh_R();
  if (sh_is_partial(pi))
    pi = sh_R();
  if (sh_is_shard(pi))
    out = sh_S(ax + pi.dim);
  /* data parallel: rows of data sharded off the axis stay apart (dims
   * after the axis move by the indices' rank less one) */
  ccg_placement dp = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  if (sh->local && !sh_is_shard(pi) && sh_is_shard(dp) && dp.dim != ax) {
    pd = dp;
    out = sh_S(dp.dim < ax ? dp.dim : dp.dim + sh_rank_of(sh, idx) - 1);
  }
  ccg_placement want[2] = {pd, pi};
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* ArgMax/ArgMin and TopK select along one axis: Shard(d) of another dim
 * stays (shifted past a dropped axis); the axis itself is gathered. K is
 * replicated. */
ccg_status sh_rule_select_axis(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  bool top_k = ccg_node_op(g, n) == CCG_OP_TOP_K;
  int64_t axis = top_k ? -1 : 0, keep = 1;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  if (!top_k)
    CCG_CHECK(ccg_node_attr_int(g, n, "keepdims", &keep));
  int ax = sh_norm_axis(axis, sh_rank_of(sh, x));
  ccg_placement p = sh_cur(sh, x, NULL), out;
  if (sh_is_partial(p) || (sh_is_shard(p) && p.dim == ax))
    p = sh_R();
  out = p;
  if (sh_is_shard(p) && !keep && p.dim > ax)
    out = sh_S(p.dim - 1);
  ccg_placement want[2] = {p, sh_R()};
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* GatherElements/ScatterElements: a shard of a dim other than the axis on
 * which data and indices have the same size stays, every input split
 * alike (the elements of a slice along the axis stay on one rank). */
ccg_status sh_rule_elements(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_value_id data = ccg_node_input(g, n, 0);
  ccg_value_id idx = ccg_node_input(g, n, 1);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  int ax = sh_norm_axis(axis, sh_rank_of(sh, data)), d = -1;
  for (size_t i = 0; i < nin && d < 0; i++) {
    ccg_placement p = sh_cur(sh, ccg_node_input(g, n, i), NULL);
    if (sh_is_shard(p) && p.dim != ax && sh_gdim(sh, data, p.dim) >= 0 &&
        sh_gdim(sh, data, p.dim) == sh_gdim(sh, idx, p.dim))
      d = p.dim;
  }
  ccg_placement want[3], out = d < 0 ? sh_R() : sh_S(d);
  for (size_t i = 0; i < nin && i < 3; i++)
    want[i] = out;
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* GatherND (batch_dims 0, the only one the IR takes: out = indices[:q-1] +
 * data[k:], k the indices' last dim): a shard of data past the indexed
 * dims, with whole indices, moves by q-1-k; a shard of the indices before
 * their last dim, with whole data, stays. Any other shard (an indexed dim
 * of data, or both sharded) is gathered: in the local run, an error. */
ccg_status sh_rule_gather_nd(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id data = ccg_node_input(g, n, 0), idx = ccg_node_input(g, n, 1);
  int q = sh_rank_of(sh, idx);
  int64_t k = q > 0 ? sh_gdim(sh, idx, q - 1) : -1;
  ccg_placement pd = sh_cur(sh, data, NULL), pi = sh_cur(sh, idx, NULL);
  ccg_placement want[2] = {sh_R(), sh_R()}, out = sh_R();
  if (k >= 0 && sh_is_shard(pd) && pd.dim >= k && !sh_is_shard(pi) &&
      !sh_is_partial(pi)) {
    want[0] = pd;
    out = sh_S((int)(pd.dim + q - 1 - k));
  } else if (sh_is_shard(pi) && pi.dim < q - 1 && !sh_is_shard(pd) &&
             !sh_is_partial(pd)) {
    want[1] = out = pi;
  }
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss with the input
 * sharded on a dim other than the class dim (the batch, or a trailing dim):
 * targets sharded alike, weights replicated; reduction none keeps the
 * shard, sum gives Partial(sum). A mean divides by the sum of the weights
 * of every position, which no rank has: it, and a sharded class dim, see
 * replicated inputs. */
ccg_status sh_rule_loss(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  const char *red = "mean";
  if (ccg_node_attr(g, n, "reduction"))
    CCG_CHECK(ccg_node_attr_string(g, n, "reduction", &red));
  bool none = strcmp(red, "none") == 0, done = false;
  if (!sh->local)
    CCG_CHECK(sh_vocab_parallel_loss(sh, n, &done));
  if (done)
    return CCG_STATUS_OK;
  /* data parallel: each rank's mean over its batch chunk; their average
   * is the whole batch's mean when every position counts (no ignored
   * targets, no class weights) */
  bool mean = sh->local && strcmp(red, "mean") == 0;
  if (!sh_is_shard(p) || p.dim == 1 ||
      (!none && !mean && strcmp(red, "sum") != 0))
    return sh_replicate(sh, n);
  int td = p.dim == 0 ? 0 : p.dim - 1;
  ccg_placement want[3] = {p, sh_S(td), sh_R()};
  ccg_placement out =
      none   ? sh_S(td)
      : mean ? (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_AVG}
             : sh_P();
  CCG_CHECK(sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1));
  if (ccg_node_num_outputs(g, n) < 2)
    return CCG_STATUS_OK;
  ccg_value_id lp = ccg_node_output(g, n, 1);
  if (lp == CCG_NONE)
    return CCG_STATUS_OK;
  return sh_set(sh, lp, sh->vals[lp].v, p, 1); /* log_prob: x's shard */
}

/* Windowed ops (Conv, ConvTranspose, the pools) compute each image on its
 * own, and the pools each channel too: a Shard on the batch dim (or, for
 * pools, the channel dim) stays; weights and bias are whole. MaxPool's
 * Indices count over the whole tensor, so a MaxPool giving them sees
 * replicated inputs. */
ccg_status sh_rule_window(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  size_t nin = ccg_node_num_inputs(g, n);
  bool conv = op == CCG_OP_CONV || op == CCG_OP_CONV_TRANSPOSE;
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  ccg_placement want[3] = {sh_R(), sh_R(), sh_R()};
  if (!sh_is_shard(p) || p.dim > (conv ? 0 : 1) ||
      ccg_node_num_outputs(g, n) > 1 || nin > 3)
    return sh_replicate(sh, n);
  want[0] = p;
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* Whether data op n leaves dim d of its input 0 alone: Trilu a batch dim,
 * CumSum a dim off its axis, Tile a dim repeated once, Pad a dim without
 * pads, Flatten the leading dim (axis >= 1), DepthToSpace and SpaceToDepth
 * the batch dim. Parameters must be known. */
static bool data_keeps_dim(const shard *sh, ccg_node_id n, int d, int rank) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  int64_t v[CCG_MAX_RANK], ax[CCG_MAX_RANK], axis = 1;
  switch (ccg_node_op(g, n)) {
  case CCG_OP_TRILU:
    return d < rank - 2;
  case CCG_OP_CUMSUM:
    return sh_known_ints(sh, ccg_node_input(g, n, 1), v, 1) == 1 &&
           sh_norm_axis(v[0], rank) != d;
  case CCG_OP_TILE:
    return sh_known_ints(sh, ccg_node_input(g, n, 1), v, CCG_MAX_RANK) ==
               rank &&
           v[d] == 1;
  case CCG_OP_FLATTEN:
    return ccg_node_attr_int(g, n, "axis", &axis) == CCG_STATUS_OK && d == 0 &&
           sh_norm_axis(axis, rank) >= 1;
  case CCG_OP_DEPTH_TO_SPACE:
  case CCG_OP_SPACE_TO_DEPTH:
    return d == 0;
  case CCG_OP_PAD: {
    int na = rank,
        np = sh_known_ints(sh, ccg_node_input(g, n, 1), v, CCG_MAX_RANK);
    for (int i = 0; i < rank; i++)
      ax[i] = i;
    if (nin > 3 && ccg_node_input(g, n, 3) != CCG_NONE)
      na = sh_known_ints(sh, ccg_node_input(g, n, 3), ax, CCG_MAX_RANK);
    if (na < 0 || np != 2 * na)
      return false;
    for (int i = 0; i < na; i++)
      if (sh_norm_axis(ax[i], rank) == d && (v[i] != 0 || v[i + na] != 0))
        return false;
    return true;
  }
  default:
    return false;
  }
}

/* Trilu, CumSum, Tile, Pad, Flatten, DepthToSpace, SpaceToDepth: a shard on a
 * dim the op leaves alone goes through (the parameter inputs replicated); else
 * replicate. */
ccg_status sh_rule_data_keep(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  size_t nin = ccg_node_num_inputs(g, n);
  int blocks = 1;
  ccg_placement p = sh_cur(sh, x, &blocks), want[5];
  if (!sh_is_shard(p) || blocks != 1 || nin > 5 ||
      !data_keeps_dim(sh, n, p.dim, sh_rank_of(sh, x)))
    return sh_replicate(sh, n);
  want[0] = p;
  for (size_t i = 1; i < nin; i++)
    want[i] = sh_R();
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* OneHot: sharded indices give the output sharded on the same dim (one
 * further where the new axis comes before it); depth and values
 * replicated. */
ccg_status sh_rule_onehot(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  int blocks = 1;
  int64_t axis = -1;
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), &blocks);
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  if (!sh_is_shard(p) || blocks != 1)
    return sh_replicate(sh, n);
  int a = sh_norm_axis(axis, sh_rank_of(sh, ccg_node_output(g, n, 0)));
  ccg_placement want[3] = {p, sh_R(), sh_R()};
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0,
                       sh_S(p.dim < a ? p.dim : p.dim + 1), 1);
}

/* Einsum: the first operand sharded (in one block) on a subscript that
 * appears once in it decides; every operand holding that subscript is
 * sharded on it, the others replicated. The output is sharded on it, or
 * Partial where the equation sums it. One Partial operand beside
 * replicated ones stays Partial (the product is linear in each). */
ccg_status sh_rule_einsum(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_placement p[CCG__EIN_MAX_IN], want[CCG__EIN_MAX_IN];
  int ranks[CCG__EIN_MAX_IN], blocks, np = 0, label = -1;
  const char *eq = NULL;
  ccg__einsum e;
  char err[160];
  if (nin > CCG__EIN_MAX_IN ||
      ccg_node_attr_string(g, n, "equation", &eq) != CCG_STATUS_OK)
    return sh_replicate(sh, n);
  for (size_t i = 0; i < nin; i++) {
    ranks[i] = sh_rank_of(sh, ccg_node_input(g, n, i));
    p[i] = sh_cur(sh, ccg_node_input(g, n, i), &blocks);
    want[i] = sh_R();
    np += sh_is_partial(p[i]);
    if (blocks != 1)
      return sh_replicate(sh, n);
  }
  if (!ccg__einsum_parse(eq, (int)nin, ranks, &e, err, sizeof err))
    return sh_replicate(sh, n);
  for (size_t i = 0; i < nin && label < 0; i++)
    if (sh_is_shard(p[i]))
      label = e.lab[i][p[i].dim];
  if (label < 0) {
    bool lone = np == 1 && !sh_any_sharded(p, nin);
    for (size_t i = 0; i < nin && lone; i++)
      want[i] = p[i];
    return sh_fetch_emit(sh, n, want, NULL, NULL, 0, lone ? sh_P() : sh_R(), 1);
  }
  for (size_t i = 0; i < nin; i++) {
    int at = -1, count = 0;
    for (int d = 0; d < e.rank[i]; d++)
      if (e.lab[i][d] == label) {
        at = d;
        count++;
      }
    if (count > 1 || (at >= 0 && sh_gdim(sh, ccg_node_input(g, n, i), at) == 1))
      return sh_replicate(sh, n);
    if (at >= 0)
      want[i] = sh_S(at);
  }
  ccg_placement out = sh_P();
  for (int d = 0; d < e.out_rank; d++)
    if (e.out_lab[d] == label)
      out = sh_S(d);
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* Gemm without transA: a row shard of A passes (each row of the product
 * is its row of A times B); C broadcasts over the rows or is whole. Only
 * the local run (data parallel) uses it; the plan's axis sees replicated
 * inputs, as before. */
ccg_status sh_rule_gemm(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  int64_t ta = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "transA", &ta));
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  ccg_value_id c = nin > 2 ? ccg_node_input(g, n, 2) : CCG_NONE;
  if (ta || !sh_is_shard(p) || p.dim != 0 ||
      (c != CCG_NONE && sh_rank_of(sh, c) == 2 && sh_gdim(sh, c, 0) != 1))
    return sh_replicate(sh, n);
  ccg_placement want[3] = {p, sh_R(), sh_R()};
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}
