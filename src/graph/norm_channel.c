/* Normalizations of [N, C, D1...] inputs with per-channel parameters:
 * BatchNormalization (inference mode: the statistics are inputs; training
 * mode: the batch's),
 * InstanceNormalization, GroupNormalization (opset 21: per-channel scale
 * and bias) and MeanVarianceNormalization (statistics over `axes`). */
#include <string.h>

#include "graph/internal.h"
#include "graph/norm.h"

/* X is a float tensor of rank >= 2 (dim 1: the channels). */
static ccg_status check_nc(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  if (x->rank >= 2)
    return CCG_STATUS_OK;
  char b[128];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "input 'X' '%s' has shape %s; expected rank >= 2 "
                   "([N, C, D1...])",
                   ccg__in_name(ix, 0), ccg__shape_str(x, b, sizeof b));
}

/* Input i is a float vector of X's channel count ([C]); same_type: of X's
 * dtype too. */
static ccg_status check_channel(ccg__infer *ix, size_t i, const char *what,
                                bool same_type) {
  CCG_CHECK(ccg__expect_vector(ix, i, CCG__FLOAT_TYPES, "a float vector"));
  if (same_type)
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
  ccg_dim c = ccg__in_shape(ix, 0)->dims[1], d = ccg__in_shape(ix, i)->dims[0];
  if (ccg_dim_equal(c, d))
    return CCG_STATUS_OK;
  char bc[64], bd[64];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "%s '%s' has %s elements; X has %s channels (dim 1)", what,
                   ccg__in_name(ix, i), ccg__dim_str(d, bd, sizeof bd),
                   ccg__dim_str(c, bc, sizeof bc));
}

/* [C] as [1, C, 1, ...] of rank `rank`, to broadcast against X. */
static ccg_status chan_bcast(ccg_graph *g, ccg_value_id p, int rank,
                             ccg_value_id *out) {
  int64_t axes[CCG_MAX_RANK];
  size_t n = 0;
  axes[n++] = 0;
  for (int d = 2; d < rank; d++)
    axes[n++] = d;
  return ccg_unsqueeze(g, p, axes, n, out);
}

/* Sums v (X's shape) over every dim but the channels, as a [C] like p. */
static ccg_status chan_sum(ccg_graph *g, ccg_value_id v, ccg_value_id p,
                           ccg_value_id *out) {
  ccg_shape want = *ccg_value_shape(g, v);
  for (int d = 0; d < want.rank; d++)
    if (d != 1)
      want.dims[d] = ccg_dim_num(1);
  CCG_CHECK(ccg__grad_reduce_to(g, v, &want, &v));
  return ccg__grad_reshape_like(g, v, p, out);
}

/* Only Y carries a gradient; every parameter must have X's dtype, since the
 * rule's nodes mix them. */
static ccg_status grad_prologue(ccg__grad *gx) {
  for (size_t o = 1; o < gx->n_out; o++)
    if (gx->gout[o] != CCG_NONE)
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "output %zu '%s' has a gradient; only Y (output "
                            "0) may",
                            o, ccg_value_name(gx->g, gx->out[o]));
  ccg_dtype dt = ccg_value_dtype(gx->g, gx->in[0]);
  for (size_t i = 1; i < gx->n_in; i++)
    if (ccg_value_dtype(gx->g, gx->in[i]) != dt)
      return ccg__grad_fail(
          gx, CCG_STATUS_UNSUPPORTED,
          "input %zu '%s' is %s and X is %s; the rule needs one dtype", i,
          ccg_value_name(gx->g, gx->in[i]),
          ccg_dtype_name(ccg_value_dtype(gx->g, gx->in[i])),
          ccg_dtype_name(dt));
  return CCG_STATUS_OK;
}

/* ---- BatchNormalization ------------------------------------------------- */

/* Opset 14's inputs, attributes and outputs (opset 15 only widened the
 * types): scale and B of one float type, input_mean and input_var of
 * another. In training mode the batch's statistics normalize X and the
 * optional outputs running_mean and running_var blend them with the inputs
 * by momentum. */
static const ccg__attr_spec batch_norm_attrs[] = {
    {"epsilon", CCG_ATTR_FLOAT, false, 0, 1e-5f, NULL},
    {"momentum", CCG_ATTR_FLOAT, false, 0, 0.9f, NULL},
    {"training_mode", CCG_ATTR_INT, false, 0, 0, NULL},
};

static ccg_status infer_batch_norm(ccg__infer *ix) {
  bool training;
  CCG_CHECK(ccg__attr_flag(ix, "training_mode", &training));
  if (!training && ix->n_out > 1)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "%zu outputs; running_mean and running_var exist only "
                     "in training mode",
                     ix->n_out);
  CCG_CHECK(check_nc(ix));
  CCG_CHECK(ccg__norm_epsilon(ix));
  static const char *const what[4] = {"scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; i++)
    CCG_CHECK(check_channel(ix, i, what[i - 1], false));
  CCG_CHECK(ccg__same_dtype(ix, 1, 2));
  CCG_CHECK(ccg__same_dtype(ix, 3, 4));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  for (size_t o = 1; o < ix->n_out; o++) {
    ix->out_dtype[o] = ccg__in_dtype(ix, 3);
    ix->out_shape[o] = *ccg__in_shape(ix, 3);
  }
  return CCG_STATUS_OK;
}

/* y = (x - mean) inv scale + B with inv = 1/sqrt(var + eps), affine in
 * every input: with S1 = sum(dy) and S2 = sum(dy (x - mean)) per channel,
 * dx = dy scale inv, dscale = S2 inv, dB = S1, dmean = -S1 scale inv and
 * dvar = -S2 scale inv^3 / 2. */
static ccg_status grad_batch_norm(ccg__grad *gx) {
  if (ccg__grad_attr_i(gx, "training_mode"))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "training_mode is 1; the rule takes the inference "
                          "form (statistics given as inputs)");
  CCG_CHECK(grad_prologue(gx));
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], dy = gx->gout[0], sc = gx->in[1];
  ccg_dtype dt = ccg_value_dtype(g, x);
  int rank = ccg_value_shape(g, x)->rank;
  ccg_value_id inv, k, a, s1, s2, t;
  CCG_CHECK(
      ccg__grad_scalar(g, dt, (double)ccg__grad_attr_f(gx, "epsilon"), &k));
  CCG_CHECK(ccg_add(g, gx->in[4], k, &inv));
  CCG_CHECK(ccg_sqrt(g, inv, &inv));
  CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &k));
  CCG_CHECK(ccg_div(g, k, inv, &inv));
  CCG_CHECK(ccg_mul(g, sc, inv, &a));
  if (gx->need[0]) {
    CCG_CHECK(chan_bcast(g, a, rank, &t));
    CCG_CHECK(ccg_mul(g, dy, t, &gx->gin[0]));
  }
  CCG_CHECK(chan_sum(g, dy, sc, &s1));
  CCG_CHECK(chan_bcast(g, gx->in[3], rank, &t));
  CCG_CHECK(ccg_sub(g, x, t, &t));
  CCG_CHECK(ccg_mul(g, dy, t, &t));
  CCG_CHECK(chan_sum(g, t, sc, &s2));
  if (gx->need[1])
    CCG_CHECK(ccg_mul(g, s2, inv, &gx->gin[1]));
  if (gx->need[2])
    gx->gin[2] = s1;
  if (gx->need[3]) {
    CCG_CHECK(ccg_mul(g, s1, a, &t));
    CCG_CHECK(ccg_neg(g, t, &gx->gin[3]));
  }
  if (gx->need[4]) {
    CCG_CHECK(ccg_mul(g, s2, a, &t));
    CCG_CHECK(ccg_mul(g, t, inv, &t));
    CCG_CHECK(ccg_mul(g, t, inv, &t));
    CCG_CHECK(ccg__grad_scale(g, t, -0.5, &gx->gin[4]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_BATCH_NORM = {CCG__ATTRS(batch_norm_attrs),
                                           0,
                                           infer_batch_norm,
                                           grad_batch_norm,
                                           .dtypes = CCG__FLOAT_TYPES,
                                           .onnx_since = 14};

/* ---- InstanceNormalization and GroupNormalization ------------------------
 * Statistics per sample over groups of channels (one channel each for
 * InstanceNormalization) and every spatial position; scale and bias per
 * channel. */

static const ccg__attr_spec instance_norm_attrs[] = {
    {"epsilon", CCG_ATTR_FLOAT, false, 0, 1e-5f, NULL},
};

static ccg_status infer_instance_norm(ccg__infer *ix) {
  CCG_CHECK(check_nc(ix));
  CCG_CHECK(ccg__norm_epsilon(ix));
  CCG_CHECK(check_channel(ix, 1, "scale", true));
  CCG_CHECK(check_channel(ix, 2, "B", true));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  return CCG_STATUS_OK;
}

/* Opset 18's GroupNormalization had scale and bias per group: its models
 * are refused (they say so when their scale has num_groups elements). */
static const ccg__attr_spec group_norm_attrs[] = {
    {"epsilon", CCG_ATTR_FLOAT, false, 0, 1e-5f, NULL},
    {"num_groups", CCG_ATTR_INT, true, 0, 0, NULL},
    {"stash_type", CCG_ATTR_INT, false, 1, 0, NULL},
};

static ccg_status infer_group_norm(ccg__infer *ix) {
  CCG_CHECK(check_nc(ix));
  CCG_CHECK(ccg__norm_epsilon(ix));
  ccg_dtype stash;
  CCG_CHECK(ccg__norm_stash_dtype(ix, &stash));
  int64_t groups = ccg__attr_i(ix, "num_groups");
  ccg_dim c = ccg__in_shape(ix, 0)->dims[1];
  if (groups < 1 || (!ccg_dim_is_sym(c) && c.size % groups != 0))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "num_groups is %lld; expected >= 1 and dividing the "
                     "%lld channels",
                     (long long)groups,
                     (long long)(ccg_dim_is_sym(c) ? -1 : c.size));
  for (size_t i = 1; i < 3; i++) {
    const ccg_shape *p = ccg__in_shape(ix, i);
    if (p->rank == 1 && ccg__is_num(p->dims[0], groups) &&
        !ccg__is_num(c, groups))
      return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                       "%s '%s' has num_groups (%lld) elements: opset 18's "
                       "per-group form; ccgraph reads opset 21's per-channel "
                       "scale and bias (re-export at opset 21)",
                       i == 1 ? "scale" : "bias", ccg__in_name(ix, i),
                       (long long)groups);
    CCG_CHECK(check_channel(ix, i, i == 1 ? "scale" : "bias", true));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  return CCG_STATUS_OK;
}

/* xhat normalizes x viewed as [N, G, rest] over `rest`; y = xhat scale + B
 * per channel. With g = dy scale: dx = norm_dx(g) in the grouped view,
 * dscale = sum(dy xhat), dB = sum(dy) per channel. */
static ccg_status grad_group_norm(ccg__grad *gx) {
  CCG_CHECK(grad_prologue(gx));
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], dy = gx->gout[0], sc = gx->in[1];
  int rank = ccg_value_shape(g, x)->rank;
  bool inst = gx->op == CCG_OP_INSTANCE_NORM;
  int64_t axes[CCG_MAX_RANK];
  size_t na = 0;
  ccg_value_id xv = x, xhat, r, t;
  if (inst) {
    for (int d = 2; d < rank; d++)
      axes[na++] = d;
  } else {
    int64_t dims[3] = {0, ccg__grad_attr_i(gx, "num_groups"), -1};
    CCG_CHECK(ccg_reshape_to(g, x, dims, 3, &xv));
    axes[na++] = 2;
  }
  if (na == 0) { /* [N, C]: one element per instance */
    CCG_CHECK(ccg__grad_zeros_like(g, x, &xhat));
    if (gx->need[0])
      CCG_CHECK(ccg__grad_zeros_like(g, x, &gx->gin[0]));
  } else {
    CCG_CHECK(ccg__norm_stats(
        g, xv, axes, na, (double)ccg__grad_attr_f(gx, "epsilon"), &xhat, &r));
    if (gx->need[0]) {
      ccg_value_id gy;
      CCG_CHECK(chan_bcast(g, sc, rank, &t));
      CCG_CHECK(ccg_mul(g, dy, t, &gy));
      if (!inst)
        CCG_CHECK(ccg__grad_reshape_like(g, gy, xv, &gy));
      CCG_CHECK(ccg__norm_dx(g, gy, xhat, r, axes, na, &t));
      CCG_CHECK(ccg__grad_reshape_like(g, t, x, &gx->gin[0]));
    }
    if (!inst)
      CCG_CHECK(ccg__grad_reshape_like(g, xhat, x, &xhat));
  }
  if (gx->need[1]) {
    CCG_CHECK(ccg_mul(g, dy, xhat, &t));
    CCG_CHECK(chan_sum(g, t, sc, &gx->gin[1]));
  }
  if (gx->need[2])
    CCG_CHECK(chan_sum(g, dy, gx->in[2], &gx->gin[2]));
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_INSTANCE_NORM = {CCG__ATTRS(instance_norm_attrs),
                                              0,
                                              infer_instance_norm,
                                              grad_group_norm,
                                              .dtypes = CCG__FLOAT_TYPES,
                                              .onnx_since = 6};

const ccg__op_def ccg__opdef_GROUP_NORM = {CCG__ATTRS(group_norm_attrs),
                                           0,
                                           infer_group_norm,
                                           grad_group_norm,
                                           .dtypes = CCG__FLOAT_TYPES,
                                           .onnx_since = 21};

/* ---- MeanVarianceNormalization ------------------------------------------ */

/* Y = (X - mean) / (sqrt(var) + 1e-9), the statistics over `axes`, as the
 * ONNX function body computes it. */
static const int64_t mvn_default_axes[3] = {0, 2, 3};
static const ccg__attr_spec mvn_attrs[] = {
    {"axes", CCG_ATTR_INTS, false, 0, 0, NULL},
};

static ccg_status infer_mvn(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  const int64_t *axes;
  size_t n = ccg__attr_ints(ix, "axes", &axes);
  if (!ccg__attr(ix, "axes")) {
    axes = mvn_default_axes;
    n = 3;
  }
  bool seen[CCG_MAX_RANK] = {false};
  for (size_t i = 0; i < n; i++) {
    int a;
    CCG_CHECK(ccg__axis(ix, axes[i], x->rank, "axes entry", &a));
    if (seen[a])
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "axes names dim %d twice",
                       a);
    seen[a] = true;
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *x;
  return CCG_STATUS_OK;
}

/* The axes of node's attribute (defaults applied, normalized). */
static size_t mvn_axes(ccg__grad *gx, int rank, int64_t *out) {
  const int64_t *axes;
  size_t n = ccg__grad_attr_ints(gx, "axes", &axes);
  if (!ccg_node_attr(gx->g, gx->node, "axes")) {
    axes = mvn_default_axes;
    n = 3;
  }
  for (size_t i = 0; i < n; i++)
    out[i] = axes[i] < 0 ? axes[i] + rank : axes[i];
  return n;
}

/* c = x - mean, sd = sqrt(mean(c^2)), s = sd + 1e-9, y = c / s:
 * dx = (dy - mean(dy)) / s - c mean(dy c) / (sd s^2). */
static ccg_status grad_mvn(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], dy = gx->gout[0], c, sd, s, k, m, t;
  ccg_dtype dt = ccg_value_dtype(g, x);
  int64_t axes[CCG_MAX_RANK];
  size_t na = mvn_axes(gx, ccg_value_shape(g, x)->rank, axes);
  CCG_CHECK(ccg_reduce_mean(g, x, axes, na, true, &m));
  CCG_CHECK(ccg_sub(g, x, m, &c));
  CCG_CHECK(ccg_mul(g, c, c, &sd));
  CCG_CHECK(ccg_reduce_mean(g, sd, axes, na, true, &sd));
  CCG_CHECK(ccg_sqrt(g, sd, &sd));
  CCG_CHECK(ccg__grad_scalar(g, dt, 1e-9, &k));
  CCG_CHECK(ccg_add(g, sd, k, &s));
  CCG_CHECK(ccg_reduce_mean(g, dy, axes, na, true, &m));
  CCG_CHECK(ccg_sub(g, dy, m, &m));
  CCG_CHECK(ccg_div(g, m, s, &m));
  CCG_CHECK(ccg_mul(g, dy, c, &t));
  CCG_CHECK(ccg_reduce_mean(g, t, axes, na, true, &t));
  CCG_CHECK(ccg_mul(g, c, t, &t));
  CCG_CHECK(ccg_div(g, t, sd, &t));
  CCG_CHECK(ccg_div(g, t, s, &t));
  CCG_CHECK(ccg_div(g, t, s, &t));
  return ccg_sub(g, m, t, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_MVN = {
    CCG__ATTRS(mvn_attrs), 0, infer_mvn, grad_mvn, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 9};
