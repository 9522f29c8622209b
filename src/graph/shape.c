/* Shape ops: Reshape, Unsqueeze, Squeeze, Expand, Shape, Constant,
 * ConstantOfShape (Transpose, Concat and Split are in layout.c, Slice and
 * Gather in index.c). Small
 * integer vectors keep their known contents through these ops:
 * torch.onnx.export with dynamic axes computes reshape targets as Shape ->
 * Gather -> Unsqueeze -> Concat, and the target dims stay known only if every
 * step carries them. */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

/* ---- helpers ------------------------------------------------------------ */

#define BUF 192

const char *ccg__ints_str(const int64_t *v, size_t n, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "",
                             (long long)v[i]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

/* Known contents printed like a shape: "[batch,-1,64]". */
static const char *elems_str(const ccg_dim *k, int n, char *buf, size_t size) {
  ccg_shape s;
  memset(&s, 0, sizeof s);
  s.rank = n;
  memcpy(s.dims, k, (size_t)n * sizeof *k);
  return ccg__shape_str(&s, buf, size);
}

const char *ccg__in_str(const ccg__infer *ix, size_t i, char *buf,
                        size_t size) {
  return ccg__shape_str(ccg__in_shape(ix, i), buf, size);
}

void ccg__set_known(ccg__infer *ix, size_t out, const ccg_dim *k, int n) {
  memcpy(ix->out_known[out], k, (size_t)n * sizeof *k);
  ix->out_n_known[out] = n;
}

/* Ops that only regroup elements keep the known contents of input 0 (in
 * row-major order) while the result is static: torch's F.pad exports reshape
 * its pads vector to [n,2], reverse and transpose it, and flatten it back. */
static void pass_known(ccg__infer *ix) {
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n >= 0 && ccg_shape_is_static(&ix->out_shape[0]))
    ccg__set_known(ix, 0, k, n);
}

/* The length of vector input i when it must give an output rank. */
static ccg_status vector_len(ccg__infer *ix, size_t i, int *n) {
  ccg_dim d = ccg__in_shape(ix, i)->dims[0];
  if (ccg_dim_is_sym(d) || d.size > CCG_MAX_RANK) {
    /* a rank set by data (a symbol) is a limit of the IR, a number past
     * the IR's ranks a bad model */
    char b[BUF];
    return ccg__fail(
        ix, ccg_dim_is_sym(d) ? CCG_STATUS_UNSUPPORTED : CCG_STATUS_SHAPE,
        "input %zu '%s' has shape %s and unknown contents; its "
        "length gives the output rank, which must be a number "
        "<= %d",
        i, ccg__in_name(ix, i), ccg__in_str(ix, i, b, BUF), CCG_MAX_RANK);
  }
  *n = (int)d.size;
  return CCG_STATUS_OK;
}

/* Contents of shape input i unknown: rank from its length, every dim a
 * fresh symbol. */
static ccg_status fresh_shape(ccg__infer *ix, size_t i) {
  ccg_shape *out = &ix->out_shape[0];
  int n;
  CCG_CHECK(vector_len(ix, i, &n));
  out->rank = n;
  for (int d = 0; d < n; d++)
    CCG_CHECK(ccg__fresh_dim(ix, 0, d, &out->dims[d]));
  return CCG_STATUS_OK;
}

/* A shape from the known contents of shape input i (sizes >= 0 or
 * symbols). */
static ccg_status shape_from_known(ccg__infer *ix, size_t i, const ccg_dim *k,
                                   int n, ccg_shape *out) {
  memset(out, 0, sizeof *out);
  out->rank = n;
  for (int d = 0; d < n; d++) {
    if (!ccg_dim_is_sym(k[d]) && k[d].size < 0) {
      char b[BUF];
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "shape input '%s' holds %s: %lld at position %d is "
                       "negative",
                       ccg__in_name(ix, i), elems_str(k, n, b, BUF),
                       (long long)k[d].size, d);
    }
    out->dims[d] = k[d];
  }
  return CCG_STATUS_OK;
}

/* Product of all dims; false when not representable (overflow, too many
 * symbol atoms). */
static bool dims_product(ccg_graph *g, const ccg_shape *s, ccg_dim *p) {
  *p = ccg_dim_num(1);
  for (int i = 0; i < s->rank; i++)
    if (!ccg__dim_mul(g, *p, s->dims[i], p))
      return false;
  return true;
}

/* ---- Reshape ------------------------------------------------------------ */

static const ccg__attr_spec reshape_attrs[] = {
    {"allowzero", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* The target with 0 resolved (unless allowzero) and a stand-in 1 at the
 * -1, whose position goes to *at (-1 if none). */
static ccg_status reshape_target(ccg__infer *ix, const ccg_dim *k, int n,
                                 ccg_shape *t, int *at) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  bool allowzero = ccg__attr_i(ix, "allowzero") != 0;
  char kb[BUF], ib[BUF];
  *at = -1;
  t->rank = n;
  for (int i = 0; i < n; i++) {
    ccg_dim d = k[i];
    if (ccg_dim_is_sym(d) || d.size > 0 || (d.size == 0 && allowzero)) {
      t->dims[i] = d;
    } else if (d.size == 0) {
      if (i >= in->rank)
        return ccg__fail(ix, CCG_STATUS_SHAPE,
                         "shape %s: the 0 at position %d copies input dim "
                         "%d, but the input %s has rank %d",
                         elems_str(k, n, kb, BUF), i, i,
                         ccg__shape_str(in, ib, BUF), in->rank);
      t->dims[i] = in->dims[i];
    } else if (d.size != -1) {
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "shape %s: %lld at position %d is invalid (a size "
                       ">= 0, 0 to copy or -1 to infer expected)",
                       elems_str(k, n, kb, BUF), (long long)d.size, i);
    } else if (*at >= 0) {
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "shape %s has more than one -1 (positions %d and %d)",
                       elems_str(k, n, kb, BUF), *at, i);
    } else {
      *at = i;
      t->dims[i] = ccg_dim_num(1);
    }
  }
  return CCG_STATUS_OK;
}

/* The -1 dim: input elements over the other target dims. Symbolic sizes
 * that no monomial expresses get a fresh symbol; static ones must divide. */
static ccg_status reshape_infer(ccg__infer *ix, const ccg_dim *k, int n,
                                ccg_shape *t, int at) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  ccg_dim total, rest;
  char kb[BUF], ib[BUF];
  bool ok = dims_product(ix->g, in, &total) && dims_product(ix->g, t, &rest);
  if (ok && ccg__is_num(rest, 0))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "shape %s: cannot infer the -1 when another target dim "
                     "is 0 (input %s)",
                     elems_str(k, n, kb, BUF), ccg__shape_str(in, ib, BUF));
  if (ok && ccg__dim_div(ix->g, total, rest, &t->dims[at]))
    return CCG_STATUS_OK;
  if (ok && !ccg_dim_is_sym(total) && !ccg_dim_is_sym(rest))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "cannot reshape %s (%lld elements) to %s: %lld is not "
                     "divisible by %lld",
                     ccg__shape_str(in, ib, BUF), (long long)total.size,
                     elems_str(k, n, kb, BUF), (long long)total.size,
                     (long long)rest.size);
  if (!ok && ccg_shape_is_static(in) && ccg_shape_is_static(t))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "reshape of %s to %s: the element count overflows",
                     ccg__shape_str(in, ib, BUF), elems_str(k, n, kb, BUF));
  return ccg__fresh_dim(ix, 0, at, &t->dims[at]);
}

/* With every dim a number, the element counts must agree. */
static ccg_status reshape_count(ccg__infer *ix, const ccg_dim *k, int n,
                                const ccg_shape *t) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (!ccg_shape_is_static(in) || !ccg_shape_is_static(t))
    return CCG_STATUS_OK;
  ccg_dim a, b;
  char kb[BUF], ib[BUF], tb[BUF];
  if (!dims_product(ix->g, in, &a) || !dims_product(ix->g, t, &b))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "reshape of %s to %s: the element count overflows",
                     ccg__shape_str(in, ib, BUF), elems_str(k, n, kb, BUF));
  if (a.size == b.size)
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "shape %s: cannot reshape %s (%lld elements) to %s (%lld "
                   "elements)",
                   elems_str(k, n, kb, BUF), ccg__shape_str(in, ib, BUF),
                   (long long)a.size, ccg__shape_str(t, tb, BUF),
                   (long long)b.size);
}

static ccg_status infer_reshape(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_vector(ix, 1, CCG__DT(I64), "a 1-D i64 shape"));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  const ccg_dim *k;
  int n = ccg__in_known(ix, 1, &k);
  if (n < 0)
    return fresh_shape(ix, 1);
  ccg_shape *t = &ix->out_shape[0];
  int at;
  CCG_CHECK(reshape_target(ix, k, n, t, &at));
  if (at >= 0)
    CCG_CHECK(reshape_infer(ix, k, n, t, at));
  CCG_CHECK(reshape_count(ix, k, n, t));
  pass_known(ix);
  return CCG_STATUS_OK;
}

/* Reshape, Squeeze, Unsqueeze, Expand: the gradient takes x's shape back
 * (summed over the dims Expand broadcast). */
static ccg_status grad_reshape(ccg__grad *gx) {
  return ccg__grad_reshape_like(gx->g, gx->gout[0], gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_RESHAPE = {CCG__ATTRS(reshape_attrs),
                                        0,
                                        infer_reshape,
                                        grad_reshape,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .onnx_since = 5,
                                        .dtypes = CCG__ALL_TYPES};

/* ---- Unsqueeze, Squeeze ------------------------------------------------- */

static const ccg__attr_spec unsqueeze_attrs[] = {
    {"axes", CCG_ATTR_INTS, true, 0, 0, NULL},
};
static const ccg__attr_spec squeeze_attrs[] = {
    {"axes", CCG_ATTR_INTS, false, 0, 0, NULL},
};

/* Normalizes axes against `rank` into a mask; repeats are errors. */
static ccg_status axes_mask(ccg__infer *ix, const int64_t *axes, size_t n,
                            int rank, bool *mask) {
  for (size_t i = 0; i < n; i++) {
    int a;
    CCG_CHECK(ccg__axis(ix, axes[i], rank, "axis", &a));
    if (mask[a]) {
      char b[BUF];
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "axes %s name dim %d twice",
                       ccg__ints_str(axes, n, b, BUF), a);
    }
    mask[a] = true;
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_unsqueeze(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  const int64_t *axes;
  size_t n = ccg__attr_ints(ix, "axes", &axes);
  char b[BUF];
  if (n == 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "axes is empty");
  if (n > (size_t)(CCG_MAX_RANK - in->rank))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input %s with %zu new axes would pass rank %d",
                     ccg__in_str(ix, 0, b, BUF), n, CCG_MAX_RANK);
  ccg_shape *out = &ix->out_shape[0];
  bool add[CCG_MAX_RANK] = {false};
  out->rank = in->rank + (int)n;
  CCG_CHECK(axes_mask(ix, axes, n, out->rank, add));
  for (int d = 0, j = 0; d < out->rank; d++)
    out->dims[d] = add[d] ? ccg_dim_num(1) : in->dims[j++];
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  pass_known(ix);
  return CCG_STATUS_OK;
}

/* Without axes every dim that is the number 1 goes; listed dims must be 1
 * or symbolic (then assumed 1). */
static ccg_status infer_squeeze(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  const int64_t *axes;
  size_t n = ccg__attr_ints(ix, "axes", &axes);
  bool drop[CCG_MAX_RANK] = {false};
  CCG_CHECK(axes_mask(ix, axes, n, in->rank, drop));
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 0;
  for (int d = 0; d < in->rank; d++) {
    ccg_dim x = in->dims[d];
    if (n == 0)
      drop[d] = ccg__is_num(x, 1);
    else if (drop[d] && !ccg_dim_is_sym(x) && x.size != 1) {
      char b[BUF];
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "dim %d of input %s is %lld, not 1", d,
                       ccg__in_str(ix, 0, b, BUF), (long long)x.size);
    }
    if (!drop[d])
      out->dims[out->rank++] = x;
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  pass_known(ix);
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_UNSQUEEZE = {CCG__ATTRS(unsqueeze_attrs),
                                          0,
                                          infer_unsqueeze,
                                          grad_reshape,
                                          .shard = CCG_OP_SHARD_OWN,
                                          .onnx_since = 1,
                                          .dtypes = CCG__ALL_TYPES};
const ccg__op_def ccg__opdef_SQUEEZE = {CCG__ATTRS(squeeze_attrs),
                                        0,
                                        infer_squeeze,
                                        grad_reshape,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .onnx_since = 1,
                                        .dtypes = CCG__ALL_TYPES};

/* ---- Expand ------------------------------------------------------------- */

/* Target unknown: a dim other than 1 stays (the target must be 1 or equal
 * there); dims that are 1 or new take whatever the target holds. */
static ccg_status expand_unknown(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  ccg_shape *out = &ix->out_shape[0];
  int n;
  CCG_CHECK(vector_len(ix, 1, &n));
  out->rank = n > in->rank ? n : in->rank;
  for (int i = 0; i < out->rank; i++) {
    int j = i - (out->rank - in->rank);
    if (j >= 0 && !ccg__is_num(in->dims[j], 1))
      out->dims[i] = in->dims[j];
    else
      CCG_CHECK(ccg__fresh_dim(ix, 0, i, &out->dims[i]));
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_expand(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_vector(ix, 1, CCG__DT(I64), "a 1-D i64 shape"));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  const ccg_dim *k;
  int n = ccg__in_known(ix, 1, &k);
  if (n < 0)
    return expand_unknown(ix);
  ccg_shape t;
  CCG_CHECK(shape_from_known(ix, 1, k, n, &t));
  return ccg__broadcast(ix, ccg__in_shape(ix, 0), &t, &ix->out_shape[0]);
}

static ccg_status grad_expand(ccg__grad *gx) {
  return ccg__grad_unbroadcast(gx->g, gx->gout[0], gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_EXPAND = {
    CCG__NO_ATTRS,           0, infer_expand, grad_expand, .onnx_since = 8,
    .dtypes = CCG__ALL_TYPES};

/* ---- Shape -------------------------------------------------------------- */

/* INT attributes need a default: INT64_MAX stands for "the rank". */
static const ccg__attr_spec shape_attrs[] = {
    {"start", CCG_ATTR_INT, false, 0, 0, NULL},
    {"end", CCG_ATTR_INT, false, INT64_MAX, 0, NULL},
};

static int clamp_index(int64_t v, int rank) {
  if (v < 0)
    v += rank;
  return v < 0 ? 0 : v > rank ? rank : (int)v;
}

static ccg_status infer_shape(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int start = clamp_index(ccg__attr_i(ix, "start"), in->rank);
  int end = clamp_index(ccg__attr_i(ix, "end"), in->rank);
  int n = end > start ? end - start : 0;
  ix->out_dtype[0] = CCG_DTYPE_I64;
  ix->out_shape[0] = ccg_shape_make(1, (const int64_t[]){n});
  ccg__set_known(ix, 0, in->dims + start, n);
  return CCG_STATUS_OK;
}

/* Shape, Constant and ConstantOfShape: integer or constant outputs, no
 * gradient flows (the rule is never asked for). */
const ccg__op_def ccg__opdef_SHAPE = {CCG__ATTRS(shape_attrs),
                                      0,
                                      infer_shape,
                                      NULL,
                                      .shard = CCG_OP_SHARD_OWN,
                                      .onnx_since = 1,
                                      .dtypes = CCG__ALL_TYPES};

/* ---- Constant, ConstantOfShape ------------------------------------------ */

static const ccg__attr_spec constant_attrs[] = {
    {"value", CCG_ATTR_TENSOR, true, 0, 0, NULL},
};

/* Attribute tensors are checked here, before the graph copies them, so the
 * message names the node. */
static ccg_status check_tensor(ccg__infer *ix, const ccg_tensor *t,
                               int64_t *numel) {
  if ((unsigned)t->dtype >= CCG_DTYPE_COUNT || t->dtype == CCG_DTYPE_UNDEFINED)
    return ccg__fail(ix, CCG_STATUS_DTYPE, "value has no valid dtype (%d)",
                     (int)t->dtype);
  if (t->rank < 0 || t->rank > CCG_MAX_RANK)
    return ccg__fail(ix, CCG_STATUS_SHAPE, "value has rank %d; 0..%d expected",
                     t->rank, CCG_MAX_RANK);
  *numel = 1;
  bool bad = false;
  for (int i = 0; i < t->rank; i++)
    bad = bad || t->dims[i] < 0 ||
          __builtin_mul_overflow(*numel, t->dims[i], numel);
  size_t nbytes;
  if (bad || ccg_tensor_nbytes(t, &nbytes) != CCG_STATUS_OK) {
    char b[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "value has dims %s: negative or too large",
                     ccg__ints_str(t->dims, (size_t)t->rank, b, BUF));
  }
  if (*numel > 0 && !t->data)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "value has no data");
  return CCG_STATUS_OK;
}

static ccg_status infer_constant(ccg__infer *ix) {
  const ccg_tensor *t = ccg__attr(ix, "value")->t;
  int64_t n;
  CCG_CHECK(check_tensor(ix, t, &n));
  ix->out_dtype[0] = t->dtype;
  ix->out_shape[0] = ccg_shape_make(t->rank, t->dims);
  /* The same rule as for initializers: small integer vectors are known. */
  bool i64 = t->dtype == CCG_DTYPE_I64;
  if ((!i64 && t->dtype != CCG_DTYPE_I32) || t->rank > 1 || n > CCG_MAX_RANK)
    return CCG_STATUS_OK;
  for (int64_t i = 0; i < n; i++)
    ix->out_known[0][i] = ccg_dim_num(i64 ? ((const int64_t *)t->data)[i]
                                          : ((const int32_t *)t->data)[i]);
  ix->out_n_known[0] = (int)n;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_CONSTANT = {
    CCG__ATTRS(constant_attrs), 0, infer_constant, NULL, .onnx_since = 9,
    .dtypes = CCG__ALL_TYPES};

static const ccg__attr_spec constant_of_shape_attrs[] = {
    {"value", CCG_ATTR_TENSOR, false, 0, 0, NULL},
};

static void known_fill(ccg__infer *ix, const ccg_attr *value);

static ccg_status infer_constant_of_shape(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_vector(ix, 0, CCG__DT(I64), "a 1-D i64 shape"));
  const ccg_attr *a = ccg__attr(ix, "value");
  ix->out_dtype[0] = CCG_DTYPE_F32;
  if (a) {
    int64_t n;
    CCG_CHECK(check_tensor(ix, a->t, &n));
    if (n != 1) {
      char b[BUF];
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "value has dims %s; one element expected",
                       ccg__ints_str(a->t->dims, (size_t)a->t->rank, b, BUF));
    }
    ix->out_dtype[0] = a->t->dtype;
  }
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n < 0)
    return fresh_shape(ix, 0);
  CCG_CHECK(shape_from_known(ix, 0, k, n, &ix->out_shape[0]));
  known_fill(ix, a);
  return CCG_STATUS_OK;
}

/* A small integer vector of one value is known: torch's exports build
 * Expand targets from ConstantOfShape(...) * -1, Equal and Where. */
static void known_fill(ccg__infer *ix, const ccg_attr *value) {
  const ccg_shape *s = &ix->out_shape[0];
  if (!value || !ccg_dtype_is_int(ix->out_dtype[0]) || s->rank > 1 ||
      !ccg_shape_is_static(s))
    return;
  int64_t count = s->rank ? s->dims[0].size : 1;
  if (count > CCG_MAX_RANK)
    return;
  int64_t v = 0;
  const void *p = value->t->data;
  switch (value->t->dtype) {
  case CCG_DTYPE_I64:
    memcpy(&v, p, 8);
    break;
  case CCG_DTYPE_I32: {
    int32_t x;
    memcpy(&x, p, 4);
    v = x;
    break;
  }
  default:
    return;
  }
  for (int i = 0; i < (int)count; i++)
    ix->out_known[0][i] = ccg_dim_num(v);
  ix->out_n_known[0] = (int)count;
}

const ccg__op_def ccg__opdef_CONSTANT_OF_SHAPE = {
    CCG__ATTRS(constant_of_shape_attrs),
    0,
    infer_constant_of_shape,
    NULL,
    .onnx_since = 9,
    .dtypes = CCG__ALL_TYPES};

/* ---- builders ----------------------------------------------------------- */

ccg_status ccg_reshape(ccg_graph *g, ccg_value_id x, ccg_value_id shape,
                       ccg_value_id *out) {
  ccg_value_id in[2] = {x, shape};
  return ccg__build(g, CCG_OP_RESHAPE, in, 2, NULL, 0, 1, out, NULL);
}

ccg_status ccg_reshape_to(ccg_graph *g, ccg_value_id x, const int64_t *dims,
                          size_t n, ccg_value_id *out) {
  if (n && !dims)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "Reshape: %zu dims given but the array is NULL", n);
  ccg__mark mark = ccg__mark_get(g);
  ccg_value_id shape;
  CCG_CHECK(ccg__const_i64(g, dims, n, "shape", &shape));
  ccg_status st = ccg_reshape(g, x, shape, out);
  if (st != CCG_STATUS_OK)
    ccg__rollback(g, &mark);
  return st;
}

ccg_status ccg_unsqueeze(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                         size_t n, ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_IS("axes", axes, n);
  return ccg__build(g, CCG_OP_UNSQUEEZE, &x, 1, &a, 1, 1, out, NULL);
}

ccg_status ccg_squeeze(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                       size_t n, ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_IS("axes", axes, n);
  return ccg__build(g, CCG_OP_SQUEEZE, &x, 1, &a, axes && n ? 1 : 0, 1, out,
                    NULL);
}

ccg_status ccg_expand(ccg_graph *g, ccg_value_id x, ccg_value_id shape,
                      ccg_value_id *out) {
  ccg_value_id in[2] = {x, shape};
  return ccg__build(g, CCG_OP_EXPAND, in, 2, NULL, 0, 1, out, NULL);
}

ccg_status ccg_shape_of(ccg_graph *g, ccg_value_id x, int64_t start,
                        int64_t end, ccg_value_id *out) {
  ccg_attr a[2];
  size_t n = 0;
  if (start != 0)
    a[n++] = CCG_ATTR_I("start", start);
  if (end != INT64_MAX)
    a[n++] = CCG_ATTR_I("end", end);
  return ccg__build(g, CCG_OP_SHAPE, &x, 1, a, n, 1, out, NULL);
}

ccg_status ccg_constant(ccg_graph *g, const ccg_tensor *value,
                        ccg_value_id *out) {
  if (!value)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "Constant: value is NULL");
  ccg_attr a = CCG_ATTR_T("value", value);
  return ccg__build(g, CCG_OP_CONSTANT, NULL, 0, &a, 1, 1, out, NULL);
}

ccg_status ccg_constant_of_shape(ccg_graph *g, ccg_value_id shape,
                                 const ccg_tensor *value, ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_T("value", value);
  return ccg__build(g, CCG_OP_CONSTANT_OF_SHAPE, &shape, 1, &a, value ? 1 : 0,
                    1, out, NULL);
}
