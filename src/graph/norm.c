/* Normalizations along trailing dims: Softmax, LogSoftmax and Hardmax
 * (opset 13 semantics: one axis, default -1), LayerNormalization (opset 17:
 * normalizes dims [axis, rank), optional Mean and InvStdDev outputs in the
 * stash type) and RMSNormalization (opset 23). The per-channel ones are in
 * norm_channel.c, attention and rotary embeddings in attention.c. */
#include <float.h>
#include <string.h>

#include "graph/internal.h"
#include "graph/norm.h"

/* ---- Softmax ------------------------------------------------------------ */

static const ccg__attr_spec softmax_attrs[] = {
    {"axis", CCG_ATTR_INT, false, -1, 0, NULL},
};

static ccg_status infer_softmax(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  int axis;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), x->rank, "axis", &axis));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *x;
  return CCG_STATUS_OK;
}

/* dx = y (dy - sum(dy y) over the axis). */
static ccg_status grad_softmax(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id y = gx->out[0], dy = gx->gout[0], s;
  int64_t axis = ccg__grad_attr_i(gx, "axis");
  CCG_CHECK(ccg_mul(g, dy, y, &s));
  CCG_CHECK(ccg_reduce_sum(g, s, &axis, 1, true, &s));
  CCG_CHECK(ccg_sub(g, dy, s, &s));
  return ccg_mul(g, y, s, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_SOFTMAX = {CCG__ATTRS(softmax_attrs),
                                        0,
                                        infer_softmax,
                                        grad_softmax,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__FLOAT_TYPES};

/* ---- LogSoftmax and Hardmax ---------------------------------------------
 * Opsets 11 and 12 flatten the input at `axis`; the importer reads those
 * only where that equals opset 13's (the last axis), as for Softmax. */

/* y = x - logsumexp(x): dx = dy - exp(y) sum(dy) over the axis. */
static ccg_status grad_log_softmax(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id e, s;
  int64_t axis = ccg__grad_attr_i(gx, "axis");
  CCG_CHECK(ccg_reduce_sum(g, gx->gout[0], &axis, 1, true, &s));
  CCG_CHECK(ccg_exp(g, gx->out[0], &e));
  CCG_CHECK(ccg_mul(g, e, s, &s));
  return ccg_sub(g, gx->gout[0], s, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_LOG_SOFTMAX = {CCG__ATTRS(softmax_attrs),
                                            0,
                                            infer_softmax,
                                            grad_log_softmax,
                                            .shard = CCG_OP_SHARD_OWN,
                                            .dtypes = CCG__FLOAT_TYPES};

/* Piecewise constant: the gradient is zero wherever it exists. */
static ccg_status grad_hardmax(ccg__grad *gx) {
  return ccg__grad_zeros_like(gx->g, gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_HARDMAX = {CCG__ATTRS(softmax_attrs),
                                        0,
                                        infer_softmax,
                                        grad_hardmax,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__FLOAT_TYPES};

/* ---- LayerNormalization ------------------------------------------------- */

static const ccg__attr_spec layer_norm_attrs[] = {
    {"axis", CCG_ATTR_INT, false, -1, 0, NULL},
    {"epsilon", CCG_ATTR_FLOAT, false, 0, 1e-5f, NULL},
    {"stash_type", CCG_ATTR_INT, false, 1, 0, NULL},
};

/* stash_type holds an ONNX TensorProto.DataType code; only float types make
 * sense for the statistics. */
static const struct {
  int64_t code;
  ccg_dtype dt;
} stash_types[] = {
    {1, CCG_DTYPE_F32},
    {10, CCG_DTYPE_F16},
    {11, CCG_DTYPE_F64},
    {16, CCG_DTYPE_BF16},
};

ccg_status ccg__norm_stash_dtype(ccg__infer *ix, ccg_dtype *out) {
  int64_t code = ccg__attr_i(ix, "stash_type");
  for (size_t i = 0; i < sizeof stash_types / sizeof *stash_types; i++) {
    if (stash_types[i].code == code) {
      *out = stash_types[i].dt;
      return CCG_STATUS_OK;
    }
  }
  return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                   "stash_type is %lld; expected an ONNX float type code "
                   "(1 = f32, 10 = f16, 11 = f64, 16 = bf16)",
                   (long long)code);
}

ccg_status ccg__norm_epsilon(ccg__infer *ix) {
  float eps = ccg__attr_f(ix, "epsilon");
  if (!(eps >= 0.0f && eps <= FLT_MAX))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "epsilon is %g; expected a finite value >= 0",
                     (double)eps);
  return CCG_STATUS_OK;
}

/* Scale and B have the normalized shape X.shape[axis:] or broadcast one way
 * to it (a shorter shape, dims of size 1). */
static ccg_status check_affine(ccg__infer *ix, size_t i, const ccg_shape *ns) {
  if (!ccg__in_has(ix, i))
    return CCG_STATUS_OK;
  CCG_CHECK(ccg__same_dtype(ix, 0, i));
  const ccg_shape *p = ccg__in_shape(ix, i);
  bool ok = p->rank <= ns->rank;
  for (int k = 0; ok && k < p->rank; k++) {
    ccg_dim d = p->dims[p->rank - 1 - k], t = ns->dims[ns->rank - 1 - k];
    ok = ccg_dim_equal(d, t) || (!ccg_dim_is_sym(d) && d.size == 1);
  }
  if (ok)
    return CCG_STATUS_OK;
  char sp[128], sn[128];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "%s '%s' %s does not broadcast to the normalized shape %s",
                   i == 1 ? "Scale" : "B", ccg__in_name(ix, i),
                   ccg__shape_str(p, sp, sizeof sp),
                   ccg__shape_str(ns, sn, sizeof sn));
}

static ccg_status infer_layer_norm(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  int axis;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), x->rank, "axis", &axis));
  CCG_CHECK(ccg__norm_epsilon(ix));
  ccg_dtype stash = CCG_DTYPE_F32;
  CCG_CHECK(ccg__norm_stash_dtype(ix, &stash));
  ccg_shape ns;
  memset(&ns, 0, sizeof ns);
  ns.rank = x->rank - axis;
  memcpy(ns.dims, x->dims + axis, (size_t)ns.rank * sizeof *ns.dims);
  CCG_CHECK(check_affine(ix, 1, &ns));
  CCG_CHECK(check_affine(ix, 2, &ns));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *x;
  /* Mean and InvStdDev keep the leading dims and 1 for each reduced one. */
  ccg_shape stat = *x;
  for (int k = axis; k < x->rank; k++)
    stat.dims[k] = ccg_dim_num(1);
  for (size_t o = 1; o < ix->n_out; o++) {
    ix->out_dtype[o] = stash;
    ix->out_shape[o] = stat;
  }
  return CCG_STATUS_OK;
}

/* The statistics are recomputed from x (the optional Mean and InvStdDev
 * outputs need not exist): xhat = (x - mean) r with r = 1/sqrt(var + eps);
 * with g = dy scale, dx = r (g - mean(g) - xhat mean(g xhat)); dscale and
 * dbias sum dy xhat and dy over the leading dims, down to their shapes. */
ccg_status ccg__norm_stats(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                           size_t n_axes, double eps, ccg_value_id *xhat,
                           ccg_value_id *r) {
  ccg_value_id mean, c, var, k;
  ccg_dtype dt = ccg_value_dtype(g, x);
  CCG_CHECK(ccg_reduce_mean(g, x, axes, n_axes, true, &mean));
  CCG_CHECK(ccg_sub(g, x, mean, &c));
  CCG_CHECK(ccg_mul(g, c, c, &var));
  CCG_CHECK(ccg_reduce_mean(g, var, axes, n_axes, true, &var));
  CCG_CHECK(ccg__grad_scalar(g, dt, eps, &k));
  CCG_CHECK(ccg_add(g, var, k, &var));
  CCG_CHECK(ccg_sqrt(g, var, &var));
  CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &k));
  CCG_CHECK(ccg_div(g, k, var, r));
  return ccg_mul(g, c, *r, xhat);
}

ccg_status ccg__norm_dx(ccg_graph *g, ccg_value_id gy, ccg_value_id xhat,
                        ccg_value_id r, const int64_t *axes, size_t n_axes,
                        ccg_value_id *dx) {
  ccg_value_id m1, m2;
  CCG_CHECK(ccg_reduce_mean(g, gy, axes, n_axes, true, &m1));
  CCG_CHECK(ccg_mul(g, gy, xhat, &m2));
  CCG_CHECK(ccg_reduce_mean(g, m2, axes, n_axes, true, &m2));
  CCG_CHECK(ccg_mul(g, xhat, m2, &m2));
  CCG_CHECK(ccg_sub(g, gy, m1, &gy));
  CCG_CHECK(ccg_sub(g, gy, m2, &gy));
  return ccg_mul(g, gy, r, dx);
}

static ccg_status grad_layer_norm(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  for (size_t o = 1; o < gx->n_out; o++)
    if (gx->gout[o] != CCG_NONE)
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "output %zu '%s' (%s) has a gradient; only Y "
                            "(output 0) may",
                            o, ccg_value_name(g, gx->out[o]),
                            o == 1 ? "Mean" : "InvStdDev");
  if (gx->gout[0] == CCG_NONE)
    return CCG_STATUS_OK;
  ccg_value_id x = gx->in[0], xhat, r;
  int rank = ccg_value_shape(g, x)->rank;
  int64_t axis = ccg__grad_attr_i(gx, "axis"), axes[CCG_MAX_RANK];
  axis = axis < 0 ? axis + rank : axis;
  size_t na = 0;
  for (int64_t k = axis; k < rank; k++)
    axes[na++] = k;
  CCG_CHECK(ccg__norm_stats(
      g, x, axes, na, (double)ccg__grad_attr_f(gx, "epsilon"), &xhat, &r));
  if (gx->need[0]) {
    ccg_value_id gy;
    CCG_CHECK(ccg_mul(g, gx->gout[0], gx->in[1], &gy));
    CCG_CHECK(ccg__norm_dx(g, gy, xhat, r, axes, na, &gx->gin[0]));
  }
  if (gx->need[1]) {
    ccg_value_id v;
    CCG_CHECK(ccg_mul(g, gx->gout[0], xhat, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, gx->in[1], &gx->gin[1]));
  }
  if (gx->n_in > 2 && gx->in[2] != CCG_NONE && gx->need[2])
    CCG_CHECK(ccg__grad_unbroadcast(g, gx->gout[0], gx->in[2], &gx->gin[2]));
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_LAYER_NORM = {CCG__ATTRS(layer_norm_attrs),
                                           0,
                                           infer_layer_norm,
                                           grad_layer_norm,
                                           .shard = CCG_OP_SHARD_OWN,
                                           .dtypes = CCG__FLOAT_TYPES,
                                           .onnx_since = 17};

/* ---- RMSNormalization --------------------------------------------------- */

/* Y = X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon) * scale; the
 * statistic is computed in f32 whatever stash_type says (it is checked to
 * be a float type code). */
static const ccg__attr_spec rms_norm_attrs[] = {
    {"axis", CCG_ATTR_INT, false, -1, 0, NULL},
    {"epsilon", CCG_ATTR_FLOAT, false, 0, 1e-5f, NULL},
    {"stash_type", CCG_ATTR_INT, false, 1, 0, NULL},
};

static ccg_status infer_rms_norm(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  int axis;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), x->rank, "axis", &axis));
  CCG_CHECK(ccg__norm_epsilon(ix));
  ccg_dtype stash;
  CCG_CHECK(ccg__norm_stash_dtype(ix, &stash));
  ccg_shape ns;
  memset(&ns, 0, sizeof ns);
  ns.rank = x->rank - axis;
  memcpy(ns.dims, x->dims + axis, (size_t)ns.rank * sizeof *ns.dims);
  CCG_CHECK(check_affine(ix, 1, &ns));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *x;
  return CCG_STATUS_OK;
}

/* r = 1/sqrt(mean(x^2) + eps), y = x r scale. With g = dy scale:
 * dx = r (g - x r^2 mean(g x)); dscale sums dy x r down to its shape. */
static ccg_status grad_rms_norm(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], dy = gx->gout[0], r, one, eps, t;
  ccg_dtype dt = ccg_value_dtype(g, x);
  int rank = ccg_value_shape(g, x)->rank;
  int64_t axis = ccg__grad_attr_i(gx, "axis"), axes[CCG_MAX_RANK];
  axis = axis < 0 ? axis + rank : axis;
  size_t na = 0;
  for (int64_t k = axis; k < rank; k++)
    axes[na++] = k;
  CCG_CHECK(ccg_mul(g, x, x, &r));
  CCG_CHECK(ccg_reduce_mean(g, r, axes, na, true, &r));
  CCG_CHECK(
      ccg__grad_scalar(g, dt, (double)ccg__grad_attr_f(gx, "epsilon"), &eps));
  CCG_CHECK(ccg_add(g, r, eps, &r));
  CCG_CHECK(ccg_sqrt(g, r, &r));
  CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &one));
  CCG_CHECK(ccg_div(g, one, r, &r));
  if (gx->need[0]) {
    ccg_value_id gy, m;
    CCG_CHECK(ccg_mul(g, dy, gx->in[1], &gy));
    CCG_CHECK(ccg_mul(g, gy, x, &m));
    CCG_CHECK(ccg_reduce_mean(g, m, axes, na, true, &m));
    CCG_CHECK(ccg_mul(g, m, r, &m));
    CCG_CHECK(ccg_mul(g, m, r, &m));
    CCG_CHECK(ccg_mul(g, x, m, &m));
    CCG_CHECK(ccg_sub(g, gy, m, &gy));
    CCG_CHECK(ccg_mul(g, gy, r, &gx->gin[0]));
  }
  if (gx->need[1]) {
    CCG_CHECK(ccg_mul(g, x, r, &t));
    CCG_CHECK(ccg_mul(g, dy, t, &t));
    CCG_CHECK(ccg__grad_unbroadcast(g, t, gx->in[1], &gx->gin[1]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_RMS_NORM = {CCG__ATTRS(rms_norm_attrs),
                                         0,
                                         infer_rms_norm,
                                         grad_rms_norm,
                                         .shard = CCG_OP_SHARD_OWN,
                                         .dtypes = CCG__FLOAT_TYPES,
                                         .onnx_since = 23};

/* ---- builders ----------------------------------------------------------- */

ccg_status ccg_softmax(ccg_graph *g, ccg_value_id x, int64_t axis,
                       ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_I("axis", axis);
  return ccg__build(g, CCG_OP_SOFTMAX, &x, 1, &a, 1, 1, out, NULL);
}

ccg_status ccg_layer_norm(ccg_graph *g, ccg_value_id x, ccg_value_id scale,
                          ccg_value_id bias, int64_t axis, float epsilon,
                          ccg_value_id *out) {
  ccg_value_id in[3] = {x, scale, bias};
  ccg_attr attrs[2] = {CCG_ATTR_I("axis", axis),
                       CCG_ATTR_F("epsilon", epsilon)};
  return ccg__build(g, CCG_OP_LAYER_NORM, in, bias == CCG_NONE ? 2 : 3, attrs,
                    2, 1, out, NULL);
}
