/* Windowed ops: Conv and ConvTranspose (opset 11 semantics), MaxPool,
 * AveragePool (dilations as in opset 19), GlobalAveragePool and
 * GlobalMaxPool over N-D inputs [N, C, spatial...]. The pad and size rules
 * are the executor's (exec/vision_math.h), so shapes and kernels agree.
 * Spatial dims must be numbers; the batch dim may be a symbol. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/vision.h"

/* ---- attributes shared by the windowed ops ------------------------------ */

#define WIN_ATTRS                                                              \
  {"auto_pad", CCG_ATTR_STRING, false, 0, 0, "NOTSET"},                        \
      {"dilations", CCG_ATTR_INTS, false, 0, 0, NULL},                         \
      {"kernel_shape", CCG_ATTR_INTS, false, 0, 0, NULL},                      \
      {"pads", CCG_ATTR_INTS, false, 0, 0, NULL}, {                            \
    "strides", CCG_ATTR_INTS, false, 0, 0, NULL                                \
  }

static const ccg__attr_spec conv_attrs[] = {
    WIN_ATTRS,
    {"group", CCG_ATTR_INT, false, 1, 0, NULL},
};

static const ccg__attr_spec convt_attrs[] = {
    WIN_ATTRS,
    {"group", CCG_ATTR_INT, false, 1, 0, NULL},
    {"output_padding", CCG_ATTR_INTS, false, 0, 0, NULL},
    {"output_shape", CCG_ATTR_INTS, false, 0, 0, NULL},
};

static const ccg__attr_spec maxpool_attrs[] = {
    WIN_ATTRS,
    {"ceil_mode", CCG_ATTR_INT, false, 0, 0, NULL},
    {"storage_order", CCG_ATTR_INT, false, 0, 0, NULL},
};

static const ccg__attr_spec avgpool_attrs[] = {
    WIN_ATTRS,
    {"ceil_mode", CCG_ATTR_INT, false, 0, 0, NULL},
    {"count_include_pad", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* Where attributes come from: a node being inferred or one being
 * differentiated (both read with the op's defaults). */
typedef struct wsrc {
  ccg__infer *ix;
  ccg__grad *gx;
} wsrc;

static const ccg_attr *src_attr(const wsrc *s, const char *name) {
  return s->ix ? ccg__attr(s->ix, name)
               : ccg_node_attr(s->gx->g, s->gx->node, name);
}

static int64_t src_i(const wsrc *s, const char *name) {
  return s->ix ? ccg__attr_i(s->ix, name) : ccg__grad_attr_i(s->gx, name);
}

static const char *src_s(const wsrc *s, const char *name) {
  return s->ix ? ccg__attr_s(s->ix, name) : ccg__grad_attr_s(s->gx, name);
}

static ccg_status src_fail(const wsrc *s, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);
static ccg_status src_fail(const wsrc *s, ccg_status st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return s->ix ? ccg__fail(s->ix, st, "%s", msg)
               : ccg__grad_fail(s->gx, st, "%s", msg);
}

/* An INTS attribute of n entries, each >= lo, or `def` everywhere when it
 * is absent. */
static ccg_status src_ints(const wsrc *s, const char *name, int n, int64_t lo,
                           int64_t def, int64_t *out) {
  const ccg_attr *a = src_attr(s, name);
  if (!a || a->n == 0) {
    for (int i = 0; i < n; i++)
      out[i] = def;
    return CCG_STATUS_OK;
  }
  if (a->n != (size_t)n)
    return src_fail(s, CCG_STATUS_INVALID_ARG,
                    "%s has %zu entries; expected %d for %d spatial dims", name,
                    a->n, n, n / (strcmp(name, "pads") == 0 ? 2 : 1));
  for (int i = 0; i < n; i++) {
    if (a->ints[i] < lo)
      return src_fail(s, CCG_STATUS_INVALID_ARG,
                      "%s[%d] is %lld; expected a value >= %lld", name, i,
                      (long long)a->ints[i], (long long)lo);
    out[i] = a->ints[i];
  }
  return CCG_STATUS_OK;
}

static ccg_status src_autopad(const wsrc *s, ccg__autopad *out) {
  static const char *const names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER",
                                      "VALID"};
  const char *v = src_s(s, "auto_pad");
  for (int i = 0; i < 4; i++)
    if (strcmp(v, names[i]) == 0) {
      *out = (ccg__autopad)i;
      return CCG_STATUS_OK;
    }
  return src_fail(s, CCG_STATUS_INVALID_ARG,
                  "auto_pad is '%s'; expected NOTSET, SAME_UPPER, SAME_LOWER "
                  "or VALID",
                  v);
}

/* The numeric spatial dims of shape x (dims 2..). */
static ccg_status spatial(const wsrc *s, const ccg_shape *x, const char *what,
                          int64_t *out) {
  for (int d = 2; d < x->rank; d++) {
    if (ccg_dim_is_sym(x->dims[d]))
      return src_fail(s, CCG_STATUS_UNSUPPORTED,
                      "spatial dim %d of %s is the symbol '%s'; windowed ops "
                      "need numeric spatial dims",
                      d, what, x->dims[d].sym);
    out[d - 2] = x->dims[d].size;
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__vision_geo(ccg__infer *ix, ccg__grad *gx, ccg_op op,
                           const ccg_shape *x, const ccg_shape *w,
                           ccg__vgeo *geo) {
  wsrc s = {ix, gx};
  memset(geo, 0, sizeof *geo);
  int nsp = x->rank - 2;
  if (x->rank < 3)
    return src_fail(&s, CCG_STATUS_SHAPE,
                    "X has rank %d; expected [N, C, spatial...] of rank >= 3",
                    x->rank);
  geo->nsp = nsp;
  CCG_CHECK(spatial(&s, x, "X", geo->in));
  CCG_CHECK(src_autopad(&s, &geo->ap));
  bool is_conv = op == CCG_OP_CONV || op == CCG_OP_CONV_TRANSPOSE;
  if (is_conv) {
    if (w->rank != x->rank)
      return src_fail(&s, CCG_STATUS_SHAPE, "W has rank %d; X has rank %d",
                      w->rank, x->rank);
    int64_t wk[CCG_MAX_RANK];
    CCG_CHECK(spatial(&s, w, "W", wk));
    CCG_CHECK(src_ints(&s, "kernel_shape", nsp, 1, 0, geo->k));
    for (int d = 0; d < nsp; d++) {
      if (geo->k[d] == 0)
        geo->k[d] = wk[d];
      if (geo->k[d] != wk[d])
        return src_fail(&s, CCG_STATUS_SHAPE,
                        "kernel_shape[%d] is %lld; W's dim %d is %lld", d,
                        (long long)geo->k[d], d + 2, (long long)wk[d]);
    }
    geo->group = src_i(&s, "group");
    if (geo->group < 1)
      return src_fail(&s, CCG_STATUS_INVALID_ARG,
                      "group is %lld; expected >= 1", (long long)geo->group);
  } else {
    CCG_CHECK(src_ints(&s, "kernel_shape", nsp, 1, 0, geo->k));
    if (geo->k[0] == 0)
      return src_fail(&s, CCG_STATUS_INVALID_ARG,
                      "kernel_shape is required (%d entries)", nsp);
    geo->ceil = src_i(&s, "ceil_mode") != 0;
  }
  CCG_CHECK(src_ints(&s, "strides", nsp, 1, 1, geo->st));
  CCG_CHECK(src_ints(&s, "dilations", nsp, 1, 1, geo->dil));
  int64_t pads[2 * CCG_MAX_RANK];
  CCG_CHECK(src_ints(&s, "pads", 2 * nsp, 0, 0, pads));
  for (int d = 0; d < nsp; d++) {
    geo->pb[d] = pads[d];
    geo->pe[d] = pads[nsp + d];
  }
  if (op != CCG_OP_CONV_TRANSPOSE) {
    for (int d = 0; d < nsp; d++) {
      geo->out[d] =
          ccg__win_out_size(geo->ap, geo->ceil, geo->in[d], geo->k[d],
                            geo->st[d], geo->dil[d], &geo->pb[d], &geo->pe[d]);
      if (geo->out[d] < 1)
        return src_fail(&s, CCG_STATUS_SHAPE,
                        "spatial dim %d: a window of extent %lld does not fit "
                        "the input of %lld with pads %lld and %lld",
                        d, (long long)ccg__win_extent(geo->k[d], geo->dil[d]),
                        (long long)geo->in[d], (long long)geo->pb[d],
                        (long long)geo->pe[d]);
    }
    return CCG_STATUS_OK;
  }
  int64_t shape[CCG_MAX_RANK];
  const ccg_attr *os = src_attr(&s, "output_shape");
  CCG_CHECK(src_ints(&s, "output_padding", nsp, 0, 0, geo->opad));
  bool given = os && os->n > 0;
  if (given) {
    if (os->n != (size_t)nsp && os->n != (size_t)nsp + 2)
      return src_fail(&s, CCG_STATUS_INVALID_ARG,
                      "output_shape has %zu entries; expected %d", os->n, nsp);
    for (int d = 0; d < nsp; d++)
      shape[d] = os->ints[os->n - (size_t)nsp + (size_t)d];
  }
  bool same = geo->ap == CCG__PAD_SAME_UPPER || geo->ap == CCG__PAD_SAME_LOWER;
  for (int d = 0; d < nsp; d++) {
    int64_t full = geo->st[d] * (geo->in[d] - 1) + geo->opad[d] +
                   ccg__win_extent(geo->k[d], geo->dil[d]);
    if (!given && same)
      shape[d] = geo->in[d] * geo->st[d];
    if (given || same) {
      geo->out[d] = shape[d];
      ccg__convt_pads(geo->ap, full - shape[d], &geo->pb[d], &geo->pe[d]);
    } else {
      if (geo->ap == CCG__PAD_VALID)
        geo->pb[d] = geo->pe[d] = 0;
      geo->out[d] = full - geo->pb[d] - geo->pe[d];
    }
    if (geo->out[d] < 1)
      return src_fail(&s, CCG_STATUS_SHAPE,
                      "spatial dim %d: the output size is %lld", d,
                      (long long)geo->out[d]);
  }
  return CCG_STATUS_OK;
}

/* ---- Conv and ConvTranspose --------------------------------------------- */

static ccg_status check_bias(ccg__infer *ix, ccg_dim m) {
  if (ix->n_in < 3 || !ccg__in_has(ix, 2))
    return CCG_STATUS_OK;
  CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  const ccg_shape *b = ccg__in_shape(ix, 2);
  if (b->rank != 1 || (!ccg_dim_is_sym(m) && !ccg_dim_is_sym(b->dims[0]) &&
                       b->dims[0].size != m.size))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "B '%s' must be a vector of the %lld output channels",
                     ccg__in_name(ix, 2), (long long)m.size);
  return CCG_STATUS_OK;
}

static ccg_status infer_conv(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  CCG_CHECK(ccg__same_dtype(ix, 0, 1));
  const ccg_shape *x = ccg__in_shape(ix, 0), *w = ccg__in_shape(ix, 1);
  ccg__vgeo geo;
  CCG_CHECK(ccg__vision_geo(ix, NULL, ix->op, x, w, &geo));
  bool t = ix->op == CCG_OP_CONV_TRANSPOSE;
  ccg_dim c = x->dims[1], w0 = w->dims[0], w1 = w->dims[1], m = w0;
  int64_t gr = geo.group;
  /* Conv: W [M, C/group, k...]; ConvTranspose: W [C, M/group, k...] */
  if (!ccg_dim_is_sym(c)) {
    bool ok = t ? ccg_dim_is_sym(w0) || w0.size == c.size
                : ccg_dim_is_sym(w1) || w1.size * gr == c.size;
    if (!ok || c.size % gr != 0)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "X has %lld channels; W's dim %d is %lld with group "
                       "%lld",
                       (long long)c.size, t ? 0 : 1,
                       (long long)(t ? w0 : w1).size, (long long)gr);
  }
  if (t) {
    if (ccg_dim_is_sym(w1))
      return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                       "W's dim 1 is a symbol; the output channels need it");
    m = ccg_dim_num(w1.size * gr);
  } else if (!ccg_dim_is_sym(w0) && w0.size % gr != 0) {
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "W has %lld output channels, not a multiple of group "
                     "%lld",
                     (long long)w0.size, (long long)gr);
  }
  CCG_CHECK(check_bias(ix, m));
  ccg_shape out = *x;
  out.dims[1] = m;
  for (int d = 0; d < geo.nsp; d++)
    out.dims[d + 2] = ccg_dim_num(geo.out[d]);
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = out;
  return CCG_STATUS_OK;
}

/* ---- pools --------------------------------------------------------------- */

static ccg_status infer_pool(ccg__infer *ix) {
  unsigned types = CCG__FLOAT_TYPES;
  if (ix->op == CCG_OP_MAX_POOL)
    types |= CCG__DT(I8) | CCG__DT(U8);
  CCG_CHECK(ccg__expect_dtype(
      ix, 0, types,
      ix->op == CCG_OP_MAX_POOL ? "a float type, i8 or u8" : "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  ccg__vgeo geo;
  CCG_CHECK(ccg__vision_geo(ix, NULL, ix->op, x, NULL, &geo));
  int64_t so = ix->op == CCG_OP_MAX_POOL ? ccg__attr_i(ix, "storage_order") : 0;
  if (so != 0 && so != 1)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "storage_order is %lld; expected 0 or 1", (long long)so);
  ccg_shape out = *x;
  for (int d = 0; d < geo.nsp; d++)
    out.dims[d + 2] = ccg_dim_num(geo.out[d]);
  for (size_t o = 0; o < ix->n_out; o++) {
    ix->out_dtype[o] = o ? CCG_DTYPE_I64 : ccg__in_dtype(ix, 0);
    ix->out_shape[o] = out;
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_global_pool(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  if (x->rank < 3)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "X has rank %d; expected [N, C, spatial...] of rank >= 3",
                     x->rank);
  ccg_shape out = *x;
  for (int d = 2; d < x->rank; d++)
    out.dims[d] = ccg_dim_num(1);
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = out;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_CONV = {CCG__ATTRS(conv_attrs),
                                     0,
                                     infer_conv,
                                     ccg__grad_conv,
                                     .shard = CCG_OP_SHARD_OWN,
                                     .dtypes = CCG__FLOAT_TYPES,
                                     .onnx_since = 11};
const ccg__op_def ccg__opdef_CONV_TRANSPOSE = {CCG__ATTRS(convt_attrs),
                                               0,
                                               infer_conv,
                                               ccg__grad_conv,
                                               .shard = CCG_OP_SHARD_OWN,
                                               .dtypes = CCG__FLOAT_TYPES,
                                               .onnx_since = 11};
const ccg__op_def ccg__opdef_MAX_POOL = {
    CCG__ATTRS(maxpool_attrs), 0, infer_pool, ccg__grad_pool,
    .shard = CCG_OP_SHARD_OWN,
    .dtypes = CCG__FLOAT_TYPES | CCG__DT(I8) | CCG__DT(U8),
    /* 12 only added i8 and u8: for floats 11 is the same op, and many CNN
     * exports use opset 11 */
    .onnx_since = 11};
const ccg__op_def ccg__opdef_AVERAGE_POOL = {CCG__ATTRS(avgpool_attrs),
                                             0,
                                             infer_pool,
                                             ccg__grad_pool,
                                             .shard = CCG_OP_SHARD_OWN,
                                             .dtypes = CCG__FLOAT_TYPES,
                                             .onnx_since = 11};
const ccg__op_def ccg__opdef_GLOBAL_AVERAGE_POOL = {CCG__NO_ATTRS,
                                                    0,
                                                    infer_global_pool,
                                                    ccg__grad_pool,
                                                    .shard =
                                                        CCG_OP_SHARD_REPLICATE,
                                                    .dtypes = CCG__FLOAT_TYPES,
                                                    .onnx_since = 1};
const ccg__op_def ccg__opdef_GLOBAL_MAX_POOL = {CCG__NO_ATTRS,
                                                0,
                                                infer_global_pool,
                                                ccg__grad_pool,
                                                .shard = CCG_OP_SHARD_OWN,
                                                .dtypes = CCG__FLOAT_TYPES,
                                                .onnx_since = 1};
