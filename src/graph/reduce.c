/* Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp. The
 * IR keeps `axes` as an attribute for all (opset 13 ReduceSum and opset 18
 * others take it as an input; the ONNX layer converts), so shape inference
 * never depends on the contents of another value. */
#include <string.h>

#include "graph/internal.h"

static const ccg__attr_spec reduce_attrs[] = {
    {"axes", CCG_ATTR_INTS, false, 0, 0, NULL},
    {"keepdims", CCG_ATTR_INT, false, 1, 0, NULL},
    {"noop_with_empty_axes", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* Marks the reduced dims; a dim named twice (e.g. 1 and -2 on rank 3) is an
 * error since ONNX leaves it undefined. */
static ccg_status reduced_dims(ccg__infer *ix, int rank,
                               bool reduced[CCG_MAX_RANK]) {
  const int64_t *axes;
  size_t n = ccg__attr_ints(ix, "axes", &axes);
  memset(reduced, 0, CCG_MAX_RANK * sizeof *reduced);
  if (n == 0) {
    bool noop = false;
    CCG_CHECK(ccg__attr_flag(ix, "noop_with_empty_axes", &noop));
    for (int k = 0; k < rank; k++)
      reduced[k] = !noop;
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < n; i++) {
    int a;
    CCG_CHECK(ccg__axis(ix, axes[i], rank, "reduction axis", &a));
    if (reduced[a])
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "axes names dim %d twice (entry %zu is %lld)", a, i,
                       (long long)axes[i]);
    reduced[a] = true;
  }
  return CCG_STATUS_OK;
}

/* L2, LogSum and LogSumExp are float only: their integer forms in ONNX
 * truncate a float result, which no model relies on. */
static bool float_only(ccg_op op) {
  return op == CCG_OP_REDUCE_L2 || op == CCG_OP_REDUCE_LOG_SUM ||
         op == CCG_OP_REDUCE_LOG_SUM_EXP;
}

static ccg_status infer_reduce(ccg__infer *ix) {
  if (float_only(ix->op))
    CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  else
    CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  bool keep = true, reduced[CCG_MAX_RANK];
  CCG_CHECK(ccg__attr_flag(ix, "keepdims", &keep));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  CCG_CHECK(reduced_dims(ix, x->rank, reduced));
  ccg_shape out;
  memset(&out, 0, sizeof out);
  for (int k = 0; k < x->rank; k++) {
    if (!reduced[k])
      out.dims[out.rank++] = x->dims[k];
    else if (keep)
      out.dims[out.rank++] = ccg_dim_num(1);
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = out;
  return CCG_STATUS_OK;
}

/* ---- gradients ---------------------------------------------------------- */

/* The reduced dims of the forward node (sorted), and whether it kept them. */
typedef struct reduced {
  int64_t axes[CCG_MAX_RANK];
  size_t n;
  bool keep;
  bool none; /* noop_with_empty_axes with no axes: the identity */
} reduced;

static void reduced_of(ccg__grad *gx, reduced *r) {
  int rank = ccg_value_shape(gx->g, gx->in[0])->rank;
  const int64_t *axes;
  size_t n = ccg__grad_attr_ints(gx, "axes", &axes);
  bool mask[CCG_MAX_RANK] = {false};
  r->keep = ccg__grad_attr_i(gx, "keepdims") != 0;
  r->none = n == 0 && ccg__grad_attr_i(gx, "noop_with_empty_axes") != 0;
  for (size_t i = 0; i < n; i++)
    mask[axes[i] < 0 ? axes[i] + rank : axes[i]] = true;
  r->n = 0;
  for (int k = 0; k < rank; k++)
    if (n == 0 || mask[k])
      r->axes[r->n++] = k;
}

/* dy with the reduced dims back as 1s (keepdims form). */
static ccg_status keep_form(ccg__grad *gx, const reduced *r, ccg_value_id v,
                            ccg_value_id *out) {
  if (r->keep || r->none || r->n == 0) {
    *out = v;
    return CCG_STATUS_OK;
  }
  return ccg_unsqueeze(gx->g, v, r->axes, r->n, out);
}

/* dy spread back over the reduced dims: Expand to x's shape. */
static ccg_status spread(ccg__grad *gx, const reduced *r, ccg_value_id v,
                         ccg_value_id *out) {
  ccg_value_id shape;
  CCG_CHECK(keep_form(gx, r, v, &v));
  CCG_CHECK(ccg__grad_shape_of(gx->g, gx->in[0], &shape));
  return ccg_expand(gx->g, v, shape, out);
}

static ccg_status grad_reduce_sum(ccg__grad *gx) {
  reduced r;
  reduced_of(gx, &r);
  return spread(gx, &r, gx->gout[0], &gx->gin[0]);
}

/* The sum's gradient over the count of reduced elements: a constant for
 * numeric dims, else the sum of ones over the reduced dims. */
static ccg_status grad_reduce_mean(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  if (r.none)
    return grad_reduce_sum(gx);
  ccg_shape xs = *ccg_value_shape(g, gx->in[0]);
  double count = 1.0;
  bool known = true;
  for (size_t i = 0; i < r.n; i++) {
    ccg_dim d = xs.dims[r.axes[i]];
    known = known && !ccg_dim_is_sym(d);
    count *= known ? (double)d.size : 1.0;
  }
  ccg_value_id v;
  CCG_CHECK(spread(gx, &r, gx->gout[0], &v));
  if (known)
    return ccg__grad_scale(g, v, count > 0 ? 1.0 / count : 0.0, &gx->gin[0]);
  ccg_value_id ones, one, n;
  CCG_CHECK(ccg__grad_zeros_like(g, gx->in[0], &ones));
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, v), 1.0, &one));
  CCG_CHECK(ccg_add(g, ones, one, &ones));
  CCG_CHECK(ccg_reduce_sum(g, ones, r.axes, r.n, true, &n));
  return ccg_div(g, v, n, &gx->gin[0]);
}

/* The gradient goes to the maxima (ReduceMin: the minima), shared evenly
 * among ties (as torch.amax / amin): mask = (x == y), dx = dy mask /
 * count(mask). Equality is "x - y cast to bool is false", the ops the IR
 * has. */
static ccg_status grad_reduce_max(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  if (r.none)
    return grad_reduce_sum(gx);
  ccg_dtype dt = ccg_value_dtype(g, gx->in[0]);
  ccg_value_id y, dy, diff, zero, one, mask, cnt;
  CCG_CHECK(keep_form(gx, &r, gx->out[0], &y));
  CCG_CHECK(keep_form(gx, &r, gx->gout[0], &dy));
  CCG_CHECK(ccg_sub(g, gx->in[0], y, &diff));
  CCG_CHECK(ccg_cast(g, diff, CCG_DTYPE_BOOL, &diff));
  CCG_CHECK(ccg__grad_scalar(g, dt, 0.0, &zero));
  CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &one));
  CCG_CHECK(ccg_where(g, diff, zero, one, &mask));
  CCG_CHECK(ccg_reduce_sum(g, mask, r.axes, r.n, true, &cnt));
  CCG_CHECK(ccg_div(g, dy, cnt, &dy));
  return ccg_mul(g, mask, dy, &gx->gin[0]);
}

static ccg_status reduce(ccg_graph *g, ccg_op op, ccg_value_id x,
                         const int64_t *axes, size_t n_axes, bool keepdims,
                         ccg_value_id *out);

/* A float 0/1 mask of x != 0 (Cast to bool is the comparison the IR has). */
static ccg_status nonzero(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  CCG_CHECK(ccg_cast(g, x, CCG_DTYPE_BOOL, out));
  return ccg_cast(g, *out, ccg_value_dtype(g, x), out);
}

/* dx = dy * f with f of x's shape (dy broadcast back over reduced dims). */
static ccg_status times_dy(ccg__grad *gx, const reduced *r, ccg_value_id f) {
  ccg_value_id dy;
  CCG_CHECK(keep_form(gx, r, gx->gout[0], &dy));
  return ccg_mul(gx->g, f, dy, &gx->gin[0]);
}

/* The exact gradient, zeros included: where x != 0, prod / x; at a zero
 * that is the only one of its group, the product of the others; at a zero
 * with another zero beside it, 0. (prod / x alone would give NaN at zeros.)
 * Zeros are replaced by 1 before any division. */
static ccg_status grad_reduce_prod(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  if (r.none)
    return grad_reduce_sum(gx);
  ccg_value_id x = gx->in[0];
  ccg_dtype dt = ccg_value_dtype(g, x);
  ccg_value_id y, nzb, zero, one, xs, pnz, isz, cnt, other, zg, f;
  CCG_CHECK(keep_form(gx, &r, gx->out[0], &y));
  CCG_CHECK(ccg_cast(g, x, CCG_DTYPE_BOOL, &nzb));
  CCG_CHECK(ccg__grad_scalar(g, dt, 0.0, &zero));
  CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &one));
  CCG_CHECK(ccg_where(g, nzb, x, one, &xs));
  CCG_CHECK(reduce(g, CCG_OP_REDUCE_PROD, xs, r.axes, r.n, true, &pnz));
  CCG_CHECK(ccg_where(g, nzb, zero, one, &isz));
  CCG_CHECK(ccg_reduce_sum(g, isz, r.axes, r.n, true, &cnt));
  CCG_CHECK(ccg_sub(g, cnt, one, &other));
  CCG_CHECK(ccg_cast(g, other, CCG_DTYPE_BOOL, &other));
  CCG_CHECK(ccg_where(g, other, zero, pnz, &zg));
  CCG_CHECK(ccg_div(g, y, xs, &f));
  CCG_CHECK(ccg_where(g, nzb, f, zg, &f));
  return times_dy(gx, &r, f);
}

/* sign(x) (0 at 0, the subgradient torch takes). */
static ccg_status grad_reduce_l1(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  ccg_value_id pos, neg, s;
  CCG_CHECK(ccg_relu(g, gx->in[0], &pos));
  CCG_CHECK(nonzero(g, pos, &pos));
  CCG_CHECK(ccg_neg(g, gx->in[0], &neg));
  CCG_CHECK(ccg_relu(g, neg, &neg));
  CCG_CHECK(nonzero(g, neg, &neg));
  CCG_CHECK(ccg_sub(g, pos, neg, &s));
  return times_dy(gx, &r, s);
}

/* x / ||x||, and 0 where the norm is 0 (as torch). */
static ccg_status grad_reduce_l2(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  ccg_dtype dt = ccg_value_dtype(g, gx->in[0]);
  ccg_value_id y, dy, nzb, zero, q, f;
  CCG_CHECK(keep_form(gx, &r, gx->out[0], &y));
  CCG_CHECK(keep_form(gx, &r, gx->gout[0], &dy));
  CCG_CHECK(ccg_cast(g, y, CCG_DTYPE_BOOL, &nzb));
  CCG_CHECK(ccg__grad_scalar(g, dt, 0.0, &zero));
  CCG_CHECK(ccg_div(g, dy, y, &q));
  CCG_CHECK(ccg_where(g, nzb, q, zero, &q));
  CCG_CHECK(ccg_mul(g, gx->in[0], q, &f));
  return ccg__grad_reshape_like(g, f, gx->in[0], &gx->gin[0]);
}

static ccg_status grad_reduce_sum_square(ccg__grad *gx) {
  reduced r;
  reduced_of(gx, &r);
  ccg_value_id f;
  CCG_CHECK(ccg__grad_scale(gx->g, gx->in[0], 2.0, &f));
  return times_dy(gx, &r, f);
}

/* d log(sum x) = dy / sum, with sum = exp(y). */
static ccg_status grad_reduce_log_sum(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  ccg_value_id s, q;
  CCG_CHECK(ccg_exp(g, gx->out[0], &s));
  CCG_CHECK(ccg_div(g, gx->gout[0], s, &q));
  return spread(gx, &r, q, &gx->gin[0]);
}

/* softmax weights over the reduced dims: exp(x - y). */
static ccg_status grad_reduce_log_sum_exp(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  reduced r;
  reduced_of(gx, &r);
  ccg_value_id y, f;
  CCG_CHECK(keep_form(gx, &r, gx->out[0], &y));
  CCG_CHECK(ccg_sub(g, gx->in[0], y, &f));
  CCG_CHECK(ccg_exp(g, f, &f));
  return times_dy(gx, &r, f);
}

/* Same semantics since opset 11 (negative axes); later versions add dtypes
 * and move axes to an input, which the ONNX layer turns into the attribute. */
#define REDUCE_DEF(id, grad, types)                                            \
  const ccg__op_def ccg__opdef_##id = {CCG__ATTRS(reduce_attrs),               \
                                       0,                                      \
                                       infer_reduce,                           \
                                       grad,                                   \
                                       .shard = CCG_OP_SHARD_OWN,              \
                                       .dtypes = types,                        \
                                       .onnx_since = 11}
REDUCE_DEF(REDUCE_SUM, grad_reduce_sum, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_MEAN, grad_reduce_mean, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_MAX, grad_reduce_max, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_MIN, grad_reduce_max, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_PROD, grad_reduce_prod, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_L1, grad_reduce_l1, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_L2, grad_reduce_l2, CCG__FLOAT_TYPES);
REDUCE_DEF(REDUCE_SUM_SQUARE, grad_reduce_sum_square, CCG__NUM_TYPES);
REDUCE_DEF(REDUCE_LOG_SUM, grad_reduce_log_sum, CCG__FLOAT_TYPES);
REDUCE_DEF(REDUCE_LOG_SUM_EXP, grad_reduce_log_sum_exp, CCG__FLOAT_TYPES);

/* ---- builders ----------------------------------------------------------- */

static ccg_status reduce(ccg_graph *g, ccg_op op, ccg_value_id x,
                         const int64_t *axes, size_t n_axes, bool keepdims,
                         ccg_value_id *out) {
  ccg_attr attrs[2];
  size_t n = 0;
  if (axes && n_axes)
    attrs[n++] = CCG_ATTR_IS("axes", axes, n_axes);
  attrs[n++] = CCG_ATTR_I("keepdims", keepdims ? 1 : 0);
  return ccg__build(g, op, &x, 1, attrs, n, 1, out, NULL);
}

ccg_status ccg_reduce_sum(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                          size_t n_axes, bool keepdims, ccg_value_id *out) {
  return reduce(g, CCG_OP_REDUCE_SUM, x, axes, n_axes, keepdims, out);
}

ccg_status ccg_reduce_mean(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                           size_t n_axes, bool keepdims, ccg_value_id *out) {
  return reduce(g, CCG_OP_REDUCE_MEAN, x, axes, n_axes, keepdims, out);
}

ccg_status ccg_reduce_max(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                          size_t n_axes, bool keepdims, ccg_value_id *out) {
  return reduce(g, CCG_OP_REDUCE_MAX, x, axes, n_axes, keepdims, out);
}
