/* Unary math of the elementwise family: Reciprocal, Abs, rounding, Sign,
 * Clip, trigonometric and hyperbolic functions. Each keeps its input's
 * shape and dtype, so placements go through unchanged (KEEP). */
#include "graph/internal.h"

/* ---- shape rules -------------------------------------------------------- */

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

/* Abs of known integers stays known: dynamo writes Expand targets as
 * Abs(Concat(Shape(x)[0:1], [-1, -1])) (-1 meaning "keep"). Symbols are
 * positive sizes. */
static ccg_status infer_abs(ccg__infer *ix) {
  CCG_CHECK(infer_numeric(ix));
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n < 0 || !ccg_dtype_is_int(ix->out_dtype[0]))
    return CCG_STATUS_OK;
  for (int i = 0; i < n; i++) {
    if (!ccg_dim_is_sym(k[i]) && k[i].size == INT64_MIN)
      return CCG_STATUS_OK;
    ix->out_known[0][i] =
        ccg_dim_is_sym(k[i]) || k[i].size >= 0 ? k[i] : ccg_dim_num(-k[i].size);
  }
  ix->out_n_known[0] = n;
  return CCG_STATUS_OK;
}

/* Clip-11+: min and max are optional scalar inputs of the data's dtype. */
static ccg_status infer_clip(ccg__infer *ix) {
  static const char *const names[3] = {"input", "min", "max"};
  CCG_CHECK(infer_numeric(ix));
  for (size_t i = 1; i < ix->n_in; i++) {
    if (!ccg__in_has(ix, i))
      continue;
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
    const ccg_shape *s = ccg__in_shape(ix, i);
    char buf[64];
    if (s->rank != 0 && !(s->rank == 1 && ccg__is_num(s->dims[0], 1)))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "input '%s' (%s) has shape %s; it must be a scalar",
                       ccg__in_name(ix, i), names[i],
                       ccg__shape_str(s, buf, sizeof buf));
  }
  return CCG_STATUS_OK;
}

/* ---- gradient rules ----------------------------------------------------- */

static ccg_status un(ccg_graph *g, ccg_op op, ccg_value_id x,
                     ccg_value_id *out) {
  return ccg__build(g, op, &x, 1, NULL, 0, 1, out, NULL);
}

static ccg_status scalar_like(ccg_graph *g, ccg_value_id x, double v,
                              ccg_value_id *out) {
  return ccg__grad_scalar(g, ccg_value_dtype(g, x), v, out);
}

/* Floor, Ceil, Round and Sign are flat almost everywhere: zeros, as torch
 * gives, rather than a refusal that would stop any backward pass through
 * them. */
static ccg_status grad_zero(ccg__grad *gx) {
  return ccg__grad_zeros_like(gx->g, gx->in[0], &gx->gin[0]);
}

/* -dy y^2 */
static ccg_status grad_reciprocal(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id d;
  CCG_CHECK(ccg_mul(g, gx->out[0], gx->out[0], &d));
  CCG_CHECK(ccg_mul(g, gx->gout[0], d, &d));
  return ccg_neg(g, d, &gx->gin[0]);
}

/* dy sign(x): 0 at 0, as torch. */
static ccg_status grad_abs(ccg__grad *gx) {
  ccg_value_id s;
  CCG_CHECK(un(gx->g, CCG_OP_SIGN, gx->in[0], &s));
  return ccg_mul(gx->g, gx->gout[0], s, &gx->gin[0]);
}

/* Where(Cast(v, bool), a, b), v's nonzeros selecting a. */
static ccg_status select_nonzero(ccg_graph *g, ccg_value_id v, ccg_value_id a,
                                 ccg_value_id b, ccg_value_id *out) {
  ccg_value_id m;
  CCG_CHECK(ccg_cast(g, v, CCG_DTYPE_BOOL, &m));
  return ccg_where(g, m, a, b, out);
}

/* x gets dy where it was kept (x - y == 0: bounds inclusive, as torch);
 * min gets the sum of dy where x was raised to it (y - x > 0), max where x
 * was lowered (x - y > 0). */
static ccg_status grad_clip(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], y = gx->out[0], dy = gx->gout[0], zero, d, v;
  CCG_CHECK(scalar_like(g, dy, 0.0, &zero));
  if (gx->need[0]) {
    CCG_CHECK(ccg_sub(g, x, y, &d));
    CCG_CHECK(select_nonzero(g, d, zero, dy, &gx->gin[0]));
  }
  for (size_t i = 1; i < gx->n_in; i++) {
    if (!gx->need[i] || gx->in[i] == CCG_NONE)
      continue;
    CCG_CHECK(i == 1 ? ccg_sub(g, y, x, &d) : ccg_sub(g, x, y, &d));
    CCG_CHECK(ccg_relu(g, d, &d));
    CCG_CHECK(select_nonzero(g, d, dy, zero, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, gx->in[i], &gx->gin[i]));
  }
  return CCG_STATUS_OK;
}

static ccg_status grad_sin(ccg__grad *gx) {
  ccg_value_id d;
  CCG_CHECK(un(gx->g, CCG_OP_COS, gx->in[0], &d));
  return ccg_mul(gx->g, gx->gout[0], d, &gx->gin[0]);
}

static ccg_status grad_cos(ccg__grad *gx) {
  ccg_value_id d;
  CCG_CHECK(un(gx->g, CCG_OP_SIN, gx->in[0], &d));
  CCG_CHECK(ccg_mul(gx->g, gx->gout[0], d, &d));
  return ccg_neg(gx->g, d, &gx->gin[0]);
}

/* 1 + y^2 */
static ccg_status grad_tan(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id y = gx->out[0], one, d;
  CCG_CHECK(scalar_like(g, y, 1.0, &one));
  CCG_CHECK(ccg_mul(g, y, y, &d));
  CCG_CHECK(ccg_add(g, d, one, &d));
  return ccg_mul(g, gx->gout[0], d, &gx->gin[0]);
}

/* dy / f(x^2) with f(s) = k s + c (sqrt taken when `root`). */
static ccg_status grad_over_square(ccg__grad *gx, double k, double c, bool root,
                                   bool negate) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], cv, d;
  CCG_CHECK(scalar_like(g, x, c, &cv));
  CCG_CHECK(ccg_mul(g, x, x, &d));
  if (k != 1.0)
    CCG_CHECK(ccg__grad_scale(g, d, k, &d));
  CCG_CHECK(ccg_add(g, d, cv, &d));
  if (root)
    CCG_CHECK(ccg_sqrt(g, d, &d));
  CCG_CHECK(ccg_div(g, gx->gout[0], d, &d));
  if (negate)
    return ccg_neg(g, d, &gx->gin[0]);
  gx->gin[0] = d;
  return CCG_STATUS_OK;
}

static ccg_status grad_asin(ccg__grad *gx) {
  return grad_over_square(gx, -1.0, 1.0, true, false);
}
static ccg_status grad_acos(ccg__grad *gx) {
  return grad_over_square(gx, -1.0, 1.0, true, true);
}
static ccg_status grad_atan(ccg__grad *gx) {
  return grad_over_square(gx, 1.0, 1.0, false, false);
}
static ccg_status grad_asinh(ccg__grad *gx) {
  return grad_over_square(gx, 1.0, 1.0, true, false);
}
static ccg_status grad_acosh(ccg__grad *gx) {
  return grad_over_square(gx, 1.0, -1.0, true, false);
}
static ccg_status grad_atanh(ccg__grad *gx) {
  return grad_over_square(gx, -1.0, 1.0, false, false);
}

static ccg_status grad_sinh(ccg__grad *gx) {
  ccg_value_id d;
  CCG_CHECK(un(gx->g, CCG_OP_COSH, gx->in[0], &d));
  return ccg_mul(gx->g, gx->gout[0], d, &gx->gin[0]);
}

static ccg_status grad_cosh(ccg__grad *gx) {
  ccg_value_id d;
  CCG_CHECK(un(gx->g, CCG_OP_SINH, gx->in[0], &d));
  return ccg_mul(gx->g, gx->gout[0], d, &gx->gin[0]);
}

/* ---- definitions ---------------------------------------------------------
 * onnx_since: the first version with today's semantics for float types
 * (the versions after it only added dtypes). */

#define F CCG__FLOAT_TYPES
#define N CCG__NUM_TYPES
#define MATH_OP(id, infer, grad, types, since)                                 \
  const ccg__op_def ccg__opdef_##id = {CCG__NO_ATTRS,                          \
                                       CCG__OP_ELEMENTWISE,                    \
                                       infer,                                  \
                                       grad,                                   \
                                       .shard = CCG_OP_SHARD_KEEP,             \
                                       .dtypes = types,                        \
                                       .onnx_since = since};

MATH_OP(RECIPROCAL, infer_float, grad_reciprocal, F, 6)
MATH_OP(ABS, infer_abs, grad_abs, N, 6)
MATH_OP(FLOOR, infer_float, grad_zero, F, 6)
MATH_OP(CEIL, infer_float, grad_zero, F, 6)
MATH_OP(ROUND, infer_float, grad_zero, F, 11)
MATH_OP(SIGN, infer_numeric, grad_zero, N, 9)
MATH_OP(CLIP, infer_clip, grad_clip, N, 11)
MATH_OP(COS, infer_float, grad_cos, F, 7)
MATH_OP(SIN, infer_float, grad_sin, F, 7)
MATH_OP(TAN, infer_float, grad_tan, F, 7)
MATH_OP(ASIN, infer_float, grad_asin, F, 7)
MATH_OP(ACOS, infer_float, grad_acos, F, 7)
MATH_OP(ATAN, infer_float, grad_atan, F, 7)
MATH_OP(SINH, infer_float, grad_sinh, F, 9)
MATH_OP(COSH, infer_float, grad_cosh, F, 9)
MATH_OP(ASINH, infer_float, grad_asinh, F, 9)
MATH_OP(ACOSH, infer_float, grad_acosh, F, 9)
MATH_OP(ATANH, infer_float, grad_atanh, F, 9)
