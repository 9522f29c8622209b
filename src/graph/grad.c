/* Helpers for the gradient rules of the op family files: reading the
 * forward node, constants, zeros, and summing a broadcast gradient back to
 * its operand's shape. Everything is built from ordinary nodes (Constant,
 * ConstantOfShape, ReduceSum, Reshape), so a differentiated graph is a plain
 * graph that exports and runs like any other. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

ccg_status ccg__grad_fail(ccg__grad *gx, ccg_status st, const char *fmt, ...) {
  char msg[CCG__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ccg__error(&gx->g->ctx, st, "node '%s' (%s): gradient: %s",
                    ccg_node_name(gx->g, gx->node), ccg_op_name(gx->op), msg);
}

int64_t ccg__grad_attr_i(ccg__grad *gx, const char *name) {
  const ccg_attr *a = ccg_node_attr(gx->g, gx->node, name);
  if (a)
    return a->i;
  const ccg__attr_spec *s = ccg__attr_spec_of(gx->op, name);
  return s ? s->i : 0;
}

float ccg__grad_attr_f(ccg__grad *gx, const char *name) {
  const ccg_attr *a = ccg_node_attr(gx->g, gx->node, name);
  if (a)
    return a->f;
  const ccg__attr_spec *s = ccg__attr_spec_of(gx->op, name);
  return s ? s->f : 0.0f;
}

const char *ccg__grad_attr_s(ccg__grad *gx, const char *name) {
  const ccg_attr *a = ccg_node_attr(gx->g, gx->node, name);
  if (a)
    return a->s;
  const ccg__attr_spec *s = ccg__attr_spec_of(gx->op, name);
  return s && s->s ? s->s : "";
}

size_t ccg__grad_attr_ints(ccg__grad *gx, const char *name, const int64_t **v) {
  const ccg_attr *a = ccg_node_attr(gx->g, gx->node, name);
  *v = a ? a->ints : NULL;
  return a ? a->n : 0;
}

ccg_status ccg__grad_scalar(ccg_graph *g, ccg_dtype dt, double v,
                            ccg_value_id *out) {
  if (dt == CCG_DTYPE_F64) {
    ccg_tensor t = {CCG_DTYPE_F64, 0, {0}, &v};
    return ccg_constant(g, &t, out);
  }
  float f = (float)v;
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &f};
  CCG_CHECK(ccg_constant(g, &t, out));
  return dt == CCG_DTYPE_F32 ? CCG_STATUS_OK : ccg_cast(g, *out, dt, out);
}

ccg_status ccg__grad_i64(ccg_graph *g, const int64_t *v, size_t n,
                         ccg_value_id *out) {
  ccg_tensor t = {CCG_DTYPE_I64, 1, {(int64_t)n}, v};
  return ccg_constant(g, &t, out);
}

ccg_status ccg__grad_shape_of(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  ccg_shape s = *ccg_value_shape(g, x);
  if (!ccg_shape_is_static(&s))
    return ccg_shape_of(g, x, 0, INT64_MAX, out);
  int64_t dims[CCG_MAX_RANK];
  for (int i = 0; i < s.rank; i++)
    dims[i] = s.dims[i].size;
  return ccg__grad_i64(g, dims, (size_t)s.rank, out);
}

/* ConstantOfShape(shape) of zeros in float dtype dt. */
static ccg_status zeros_of(ccg_graph *g, ccg_dtype dt, ccg_value_id shape,
                           ccg_value_id *out) {
  double zero = 0.0;
  float zf = 0.0f;
  ccg_tensor t = {dt, 1, {1}, dt == CCG_DTYPE_F64 ? (const void *)&zero : &zf};
  if (dt != CCG_DTYPE_F64 && dt != CCG_DTYPE_F32) {
    t.dtype = CCG_DTYPE_F32;
    CCG_CHECK(ccg_constant_of_shape(g, shape, &t, out));
    return ccg_cast(g, *out, dt, out);
  }
  return ccg_constant_of_shape(g, shape, &t, out);
}

ccg_status ccg__grad_zeros_like(ccg_graph *g, ccg_value_id x,
                                ccg_value_id *out) {
  ccg_value_id shape;
  CCG_CHECK(ccg__grad_shape_of(g, x, &shape));
  return zeros_of(g, ccg_value_dtype(g, x), shape, out);
}

ccg_status ccg__grad_scatter(ccg__grad *gx, ccg_op gather, ccg_op scatter,
                             const ccg_attr *axis) {
  const char *red = ccg__grad_attr_s(gx, "reduction");
  if (strcmp(red, "add") != 0 && strcmp(red, "none") != 0)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "reduction '%s' has no gradient rule (none and add "
                          "do)",
                          red);
  ccg_attr attrs[2];
  size_t na = 0;
  if (axis)
    attrs[na++] = *axis;
  ccg_value_id dy = gx->gout[0], idx = gx->in[1];
  if (gx->need[2])
    CCG_CHECK(ccg__build(gx->g, gather, (ccg_value_id[]){dy, idx}, 2, attrs, na,
                         1, &gx->gin[2], NULL));
  if (!gx->need[0])
    return CCG_STATUS_OK;
  if (strcmp(red, "add") == 0) {
    gx->gin[0] = dy;
    return CCG_STATUS_OK;
  }
  ccg_value_id z;
  CCG_CHECK(ccg__grad_zeros_like(gx->g, gx->in[2], &z));
  attrs[na++] = CCG_ATTR_S("reduction", "none");
  return ccg__build(gx->g, scatter, (ccg_value_id[]){dy, idx, z}, 3, attrs, na,
                    1, &gx->gin[0], NULL);
}

ccg_status ccg__grad_zeros(ccg_graph *g, ccg_dtype dt, const int64_t *dims,
                           size_t n, ccg_value_id *out) {
  ccg_value_id shape;
  CCG_CHECK(ccg__grad_i64(g, dims, n, &shape));
  return zeros_of(g, dt, shape, out);
}

ccg_status ccg__grad_reshape_like(ccg_graph *g, ccg_value_id x,
                                  ccg_value_id like, ccg_value_id *out) {
  if (ccg_shape_equal(ccg_value_shape(g, x), ccg_value_shape(g, like))) {
    *out = x;
    return CCG_STATUS_OK;
  }
  ccg_value_id shape;
  CCG_CHECK(ccg__grad_shape_of(g, like, &shape));
  return ccg_reshape(g, x, shape, out);
}

ccg_status ccg__grad_reduce_to(ccg_graph *g, ccg_value_id dy,
                               const ccg_shape *want, ccg_value_id *out) {
  ccg_shape have = *ccg_value_shape(g, dy);
  int lead = have.rank - want->rank;
  if (lead < 0)
    return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                      "gradient '%s' has rank %d, below its operand's %d",
                      ccg_value_name(g, dy), have.rank, want->rank);
  int64_t axes[CCG_MAX_RANK];
  size_t n = 0;
  for (int i = 0; i < have.rank; i++) {
    bool reduce = i < lead;
    if (!reduce) {
      ccg_dim w = want->dims[i - lead], h = have.dims[i];
      reduce = ccg__is_num(w, 1) && !ccg__is_num(h, 1);
    }
    if (reduce)
      axes[n++] = i;
  }
  ccg_value_id v = dy;
  /* only the leading axes: one ReduceSum that drops them (keepdims 0),
   * the same sums as keeping them and squeezing them after (a bias's
   * gradient: a node less for each) */
  if (n > 0 && n == (size_t)lead) {
    CCG_CHECK(ccg_reduce_sum(g, v, axes, n, false, &v));
    *out = v;
    return CCG_STATUS_OK;
  }
  if (n > 0)
    CCG_CHECK(ccg_reduce_sum(g, v, axes, n, true, &v));
  if (lead > 0) {
    int64_t sq[CCG_MAX_RANK];
    for (int i = 0; i < lead; i++)
      sq[i] = i;
    CCG_CHECK(ccg_squeeze(g, v, sq, (size_t)lead, &v));
  }
  *out = v;
  return CCG_STATUS_OK;
}

ccg_status ccg__grad_unbroadcast(ccg_graph *g, ccg_value_id dy,
                                 ccg_value_id target, ccg_value_id *out) {
  ccg_shape want = *ccg_value_shape(g, target);
  if (ccg_shape_equal(ccg_value_shape(g, dy), &want)) {
    *out = dy;
    return CCG_STATUS_OK;
  }
  return ccg__grad_reduce_to(g, dy, &want, out);
}

ccg_status ccg__grad_scale(ccg_graph *g, ccg_value_id x, double k,
                           ccg_value_id *out) {
  ccg_value_id c;
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, x), k, &c));
  return ccg_mul(g, x, c, out);
}
