/* Pipeline split: the rules that make a copied node right for one
 * microbatch (targets and tables fixed for the whole batch cut to its
 * rows, a value still holding the whole batch refused) and how the last
 * stage combines a scalar output of its microbatches. */
#include <stdio.h>
#include <stdlib.h>
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
 * a mean over the batch with every position counted alike (equal
 * microbatches make the mean of their means the whole batch's), a sum (the
 * sum of their sums), or a weighted mean: a loss that skips ignored
 * targets or weighs classes, or a ratio of two sums (a masked loss over
 * the count of its valid labels), whose microbatches count different
 * weights, so their means are averaged weighted by them. */
typedef enum pp_reduction {
  PP_RED_UNKNOWN,
  PP_RED_MEAN,
  PP_RED_SUM,
  PP_RED_WEIGHTED
} pp_reduction;

static pp_reduction reduction_of(pp_build *b, ccg_value_id v, int depth,
                                 ccg_value_id *src);

/* Whether a loss's class weights (input 2) are fixed, so that the sum of
 * the weights a microbatch applies can be made without a path for a
 * gradient (the loss's own rule gives them none): made from constants, or
 * an initializer with the same data on every rank. */
static bool fixed_weights(pp_build *b, ccg_node_id n) {
  ccg_graph *g = b->g;
  ccg_value_id w =
      ccg_node_num_inputs(g, n) > 2 ? ccg_node_input(g, n, 2) : CCG_NONE;
  if (w == CCG_NONE || b->pl->is_const[w])
    return true;
  if (ccg_value_kind_of(g, w) != CCG_VALUE_INITIALIZER || !ccg_value_data(g, w))
    return false;
  int64_t world = ccg_mesh_world_size(&b->pl->mesh);
  for (int64_t r = 0; r < world; r++)
    if (ccg_value_has_rank_data(g, w, r))
      return false;
  return true;
}

/* A loss op's "reduction" attribute (default mean); an f32 or f64 mean
 * that skips an ignore_index or weighs classes is weighted, where the
 * weights can be counted (else the mean of means stands in). */
static pp_reduction loss_attr(pp_build *b, ccg_node_id n) {
  ccg_graph *g = b->g;
  const char *red = "mean";
  if (ccg_node_attr(g, n, "reduction") &&
      ccg_node_attr_string(g, n, "reduction", &red) != CCG_STATUS_OK)
    return PP_RED_UNKNOWN;
  bool weighted =
      ccg_node_attr(g, n, "ignore_index") ||
      (ccg_node_num_inputs(g, n) > 2 && ccg_node_input(g, n, 2) != CCG_NONE);
  if (strcmp(red, "sum") == 0)
    return PP_RED_SUM;
  if (strcmp(red, "mean") != 0)
    return PP_RED_UNKNOWN;
  /* the copies sum what the op averages in double: a half-precision sum
   * over many tokens would overflow */
  ccg_dtype dt = ccg_value_dtype(g, ccg_node_output(g, n, 0));
  bool wide = dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F64;
  return weighted && wide && fixed_weights(b, n) ? PP_RED_WEIGHTED
                                                 : PP_RED_MEAN;
}

static bool is_mean(pp_reduction r) {
  return r == PP_RED_MEAN || r == PP_RED_WEIGHTED;
}

/* Add/Sub: terms with the same reduction keep it; a term that does not
 * depend on the batch added to a mean keeps the mean (mean(x + c) =
 * mean(x) + c), to a sum it would be counted once per microbatch. Means
 * weighted differently (two losses, or a loss and a plain mean) fall back
 * to the mean of means. */
static pp_reduction terms(pp_build *b, ccg_node_id n, int depth,
                          ccg_value_id *src) {
  ccg_graph *g = b->g;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_input(g, n, 1);
  ccg_value_id sx = CCG_NONE, sy = CCG_NONE;
  bool bx = b->pl->batch[x], by = b->pl->batch[y];
  pp_reduction rx = bx ? reduction_of(b, x, depth + 1, &sx) : PP_RED_UNKNOWN;
  pp_reduction ry = by ? reduction_of(b, y, depth + 1, &sy) : PP_RED_UNKNOWN;
  if (bx && by) {
    if (rx == ry && sx == sy) {
      *src = sx;
      return rx;
    }
    return is_mean(rx) && is_mean(ry) ? PP_RED_MEAN : PP_RED_UNKNOWN;
  }
  *src = bx ? sx : sy;
  pp_reduction r = bx ? rx : ry;
  return is_mean(r) ? r : PP_RED_UNKNOWN;
}

/* Through the scalar ops between the reduction and the output: casts,
 * reshapes, negation, scaling by what does not depend on the batch, and
 * a ratio of two sums. *src: the value whose microbatches' weights weigh
 * a weighted mean (the loss, the ratio). */
static pp_reduction reduction_of(pp_build *b, ccg_value_id v, int depth,
                                 ccg_value_id *src) {
  ccg_graph *g = b->g;
  ccg_node_id n = ccg_value_producer(g, v);
  *src = CCG_NONE;
  if (n == CCG_NONE || depth > 32)
    return PP_RED_UNKNOWN;
  ccg_value_id x = ccg_node_input(g, n, 0), s2 = CCG_NONE;
  switch (ccg_node_op(g, n)) {
  case CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
  case CCG_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    if (ccg_node_output(g, n, 0) != v)
      return PP_RED_UNKNOWN;
    if (loss_attr(b, n) == PP_RED_WEIGHTED)
      *src = v;
    return loss_attr(b, n);
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
    return reduction_of(b, x, depth + 1, src);
  case CCG_OP_MUL:
  case CCG_OP_DIV: {
    ccg_value_id y = ccg_node_input(g, n, 1);
    if (!b->pl->batch[y])
      return reduction_of(b, x, depth + 1, src);
    if (ccg_node_op(g, n) == CCG_OP_MUL && !b->pl->batch[x])
      return reduction_of(b, y, depth + 1, src);
    int64_t numel;
    if (ccg_node_op(g, n) == CCG_OP_DIV &&
        reduction_of(b, x, depth + 1, src) == PP_RED_SUM &&
        reduction_of(b, y, depth + 1, &s2) == PP_RED_SUM &&
        ccg_shape_numel(ccg_value_shape(g, v), &numel) == CCG_STATUS_OK &&
        numel == 1) {
      *src = v;
      return PP_RED_WEIGHTED;
    }
    return PP_RED_UNKNOWN;
  }
  case CCG_OP_ADD:
  case CCG_OP_SUB:
    return terms(b, n, depth, src);
  default:
    return PP_RED_UNKNOWN;
  }
}

/* Whether node n is where a weighted mean is made (a loss with
 * ignore_index or class weights, a scalar ratio of two sums): its
 * microbatch copies record their weights and divide by them safely. */
static bool weighted_source(pp_build *b, ccg_node_id n) {
  ccg_op op = ccg_node_op(b->g, n);
  ccg_value_id y = ccg_node_output(b->g, n, 0), src;
  if (op != CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS &&
      op != CCG_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS && op != CCG_OP_DIV)
    return false;
  return y != CCG_NONE && b->pl->batch[y] &&
         ccg_dtype_is_float(ccg_value_dtype(b->g, y)) &&
         reduction_of(b, y, 0, &src) == PP_RED_WEIGHTED && src == y;
}

/* w where it is not 0, else 1: a microbatch whose targets are all ignored
 * has a sum of 0 over a weight of 0, which the mean would make NaN (and
 * its gradient with it) where the whole batch's is a number; it enters
 * the combination with weight 0 either way. */
static ccg_status safe_weight(pp_build *b, ccg_value_id w, ccg_value_id *out) {
  ccg_value_id nz, one;
  if (ccg__grad_scalar(b->d, ccg_value_dtype(b->d, w), 1.0, &one) ||
      ccg_cast(b->d, w, CCG_DTYPE_BOOL, &nz) ||
      ccg_where(b->d, nz, w, one, out))
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

/* The sum of the weights a loss applies to microbatch m's targets (in[1]);
 * class weights stored as an initializer enter as a Constant of their
 * data, so that the sum passes no gradient to them. */
static ccg_status loss_weight(pp_build *b, ccg_node_id n,
                              const ccg_value_id *in, ccg_value_id *out) {
  ccg_graph *g = b->g, *d = b->d;
  const ccg_attr *ii = ccg_node_attr(g, n, "ignore_index");
  ccg_value_id w = ccg_node_num_inputs(g, n) > 2 ? in[2] : CCG_NONE;
  ccg_value_id ws = w == CCG_NONE ? CCG_NONE : ccg_node_input(g, n, 2);
  if (w != CCG_NONE && !b->pl->is_const[ws] &&
      ccg_constant(d, ccg_value_data(g, ws), &w) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  ccg_dtype dx = ccg_value_dtype(d, in[0]);
  ccg_value_id zero, one, wt, tsafe;
  if (ccg__grad_scalar(d, dx, 0.0, &zero) ||
      ccg__grad_scalar(d, dx, 1.0, &one) ||
      ccg__loss_weight_applied(d, in[1], w, ii ? &ii->i : NULL, zero, one, &wt,
                               &tsafe) ||
      ccg_reduce_sum(d, wt, NULL, 0, false, out))
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

ccg_status ccg__pp_mb_weight(pp_build *b, ccg_node_id n, int m,
                             ccg_value_id *in, ccg_attr *attrs, size_t *na) {
  if (m < 0 || b->pl->M == 1 || !b->mb_weight || !weighted_source(b, n))
    return CCG_STATUS_OK;
  ccg_value_id *w =
      &b->mb_weight[(size_t)m * b->pl->nv + ccg_node_output(b->g, n, 0)];
  if (ccg_node_op(b->g, n) == CCG_OP_DIV) {
    *w = in[1];
    return safe_weight(b, in[1], &in[1]);
  }
  CCG_CHECK(loss_weight(b, n, in, w));
  /* the sum: its mean is taken by ccg__pp_mb_mean */
  size_t i = 0;
  while (i < *na && strcmp(attrs[i].name, "reduction") != 0)
    i++;
  attrs[i] = CCG_ATTR_S("reduction", "sum");
  if (i == *na)
    (*na)++;
  return CCG_STATUS_OK;
}

ccg_status ccg__pp_mb_mean(pp_build *b, ccg_node_id n, int m, ccg_value_id *y) {
  ccg_op op = ccg_node_op(b->g, n);
  if (m < 0 || b->pl->M == 1 || op == CCG_OP_DIV || !b->mb_weight ||
      !weighted_source(b, n))
    return CCG_STATUS_OK;
  ccg_value_id
      w = b->mb_weight[(size_t)m * b->pl->nv + ccg_node_output(b->g, n, 0)],
      ws, mean;
  CCG_CHECK(safe_weight(b, w, &ws));
  if (ccg_div(b->d, *y, ws, &mean) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  /* the copy's name goes to the mean, which is what the source's value is */
  char name[PP_NAME_MAX + 8];
  snprintf(name, sizeof name, "%s.sum", ccg_value_name(b->d, *y));
  char keep[PP_NAME_MAX];
  snprintf(keep, sizeof keep, "%s", ccg_value_name(b->d, *y));
  if (ccg_value_set_name(b->d, *y, name) ||
      ccg_value_set_name(b->d, mean, keep))
    return ccg__pp_from_d(b);
  *y = mean;
  return CCG_STATUS_OK;
}

/* parts[m] * w[m] summed over m, over the sum of w: the mean of the whole
 * batch when part m is the mean of microbatch m's positions weighing w[m]
 * in all (and so for any affine function of it, the ops reduction_of
 * passes). */
static ccg_status weighted(pp_build *b, const ccg_value_id *parts,
                           const ccg_value_id *w, ccg_value_id *y) {
  ccg_graph *d = b->d;
  ccg_dtype dt = ccg_value_dtype(d, parts[0]);
  ccg_value_id num = CCG_NONE, den = CCG_NONE;
  for (int64_t m = 0; m < b->pl->M; m++) {
    ccg_value_id wm = w[m], t;
    if (ccg_value_dtype(d, wm) != dt && ccg_cast(d, wm, dt, &wm))
      return ccg__pp_from_d(b);
    if (ccg_mul(d, parts[m], wm, &t) ||
        (m > 0 && (ccg_add(d, num, t, &t) || ccg_add(d, den, wm, &wm))))
      return ccg__pp_from_d(b);
    num = t;
    den = wm;
  }
  if (ccg_div(d, num, den, y) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

/* Whether the weights w[0..M-1] can be made before any microbatch's
 * backward: the first backward scales its loss by w[0] over the sum of
 * all of them, so under 1F1B the weights of the microbatches whose
 * forward comes later must not wait for their activations. They come from
 * the targets, not from anything received; they and what they are made of
 * (the copies of target arithmetic, a shift of the labels) then move to
 * slot 0, which the stage runs first. False, with nothing moved, when one
 * depends on a Recv. */
static ccg_status early_weights(pp_build *b, const ccg_value_id *w, bool *ok) {
  ccg_graph *d = b->d;
  size_t nn = ccg_graph_num_nodes(d), sp = 0, nseen = 0;
  bool *seen = calloc(nn + 1, sizeof *seen);
  ccg_node_id *stack = malloc((nn + 1) * sizeof *stack);
  ccg_node_id *found = malloc((nn + 1) * sizeof *found);
  ccg_status st = CCG_STATUS_OK;
  *ok = seen && stack && found;
  if (!*ok)
    st = ccg__error(&b->g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  for (int64_t m = 0; *ok && m < b->pl->M; m++) {
    ccg_node_id p = ccg_value_producer(d, w[m]);
    if (p != CCG_NONE && !seen[p])
      seen[p] = true, stack[sp++] = p;
    while (*ok && sp) {
      ccg_node_id n = stack[--sp];
      found[nseen++] = n;
      *ok = ccg_node_op(d, n) != CCG_OP_RECV;
      for (size_t i = 0; i < ccg_node_num_inputs(d, n); i++) {
        ccg_value_id v = ccg_node_input(d, n, i);
        ccg_node_id q = v == CCG_NONE ? CCG_NONE : ccg_value_producer(d, v);
        if (q != CCG_NONE && !seen[q])
          seen[q] = true, stack[sp++] = q;
      }
    }
  }
  for (size_t i = 0; *ok && i < nseen; i++)
    if (ccg_node_set_meta(d, found[i], CCG_META_SLOT, "0") != CCG_STATUS_OK) {
      st = ccg__pp_from_d(b);
      break;
    }
  free(seen);
  free(stack);
  free(found);
  return st;
}

/* Scalar output o of the last stage from its microbatches' values: their
 * sum, their mean weighted by the microbatches' weights for a weighted
 * mean, or their mean. */
ccg_status ccg__pp_combine_scalar(pp_build *b, ccg_value_id o,
                                  const ccg_value_id *parts, ccg_value_id *y) {
  ccg_graph *g = b->g;
  int64_t M = b->pl->M;
  ccg_value_id src;
  pp_reduction r = reduction_of(b, o, 0, &src);
  if (r == PP_RED_UNKNOWN)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: output '%s' is a scalar that depends on the "
                      "batch, but not through a mean or a sum over it (a "
                      "loss's reduction, ReduceMean, ReduceSum): its "
                      "microbatches' values cannot be combined",
                      ccg_value_name(g, o));
  if (r != PP_RED_SUM && ccg_value_dtype(b->d, parts[0]) != CCG_DTYPE_F32)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: output '%s' is a %s scalar; the mean "
                      "over microbatches is made for f32",
                      ccg_value_name(g, o),
                      ccg_dtype_name(ccg_value_dtype(b->d, parts[0])));
  if (r == PP_RED_WEIGHTED && b->mb_weight) {
    /* the weights exist where the source was copied: on this stage;
     * else, or when they wait for a Recv, the mean of means stands in */
    const ccg_value_id *w = &b->mb_weight[src];
    bool here = true;
    for (int64_t m = 0; m < M; m++)
      here &= w[(size_t)m * b->pl->nv] != CCG_NONE;
    ccg_value_id ws[4096];
    for (int64_t m = 0; here && m < M; m++)
      ws[m] = w[(size_t)m * b->pl->nv];
    if (here)
      CCG_CHECK(early_weights(b, ws, &here));
    if (here)
      return weighted(b, parts, ws, y);
  }
  *y = parts[0];
  for (int64_t m = 1; m < M; m++)
    if (ccg_add(b->d, *y, parts[m], y) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
  if (r == PP_RED_SUM)
    return CCG_STATUS_OK;
  float inv = 1.0f / (float)M;
  ccg_tensor c = {CCG_DTYPE_F32, 0, {0}, &inv};
  ccg_value_id k;
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
