/* Activations of the elementwise family beyond Relu, Gelu, Tanh and
 * Sigmoid: Softplus, Softsign, the Relu variants, HardSigmoid, HardSwish,
 * Mish, Shrink. Same shape and dtype as the input (KEEP); attributes carry
 * ONNX's names and defaults. */
#include "graph/internal.h"

static ccg_status same_as_input(ccg__infer *ix, unsigned types,
                                const char *what) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, types, what));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  return CCG_STATUS_OK;
}

static ccg_status infer_float(ccg__infer *ix) {
  return same_as_input(ix, CCG__FLOAT_TYPES, "a float type");
}

static ccg_status infer_numeric(ccg__infer *ix) {
  return same_as_input(ix, CCG__NUM_TYPES, "a numeric type");
}

/* Celu divides by alpha. */
static ccg_status infer_celu(ccg__infer *ix) {
  float alpha = ccg__attr_f(ix, "alpha");
  if (alpha == 0.0f)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "alpha must not be 0");
  return infer_float(ix);
}

/* ---- gradient rules: dx = dy * f'(x), masks from Cast(v, bool) ----------- */

static ccg_status scalar_like(ccg_graph *g, ccg_value_id x, double v,
                              ccg_value_id *out) {
  return ccg__grad_scalar(g, ccg_value_dtype(g, x), v, out);
}

static ccg_status un(ccg_graph *g, ccg_op op, ccg_value_id x,
                     ccg_value_id *out) {
  return ccg__build(g, op, &x, 1, NULL, 0, 1, out, NULL);
}

/* Where(v != 0, a, b) */
static ccg_status select_nonzero(ccg_graph *g, ccg_value_id v, ccg_value_id a,
                                 ccg_value_id b, ccg_value_id *out) {
  ccg_value_id m;
  CCG_CHECK(ccg_cast(g, v, CCG_DTYPE_BOOL, &m));
  return ccg_where(g, m, a, b, out);
}

/* Where(x > 0, a, b): Relu(x) is nonzero exactly there. */
static ccg_status select_positive(ccg_graph *g, ccg_value_id x, ccg_value_id a,
                                  ccg_value_id b, ccg_value_id *out) {
  ccg_value_id r;
  CCG_CHECK(ccg_relu(g, x, &r));
  return select_nonzero(g, r, a, b, out);
}

static ccg_status times_dy(ccg__grad *gx, ccg_value_id d) {
  return ccg_mul(gx->g, gx->gout[0], d, &gx->gin[0]);
}

/* sigmoid(x) */
static ccg_status grad_softplus(ccg__grad *gx) {
  ccg_value_id d;
  CCG_CHECK(ccg_sigmoid(gx->g, gx->in[0], &d));
  return times_dy(gx, d);
}

/* 1 / (1 + |x|)^2 */
static ccg_status grad_softsign(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id one, d;
  CCG_CHECK(scalar_like(g, gx->in[0], 1.0, &one));
  CCG_CHECK(un(g, CCG_OP_ABS, gx->in[0], &d));
  CCG_CHECK(ccg_add(g, d, one, &d));
  CCG_CHECK(ccg_mul(g, d, d, &d));
  return ccg_div(g, gx->gout[0], d, &gx->gin[0]);
}

/* 1 for x > 0, alpha below */
static ccg_status grad_leaky_relu(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id one, al, d;
  CCG_CHECK(scalar_like(g, gx->in[0], 1.0, &one));
  CCG_CHECK(scalar_like(g, gx->in[0], ccg__grad_attr_f(gx, "alpha"), &al));
  CCG_CHECK(select_positive(g, gx->in[0], one, al, &d));
  return times_dy(gx, d);
}

/* scale for x > 0, y + c below (Elu: 1, alpha; Selu: gamma, alpha gamma),
 * since there y = c (e^x - 1) */
static ccg_status grad_exp_linear(ccg__grad *gx, double scale, double c) {
  ccg_graph *g = gx->g;
  ccg_value_id s, cv, below, d;
  CCG_CHECK(scalar_like(g, gx->in[0], scale, &s));
  CCG_CHECK(scalar_like(g, gx->in[0], c, &cv));
  CCG_CHECK(ccg_add(g, gx->out[0], cv, &below));
  CCG_CHECK(select_positive(g, gx->in[0], s, below, &d));
  return times_dy(gx, d);
}

static ccg_status grad_elu(ccg__grad *gx) {
  return grad_exp_linear(gx, 1.0, ccg__grad_attr_f(gx, "alpha"));
}

static ccg_status grad_selu(ccg__grad *gx) {
  double alpha = ccg__grad_attr_f(gx, "alpha");
  double gamma = ccg__grad_attr_f(gx, "gamma");
  return grad_exp_linear(gx, gamma, alpha * gamma);
}

/* 1 for x > 0, e^(x/alpha) = y/alpha + 1 below */
static ccg_status grad_celu(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id one, below, d;
  CCG_CHECK(scalar_like(g, gx->in[0], 1.0, &one));
  CCG_CHECK(ccg__grad_scale(g, gx->out[0], 1.0 / ccg__grad_attr_f(gx, "alpha"),
                            &below));
  CCG_CHECK(ccg_add(g, below, one, &below));
  CCG_CHECK(select_positive(g, gx->in[0], one, below, &d));
  return times_dy(gx, d);
}

/* Where 0 < h < 1 (h (1 - h) nonzero), the slope k; else 0. */
static ccg_status hard_slope(ccg_graph *g, ccg_value_id h, double k,
                             ccg_value_id *out) {
  ccg_value_id one, zero, kv, m;
  CCG_CHECK(scalar_like(g, h, 1.0, &one));
  CCG_CHECK(scalar_like(g, h, 0.0, &zero));
  CCG_CHECK(scalar_like(g, h, k, &kv));
  CCG_CHECK(ccg_sub(g, one, h, &m));
  CCG_CHECK(ccg_mul(g, m, h, &m));
  return select_nonzero(g, m, kv, zero, out);
}

static ccg_status grad_hard_sigmoid(ccg__grad *gx) {
  ccg_value_id d;
  CCG_CHECK(hard_slope(gx->g, gx->out[0], ccg__grad_attr_f(gx, "alpha"), &d));
  return times_dy(gx, d);
}

/* y = x h(x), h = HardSigmoid(x; 1/6, 1/2): h + x h' */
static ccg_status grad_hard_swish(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], h, d;
  ccg_attr at[2] = {CCG_ATTR_F("alpha", 1.0f / 6.0f), CCG_ATTR_F("beta", 0.5f)};
  CCG_CHECK(ccg__build(g, CCG_OP_HARD_SIGMOID, &x, 1, at, 2, 1, &h, NULL));
  CCG_CHECK(hard_slope(g, h, 1.0 / 6.0, &d));
  CCG_CHECK(ccg_mul(g, d, x, &d));
  CCG_CHECK(ccg_add(g, d, h, &d));
  return times_dy(gx, d);
}

/* y = x t, t = tanh(softplus(x)): t + x (1 - t^2) sigmoid(x) */
static ccg_status grad_mish(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], one, t, s, d;
  CCG_CHECK(scalar_like(g, x, 1.0, &one));
  CCG_CHECK(un(g, CCG_OP_SOFTPLUS, x, &t));
  CCG_CHECK(ccg_tanh(g, t, &t));
  CCG_CHECK(ccg_sigmoid(g, x, &s));
  CCG_CHECK(ccg_mul(g, t, t, &d));
  CCG_CHECK(ccg_sub(g, one, d, &d));
  CCG_CHECK(ccg_mul(g, d, s, &d));
  CCG_CHECK(ccg_mul(g, d, x, &d));
  CCG_CHECK(ccg_add(g, d, t, &d));
  return times_dy(gx, d);
}

/* dy where x > alpha, i.e. where y = x is nonzero (x == 0 > alpha, a
 * single point, gets 0) */
static ccg_status grad_thresholded_relu(ccg__grad *gx) {
  ccg_value_id zero;
  CCG_CHECK(scalar_like(gx->g, gx->in[0], 0.0, &zero));
  return select_nonzero(gx->g, gx->out[0], gx->gout[0], zero, &gx->gin[0]);
}

/* dy where |x| > lambd */
static ccg_status grad_shrink(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], zero, lam, d;
  CCG_CHECK(scalar_like(g, x, 0.0, &zero));
  CCG_CHECK(scalar_like(g, x, ccg__grad_attr_f(gx, "lambd"), &lam));
  CCG_CHECK(un(g, CCG_OP_ABS, x, &d));
  CCG_CHECK(ccg_sub(g, d, lam, &d));
  return select_positive(g, d, gx->gout[0], zero, &gx->gin[0]);
}

/* ---- definitions ---------------------------------------------------------
 * onnx_since: the first version with today's attributes and semantics for
 * float types (the versions after it only added dtypes). */

static const ccg__attr_spec leaky_relu_attrs[] = {
    {"alpha", CCG_ATTR_FLOAT, false, 0, 0.01f, NULL},
};
static const ccg__attr_spec alpha1_attrs[] = {
    {"alpha", CCG_ATTR_FLOAT, false, 0, 1.0f, NULL},
};
static const ccg__attr_spec selu_attrs[] = {
    {"alpha", CCG_ATTR_FLOAT, false, 0, 1.67326319217681884765625f, NULL},
    {"gamma", CCG_ATTR_FLOAT, false, 0, 1.05070102214813232421875f, NULL},
};
static const ccg__attr_spec hard_sigmoid_attrs[] = {
    {"alpha", CCG_ATTR_FLOAT, false, 0, 0.2f, NULL},
    {"beta", CCG_ATTR_FLOAT, false, 0, 0.5f, NULL},
};
static const ccg__attr_spec shrink_attrs[] = {
    {"bias", CCG_ATTR_FLOAT, false, 0, 0.0f, NULL},
    {"lambd", CCG_ATTR_FLOAT, false, 0, 0.5f, NULL},
};

#define F CCG__FLOAT_TYPES
#define ACT_OP(id, attrs, infer, grad, types, since)                           \
  const ccg__op_def ccg__opdef_##id = {attrs,                                  \
                                       CCG__OP_ELEMENTWISE,                    \
                                       infer,                                  \
                                       grad,                                   \
                                       .shard = CCG_OP_SHARD_KEEP,             \
                                       .dtypes = types,                        \
                                       .onnx_since = since};

ACT_OP(SOFTPLUS, CCG__NO_ATTRS, infer_float, grad_softplus, F, 1)
ACT_OP(SOFTSIGN, CCG__NO_ATTRS, infer_float, grad_softsign, F, 1)
ACT_OP(LEAKY_RELU, CCG__ATTRS(leaky_relu_attrs), infer_float, grad_leaky_relu,
       F, 6)
ACT_OP(ELU, CCG__ATTRS(alpha1_attrs), infer_float, grad_elu, F, 6)
ACT_OP(SELU, CCG__ATTRS(selu_attrs), infer_float, grad_selu, F, 6)
ACT_OP(CELU, CCG__ATTRS(alpha1_attrs), infer_celu, grad_celu, F, 12)
ACT_OP(HARD_SIGMOID, CCG__ATTRS(hard_sigmoid_attrs), infer_float,
       grad_hard_sigmoid, F, 6)
ACT_OP(HARD_SWISH, CCG__NO_ATTRS, infer_float, grad_hard_swish, F, 14)
ACT_OP(MISH, CCG__NO_ATTRS, infer_float, grad_mish, F, 18)
ACT_OP(THRESHOLDED_RELU, CCG__ATTRS(alpha1_attrs), infer_float,
       grad_thresholded_relu, F, 10)
ACT_OP(SHRINK, CCG__ATTRS(shrink_attrs), infer_numeric, grad_shrink,
       CCG__NUM_TYPES, 9)
