/* Elementwise ops: unary math, binary arithmetic with ONNX broadcasting,
 * Where, Cast, Dropout. Integer arithmetic on known small vectors is folded
 * so that shape computations (Shape -> Gather -> Mul -> Concat) stay known. */
#include <string.h>

#include "graph/internal.h"

/* ---- binary arithmetic -------------------------------------------------- */

typedef bool (*dim_fold)(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *out);

static bool fold_add(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *out) {
  return ccg__dim_add(g, a, b, out);
}
static bool fold_sub(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *out) {
  (void)g;
  if (ccg_dim_is_sym(a) || ccg_dim_is_sym(b))
    return ccg_dim_equal(a, b) && (*out = ccg_dim_num(0), true);
  int64_t d;
  if (__builtin_sub_overflow(a.size, b.size, &d))
    return false;
  *out = ccg_dim_num(d);
  return true;
}
static bool fold_mul(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *out) {
  /* Plain integers may be negative (-1 in reshape targets); dims may not. */
  if (!ccg_dim_is_sym(a) && !ccg_dim_is_sym(b)) {
    int64_t p;
    if (__builtin_mul_overflow(a.size, b.size, &p))
      return false;
    *out = ccg_dim_num(p);
    return true;
  }
  return ccg__dim_mul(g, a, b, out);
}
static bool fold_div(ccg_graph *g, ccg_dim a, ccg_dim b, ccg_dim *out) {
  if (!ccg_dim_is_sym(a) && !ccg_dim_is_sym(b)) {
    if (b.size == 0 || (a.size == INT64_MIN && b.size == -1))
      return false;
    *out = ccg_dim_num(a.size / b.size); /* ONNX integer Div truncates */
    return true;
  }
  return ccg__dim_div(g, a, b, out);
}

/* Folds known integer contents of both inputs (scalars or vectors that
 * broadcast) into the output's known contents. Unknown stays unknown. */
static void fold_known(ccg__infer *ix, dim_fold f) {
  const ccg_dim *ka, *kb;
  int na = ccg__in_known(ix, 0, &ka), nb = ccg__in_known(ix, 1, &kb);
  if (na < 0 || nb < 0 || !ccg_dtype_is_int(ix->out_dtype[0]) ||
      ix->out_shape[0].rank > 1)
    return;
  int n = na > nb ? na : nb;
  if ((na != n && na != 1) || (nb != n && nb != 1))
    return;
  for (int i = 0; i < n; i++)
    if (!f(ix->g, ka[na == 1 ? 0 : i], kb[nb == 1 ? 0 : i],
           &ix->out_known[0][i]))
      return;
  ix->out_n_known[0] = n;
}

static ccg_status infer_binary(ccg__infer *ix, dim_fold f) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(ccg__same_dtype(ix, 0, 1));
  CCG_CHECK(ccg__broadcast(ix, ccg__in_shape(ix, 0), ccg__in_shape(ix, 1),
                           &ix->out_shape[0]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  if (f)
    fold_known(ix, f);
  return CCG_STATUS_OK;
}

static ccg_status infer_add(ccg__infer *ix) {
  return infer_binary(ix, fold_add);
}
static ccg_status infer_sub(ccg__infer *ix) {
  return infer_binary(ix, fold_sub);
}
static ccg_status infer_mul(ccg__infer *ix) {
  return infer_binary(ix, fold_mul);
}
static ccg_status infer_div(ccg__infer *ix) {
  return infer_binary(ix, fold_div);
}

static ccg_status infer_pow(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0,
                              CCG__FLOAT_TYPES | CCG__DT(I64) | CCG__DT(I32),
                              "a float, i64 or i32 base"));
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__NUM_TYPES, "a numeric exponent"));
  CCG_CHECK(ccg__broadcast(ix, ccg__in_shape(ix, 0), ccg__in_shape(ix, 1),
                           &ix->out_shape[0]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

/* Gradients of the binary ops: each operand's share, summed back over the
 * dims it was broadcast along. */
static ccg_status grad_add(ccg__grad *gx) {
  for (size_t i = 0; i < 2; i++)
    if (gx->need[i])
      CCG_CHECK(
          ccg__grad_unbroadcast(gx->g, gx->gout[0], gx->in[i], &gx->gin[i]));
  return CCG_STATUS_OK;
}

static ccg_status grad_sub(ccg__grad *gx) {
  CCG_CHECK(grad_add(gx));
  return gx->need[1] ? ccg_neg(gx->g, gx->gin[1], &gx->gin[1]) : CCG_STATUS_OK;
}

/* d(a*b)/da = b, d(a*b)/db = a. */
static ccg_status grad_mul(ccg__grad *gx) {
  for (size_t i = 0; i < 2; i++) {
    if (!gx->need[i])
      continue;
    ccg_value_id v;
    CCG_CHECK(ccg_mul(gx->g, gx->gout[0], gx->in[1 - i], &v));
    CCG_CHECK(ccg__grad_unbroadcast(gx->g, v, gx->in[i], &gx->gin[i]));
  }
  return CCG_STATUS_OK;
}

/* d(a/b)/da = 1/b, d(a/b)/db = -y/b. */
static ccg_status grad_div(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id dy = gx->gout[0], v;
  if (gx->need[0]) {
    CCG_CHECK(ccg_div(g, dy, gx->in[1], &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, gx->in[0], &gx->gin[0]));
  }
  if (gx->need[1]) {
    CCG_CHECK(ccg_mul(g, dy, gx->out[0], &v));
    CCG_CHECK(ccg_div(g, v, gx->in[1], &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, gx->in[1], &v));
    CCG_CHECK(ccg_neg(g, v, &gx->gin[1]));
  }
  return CCG_STATUS_OK;
}

/* y = a^b: dy/da = b a^(b-1), dy/db = y ln a (an integer exponent has no
 * gradient and is cast to the base's dtype). */
static ccg_status grad_pow(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id a = gx->in[0], b = gx->in[1], dy = gx->gout[0], v, t;
  ccg_dtype dt = ccg_value_dtype(g, a);
  if (gx->need[0]) {
    ccg_value_id bf = b, one;
    if (ccg_value_dtype(g, b) != dt)
      CCG_CHECK(ccg_cast(g, b, dt, &bf));
    CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &one));
    CCG_CHECK(ccg_sub(g, bf, one, &t));
    CCG_CHECK(ccg_pow(g, a, t, &t));
    CCG_CHECK(ccg_mul(g, t, bf, &t));
    CCG_CHECK(ccg_mul(g, dy, t, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, a, &gx->gin[0]));
  }
  if (gx->need[1]) {
    CCG_CHECK(ccg_log(g, a, &t));
    CCG_CHECK(ccg_mul(g, t, gx->out[0], &t));
    CCG_CHECK(ccg_mul(g, dy, t, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, b, &gx->gin[1]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_ADD = {CCG__NO_ATTRS,
                                    0,
                                    infer_add,
                                    grad_add,
                                    .shard = CCG_OP_SHARD_BROADCAST,
                                    .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 7};
const ccg__op_def ccg__opdef_SUB = {CCG__NO_ATTRS,
                                    0,
                                    infer_sub,
                                    grad_sub,
                                    .shard = CCG_OP_SHARD_BROADCAST,
                                    .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 7};
const ccg__op_def ccg__opdef_MUL = {CCG__NO_ATTRS,
                                    0,
                                    infer_mul,
                                    grad_mul,
                                    .shard = CCG_OP_SHARD_BROADCAST,
                                    .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 7};
const ccg__op_def ccg__opdef_DIV = {CCG__NO_ATTRS,
                                    0,
                                    infer_div,
                                    grad_div,
                                    .shard = CCG_OP_SHARD_BROADCAST,
                                    .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 7};
const ccg__op_def ccg__opdef_POW = {CCG__NO_ATTRS,
                                    0,
                                    infer_pow,
                                    grad_pow,
                                    .shard = CCG_OP_SHARD_BROADCAST,
                                    .dtypes = CCG__FLOAT_TYPES | CCG__DT(I64) |
                                              CCG__DT(I32),
                                    .onnx_since = 7};

/* ---- unary -------------------------------------------------------------- */

static ccg_status infer_unary(ccg__infer *ix, unsigned types,
                              const char *what) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, types, what));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  return CCG_STATUS_OK;
}

#define SIGNED_TYPES                                                           \
  (CCG__FLOAT_TYPES | CCG__DT(I64) | CCG__DT(I32) | CCG__DT(I8))

static ccg_status infer_identity(ccg__infer *ix) {
  CCG_CHECK(infer_unary(ix, CCG__ALL_TYPES, "any type"));
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n >= 0) {
    memcpy(ix->out_known[0], k, (size_t)n * sizeof *k);
    ix->out_n_known[0] = n;
  }
  return CCG_STATUS_OK;
}
/* Neg of known integers stays known (ONNX's expanded functions negate
 * axis counts before ConstantOfShape). */
static ccg_status infer_neg(ccg__infer *ix) {
  CCG_CHECK(infer_unary(ix, SIGNED_TYPES, "a float or signed integer type"));
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n < 0 || !ccg_dtype_is_int(ix->out_dtype[0]))
    return CCG_STATUS_OK;
  for (int i = 0; i < n; i++) {
    if (ccg_dim_is_sym(k[i]) || k[i].size == INT64_MIN)
      return CCG_STATUS_OK;
    ix->out_known[0][i] = ccg_dim_num(-k[i].size);
  }
  ix->out_n_known[0] = n;
  return CCG_STATUS_OK;
}
static ccg_status infer_float_unary(ccg__infer *ix) {
  return infer_unary(ix, CCG__FLOAT_TYPES, "a float type");
}

static const ccg__attr_spec gelu_attrs[] = {
    {"approximate", CCG_ATTR_STRING, false, 0, 0, "none"},
};

static ccg_status infer_gelu(ccg__infer *ix) {
  const char *ap = ccg__attr_s(ix, "approximate");
  if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "approximate is '%s'; expected 'none' or 'tanh'", ap);
  return infer_float_unary(ix);
}

/* Unary gradients: dx = dy * f'(x), with f' from x or y, whichever is
 * cheaper. */
static ccg_status grad_identity(ccg__grad *gx) {
  gx->gin[0] = gx->gout[0];
  return CCG_STATUS_OK;
}

static ccg_status grad_neg(ccg__grad *gx) {
  return ccg_neg(gx->g, gx->gout[0], &gx->gin[0]);
}

/* Relu passes dy where y > 0: y cast to bool is exactly that mask. */
static ccg_status grad_relu(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id mask, zero;
  CCG_CHECK(ccg_cast(g, gx->out[0], CCG_DTYPE_BOOL, &mask));
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, gx->in[0]), 0.0, &zero));
  return ccg_where(g, mask, gx->gout[0], zero, &gx->gin[0]);
}

/* erf form: Phi(x) + x phi(x); tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2)
 * k0 (1 + 3 k1 x^2) with t = tanh(k0 (x + k1 x^3)). */
static ccg_status grad_gelu_erf(ccg_graph *g, ccg_value_id x, ccg_value_id *d) {
  ccg_value_id cdf, pdf, t;
  CCG_CHECK(ccg__grad_scale(g, x, 0.70710678118654752440, &cdf));
  CCG_CHECK(ccg_erf(g, cdf, &cdf));
  CCG_CHECK(ccg__grad_scale(g, cdf, 0.5, &cdf));
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, x), 0.5, &t));
  CCG_CHECK(ccg_add(g, cdf, t, &cdf));
  CCG_CHECK(ccg_mul(g, x, x, &pdf));
  CCG_CHECK(ccg__grad_scale(g, pdf, -0.5, &pdf));
  CCG_CHECK(ccg_exp(g, pdf, &pdf));
  CCG_CHECK(ccg__grad_scale(g, pdf, 0.39894228040143267794, &pdf));
  CCG_CHECK(ccg_mul(g, x, pdf, &pdf));
  return ccg_add(g, cdf, pdf, d);
}

static ccg_status grad_gelu_tanh(ccg_graph *g, ccg_value_id x,
                                 ccg_value_id *d) {
  const double k0 = 0.79788456080286535588, k1 = 0.044715;
  ccg_dtype dt = ccg_value_dtype(g, x);
  ccg_value_id x2, u, t, one, a, b;
  CCG_CHECK(ccg__grad_scalar(g, dt, 1.0, &one));
  CCG_CHECK(ccg_mul(g, x, x, &x2));
  CCG_CHECK(ccg__grad_scale(g, x2, k1, &u));
  CCG_CHECK(ccg_add(g, u, one, &u)); /* 1 + k1 x^2 */
  CCG_CHECK(ccg_mul(g, u, x, &u));
  CCG_CHECK(ccg__grad_scale(g, u, k0, &u));
  CCG_CHECK(ccg_tanh(g, u, &t));
  CCG_CHECK(ccg_add(g, t, one, &a));
  CCG_CHECK(ccg__grad_scale(g, a, 0.5, &a)); /* 0.5 (1 + t) */
  CCG_CHECK(ccg_mul(g, t, t, &b));
  CCG_CHECK(ccg_sub(g, one, b, &b)); /* 1 - t^2 */
  CCG_CHECK(ccg__grad_scale(g, x2, 3.0 * k1, &u));
  CCG_CHECK(ccg_add(g, u, one, &u)); /* 1 + 3 k1 x^2 */
  CCG_CHECK(ccg_mul(g, b, u, &b));
  CCG_CHECK(ccg_mul(g, b, x, &b));
  CCG_CHECK(ccg__grad_scale(g, b, 0.5 * k0, &b));
  return ccg_add(g, a, b, d);
}

static ccg_status grad_gelu(ccg__grad *gx) {
  ccg_value_id d;
  if (strcmp(ccg__grad_attr_s(gx, "approximate"), "tanh") == 0)
    CCG_CHECK(grad_gelu_tanh(gx->g, gx->in[0], &d));
  else
    CCG_CHECK(grad_gelu_erf(gx->g, gx->in[0], &d));
  return ccg_mul(gx->g, gx->gout[0], d, &gx->gin[0]);
}

/* 1 - y^2 */
static ccg_status grad_tanh(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id y = gx->out[0], one, d;
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, y), 1.0, &one));
  CCG_CHECK(ccg_mul(g, y, y, &d));
  CCG_CHECK(ccg_sub(g, one, d, &d));
  return ccg_mul(g, gx->gout[0], d, &gx->gin[0]);
}

/* 2/sqrt(pi) exp(-x^2) */
static ccg_status grad_erf(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], d;
  CCG_CHECK(ccg_mul(g, x, x, &d));
  CCG_CHECK(ccg_neg(g, d, &d));
  CCG_CHECK(ccg_exp(g, d, &d));
  CCG_CHECK(ccg__grad_scale(g, d, 1.12837916709551257390, &d));
  return ccg_mul(g, gx->gout[0], d, &gx->gin[0]);
}

/* y (1 - y) */
static ccg_status grad_sigmoid(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id y = gx->out[0], one, d;
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, y), 1.0, &one));
  CCG_CHECK(ccg_sub(g, one, y, &d));
  CCG_CHECK(ccg_mul(g, y, d, &d));
  return ccg_mul(g, gx->gout[0], d, &gx->gin[0]);
}

static ccg_status grad_exp(ccg__grad *gx) {
  return ccg_mul(gx->g, gx->gout[0], gx->out[0], &gx->gin[0]);
}

static ccg_status grad_log(ccg__grad *gx) {
  return ccg_div(gx->g, gx->gout[0], gx->in[0], &gx->gin[0]);
}

/* 0.5 / y */
static ccg_status grad_sqrt(ccg__grad *gx) {
  ccg_value_id v;
  CCG_CHECK(ccg__grad_scale(gx->g, gx->gout[0], 0.5, &v));
  return ccg_div(gx->g, v, gx->out[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_IDENTITY = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_identity,
    grad_identity,  .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__ALL_TYPES,
    .onnx_since = 1};
const ccg__op_def ccg__opdef_NEG = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_neg,
    grad_neg,       .shard = CCG_OP_SHARD_KEEP, .dtypes = SIGNED_TYPES,
    .onnx_since = 6};
const ccg__op_def ccg__opdef_RELU = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_neg,
    grad_relu,      .shard = CCG_OP_SHARD_KEEP, .dtypes = SIGNED_TYPES,
    .onnx_since = 6};
const ccg__op_def ccg__opdef_GELU = {CCG__ATTRS(gelu_attrs),
                                     CCG__OP_ELEMENTWISE,
                                     infer_gelu,
                                     grad_gelu,
                                     .shard = CCG_OP_SHARD_KEEP,
                                     .dtypes = CCG__FLOAT_TYPES,
                                     .onnx_since = 20};
const ccg__op_def ccg__opdef_TANH = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_float_unary,
    grad_tanh,      .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 6};
const ccg__op_def ccg__opdef_ERF = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_float_unary,
    grad_erf,       .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 9};
const ccg__op_def ccg__opdef_SIGMOID = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_float_unary,
    grad_sigmoid,   .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 6};
const ccg__op_def ccg__opdef_EXP = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_float_unary,
    grad_exp,       .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 6};
const ccg__op_def ccg__opdef_LOG = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_float_unary,
    grad_log,       .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 6};
const ccg__op_def ccg__opdef_SQRT = {
    CCG__NO_ATTRS,  CCG__OP_ELEMENTWISE,        infer_float_unary,
    grad_sqrt,      .shard = CCG_OP_SHARD_KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 6};

/* ---- Where, Cast, Dropout ----------------------------------------------- */

/* Known integer vectors stay known through Where with a known condition:
 * torch's exports rewrite reshape targets with Where(Equal(shape, -1),
 * ones, shape). Only the chosen side's entry needs to be known. */
static void fold_where(ccg__infer *ix) {
  const ccg_dim *k[3];
  int nk[3];
  for (int i = 0; i < 3; i++)
    nk[i] = ccg__in_known(ix, (size_t)i, &k[i]);
  if (nk[0] < 0 || !ccg_dtype_is_int(ix->out_dtype[0]) ||
      ix->out_shape[0].rank > 1)
    return;
  int n = 1;
  for (int i = 0; i < 3; i++)
    if (nk[i] > n)
      n = nk[i];
  if (nk[0] != n && nk[0] != 1)
    return;
  for (int j = 0; j < n; j++) {
    ccg_dim c = k[0][nk[0] == 1 ? 0 : j];
    if (ccg_dim_is_sym(c))
      return;
    int side = c.size ? 1 : 2;
    if (nk[side] < 0 || (nk[side] != n && nk[side] != 1))
      return;
    ix->out_known[0][j] = k[side][nk[side] == 1 ? 0 : j];
  }
  ix->out_n_known[0] = n;
}

static ccg_status infer_where(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__DT(BOOL), "bool (the condition)"));
  CCG_CHECK(ccg__same_dtype(ix, 1, 2));
  ccg_shape xy;
  CCG_CHECK(
      ccg__broadcast(ix, ccg__in_shape(ix, 1), ccg__in_shape(ix, 2), &xy));
  CCG_CHECK(ccg__broadcast(ix, ccg__in_shape(ix, 0), &xy, &ix->out_shape[0]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 1);
  fold_where(ix);
  return CCG_STATUS_OK;
}

/* The condition has no gradient; x gets dy where it was chosen, y the
 * rest, each summed back over its broadcast dims. */
static ccg_status grad_where(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id zero, v;
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, gx->gout[0]), 0.0, &zero));
  for (size_t i = 1; i < 3; i++) {
    if (!gx->need[i])
      continue;
    ccg_value_id a = i == 1 ? gx->gout[0] : zero,
                 b = i == 1 ? zero : gx->gout[0];
    CCG_CHECK(ccg_where(g, gx->in[0], a, b, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, gx->in[i], &gx->gin[i]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_WHERE = {CCG__NO_ATTRS,
                                      0,
                                      infer_where,
                                      grad_where,
                                      .shard = CCG_OP_SHARD_BROADCAST,
                                      .dtypes = CCG__ALL_TYPES,
                                      .onnx_since = 9};

static const ccg__attr_spec cast_attrs[] = {
    {"to", CCG_ATTR_STRING, true, 0, 0, NULL},
};

static ccg_status infer_cast(ccg__infer *ix) {
  ccg_dtype dt;
  CCG_CHECK(ccg__attr_dtype(ix, "to", &dt));
  ix->out_dtype[0] = dt;
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  /* Integer casts of known shape values keep them known. */
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n >= 0 && ccg_dtype_is_int(dt)) {
    memcpy(ix->out_known[0], k, (size_t)n * sizeof *k);
    ix->out_n_known[0] = n;
  }
  return CCG_STATUS_OK;
}

/* A float-to-float cast: the gradient is cast back. */
static ccg_status grad_cast(ccg__grad *gx) {
  ccg_dtype from = ccg_value_dtype(gx->g, gx->in[0]);
  return ccg_cast(gx->g, gx->gout[0], from, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_CAST = {CCG__ATTRS(cast_attrs),
                                     0,
                                     infer_cast,
                                     grad_cast,
                                     .shard = CCG_OP_SHARD_KEEP,
                                     .dtypes = CCG__ALL_TYPES,
                                     .onnx_since = 6};

static const ccg__attr_spec dropout_attrs[] = {
    {"seed", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* Inputs: data, ratio (scalar float, optional), training_mode (scalar bool,
 * optional). Outputs: output, mask (optional). */
static ccg_status infer_dropout(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  if (ccg__in_has(ix, 1)) {
    CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__FLOAT_TYPES, "a float ratio"));
    if (ccg__in_shape(ix, 1)->rank != 0)
      return ccg__fail(ix, CCG_STATUS_SHAPE, "ratio '%s' must be a scalar",
                       ccg__in_name(ix, 1));
  }
  if (ccg__in_has(ix, 2)) {
    CCG_CHECK(ccg__expect_dtype(ix, 2, CCG__DT(BOOL), "a bool training_mode"));
    if (ccg__in_shape(ix, 2)->rank != 0)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "training_mode '%s' must be a scalar",
                       ccg__in_name(ix, 2));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  if (ix->n_out > 1) {
    ix->out_dtype[1] = CCG_DTYPE_BOOL;
    ix->out_shape[1] = *ccg__in_shape(ix, 0);
  }
  return CCG_STATUS_OK;
}

/* Inference-mode dropout is the identity; ratio and mode get nothing. */
static ccg_status grad_dropout(ccg__grad *gx) {
  if (gx->gout[0] == CCG_NONE)
    return CCG_STATUS_OK;
  gx->gin[0] = gx->gout[0];
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_DROPOUT = {CCG__ATTRS(dropout_attrs),
                                        0,
                                        infer_dropout,
                                        grad_dropout,
                                        .shard = CCG_OP_SHARD_KEEP,
                                        .dtypes = CCG__FLOAT_TYPES};

/* ---- builders ----------------------------------------------------------- */

static ccg_status unary(ccg_graph *g, ccg_op op, ccg_value_id x,
                        ccg_value_id *out) {
  return ccg__build(g, op, &x, 1, NULL, 0, 1, out, NULL);
}
static ccg_status binary(ccg_graph *g, ccg_op op, ccg_value_id a,
                         ccg_value_id b, ccg_value_id *out) {
  ccg_value_id in[2] = {a, b};
  return ccg__build(g, op, in, 2, NULL, 0, 1, out, NULL);
}

ccg_status ccg_identity(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_IDENTITY, x, out);
}
ccg_status ccg_add(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                   ccg_value_id *out) {
  return binary(g, CCG_OP_ADD, a, b, out);
}
ccg_status ccg_sub(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                   ccg_value_id *out) {
  return binary(g, CCG_OP_SUB, a, b, out);
}
ccg_status ccg_mul(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                   ccg_value_id *out) {
  return binary(g, CCG_OP_MUL, a, b, out);
}
ccg_status ccg_div(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                   ccg_value_id *out) {
  return binary(g, CCG_OP_DIV, a, b, out);
}
ccg_status ccg_pow(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                   ccg_value_id *out) {
  return binary(g, CCG_OP_POW, a, b, out);
}
ccg_status ccg_neg(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_NEG, x, out);
}
ccg_status ccg_relu(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_RELU, x, out);
}
ccg_status ccg_gelu(ccg_graph *g, ccg_value_id x, const char *approximate,
                    ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_S("approximate", approximate ? approximate : "none");
  return ccg__build(g, CCG_OP_GELU, &x, 1, &a, 1, 1, out, NULL);
}
ccg_status ccg_tanh(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_TANH, x, out);
}
ccg_status ccg_erf(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_ERF, x, out);
}
ccg_status ccg_sigmoid(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_SIGMOID, x, out);
}
ccg_status ccg_exp(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_EXP, x, out);
}
ccg_status ccg_log(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_LOG, x, out);
}
ccg_status ccg_sqrt(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  return unary(g, CCG_OP_SQRT, x, out);
}
ccg_status ccg_where(ccg_graph *g, ccg_value_id cond, ccg_value_id x,
                     ccg_value_id y, ccg_value_id *out) {
  ccg_value_id in[3] = {cond, x, y};
  return ccg__build(g, CCG_OP_WHERE, in, 3, NULL, 0, 1, out, NULL);
}
ccg_status ccg_cast(ccg_graph *g, ccg_value_id x, ccg_dtype to,
                    ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_S("to", ccg_dtype_name(to));
  return ccg__build(g, CCG_OP_CAST, &x, 1, &a, 1, 1, out, NULL);
}
ccg_status ccg_dropout(ccg_graph *g, ccg_value_id x, float ratio,
                       ccg_value_id *out) {
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "Dropout: ratio %g is outside [0, 1)", (double)ratio);
  ccg_value_id in[2] = {x, CCG_NONE};
  ccg__mark mark = ccg__mark_get(g);
  if (ratio != 0.5f) { /* 0.5 is the ONNX default: no input needed */
    ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &ratio};
    CCG_CHECK(ccg__add_const(g, &t, "dropout_ratio", &in[1]));
  }
  ccg_status st = ccg__build(g, CCG_OP_DROPOUT, in, in[1] == CCG_NONE ? 1 : 2,
                             NULL, 0, 1, out, NULL);
  if (st != CCG_STATUS_OK)
    ccg__rollback(g, &mark);
  return st;
}
