/* Reductions: ReduceSum, ReduceMean, ReduceMax. The IR keeps `axes` as an
 * attribute for all three (opset 13 ReduceSum and opset 18 Mean/Max take it
 * as an input; the ONNX layer converts), so shape inference never depends on
 * the contents of another value. */
#include <string.h>

#include "graph/internal.h"

static const ccg__attr_spec reduce_attrs[] = {
    {"axes", CCG_ATTR_INTS, false, 0, 0, NULL},
    {"keepdims", CCG_ATTR_INT, false, 1, 0, NULL},
    {"noop_with_empty_axes", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* Marks the reduced dims; a dim named twice (e.g. 1 and -2 on rank 3) is an
 * error since ONNX leaves it undefined. */
static ccg_status reduced_dims(ccg__infer *ix, int rank,
                               bool reduced[CCG_MAX_RANK]) {
  const int64_t *axes;
  size_t n = ccg__attr_ints(ix, "axes", &axes);
  memset(reduced, 0, CCG_MAX_RANK * sizeof *reduced);
  if (n == 0) {
    bool noop = false;
    CCG_CHECK(ccg__attr_flag(ix, "noop_with_empty_axes", &noop));
    for (int k = 0; k < rank; k++)
      reduced[k] = !noop;
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < n; i++) {
    int a;
    CCG_CHECK(ccg__axis(ix, axes[i], rank, "reduction axis", &a));
    if (reduced[a])
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "axes names dim %d twice (entry %zu is %lld)", a, i,
                       (long long)axes[i]);
    reduced[a] = true;
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_reduce(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  bool keep = true, reduced[CCG_MAX_RANK];
  CCG_CHECK(ccg__attr_flag(ix, "keepdims", &keep));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  CCG_CHECK(reduced_dims(ix, x->rank, reduced));
  ccg_shape out;
  memset(&out, 0, sizeof out);
  for (int k = 0; k < x->rank; k++) {
    if (!reduced[k])
      out.dims[out.rank++] = x->dims[k];
    else if (keep)
      out.dims[out.rank++] = ccg_dim_num(1);
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = out;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_REDUCE_SUM = {CCG__ATTRS(reduce_attrs), 0,
                                           infer_reduce};
const ccg__op_def ccg__opdef_REDUCE_MEAN = {CCG__ATTRS(reduce_attrs), 0,
                                            infer_reduce};
const ccg__op_def ccg__opdef_REDUCE_MAX = {CCG__ATTRS(reduce_attrs), 0,
                                           infer_reduce};

/* ---- builders ----------------------------------------------------------- */

static ccg_status reduce(ccg_graph *g, ccg_op op, ccg_value_id x,
                         const int64_t *axes, size_t n_axes, bool keepdims,
                         ccg_value_id *out) {
  ccg_attr attrs[2];
  size_t n = 0;
  if (axes && n_axes)
    attrs[n++] = CCG_ATTR_IS("axes", axes, n_axes);
  attrs[n++] = CCG_ATTR_I("keepdims", keepdims ? 1 : 0);
  return ccg__build(g, op, &x, 1, attrs, n, 1, out, NULL);
}

ccg_status ccg_reduce_sum(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                          size_t n_axes, bool keepdims, ccg_value_id *out) {
  return reduce(g, CCG_OP_REDUCE_SUM, x, axes, n_axes, keepdims, out);
}

ccg_status ccg_reduce_mean(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                           size_t n_axes, bool keepdims, ccg_value_id *out) {
  return reduce(g, CCG_OP_REDUCE_MEAN, x, axes, n_axes, keepdims, out);
}

ccg_status ccg_reduce_max(ccg_graph *g, ccg_value_id x, const int64_t *axes,
                          size_t n_axes, bool keepdims, ccg_value_id *out) {
  return reduce(g, CCG_OP_REDUCE_MAX, x, axes, n_axes, keepdims, out);
}
