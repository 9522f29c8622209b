/* Data ops: Range, Trilu, CumSum, Flatten, Size, CastLike, OneHot, EyeLike
 * (Tile, Pad, DepthToSpace and SpaceToDepth are in rearrange.c, Einsum in
 * einsum.c). Range, Size and CastLike carry known contents: torch.onnx.export
 * with dynamic axes builds position ids and masks from Range(0, seq, 1) where
 * seq comes out of Shape -> Gather, so the length must stay the symbol it
 * was. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/data_util.h"

#define BUF CCG__DATA_BUF

/* ---- helpers ------------------------------------------------------------ */

/* A copy of the forward node with dy for input 0 (the other inputs and
 * the attributes as they were; reverse flipped when asked): the gradient of
 * Trilu and CumSum. */
static ccg_status same_op_on(ccg__grad *gx, bool flip_reverse,
                             ccg_value_id *out) {
  ccg_graph *g = gx->g;
  ccg_value_id in[8];
  ccg_attr at[8];
  size_t na = 0, n_in = gx->n_in < 8 ? gx->n_in : 8;
  in[0] = gx->gout[0];
  for (size_t i = 1; i < n_in; i++)
    in[i] = gx->in[i];
  bool seen = false;
  for (size_t i = 0; i < ccg_node_num_attrs(g, gx->node) && na < 8; i++) {
    at[na] = *ccg_node_attr_at(g, gx->node, i);
    if (flip_reverse && strcmp(at[na].name, "reverse") == 0) {
      at[na].i = !at[na].i;
      seen = true;
    }
    na++;
  }
  if (flip_reverse && !seen && na < 8)
    at[na++] = CCG_ATTR_I("reverse", 1);
  return ccg__build(g, gx->op, in, n_in, at, na, 1, out, NULL);
}

/* ---- Range -------------------------------------------------------------- */

#define RANGE_TYPES (CCG__DT(F32) | CCG__DT(F64) | CCG__DT(I32) | CCG__DT(I64))

/* ceil((limit - start) / delta), at least 0; false on overflow. */
static bool range_count(int64_t s, int64_t l, int64_t d, int64_t *n) {
  __int128 diff = (__int128)l - s, q = diff / d;
  if (q * d != diff)
    q += (diff > 0) == (d > 0) ? 1 : 0;
  if (q < 0)
    q = 0;
  if (q > INT64_MAX)
    return false;
  *n = (int64_t)q;
  return true;
}

/* A float Range bound: known contents are for integers, so a float one
 * is read from an initializer or Constant (or a graph input's data: the
 * executor's specialized copy holds what a run fed), or seen through a
 * Cast (or CastLike) of a known integer: torch exports arange(seq,
 * dtype=float) as Range(0., Cast(seq), 1.). 0: unknown, 1: the number
 * *num, 2: the symbol *sym. */
static int float_bound(ccg__infer *ix, size_t i, double *num, ccg_dim *sym) {
  ccg_graph *g = ix->g;
  ccg_value_id v = ix->in[i];
  const ccg_tensor *t = ccg__vdata(&g->values[v]);
  ccg_node_id p = ccg_value_producer(g, v);
  ccg_op op = p == CCG_NONE ? CCG_OP_COUNT : ccg_node_op(g, p);
  if (!t && op == CCG_OP_CONSTANT)
    t = ccg_node_attr(g, p, "value")->t;
  if (t && (t->dtype == CCG_DTYPE_F32 || t->dtype == CCG_DTYPE_F64)) {
    *num = t->dtype == CCG_DTYPE_F32 ? *(const float *)t->data
                                     : *(const double *)t->data;
    return 1;
  }
  ccg_dim k[CCG_MAX_RANK];
  if ((op != CCG_OP_CAST && op != CCG_OP_CAST_LIKE) ||
      ccg_value_known(g, ccg_node_input(g, p, 0), k) != 1)
    return 0;
  *sym = k[0];
  *num = (double)k[0].size;
  return ccg_dim_is_sym(k[0]) ? 2 : 1;
}

/* The length numpy's arange gives; Range(0, n, 1) and Range(n, 0, -1)
 * with n a symbol have n elements. */
static ccg_status range_len_float(ccg__infer *ix, ccg_dim *len) {
  double v[3];
  ccg_dim sym[3];
  int kind[3];
  for (size_t i = 0; i < 3; i++)
    if (!(kind[i] = float_bound(ix, i, &v[i], &sym[i])))
      return ccg__fresh_dim(ix, 0, 0, len);
  if (kind[2] == 1 && v[2] == 0.0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "delta '%s' is 0",
                     ccg__in_name(ix, 2));
  if (kind[0] == 1 && v[0] == 0.0 && kind[1] == 2 && kind[2] == 1 &&
      v[2] == 1.0) {
    *len = sym[1];
    return CCG_STATUS_OK;
  }
  if (kind[0] == 2 && kind[1] == 1 && v[1] == 0.0 && kind[2] == 1 &&
      v[2] == -1.0) {
    *len = sym[0];
    return CCG_STATUS_OK;
  }
  if (kind[0] != 1 || kind[1] != 1 || kind[2] != 1)
    return ccg__fresh_dim(ix, 0, 0, len);
  double n = ceil((v[1] - v[0]) / v[2]);
  if (!(n < 9e15))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "Range(%g, %g, %g) has no finite length", v[0], v[1],
                     v[2]);
  *len = ccg_dim_num(n > 0 ? (int64_t)n : 0);
  return CCG_STATUS_OK;
}

/* Numbers give the length and, when short, the contents; Range(0, seq, 1)
 * and Range(seq, 0, -1) are [seq]; anything else a fresh symbol. */
static ccg_status range_len(ccg__infer *ix, ccg_dim *len) {
  const ccg_dim *k[3];
  if (ccg_dtype_is_float(ccg__in_dtype(ix, 0)))
    return range_len_float(ix, len);
  for (size_t i = 0; i < 3; i++)
    if (ccg__in_known(ix, i, &k[i]) != 1)
      return ccg__fresh_dim(ix, 0, 0, len);
  ccg_dim s = k[0][0], l = k[1][0], d = k[2][0];
  if (ccg__is_num(d, 0))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "delta '%s' is 0",
                     ccg__in_name(ix, 2));
  /* Range(0, n, 1) and Range(n, 0, -1) have n elements */
  if (ccg_dim_is_sym(l) && ccg__is_num(s, 0) && ccg__is_num(d, 1)) {
    *len = l;
    return CCG_STATUS_OK;
  }
  if (ccg_dim_is_sym(s) && ccg__is_num(l, 0) && ccg__is_num(d, -1)) {
    *len = s;
    return CCG_STATUS_OK;
  }
  if (ccg_dim_is_sym(s) || ccg_dim_is_sym(d) || ccg_dim_is_sym(l))
    return ccg__fresh_dim(ix, 0, 0, len);
  int64_t n;
  if (!range_count(s.size, l.size, d.size, &n))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "Range(%lld, %lld, %lld) has too many elements",
                     (long long)s.size, (long long)l.size, (long long)d.size);
  *len = ccg_dim_num(n);
  if (n <= CCG_MAX_RANK) {
    for (int64_t i = 0; i < n; i++)
      ix->out_known[0][i] = ccg_dim_num(s.size + i * d.size);
    ix->out_n_known[0] = (int)n;
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_range(ccg__infer *ix) {
  for (size_t i = 0; i < 3; i++) {
    CCG_CHECK(ccg__expect_scalar(ix, i, RANGE_TYPES, "f32, f64, i32 or i64"));
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0].rank = 1;
  return range_len(ix, &ix->out_shape[0].dims[0]);
}

const ccg__op_def ccg__opdef_RANGE = {CCG__NO_ATTRS,         0,
                                      infer_range,           NULL,
                                      .dtypes = RANGE_TYPES, .onnx_since = 11};

/* ---- Trilu -------------------------------------------------------------- */

static const ccg__attr_spec trilu_attrs[] = {
    {"upper", CCG_ATTR_INT, false, 1, 0, NULL},
};

static ccg_status infer_trilu(ccg__infer *ix) {
  bool upper;
  CCG_CHECK(ccg__attr_flag(ix, "upper", &upper));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (in->rank < 2) {
    char b[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' has shape %s; rank >= 2 expected",
                     ccg__in_name(ix, 0), ccg__shape_str(in, b, BUF));
  }
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__ALL_TYPES, "any type"));
  if (ccg__in_has(ix, 1))
    CCG_CHECK(ccg__expect_scalar(ix, 1, CCG__DT(I64), "i64"));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

/* The kept triangle passes the gradient; the zeroed one gets none. */
static ccg_status grad_trilu(ccg__grad *gx) {
  return same_op_on(gx, false, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_TRILU = {CCG__ATTRS(trilu_attrs),
                                      0,
                                      infer_trilu,
                                      grad_trilu,
                                      .shard = CCG_OP_SHARD_OWN,
                                      .dtypes = CCG__ALL_TYPES,
                                      .onnx_since = 14};

/* ---- CumSum ------------------------------------------------------------- */

static const ccg__attr_spec cumsum_attrs[] = {
    {"exclusive", CCG_ATTR_INT, false, 0, 0, NULL},
    {"reverse", CCG_ATTR_INT, false, 0, 0, NULL},
};

#define CUMSUM_TYPES (CCG__FLOAT_TYPES | CCG__DT(I64) | CCG__DT(I32))

static ccg_status infer_cumsum(ccg__infer *ix) {
  bool f;
  CCG_CHECK(ccg__attr_flag(ix, "exclusive", &f));
  CCG_CHECK(ccg__attr_flag(ix, "reverse", &f));
  CCG_CHECK(ccg__expect_dtype(ix, 0, CUMSUM_TYPES, "a float, i32 or i64"));
  CCG_CHECK(
      ccg__expect_scalar(ix, 1, CCG__DT(I64) | CCG__DT(I32), "i32 or i64"));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int64_t axis;
  int a;
  if (in->rank == 0)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' is a scalar; rank >= 1 expected",
                     ccg__in_name(ix, 0));
  if (ccg__known_num(ix, 1, &axis))
    CCG_CHECK(ccg__axis(ix, axis, in->rank, "axis", &a));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

/* Each input element reaches the outputs after it (before it, reversed):
 * the gradient is the cumulative sum the other way. */
static ccg_status grad_cumsum(ccg__grad *gx) {
  return same_op_on(gx, true, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_CUMSUM = {CCG__ATTRS(cumsum_attrs),
                                       0,
                                       infer_cumsum,
                                       grad_cumsum,
                                       .shard = CCG_OP_SHARD_OWN,
                                       .dtypes = CUMSUM_TYPES,
                                       .onnx_since = 11};

/* ---- Flatten ------------------------------------------------------------ */

static const ccg__attr_spec flatten_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 1, 0, NULL},
};

/* Product of dims [from, to) of s, or a fresh symbol. */
static ccg_status dims_product(ccg__infer *ix, const ccg_shape *s, int from,
                               int to, int out_dim, ccg_dim *p) {
  *p = ccg_dim_num(1);
  for (int i = from; i < to; i++)
    if (!ccg__dim_mul(ix->g, *p, s->dims[i], p)) {
      if (ccg_shape_is_static(s))
        return ccg__fail(ix, CCG_STATUS_SHAPE, "the element count overflows");
      return ccg__fresh_dim(ix, 0, out_dim, p);
    }
  return CCG_STATUS_OK;
}

static ccg_status infer_flatten(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int64_t axis = ccg__attr_i(ix, "axis");
  if (axis < -in->rank || axis > in->rank)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "axis %lld is out of range for rank %d (-%d..%d)",
                     (long long)axis, in->rank, in->rank, in->rank);
  int a = (int)(axis < 0 ? axis + in->rank : axis);
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 2;
  CCG_CHECK(dims_product(ix, in, 0, a, 0, &out->dims[0]));
  CCG_CHECK(dims_product(ix, in, a, in->rank, 1, &out->dims[1]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

static ccg_status grad_flatten(ccg__grad *gx) {
  return ccg__grad_reshape_like(gx->g, gx->gout[0], gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_FLATTEN = {CCG__ATTRS(flatten_attrs),
                                        0,
                                        infer_flatten,
                                        grad_flatten,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__ALL_TYPES,
                                        .onnx_since = 11};

/* ---- Size --------------------------------------------------------------- */

static ccg_status infer_size(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  ccg_dim p = ccg_dim_num(1);
  bool ok = true;
  for (int i = 0; i < in->rank && ok; i++)
    ok = ccg__dim_mul(ix->g, p, in->dims[i], &p);
  ix->out_dtype[0] = CCG_DTYPE_I64;
  ix->out_shape[0].rank = 0;
  if (ok)
    ccg__set_known(ix, 0, &p, 1);
  else if (ccg_shape_is_static(in))
    return ccg__fail(ix, CCG_STATUS_SHAPE, "the element count overflows");
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_SIZE = {
    CCG__NO_ATTRS,   0, infer_size, NULL, .dtypes = CCG__ALL_TYPES,
    .onnx_since = 11};

/* ---- CastLike ----------------------------------------------------------- */

/* A small float constant of whole numbers cast to an integer type is known:
 * dynamo exports arange(n) as Range(0, n, CastLike(1.0, n)). */
static void cast_like_float_const(ccg__infer *ix) {
  ccg_graph *g = ix->g;
  ccg_value_id v = ix->in[0];
  const ccg_tensor *t = ccg__vdata(&g->values[v]);
  ccg_node_id p = ccg_value_producer(g, v);
  if (!t && p != CCG_NONE && ccg_node_op(g, p) == CCG_OP_CONSTANT)
    t = ccg_node_attr(g, p, "value")->t;
  if (!t || (t->dtype != CCG_DTYPE_F32 && t->dtype != CCG_DTYPE_F64) ||
      t->rank > 1 || (t->rank == 1 && t->dims[0] > CCG_MAX_RANK))
    return;
  int n = t->rank ? (int)t->dims[0] : 1;
  for (int i = 0; i < n; i++) {
    double x = t->dtype == CCG_DTYPE_F32 ? ((const float *)t->data)[i]
                                         : ((const double *)t->data)[i];
    double lim = ix->out_dtype[0] == CCG_DTYPE_I32 ? 2147483647.0 : 9e15;
    if (!(x == floor(x) && fabs(x) <= lim))
      return;
    ix->out_known[0][i] = ccg_dim_num((int64_t)x);
  }
  ix->out_n_known[0] = n;
}

static ccg_status infer_cast_like(ccg__infer *ix) {
  ccg_dtype to = ccg__in_dtype(ix, 1);
  ix->out_dtype[0] = to;
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  /* integer contents stay what they are in another integer type that
   * holds shape values */
  if (to != CCG_DTYPE_I64 && to != CCG_DTYPE_I32)
    return CCG_STATUS_OK;
  if (n >= 0)
    ccg__set_known(ix, 0, k, n);
  else
    cast_like_float_const(ix);
  return CCG_STATUS_OK;
}

/* The gradient goes back to x's dtype. */
static ccg_status grad_cast_like(ccg__grad *gx) {
  ccg_value_id in[2] = {gx->gout[0], gx->in[0]};
  if (!ccg_dtype_is_float(ccg_value_dtype(gx->g, gx->in[0])))
    return CCG_STATUS_OK;
  return ccg__build(gx->g, CCG_OP_CAST_LIKE, in, 2, NULL, 0, 1, &gx->gin[0],
                    NULL);
}

const ccg__op_def ccg__opdef_CAST_LIKE = {CCG__NO_ATTRS,
                                          0,
                                          infer_cast_like,
                                          grad_cast_like,
                                          .shard = CCG_OP_SHARD_KEEP,
                                          .dtypes = CCG__ALL_TYPES,
                                          .onnx_since = 15};

/* ---- OneHot ------------------------------------------------------------- */

static const ccg__attr_spec onehot_attrs[] = {
    {"axis", CCG_ATTR_INT, false, -1, 0, NULL},
};

/* depth from known integer contents or a float's data (an initializer, a
 * Constant, a Cast of a known integer, or what a run fed, which the
 * executor's specialized copy holds), truncated as ONNX does; false when
 * unknown: the dim is then a fresh symbol a run binds. */
static bool onehot_depth(ccg__infer *ix, int64_t *depth) {
  double v;
  ccg_dim sym;
  if (ccg__known_num(ix, 1, depth))
    return true;
  if (!ccg_dtype_is_float(ccg__in_dtype(ix, 1)) ||
      float_bound(ix, 1, &v, &sym) != 1 || !(fabs(v) < 9e15))
    return false;
  *depth = (int64_t)v;
  return true;
}

static ccg_status infer_onehot(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(ccg__expect_scalar(ix, 1, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(ccg__expect_vector(ix, 2, CCG__ALL_TYPES, "a 2-element vector"));
  ccg_dim nv = ccg__in_shape(ix, 2)->dims[0];
  if (!ccg_dim_is_sym(nv) && nv.size != 2)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "values '%s' has %lld elements; 2 (off, on) expected",
                     ccg__in_name(ix, 2), (long long)nv.size);
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (in->rank >= CCG_MAX_RANK)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "indices have rank %d; the output would pass rank %d",
                     in->rank, CCG_MAX_RANK);
  int a;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), in->rank + 1, "axis", &a));
  ccg_shape *out = &ix->out_shape[0];
  out->rank = in->rank + 1;
  for (int d = 0, j = 0; d < out->rank; d++)
    if (d != a)
      out->dims[d] = in->dims[j++];
  int64_t depth;
  if (!onehot_depth(ix, &depth))
    CCG_CHECK(ccg__fresh_dim(ix, 0, a, &out->dims[a]));
  else if (depth < 1)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "depth is %lld; >= 1 expected",
                     (long long)depth);
  else
    out->dims[a] = ccg_dim_num(depth);
  ix->out_dtype[0] = ccg__in_dtype(ix, 2);
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_ONE_HOT = {CCG__ATTRS(onehot_attrs),
                                        0,
                                        infer_onehot,
                                        NULL,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__NUM_TYPES,
                                        .onnx_since = 11};

/* ---- EyeLike ------------------------------------------------------------ */

/* dtype: a dtype name ("f16"; ONNX's type code, converted at import and
 * export as Cast's `to`); absent: the input's dtype. */
static const ccg__attr_spec eye_like_attrs[] = {
    {"dtype", CCG_ATTR_STRING, false, 0, 0, NULL},
    {"k", CCG_ATTR_INT, false, 0, 0, NULL},
};

static ccg_status infer_eye_like(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (in->rank != 2) {
    char b[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' has shape %s; a matrix expected",
                     ccg__in_name(ix, 0), ccg__shape_str(in, b, BUF));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  if (ccg__attr(ix, "dtype"))
    CCG_CHECK(ccg__attr_dtype(ix, "dtype", &ix->out_dtype[0]));
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

/* The output does not depend on the input's values. */
static ccg_status grad_eye_like(ccg__grad *gx) {
  if (!ccg_dtype_is_float(ccg_value_dtype(gx->g, gx->in[0])))
    return CCG_STATUS_OK;
  return ccg__grad_zeros_like(gx->g, gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_EYE_LIKE = {CCG__ATTRS(eye_like_attrs),
                                         0,
                                         infer_eye_like,
                                         grad_eye_like,
                                         .dtypes = CCG__ALL_TYPES,
                                         .onnx_since = 11};
