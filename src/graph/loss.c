/* Training losses: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss,
 * as ONNX defines them (opset 12 on): scores / log-probabilities [N, C, d...],
 * integer targets [N, d...], optional class weights [C], reduction none /
 * sum / mean (mean divides by the sum of the weights applied), and an
 * optional ignore_index whose targets add 0 to the loss and to the
 * weights. */
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

static const ccg__attr_spec loss_attrs[] = {
    {"ignore_index", CCG_ATTR_INT, false, 0, 0, NULL},
    {"reduction", CCG_ATTR_STRING, false, 0, 0, "mean"},
};

static ccg_status check_reduction(ccg__infer *ix, bool *none) {
  const char *r = ccg__attr_s(ix, "reduction");
  if (strcmp(r, "none") != 0 && strcmp(r, "sum") != 0 && strcmp(r, "mean") != 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "reduction is '%s'; expected none, sum or mean", r);
  *none = strcmp(r, "none") == 0;
  return CCG_STATUS_OK;
}

/* Input 0 [N, C, d...] (float), input 1 [N, d...] (i32/i64), optional
 * input 2 [C] of input 0's dtype. */
static ccg_status infer_loss(ccg__infer *ix) {
  char b0[128], b1[128];
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I32) | CCG__DT(I64),
                              "i32 or i64 (class indices)"));
  const ccg_shape *x = ccg__in_shape(ix, 0), *t = ccg__in_shape(ix, 1);
  if (x->rank < 2)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input '%s' has shape %s; expected [N, C, d...]",
                     ccg__in_name(ix, 0), ccg__shape_str(x, b0, sizeof b0));
  bool match = t->rank == x->rank - 1;
  for (int k = 0; match && k < t->rank; k++)
    match = ccg_dim_equal(t->dims[k], x->dims[k ? k + 1 : 0]);
  if (!match)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "target '%s' has shape %s; input '%s' of shape %s needs "
                     "its shape without dim 1",
                     ccg__in_name(ix, 1), ccg__shape_str(t, b1, sizeof b1),
                     ccg__in_name(ix, 0), ccg__shape_str(x, b0, sizeof b0));
  if (ccg__in_has(ix, 2)) {
    CCG_CHECK(ccg__same_dtype(ix, 0, 2));
    const ccg_shape *w = ccg__in_shape(ix, 2);
    if (w->rank != 1 || !ccg_dim_equal(w->dims[0], x->dims[1]))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "weight '%s' has shape %s; expected [C] with C dim 1 "
                       "of input '%s'",
                       ccg__in_name(ix, 2), ccg__shape_str(w, b1, sizeof b1),
                       ccg__in_name(ix, 0));
  }
  bool none = false;
  CCG_CHECK(check_reduction(ix, &none));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  memset(&ix->out_shape[0], 0, sizeof ix->out_shape[0]);
  if (none)
    ix->out_shape[0] = *t;
  if (ix->n_out > 1) {
    ix->out_dtype[1] = ccg__in_dtype(ix, 0);
    ix->out_shape[1] = *x;
  }
  return CCG_STATUS_OK;
}

/* ---- gradients ---------------------------------------------------------- */

/* An integer Constant of dtype dt (i32 or i64) and the given dims. */
static ccg_status int_const(ccg_graph *g, ccg_dtype dt, const int64_t *v,
                            int rank, const int64_t *dims, ccg_value_id *out) {
  size_t n = 1;
  ccg_tensor t = {dt, rank, {0}, NULL};
  for (int d = 0; d < rank; d++)
    n *= (size_t)(t.dims[d] = dims[d]);
  void *data = malloc(n * ccg_dtype_size(dt) + 1);
  if (!data)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    if (dt == CCG_DTYPE_I32)
      ((int32_t *)data)[i] = (int32_t)v[i];
    else
      ((int64_t *)data)[i] = v[i];
  }
  t.data = data;
  ccg_status st = ccg_constant(g, &t, out);
  free(data);
  return st;
}

ccg_status ccg__loss_weight_applied(ccg_graph *g, ccg_value_id t,
                                    ccg_value_id w, const int64_t *ignore_index,
                                    ccg_value_id zero, ccg_value_id one,
                                    ccg_value_id *wt, ccg_value_id *tsafe) {
  ccg_dtype dt = ccg_value_dtype(g, t);
  ccg_value_id valid = CCG_NONE;
  *tsafe = t;
  if (ignore_index) {
    ccg_value_id iv, izero, diff;
    CCG_CHECK(int_const(g, dt, ignore_index, 0, NULL, &iv));
    int64_t z = 0;
    CCG_CHECK(int_const(g, dt, &z, 0, NULL, &izero));
    CCG_CHECK(ccg_sub(g, t, iv, &diff));
    CCG_CHECK(ccg_cast(g, diff, CCG_DTYPE_BOOL, &valid));
    CCG_CHECK(ccg_where(g, valid, t, izero, tsafe));
  }
  if (w != CCG_NONE) {
    CCG_CHECK(ccg_gather(g, w, *tsafe, 0, wt));
    if (ignore_index)
      CCG_CHECK(ccg_where(g, valid, *wt, zero, wt));
  } else if (ignore_index) {
    CCG_CHECK(ccg_where(g, valid, one, zero, wt));
  } else {
    CCG_CHECK(ccg__grad_zeros_like(g, t, wt));
    CCG_CHECK(ccg_cast(g, *wt, ccg_value_dtype(g, one), wt));
    CCG_CHECK(ccg_add(g, *wt, one, wt));
  }
  return CCG_STATUS_OK;
}

/* Per position [N, d...]: the weight applied and the float mask of the
 * class t over [N, C, d...]. */
static ccg_status weights_and_onehot(ccg__grad *gx, ccg_value_id *wt,
                                     ccg_value_id *onehot) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], t = gx->in[1];
  ccg_dtype dx = ccg_value_dtype(g, x), dt = ccg_value_dtype(g, t);
  /* a copy: adding values moves the graph's value table */
  ccg_shape xs = *ccg_value_shape(g, x);
  if (ccg_dim_is_sym(xs.dims[1]))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "the class dim of '%s' is symbolic; the gradient "
                          "needs its size",
                          ccg_value_name(g, x));
  int64_t C = xs.dims[1].size;
  const ccg_attr *ii = ccg_node_attr(g, gx->node, "ignore_index");
  ccg_value_id zero, one, tsafe;
  CCG_CHECK(ccg__grad_scalar(g, dx, 0.0, &zero));
  CCG_CHECK(ccg__grad_scalar(g, dx, 1.0, &one));
  bool has_w = gx->n_in > 2 && gx->in[2] != CCG_NONE;
  CCG_CHECK(ccg__loss_weight_applied(g, t, has_w ? gx->in[2] : CCG_NONE,
                                     ii ? &ii->i : NULL, zero, one, wt,
                                     &tsafe));
  /* classes [1, C, 1, ...] against t unsqueezed to [N, 1, d...] */
  int64_t dims[CCG_MAX_RANK], *cls = malloc((size_t)C * sizeof *cls + 1);
  if (!cls)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
  for (int d = 0; d < xs.rank; d++)
    dims[d] = d == 1 ? C : 1;
  for (int64_t c = 0; c < C; c++)
    cls[c] = c;
  ccg_value_id cv, tu, diff, ne;
  ccg_status st = int_const(g, dt, cls, xs.rank, dims, &cv);
  free(cls);
  CCG_CHECK(st);
  const int64_t ax1[] = {1};
  CCG_CHECK(ccg_unsqueeze(g, tsafe, ax1, 1, &tu));
  CCG_CHECK(ccg_sub(g, tu, cv, &diff));
  CCG_CHECK(ccg_cast(g, diff, CCG_DTYPE_BOOL, &ne));
  return ccg_where(g, ne, zero, one, onehot);
}

/* The gradient of the loss at each position, [N, 1, d...]: dy times the
 * weight applied, over the sum of the weights for mean. */
static ccg_status coefficient(ccg__grad *gx, ccg_value_id wt,
                              ccg_value_id *out) {
  ccg_graph *g = gx->g;
  const char *red = ccg__grad_attr_s(gx, "reduction");
  ccg_value_id c;
  CCG_CHECK(ccg_mul(g, wt, gx->gout[0], &c));
  if (strcmp(red, "mean") == 0) {
    ccg_value_id total;
    CCG_CHECK(ccg_reduce_sum(g, wt, NULL, 0, false, &total));
    CCG_CHECK(ccg_div(g, c, total, &c));
  }
  const int64_t ax1[] = {1};
  return ccg_unsqueeze(g, c, ax1, 1, out);
}

/* d input = -onehot(t) * coefficient. */
static ccg_status grad_nll(ccg__grad *gx) {
  ccg_value_id wt, onehot, c, d;
  CCG_CHECK(weights_and_onehot(gx, &wt, &onehot));
  CCG_CHECK(coefficient(gx, wt, &c));
  CCG_CHECK(ccg_mul(gx->g, onehot, c, &d));
  return ccg_neg(gx->g, d, &gx->gin[0]);
}

/* d scores = (softmax - onehot(t)) * coefficient, plus, when log_prob has a
 * gradient g, the log-softmax backward g - softmax * sum_c g. */
static ccg_status grad_sce(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id p, d = CCG_NONE;
  CCG_CHECK(ccg_softmax(g, gx->in[0], 1, &p));
  if (gx->gout[0] != CCG_NONE) {
    ccg_value_id wt, onehot, c;
    CCG_CHECK(weights_and_onehot(gx, &wt, &onehot));
    CCG_CHECK(coefficient(gx, wt, &c));
    CCG_CHECK(ccg_sub(g, p, onehot, &d));
    CCG_CHECK(ccg_mul(g, d, c, &d));
  }
  if (gx->n_out > 1 && gx->gout[1] != CCG_NONE) {
    const int64_t ax1[] = {1};
    ccg_value_id s, e;
    CCG_CHECK(ccg_reduce_sum(g, gx->gout[1], ax1, 1, true, &s));
    CCG_CHECK(ccg_mul(g, p, s, &s));
    CCG_CHECK(ccg_sub(g, gx->gout[1], s, &e));
    if (d == CCG_NONE)
      d = e;
    else
      CCG_CHECK(ccg_add(g, d, e, &d));
  }
  gx->gin[0] = d;
  return CCG_STATUS_OK;
}

/* Opset 12 and 13 differ in dtypes only. Shard: rule_loss (a batch or
 * trailing-dim shard kept for reductions none and sum). */
const ccg__op_def ccg__opdef_SOFTMAX_CROSS_ENTROPY_LOSS = {
    CCG__ATTRS(loss_attrs),
    0,
    infer_loss,
    grad_sce,
    .shard = CCG_OP_SHARD_OWN,
    .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 12};
const ccg__op_def ccg__opdef_NEGATIVE_LOG_LIKELIHOOD_LOSS = {
    CCG__ATTRS(loss_attrs),
    0,
    infer_loss,
    grad_nll,
    .shard = CCG_OP_SHARD_OWN,
    .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 12};
