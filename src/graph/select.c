/* Selection ops: ArgMax/ArgMin, GatherElements, ScatterElements, TopK,
 * NonZero and Compress. NonZero's and Compress's output sizes depend on
 * the data: their shape rules give a fresh symbolic dim that the executor
 * must bind. */
#include <string.h>

#include "graph/internal.h"

#define BUF 192

/* ---- gradient helper ---------------------------------------------------- */

/* Gradient of x (input 0) where y took x's elements at idx along the
 * node's axis: dy added into zeros of x's shape at those places, so
 * repeated indices add up. */
static ccg_status grad_at_indices(ccg__grad *gx, ccg_value_id idx) {
  ccg_value_id z;
  CCG_CHECK(ccg__grad_zeros_like(gx->g, gx->in[0], &z));
  ccg_value_id in[3] = {z, idx, gx->gout[0]};
  ccg_attr a[2] = {CCG_ATTR_I("axis", ccg__grad_attr_i(gx, "axis")),
                   CCG_ATTR_S("reduction", "add")};
  return ccg__build(gx->g, CCG_OP_SCATTER_ELEMENTS, in, 3, a, 2, 1, &gx->gin[0],
                    NULL);
}

/* ---- ArgMax, ArgMin ----------------------------------------------------- */

static const ccg__attr_spec arg_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 0, 0, NULL},
    {"keepdims", CCG_ATTR_INT, false, 1, 0, NULL},
    {"select_last_index", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* i64 indices over x's shape with the axis reduced (kept as 1 or
 * dropped). An axis of size 0 has no extreme element. */
static ccg_status infer_arg(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  bool keep = true, last = false;
  CCG_CHECK(ccg__attr_flag(ix, "keepdims", &keep));
  CCG_CHECK(ccg__attr_flag(ix, "select_last_index", &last));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  int ax;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), x->rank, "axis", &ax));
  if (ccg__is_num(x->dims[ax], 0))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "axis %d of input '%s' has size 0: no element to select",
                     ax, ccg__in_name(ix, 0));
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 0;
  for (int d = 0; d < x->rank; d++)
    if (d != ax)
      out->dims[out->rank++] = x->dims[d];
    else if (keep)
      out->dims[out->rank++] = ccg_dim_num(1);
  ix->out_dtype[0] = CCG_DTYPE_I64;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_ARG_MAX = {CCG__ATTRS(arg_attrs),
                                        0,
                                        infer_arg,
                                        NULL,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__NUM_TYPES,
                                        .onnx_since = 11};
const ccg__op_def ccg__opdef_ARG_MIN = {CCG__ATTRS(arg_attrs),
                                        0,
                                        infer_arg,
                                        NULL,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__NUM_TYPES,
                                        .onnx_since = 11};

/* ---- GatherElements, ScatterElements ------------------------------------ */

static const ccg__attr_spec gather_elements_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 0, 0, NULL},
};

static const ccg__attr_spec scatter_elements_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 0, 0, NULL},
    {"reduction", CCG_ATTR_STRING, false, 0, 0, "none"},
};

/* indices (input 1) must have data's rank (>= 1) and, off the axis, dims no
 * larger than data's: its elements address data's at the same coordinates
 * but along the axis. */
static ccg_status elements_geometry(ccg__infer *ix, int *ax) {
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I64) | CCG__DT(I32),
                              "i32 or i64 indices"));
  const ccg_shape *d = ccg__in_shape(ix, 0), *q = ccg__in_shape(ix, 1);
  char db[BUF], qb[BUF];
  if (d->rank < 1 || q->rank != d->rank)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "indices %s must have the rank of data %s (at least 1)",
                     ccg__shape_str(q, qb, BUF), ccg__shape_str(d, db, BUF));
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), d->rank, "axis", ax));
  for (int k = 0; k < d->rank; k++) {
    ccg_dim a = d->dims[k], b = q->dims[k];
    bool bad =
        k != *ax && !ccg_dim_is_sym(a) && !ccg_dim_is_sym(b) && b.size > a.size;
    if (bad)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "indices %s is larger than data %s in dim %d (only "
                       "axis %d may differ)",
                       ccg__shape_str(q, qb, BUF), ccg__shape_str(d, db, BUF),
                       k, *ax);
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_gather_elements(ccg__infer *ix) {
  int ax;
  CCG_CHECK(elements_geometry(ix, &ax));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 1);
  return CCG_STATUS_OK;
}

/* data's gradient: dy at the gathered places (input 1). */
static ccg_status grad_gather_elements(ccg__grad *gx) {
  return gx->need[0] ? grad_at_indices(gx, gx->in[1]) : CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_GATHER_ELEMENTS = {
    CCG__ATTRS(gather_elements_attrs),
    0,
    infer_gather_elements,
    grad_gather_elements,
    .shard = CCG_OP_SHARD_OWN,
    .dtypes = CCG__ALL_TYPES,
    .onnx_since = 11};

static ccg_status infer_scatter_elements(ccg__infer *ix) {
  const char *red;
  CCG_CHECK(ccg__attr_reduction(ix, &red));
  int ax;
  CCG_CHECK(elements_geometry(ix, &ax));
  CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  const ccg_shape *q = ccg__in_shape(ix, 1), *u = ccg__in_shape(ix, 2);
  if (!ccg_shape_equal(q, u)) {
    char qb[BUF], ub[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "updates %s must have the shape of indices %s",
                     ccg__shape_str(u, ub, BUF), ccg__shape_str(q, qb, BUF));
  }
  if (strcmp(red, "none") != 0 && ccg__in_dtype(ix, 0) == CCG_DTYPE_BOOL)
    return ccg__fail(ix, CCG_STATUS_DTYPE,
                     "reduction '%s' needs numeric data; '%s' is bool", red,
                     ccg__in_name(ix, 0));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  return CCG_STATUS_OK;
}

/* With repeated indices and reduction none only the last write reached y,
 * which ONNX leaves undefined. */
static ccg_status grad_scatter_elements(ccg__grad *gx) {
  ccg_attr axis = CCG_ATTR_I("axis", ccg__grad_attr_i(gx, "axis"));
  return ccg__grad_scatter(gx, CCG_OP_GATHER_ELEMENTS, CCG_OP_SCATTER_ELEMENTS,
                           &axis);
}

const ccg__op_def ccg__opdef_SCATTER_ELEMENTS = {
    CCG__ATTRS(scatter_elements_attrs),
    0,
    infer_scatter_elements,
    grad_scatter_elements,
    .shard = CCG_OP_SHARD_OWN,
    .dtypes = CCG__ALL_TYPES,
    .onnx_since = 11};

/* ---- TopK --------------------------------------------------------------- */

static const ccg__attr_spec top_k_attrs[] = {
    {"axis", CCG_ATTR_INT, false, -1, 0, NULL},
    {"largest", CCG_ATTR_INT, false, 1, 0, NULL},
    {"sorted", CCG_ATTR_INT, false, 1, 0, NULL},
};

/* K (input 1): one i64 element (ONNX: a vector of one; a scalar is taken
 * too). Its value sizes the outputs; where it is known only at run time
 * (fed, or computed by the graph) the axis gets a fresh symbol that the
 * executor binds from K's contents (docs/exec.md, run-time
 * specialization). */
static ccg_status top_k_count(ccg__infer *ix, int ax, ccg_dim axis_dim,
                              ccg_dim *k) {
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I64), "an i64 K"));
  const ccg_shape *ks = ccg__in_shape(ix, 1);
  if (ks->rank > 1 || (ks->rank == 1 && !ccg__is_num(ks->dims[0], 1))) {
    char kb[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 'K' ('%s') is %s; it holds one element",
                     ccg__in_name(ix, 1), ccg__shape_str(ks, kb, BUF));
  }
  const ccg_dim *kv;
  if (ccg__in_known(ix, 1, &kv) != 1)
    return ccg__fresh_dim(ix, 0, ax, k);
  *k = kv[0];
  if (ccg_dim_is_sym(*k))
    return CCG_STATUS_OK;
  if (k->size < 0 || (!ccg_dim_is_sym(axis_dim) && k->size > axis_dim.size))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "K is %lld; it must be in 0..%lld (the axis' size)",
                     (long long)k->size, (long long)axis_dim.size);
  return CCG_STATUS_OK;
}

static ccg_status infer_top_k(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  bool flag;
  CCG_CHECK(ccg__attr_flag(ix, "largest", &flag));
  CCG_CHECK(ccg__attr_flag(ix, "sorted", &flag));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  int ax;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), x->rank, "axis", &ax));
  ccg_dim k;
  CCG_CHECK(top_k_count(ix, ax, x->dims[ax], &k));
  ix->out_shape[0] = *x;
  ix->out_shape[0].dims[ax] = k;
  ix->out_shape[1] = ix->out_shape[0];
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_dtype[1] = CCG_DTYPE_I64;
  return CCG_STATUS_OK;
}

/* x's gradient: the values' gradient put back where they came from (the
 * indices are distinct along the axis, so adding is placing). */
static ccg_status grad_top_k(ccg__grad *gx) {
  if (!gx->need[0] || gx->gout[0] == CCG_NONE)
    return CCG_STATUS_OK;
  return grad_at_indices(gx, gx->out[1]);
}

const ccg__op_def ccg__opdef_TOP_K = {CCG__ATTRS(top_k_attrs),
                                      0,
                                      infer_top_k,
                                      grad_top_k,
                                      .shard = CCG_OP_SHARD_OWN,
                                      .dtypes = CCG__NUM_TYPES,
                                      .onnx_since = 11};

/* ---- NonZero, Compress --------------------------------------------------- */

/* [rank, nnz]: nnz is the data's, a fresh symbol the executor binds at run
 * time (0 when x has no elements). */
static ccg_status infer_non_zero(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__ALL_TYPES, "a numeric or bool type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  if (x->rank < 1)
    return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                     "input '%s' is a scalar; NonZero takes rank >= 1",
                     ccg__in_name(ix, 0));
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 2;
  out->dims[0] = ccg_dim_num(x->rank);
  bool empty = false;
  for (int d = 0; d < x->rank; d++)
    empty = empty || ccg__is_num(x->dims[d], 0);
  if (empty)
    out->dims[1] = ccg_dim_num(0);
  else
    CCG_CHECK(ccg__fresh_dim(ix, 0, 1, &out->dims[1]));
  ix->out_dtype[0] = CCG_DTYPE_I64;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_NON_ZERO = {
    CCG__NO_ATTRS,  0, infer_non_zero, NULL, .dtypes = CCG__ALL_TYPES,
    .onnx_since = 9};

/* ONNX Compress has no default axis: without one the input is flattened. */
static const ccg__attr_spec compress_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* condition: a bool vector, at most as long as the axis (or the flattened
 * input); the kept count is a fresh symbol the executor binds at run
 * time. */
static ccg_status infer_compress(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_vector(ix, 1, CCG__DT(BOOL), "a 1-D bool vector"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  ccg_shape *out = &ix->out_shape[0];
  ccg_dim len = ccg__in_shape(ix, 1)->dims[0], along;
  int at = 0;
  if (ccg__attr(ix, "axis")) {
    CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), x->rank, "axis", &at));
    *out = *x;
    along = x->dims[at];
  } else {
    out->rank = 1;
    along = ccg_dim_num(1);
    bool ok = true;
    for (int d = 0; ok && d < x->rank; d++)
      ok = ccg__dim_mul(ix->g, along, x->dims[d], &along);
    if (!ok)
      along = len; /* no product to check against */
  }
  if (!ccg_dim_is_sym(len) && !ccg_dim_is_sym(along) && len.size > along.size)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "condition '%s' has %lld elements; the input has only "
                     "%lld to select from",
                     ccg__in_name(ix, 1), (long long)len.size,
                     (long long)along.size);
  if (ccg__is_num(len, 0))
    out->dims[at] = ccg_dim_num(0);
  else
    CCG_CHECK(ccg__fresh_dim(ix, 0, at, &out->dims[at]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_COMPRESS = {CCG__ATTRS(compress_attrs),
                                         0,
                                         infer_compress,
                                         NULL,
                                         .dtypes = CCG__ALL_TYPES,
                                         .onnx_since = 11};
