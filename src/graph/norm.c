/* Normalizations: Softmax (opset 13 semantics: one axis, default -1) and
 * LayerNormalization (opset 17: normalizes dims [axis, rank), optional Mean
 * and InvStdDev outputs in the stash type). */
#include <float.h>
#include <string.h>

#include "graph/internal.h"

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

const ccg__op_def ccg__opdef_SOFTMAX = {CCG__ATTRS(softmax_attrs), 0,
                                        infer_softmax};

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

static ccg_status stash_dtype(ccg__infer *ix, ccg_dtype *out) {
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
  float eps = ccg__attr_f(ix, "epsilon");
  if (!(eps >= 0.0f && eps <= FLT_MAX))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "epsilon is %g; expected a finite value >= 0",
                     (double)eps);
  ccg_dtype stash = CCG_DTYPE_F32;
  CCG_CHECK(stash_dtype(ix, &stash));
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

const ccg__op_def ccg__opdef_LAYER_NORM = {CCG__ATTRS(layer_norm_attrs), 0,
                                           infer_layer_norm};

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
