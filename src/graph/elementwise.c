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

const ccg__op_def ccg__opdef_ADD = {CCG__NO_ATTRS, 0, infer_add};
const ccg__op_def ccg__opdef_SUB = {CCG__NO_ATTRS, 0, infer_sub};
const ccg__op_def ccg__opdef_MUL = {CCG__NO_ATTRS, 0, infer_mul};
const ccg__op_def ccg__opdef_DIV = {CCG__NO_ATTRS, 0, infer_div};
const ccg__op_def ccg__opdef_POW = {CCG__NO_ATTRS, 0, infer_pow};

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
static ccg_status infer_neg(ccg__infer *ix) {
  return infer_unary(ix, SIGNED_TYPES, "a float or signed integer type");
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

const ccg__op_def ccg__opdef_IDENTITY = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                         infer_identity};
const ccg__op_def ccg__opdef_NEG = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                    infer_neg};
const ccg__op_def ccg__opdef_RELU = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                     infer_neg};
const ccg__op_def ccg__opdef_GELU = {CCG__ATTRS(gelu_attrs),
                                     CCG__OP_ELEMENTWISE, infer_gelu};
const ccg__op_def ccg__opdef_TANH = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                     infer_float_unary};
const ccg__op_def ccg__opdef_ERF = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                    infer_float_unary};
const ccg__op_def ccg__opdef_SIGMOID = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                        infer_float_unary};
const ccg__op_def ccg__opdef_EXP = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                    infer_float_unary};
const ccg__op_def ccg__opdef_LOG = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                    infer_float_unary};
const ccg__op_def ccg__opdef_SQRT = {CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,
                                     infer_float_unary};

/* ---- Where, Cast, Dropout ----------------------------------------------- */

static ccg_status infer_where(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__DT(BOOL), "bool (the condition)"));
  CCG_CHECK(ccg__same_dtype(ix, 1, 2));
  ccg_shape xy;
  CCG_CHECK(
      ccg__broadcast(ix, ccg__in_shape(ix, 1), ccg__in_shape(ix, 2), &xy));
  CCG_CHECK(ccg__broadcast(ix, ccg__in_shape(ix, 0), &xy, &ix->out_shape[0]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 1);
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_WHERE = {CCG__NO_ATTRS, 0, infer_where};

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

const ccg__op_def ccg__opdef_CAST = {CCG__ATTRS(cast_attrs), 0, infer_cast};

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

const ccg__op_def ccg__opdef_DROPOUT = {CCG__ATTRS(dropout_attrs), 0,
                                        infer_dropout};

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
