/* Pipeline split: the rules that make a copied node right for one
 * microbatch (targets and tables fixed for the whole batch cut to its
 * rows, a value still holding the whole batch refused) and how the last
 * stage combines a scalar output of its microbatches. */
#include <string.h>

#include "passes/pipeline_internal.h"

/* A Reshape or Expand of a microbatch whose fixed target still has the
 * whole batch: dim 0 written as the batch (beside a -1 that takes the
 * rest), or a Reshape target without -1 whose size is the whole batch's.
 * Dim 0 is divided by M. */
static ccg_status mb_reshape(pp_build *b, ccg_node_id n, ccg_value_id *in) {
  ccg_graph *g = b->g;
  ccg_dim e[CCG_MAX_RANK];
  int k = ccg_value_known(g, ccg_node_input(g, n, 1), e);
  int64_t have, want = 1, M = b->pl->M, B = b->pl->batch_size;
  const ccg_shape *gy = ccg_value_shape(g, ccg_node_output(g, n, 0));
  if (k < 1 || ccg_dim_is_sym(e[0]) ||
      ccg_shape_numel(ccg_value_shape(b->d, in[0]), &have) != CCG_STATUS_OK)
    return CCG_STATUS_OK;
  int64_t t[CCG_MAX_RANK];
  bool fixed = true, sym = false;
  for (int i = 0; i < k; i++) {
    sym |= ccg_dim_is_sym(e[i]);
    t[i] = sym ? -1 : e[i].size;
    fixed &= !ccg_dim_is_sym(e[i]) && t[i] > 0;
    want *= t[i];
  }
  bool batch_dim = t[0] == B && gy->rank > 0 && !ccg_dim_is_sym(gy->dims[0]) &&
                   gy->dims[0].size == B;
  if (ccg_node_op(g, n) == CCG_OP_EXPAND)
    fixed = false; /* its target broadcasts: only dim 0 is the batch */
  if (!batch_dim && (!fixed || want == have))
    return CCG_STATUS_OK;
  if (sym || t[0] % M != 0 || (fixed && want / M != have))
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "pipeline: node '%s' reshapes a microbatch of %lld "
                      "elements to a target fixed for the whole batch that "
                      "cannot be divided into %lld microbatches on dim 0",
                      ccg_node_name(g, n), (long long)have, (long long)M);
  t[0] /= M;
  ccg_tensor tt = {CCG_DTYPE_I64, 1, {k}, t};
  if (ccg_constant(b->d, &tt, &in[1]) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

/* Whether a batch-dependent input of n has dim 0 `D` in the source and
 * D / M in the stage: the node's dim 0 carries the batch (the batch itself,
 * or tokens = batch x sequence, batch outermost). */
static bool divided_dim0(pp_build *b, ccg_node_id n, int64_t D,
                         const ccg_value_id *in) {
  ccg_graph *g = b->g;
  for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    if (v == CCG_NONE || !b->pl->batch[v])
      continue;
    const ccg_shape *gs = ccg_value_shape(g, v),
                    *ds = ccg_value_shape(b->d, in[i]);
    if (gs->rank >= 1 && ds->rank == gs->rank && !ccg_dim_is_sym(gs->dims[0]) &&
        !ccg_dim_is_sym(ds->dims[0]) && gs->dims[0].size == D &&
        ds->dims[0].size * b->pl->M == D)
      return true;
  }
  return false;
}

/* A value made for the whole batch from constants or stored as a weight (a
 * causal mask expanded to [batch, 1, seq, seq], or folded into one; zeros
 * of [tokens, hidden] that MoE routing adds its experts' outputs to) that
 * a microbatch's node broadcasts against or joins (a class token expanded
 * to the batch): dim 0 of both is the batch in the source, or, for an
 * elementwise node, a multiple of it that the node's microbatch input has
 * divided (not a MatMul's weight), so the microbatch's rows. */
static ccg_status mb_broadcast(pp_build *b, ccg_node_id n, int m,
                               ccg_value_id *in) {
  ccg_graph *g = b->g;
  int64_t B = b->pl->batch_size, M = b->pl->M;
  ccg_value_id y = ccg_node_output(g, n, 0);
  const ccg_shape *gy = ccg_value_shape(g, y);
  /* integers are shape arithmetic (a Shape times a constant): their
   * length may equal the batch by chance */
  ccg_dtype dt = ccg_value_dtype(g, y);
  if (!b->pl->batch[y] || gy->rank < 1 || ccg_dim_is_sym(gy->dims[0]) ||
      (dt != CCG_DTYPE_BOOL && !ccg_dtype_is_float(dt)))
    return CCG_STATUS_OK;
  int64_t D = gy->dims[0].size;
  bool elementwise =
      ccg_op_shard_rule(ccg_node_op(g, n)) == CCG_OP_SHARD_BROADCAST;
  if (D % M != 0 || (D != B && !(elementwise && divided_dim0(b, n, D, in))))
    return CCG_STATUS_OK;
  for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    if (v == CCG_NONE || b->pl->batch[v])
      continue;
    /* as the stage has it: a rule above may have cut it already */
    const ccg_shape *dv = ccg_value_shape(b->d, in[i]);
    if (dv->rank != gy->rank || ccg_dim_is_sym(dv->dims[0]) ||
        dv->dims[0].size != D)
      continue;
    int64_t start = m * (D / M), end = start + D / M, axis = 0;
    if (ccg_slice(b->d, in[i], &start, &end, &axis, NULL, 1, &in[i]))
      return ccg__pp_from_d(b);
  }
  return CCG_STATUS_OK;
}

/* Whether D is the element count of the leading dims of an input that
 * carries the batch: the batch itself, or its tokens (batch x sequence,
 * batch outermost when flattened). */
static bool batch_rows(const pp_build *b, int64_t D) {
  ccg_graph *g = b->g;
  for (size_t i = 0; i < ccg_graph_num_inputs(g); i++) {
    ccg_value_id v = ccg_graph_input(g, i);
    const ccg_shape *s = ccg_value_shape(g, v);
    int64_t rows = 1;
    for (int k = 0; b->pl->batch[v] && k < s->rank; k++) {
      if (ccg_dim_is_sym(s->dims[k]) ||
          __builtin_mul_overflow(rows, s->dims[k].size, &rows))
        break;
      if (rows == D)
        return true;
    }
  }
  return false;
}

/* A scatter of a microbatch's rows into a table made for the whole batch
 * from constants or stored as a weight (index_add into zeros of [tokens,
 * hidden], as MoE routing writes it): the indices come from the
 * microbatch, so they address its rows, and the table's dim 0, the
 * batch's rows or tokens (not a vocabulary the indices might be token ids
 * of), takes the microbatch's chunk, as data parallelism's batch chunk
 * does for a rank. */
static ccg_status mb_scatter(pp_build *b, ccg_node_id n, int m,
                             ccg_value_id *in) {
  ccg_graph *g = b->g;
  int64_t M = b->pl->M, axis = 0;
  ccg_value_id data = ccg_node_input(g, n, 0);
  const ccg_shape *gd = ccg_value_shape(g, data);
  if (ccg_node_op(g, n) == CCG_OP_SCATTER_ELEMENTS &&
      ccg_node_attr(g, n, "axis"))
    CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  if (b->pl->batch[data] || !b->pl->batch[ccg_node_input(g, n, 1)] ||
      (axis != 0 && axis != -gd->rank) || gd->rank < 1 ||
      ccg_dim_is_sym(gd->dims[0]) || gd->dims[0].size % M != 0 ||
      !batch_rows(b, gd->dims[0].size))
    return CCG_STATUS_OK;
  int64_t rows = gd->dims[0].size / M, start = m * rows, end = start + rows;
  if (ccg_slice(b->d, in[0], &start, &end, &axis, NULL, 1, &in[0]))
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

/* A microbatch's value whose dim 0 is still the whole batch came from a
 * broadcast against something made for the whole batch that the rules
 * above did not cut: an error rather than a silently wrong result. */
ccg_status ccg__pp_check_mb_dim(pp_build *b, ccg_node_id n, ccg_value_id v,
                                ccg_value_id dv, int m) {
  int64_t B = b->pl->batch_size;
  const ccg_shape *gs = ccg_value_shape(b->g, v),
                  *ds = ccg_value_shape(b->d, dv);
  /* activations only: shape arithmetic (Shape, Slice of it) has small
   * int tensors whose length may equal the batch */
  if (m < 0 || b->pl->M == 1 || !b->pl->batch[v] || gs->rank < 1 ||
      !ccg_dtype_is_float(ccg_value_dtype(b->g, v)) ||
      ccg_dim_is_sym(gs->dims[0]) || gs->dims[0].size != B ||
      ccg_dim_is_sym(ds->dims[0]) || ds->dims[0].size != B)
    return CCG_STATUS_OK;
  /* made from the microbatch's shapes alone (a causal mask of
   * ConstantOfShape [seq, seq]), so right whatever its dim 0 is */
  if (!b->pl->data[v])
    return CCG_STATUS_OK;
  return ccg__error(&b->g->ctx, CCG_STATUS_UNSUPPORTED,
                    "pipeline: node '%s' gives microbatch %d's '%s' the whole "
                    "batch (%lld) on dim 0: it combines the microbatch with a "
                    "value made for the whole batch that microbatching cannot "
                    "cut",
                    ccg_node_name(b->g, n), m, ccg_value_name(b->g, v),
                    (long long)B);
}

/* How a scalar output depending on the batch combines over microbatches:
 * a mean over the batch (equal microbatches make the mean of their means
 * the whole batch's) or a sum (the sum of their sums). */
typedef enum pp_reduction {
  PP_RED_UNKNOWN,
  PP_RED_MEAN,
  PP_RED_SUM
} pp_reduction;

static pp_reduction reduction_of(pp_build *b, ccg_value_id v, int depth);

/* A loss op's "reduction" attribute (default mean). */
static pp_reduction loss_attr(ccg_graph *g, ccg_node_id n) {
  const char *red = "mean";
  if (ccg_node_attr(g, n, "reduction") &&
      ccg_node_attr_string(g, n, "reduction", &red) != CCG_STATUS_OK)
    return PP_RED_UNKNOWN;
  return strcmp(red, "mean") == 0  ? PP_RED_MEAN
         : strcmp(red, "sum") == 0 ? PP_RED_SUM
                                   : PP_RED_UNKNOWN;
}

/* Add/Sub: terms with the same reduction keep it; a term that does not
 * depend on the batch added to a mean keeps the mean (mean(x + c) =
 * mean(x) + c), to a sum it would be counted once per microbatch. */
static pp_reduction terms(pp_build *b, ccg_node_id n, int depth) {
  ccg_graph *g = b->g;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_input(g, n, 1);
  bool bx = b->pl->batch[x], by = b->pl->batch[y];
  pp_reduction rx = bx ? reduction_of(b, x, depth + 1) : PP_RED_UNKNOWN;
  pp_reduction ry = by ? reduction_of(b, y, depth + 1) : PP_RED_UNKNOWN;
  if (bx && by)
    return rx == ry ? rx : PP_RED_UNKNOWN;
  pp_reduction r = bx ? rx : ry;
  return r == PP_RED_MEAN ? r : PP_RED_UNKNOWN;
}

/* Through the scalar ops between the reduction and the output: casts,
 * reshapes, negation, scaling by what does not depend on the batch, and
 * a ratio of two sums (a mean weighted by a count, as a masked loss). */
static pp_reduction reduction_of(pp_build *b, ccg_value_id v, int depth) {
  ccg_graph *g = b->g;
  ccg_node_id n = ccg_value_producer(g, v);
  if (n == CCG_NONE || depth > 32)
    return PP_RED_UNKNOWN;
  ccg_value_id x = ccg_node_input(g, n, 0);
  switch (ccg_node_op(g, n)) {
  case CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
  case CCG_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    return ccg_node_output(g, n, 0) == v ? loss_attr(g, n) : PP_RED_UNKNOWN;
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_SUM_SQUARE:
    return PP_RED_SUM;
  case CCG_OP_REDUCE_MEAN:
    return PP_RED_MEAN;
  case CCG_OP_IDENTITY:
  case CCG_OP_CAST:
  case CCG_OP_NEG:
  case CCG_OP_RESHAPE:
  case CCG_OP_SQUEEZE:
  case CCG_OP_UNSQUEEZE:
    return reduction_of(b, x, depth + 1);
  case CCG_OP_MUL:
  case CCG_OP_DIV: {
    ccg_value_id y = ccg_node_input(g, n, 1);
    if (!b->pl->batch[y])
      return reduction_of(b, x, depth + 1);
    if (ccg_node_op(g, n) == CCG_OP_MUL && !b->pl->batch[x])
      return reduction_of(b, y, depth + 1);
    if (ccg_node_op(g, n) == CCG_OP_DIV &&
        reduction_of(b, x, depth + 1) == PP_RED_SUM &&
        reduction_of(b, y, depth + 1) == PP_RED_SUM)
      return PP_RED_MEAN;
    return PP_RED_UNKNOWN;
  }
  case CCG_OP_ADD:
  case CCG_OP_SUB:
    return terms(b, n, depth);
  default:
    return PP_RED_UNKNOWN;
  }
}

/* Scalar output o of the last stage from its microbatches' values: their
 * sum, divided by M for a mean. */
ccg_status ccg__pp_combine_scalar(pp_build *b, ccg_value_id o,
                                  const ccg_value_id *parts, ccg_value_id *y) {
  ccg_graph *g = b->g;
  int64_t M = b->pl->M;
  pp_reduction r = reduction_of(b, o, 0);
  if (r == PP_RED_UNKNOWN)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: output '%s' is a scalar that depends on the "
                      "batch, but not through a mean or a sum over it (a "
                      "loss's reduction, ReduceMean, ReduceSum): its "
                      "microbatches' values cannot be combined",
                      ccg_value_name(g, o));
  *y = parts[0];
  for (int64_t m = 1; m < M; m++)
    if (ccg_add(b->d, *y, parts[m], y) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
  if (r == PP_RED_SUM)
    return CCG_STATUS_OK;
  float inv = 1.0f / (float)M;
  ccg_tensor c = {ccg_value_dtype(b->d, *y), 0, {0}, &inv};
  ccg_value_id k;
  if (c.dtype != CCG_DTYPE_F32)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: output '%s' is a %s scalar; the mean "
                      "over microbatches is made for f32",
                      ccg_value_name(g, o), ccg_dtype_name(c.dtype));
  if (ccg_constant(b->d, &c, &k) || ccg_mul(b->d, *y, k, y))
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

ccg_status ccg__pp_mb_inputs(pp_build *b, ccg_node_id n, int m,
                             ccg_value_id *in) {
  ccg_graph *g = b->g;
  ccg_op op = ccg_node_op(g, n);
  if ((op == CCG_OP_RESHAPE || op == CCG_OP_EXPAND) &&
      ccg_node_num_inputs(g, n) >= 2 && b->pl->batch[ccg_node_input(g, n, 0)])
    CCG_CHECK(mb_reshape(b, n, in));
  if (op == CCG_OP_SCATTER_ELEMENTS || op == CCG_OP_SCATTER_ND)
    CCG_CHECK(mb_scatter(b, n, m, in));
  return mb_broadcast(b, n, m, in);
}
