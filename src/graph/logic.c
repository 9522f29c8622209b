/* Logic family: comparisons (bool results), boolean logic, IsNaN/IsInf, the
 * variadic Min/Max/Sum/Mean, Mod, PRelu and the bitwise ops. Binary and
 * variadic ops broadcast ONNX style; comparisons, logic and integer ops have
 * no gradient. */
#include <string.h>

#include "graph/internal.h"

#define BOOL_TYPE CCG__DT(BOOL)

/* ---- shape rules --------------------------------------------------------- */

/* Every input of one dtype in `types`; the output shape is the broadcast of
 * all of them. */
static ccg_status infer_nary(ccg__infer *ix, unsigned types, const char *what) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, types, what));
  ccg_shape s = *ccg__in_shape(ix, 0);
  for (size_t i = 1; i < ix->n_in; i++) {
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
    CCG_CHECK(ccg__broadcast(ix, &s, ccg__in_shape(ix, i), &s));
  }
  ix->out_shape[0] = s;
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

/* a OP b for known contents: numbers compare; a symbol (a dim, so >= 0)
 * equals itself and exceeds every negative number. -1: not decided. */
static int compare_dims(ccg_op op, ccg_dim a, ccg_dim b) {
  int c; /* sign of a - b */
  if (!ccg_dim_is_sym(a) && !ccg_dim_is_sym(b))
    c = (a.size > b.size) - (a.size < b.size);
  else if (ccg_dim_equal(a, b))
    c = 0;
  else if (!ccg_dim_is_sym(b) && b.size < 0)
    c = 1;
  else if (!ccg_dim_is_sym(a) && a.size < 0)
    c = -1;
  else
    return -1;
  switch (op) {
  case CCG_OP_EQUAL:
    return c == 0;
  case CCG_OP_LESS:
    return c < 0;
  case CCG_OP_LESS_OR_EQUAL:
    return c <= 0;
  case CCG_OP_GREATER:
    return c > 0;
  default:
    return c >= 0;
  }
}

/* Comparisons of known shape values stay known (0 or 1), so that
 * Equal(shape, -1) feeding a Where of an exported expand or reshape can
 * stay known as well. */
static void fold_compare(ccg__infer *ix) {
  const ccg_dim *ka, *kb;
  int na = ccg__in_known(ix, 0, &ka), nb = ccg__in_known(ix, 1, &kb);
  if (na < 0 || nb < 0 || !ccg_dtype_is_int(ccg__in_dtype(ix, 0)) ||
      ix->out_shape[0].rank > 1)
    return;
  int n = na > nb ? na : nb;
  if ((na != n && na != 1) || (nb != n && nb != 1))
    return;
  for (int i = 0; i < n; i++) {
    int r = compare_dims(ix->op, ka[na == 1 ? 0 : i], kb[nb == 1 ? 0 : i]);
    if (r < 0)
      return;
    ix->out_known[0][i] = ccg_dim_num(r);
  }
  ix->out_n_known[0] = n;
}

static ccg_status infer_compare(ccg__infer *ix, unsigned types,
                                const char *what) {
  CCG_CHECK(infer_nary(ix, types, what));
  ix->out_dtype[0] = CCG_DTYPE_BOOL;
  if (ix->op != CCG_OP_AND && ix->op != CCG_OP_OR && ix->op != CCG_OP_XOR)
    fold_compare(ix);
  return CCG_STATUS_OK;
}

/* Equal compares any of our dtypes; the orderings take numbers (ONNX Less
 * and Greater have no bool). */
static ccg_status infer_equal(ccg__infer *ix) {
  return infer_compare(ix, CCG__ALL_TYPES, "a numeric or bool type");
}
static ccg_status infer_order(ccg__infer *ix) {
  return infer_compare(ix, CCG__NUM_TYPES, "a numeric type");
}
static ccg_status infer_logic(ccg__infer *ix) {
  return infer_compare(ix, BOOL_TYPE, "bool");
}

static ccg_status infer_unary(ccg__infer *ix, unsigned types, const char *what,
                              ccg_dtype out) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, types, what));
  ix->out_dtype[0] = out == CCG_DTYPE_UNDEFINED ? ccg__in_dtype(ix, 0) : out;
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  return CCG_STATUS_OK;
}

static ccg_status infer_not(ccg__infer *ix) {
  return infer_unary(ix, BOOL_TYPE, "bool", CCG_DTYPE_BOOL);
}
static ccg_status infer_isnan(ccg__infer *ix) {
  return infer_unary(ix, CCG__FLOAT_TYPES, "a float type", CCG_DTYPE_BOOL);
}

static const ccg__attr_spec isinf_attrs[] = {
    {"detect_negative", CCG_ATTR_INT, false, 1, 0, NULL},
    {"detect_positive", CCG_ATTR_INT, false, 1, 0, NULL},
};

static ccg_status infer_isinf(ccg__infer *ix) {
  bool neg, pos;
  CCG_CHECK(ccg__attr_flag(ix, "detect_negative", &neg));
  CCG_CHECK(ccg__attr_flag(ix, "detect_positive", &pos));
  return infer_isnan(ix);
}

/* Min and Max of known integer contents (Max(dim, 1) in shape arithmetic)
 * stay known; a symbol only survives against itself. */
static void fold_minmax(ccg__infer *ix) {
  if (!ccg_dtype_is_int(ix->out_dtype[0]) || ix->out_shape[0].rank > 1)
    return;
  const ccg_dim *k[CCG_MAX_RANK];
  int nk[CCG_MAX_RANK], n = 1;
  if (ix->n_in > CCG_MAX_RANK)
    return;
  for (size_t i = 0; i < ix->n_in; i++) {
    nk[i] = ccg__in_known(ix, i, &k[i]);
    if (nk[i] < 0)
      return;
    n = nk[i] > n ? nk[i] : n;
  }
  for (size_t i = 0; i < ix->n_in; i++)
    if (nk[i] != n && nk[i] != 1)
      return;
  bool is_max = ix->op == CCG_OP_MAX;
  for (int e = 0; e < n; e++) {
    ccg_dim r = k[0][nk[0] == 1 ? 0 : e];
    for (size_t i = 1; i < ix->n_in; i++) {
      ccg_dim d = k[i][nk[i] == 1 ? 0 : e];
      if (ccg_dim_is_sym(r) || ccg_dim_is_sym(d)) {
        if (!ccg_dim_equal(r, d))
          return;
      } else if (is_max ? d.size > r.size : d.size < r.size) {
        r = d;
      }
    }
    ix->out_known[0][e] = r;
  }
  ix->out_n_known[0] = n;
}

static ccg_status infer_minmax(ccg__infer *ix) {
  CCG_CHECK(infer_nary(ix, CCG__NUM_TYPES, "a numeric type"));
  fold_minmax(ix);
  return CCG_STATUS_OK;
}

/* ONNX Sum and Mean are defined for floats only. */
static ccg_status infer_sum(ccg__infer *ix) {
  return infer_nary(ix, CCG__FLOAT_TYPES, "a float type");
}

static const ccg__attr_spec mod_attrs[] = {
    {"fmod", CCG_ATTR_INT, false, 0, 0, NULL},
};

static ccg_status infer_mod(ccg__infer *ix) {
  bool fmod;
  CCG_CHECK(ccg__attr_flag(ix, "fmod", &fmod));
  CCG_CHECK(infer_nary(ix, CCG__NUM_TYPES, "a numeric type"));
  if (!fmod && ccg_dtype_is_float(ix->out_dtype[0]))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "fmod is 0 but the inputs are %s; a float Mod needs "
                     "fmod 1 (ONNX)",
                     ccg_dtype_name(ix->out_dtype[0]));
  return CCG_STATUS_OK;
}

/* slope broadcasts to X one way: the output is X's shape. */
static ccg_status infer_prelu(ccg__infer *ix) {
  CCG_CHECK(infer_nary(ix, CCG__FLOAT_TYPES | CCG__DT(I64) | CCG__DT(I32),
                       "a float, i64 or i32 type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  if (!ccg_shape_equal(&ix->out_shape[0], x)) {
    char a[128], b[128];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "slope '%s' of shape %s does not broadcast to X '%s' of "
                     "shape %s",
                     ccg__in_name(ix, 1),
                     ccg__shape_str(ccg__in_shape(ix, 1), a, sizeof a),
                     ccg__in_name(ix, 0), ccg__shape_str(x, b, sizeof b));
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_bitwise(ccg__infer *ix) {
  return infer_nary(ix, CCG__INT_TYPES, "an integer type");
}
static ccg_status infer_bitwise_not(ccg__infer *ix) {
  return infer_unary(ix, CCG__INT_TYPES, "an integer type",
                     CCG_DTYPE_UNDEFINED);
}

static const ccg__attr_spec bitshift_attrs[] = {
    {"direction", CCG_ATTR_STRING, true, 0, 0, NULL},
};

/* ONNX shifts unsigned integers only; u8 is the one we have. */
static ccg_status infer_bitshift(ccg__infer *ix) {
  const char *d = ccg__attr_s(ix, "direction");
  if (strcmp(d, "LEFT") != 0 && strcmp(d, "RIGHT") != 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "direction is '%s'; expected 'LEFT' or 'RIGHT'", d);
  return infer_nary(ix, CCG__DT(U8), "u8 (BitShift takes unsigned integers)");
}

/* ---- gradient rules ------------------------------------------------------ */

static ccg_status build1(ccg_graph *g, ccg_op op, const ccg_value_id *in,
                         size_t n, ccg_value_id *out) {
  return ccg__build(g, op, in, n, NULL, 0, 1, out, NULL);
}
static ccg_status build2(ccg_graph *g, ccg_op op, ccg_value_id a,
                         ccg_value_id b, ccg_value_id *out) {
  ccg_value_id in[2] = {a, b};
  return build1(g, op, in, 2, out);
}

static ccg_status need_float(ccg__grad *gx) {
  ccg_dtype dt = ccg_value_dtype(gx->g, gx->in[0]);
  if (ccg_dtype_is_float(dt))
    return CCG_STATUS_OK;
  return ccg__grad_fail(gx, CCG_STATUS_DTYPE,
                        "%s inputs have no gradient (float types only)",
                        ccg_dtype_name(dt));
}

/* Sum: dy to every input; Mean: dy / N. Each summed back over the dims it
 * was broadcast along. */
static ccg_status grad_sum(ccg__grad *gx) {
  ccg_value_id dy = gx->gout[0];
  if (gx->op == CCG_OP_MEAN && gx->n_in > 1)
    CCG_CHECK(ccg__grad_scale(gx->g, dy, 1.0 / (double)gx->n_in, &dy));
  for (size_t i = 0; i < gx->n_in; i++)
    if (gx->need[i])
      CCG_CHECK(ccg__grad_unbroadcast(gx->g, dy, gx->in[i], &gx->gin[i]));
  return CCG_STATUS_OK;
}

/* dy goes to the inputs equal to the result; ties share it evenly (as
 * torch.maximum/minimum and ONNX Runtime's training gradient do), so the
 * shares always sum to dy. Where the result is NaN no input equals it: the
 * gradient there is NaN (0 / 0), as in ONNX Runtime. */
static ccg_status grad_minmax(ccg__grad *gx) {
  CCG_CHECK(need_float(gx));
  ccg_graph *g = gx->g;
  if (gx->n_in == 1) {
    gx->gin[0] = gx->gout[0];
    return CCG_STATUS_OK;
  }
  ccg_dtype dt = ccg_value_dtype(g, gx->out[0]);
  /* the graph's arena, not its scratch: adding nodes resets that */
  ccg_value_id *mask = ccg__arena_calloc(&g->arena, gx->n_in, sizeof *mask);
  if (!mask)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < gx->n_in; i++) {
    CCG_CHECK(build2(g, CCG_OP_EQUAL, gx->in[i], gx->out[0], &mask[i]));
    CCG_CHECK(ccg_cast(g, mask[i], dt, &mask[i]));
  }
  ccg_value_id count, share, v;
  CCG_CHECK(build1(g, CCG_OP_SUM, mask, gx->n_in, &count));
  CCG_CHECK(ccg_div(g, gx->gout[0], count, &share));
  for (size_t i = 0; i < gx->n_in; i++) {
    if (!gx->need[i])
      continue;
    CCG_CHECK(ccg_mul(g, share, mask[i], &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, gx->in[i], &gx->gin[i]));
  }
  return CCG_STATUS_OK;
}

/* fmod: y = a - trunc(a / b) b, so dy/da = 1 and dy/db = -trunc(a / b),
 * which is (a - y) / b exactly where y is defined. */
static ccg_status grad_mod(ccg__grad *gx) {
  CCG_CHECK(need_float(gx));
  ccg_graph *g = gx->g;
  ccg_value_id a = gx->in[0], b = gx->in[1], dy = gx->gout[0], v;
  if (gx->need[0])
    CCG_CHECK(ccg__grad_unbroadcast(g, dy, a, &gx->gin[0]));
  if (gx->need[1]) {
    CCG_CHECK(ccg_sub(g, a, gx->out[0], &v));
    CCG_CHECK(ccg_div(g, v, b, &v));
    CCG_CHECK(ccg_mul(g, dy, v, &v));
    CCG_CHECK(ccg_neg(g, v, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, b, &gx->gin[1]));
  }
  return CCG_STATUS_OK;
}

/* y = x < 0 ? slope x : x: dx = dy (x < 0 ? slope : 1), dslope = dy x where
 * x < 0, summed back to slope's shape. */
static ccg_status grad_prelu(ccg__grad *gx) {
  CCG_CHECK(need_float(gx));
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], slope = gx->in[1], dy = gx->gout[0];
  ccg_value_id zero, neg, v;
  CCG_CHECK(ccg__grad_scalar(g, ccg_value_dtype(g, x), 0.0, &zero));
  CCG_CHECK(build2(g, CCG_OP_LESS, x, zero, &neg));
  if (gx->need[0]) {
    CCG_CHECK(ccg_mul(g, dy, slope, &v));
    CCG_CHECK(ccg_where(g, neg, v, dy, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, x, &gx->gin[0]));
  }
  if (gx->need[1]) {
    CCG_CHECK(ccg_mul(g, dy, x, &v));
    CCG_CHECK(ccg_where(g, neg, v, zero, &v));
    CCG_CHECK(ccg__grad_unbroadcast(g, v, slope, &gx->gin[1]));
  }
  return CCG_STATUS_OK;
}

/* ---- definitions ---------------------------------------------------------
 * onnx_since: the first version with ONNX broadcasting and no legacy
 * attributes (broadcast/axis, consumed_inputs); later versions only widened
 * the dtypes. Min/Max/Sum/Mean are read from 8 (opset 6 did not broadcast,
 * 8 takes the float types, all of which we run; 12 added integers). */

#define BCAST .shard = CCG_OP_SHARD_BROADCAST
#define KEEP .shard = CCG_OP_SHARD_KEEP

const ccg__op_def ccg__opdef_EQUAL = {
    CCG__NO_ATTRS,  0, infer_equal, NULL, BCAST, .dtypes = CCG__ALL_TYPES,
    .onnx_since = 7};
const ccg__op_def ccg__opdef_LESS = {
    CCG__NO_ATTRS,  0, infer_order, NULL, BCAST, .dtypes = CCG__NUM_TYPES,
    .onnx_since = 7};
const ccg__op_def ccg__opdef_LESS_OR_EQUAL = {
    CCG__NO_ATTRS,   0, infer_order, NULL, BCAST, .dtypes = CCG__NUM_TYPES,
    .onnx_since = 12};
const ccg__op_def ccg__opdef_GREATER = {
    CCG__NO_ATTRS,  0, infer_order, NULL, BCAST, .dtypes = CCG__NUM_TYPES,
    .onnx_since = 7};
const ccg__op_def ccg__opdef_GREATER_OR_EQUAL = {
    CCG__NO_ATTRS,   0, infer_order, NULL, BCAST, .dtypes = CCG__NUM_TYPES,
    .onnx_since = 12};
const ccg__op_def ccg__opdef_NOT = {
    CCG__NO_ATTRS, CCG__OP_ELEMENTWISE, infer_not,      NULL,
    KEEP,          .dtypes = BOOL_TYPE, .onnx_since = 1};
const ccg__op_def ccg__opdef_AND = {CCG__NO_ATTRS,  0,     infer_logic,
                                    NULL,           BCAST, .dtypes = BOOL_TYPE,
                                    .onnx_since = 7};
const ccg__op_def ccg__opdef_OR = {CCG__NO_ATTRS,  0,     infer_logic,
                                   NULL,           BCAST, .dtypes = BOOL_TYPE,
                                   .onnx_since = 7};
const ccg__op_def ccg__opdef_XOR = {CCG__NO_ATTRS,  0,     infer_logic,
                                    NULL,           BCAST, .dtypes = BOOL_TYPE,
                                    .onnx_since = 7};
const ccg__op_def ccg__opdef_IS_NAN = {
    CCG__NO_ATTRS,  0, infer_isnan, NULL, KEEP, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 9};
const ccg__op_def ccg__opdef_IS_INF = {CCG__ATTRS(isinf_attrs),
                                       0,
                                       infer_isinf,
                                       NULL,
                                       KEEP,
                                       .dtypes = CCG__FLOAT_TYPES,
                                       .onnx_since = 10};
const ccg__op_def ccg__opdef_MIN = {CCG__NO_ATTRS,  0,
                                    infer_minmax,   grad_minmax,
                                    BCAST,          .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 8};
const ccg__op_def ccg__opdef_MAX = {CCG__NO_ATTRS,  0,
                                    infer_minmax,   grad_minmax,
                                    BCAST,          .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 8};
const ccg__op_def ccg__opdef_SUM = {
    CCG__NO_ATTRS,  0, infer_sum, grad_sum, BCAST, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 8};
const ccg__op_def ccg__opdef_MEAN = {
    CCG__NO_ATTRS,  0, infer_sum, grad_sum, BCAST, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 8};
const ccg__op_def ccg__opdef_MOD = {CCG__ATTRS(mod_attrs),
                                    0,
                                    infer_mod,
                                    grad_mod,
                                    BCAST,
                                    .dtypes = CCG__NUM_TYPES,
                                    .onnx_since = 10};
const ccg__op_def ccg__opdef_PRELU = {
    CCG__NO_ATTRS,  0,
    infer_prelu,    grad_prelu,
    BCAST,          .dtypes = CCG__FLOAT_TYPES | CCG__DT(I64) | CCG__DT(I32),
    .onnx_since = 7};
const ccg__op_def ccg__opdef_BIT_SHIFT = {CCG__ATTRS(bitshift_attrs),
                                          0,
                                          infer_bitshift,
                                          NULL,
                                          BCAST,
                                          .dtypes = CCG__DT(U8),
                                          .onnx_since = 11};
const ccg__op_def ccg__opdef_BITWISE_AND = {
    CCG__NO_ATTRS,   0, infer_bitwise, NULL, BCAST, .dtypes = CCG__INT_TYPES,
    .onnx_since = 18};
const ccg__op_def ccg__opdef_BITWISE_OR = {
    CCG__NO_ATTRS,   0, infer_bitwise, NULL, BCAST, .dtypes = CCG__INT_TYPES,
    .onnx_since = 18};
const ccg__op_def ccg__opdef_BITWISE_XOR = {
    CCG__NO_ATTRS,   0, infer_bitwise, NULL, BCAST, .dtypes = CCG__INT_TYPES,
    .onnx_since = 18};
const ccg__op_def ccg__opdef_BITWISE_NOT = {
    CCG__NO_ATTRS, CCG__OP_ELEMENTWISE,      infer_bitwise_not, NULL,
    KEEP,          .dtypes = CCG__INT_TYPES, .onnx_since = 18};
