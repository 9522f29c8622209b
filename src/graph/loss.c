/* Training losses: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss,
 * as ONNX defines them (opset 12 on): scores / log-probabilities [N, C, d...],
 * integer targets [N, d...], optional class weights [C], reduction none /
 * sum / mean (mean divides by the sum of the weights applied), and an
 * optional ignore_index whose targets add 0 to the loss and to the
 * weights. */
#include <string.h>

#include "graph/internal.h"

static const ccg__attr_spec loss_attrs[] = {
    {"ignore_index", CCG_ATTR_INT, false, 0, 0, NULL},
    {"reduction", CCG_ATTR_STRING, false, 0, 0, "mean"},
};

static ccg_status check_reduction(ccg__infer *ix, bool *none) {
  const char *r = ccg__attr_s(ix, "reduction");
  if (strcmp(r, "none") != 0 && strcmp(r, "sum") != 0 && strcmp(r, "mean") != 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "reduction is '%s'; expected none, sum or mean", r);
  *none = strcmp(r, "none") == 0;
  return CCG_STATUS_OK;
}

/* Input 0 [N, C, d...] (float), input 1 [N, d...] (i32/i64), optional
 * input 2 [C] of input 0's dtype. */
static ccg_status infer_loss(ccg__infer *ix) {
  char b0[128], b1[128];
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I32) | CCG__DT(I64),
                              "i32 or i64 (class indices)"));
  const ccg_shape *x = ccg__in_shape(ix, 0), *t = ccg__in_shape(ix, 1);
  if (x->rank < 2)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input '%s' has shape %s; expected [N, C, d...]",
                     ccg__in_name(ix, 0), ccg__shape_str(x, b0, sizeof b0));
  bool match = t->rank == x->rank - 1;
  for (int k = 0; match && k < t->rank; k++)
    match = ccg_dim_equal(t->dims[k], x->dims[k ? k + 1 : 0]);
  if (!match)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "target '%s' has shape %s; input '%s' of shape %s needs "
                     "its shape without dim 1",
                     ccg__in_name(ix, 1), ccg__shape_str(t, b1, sizeof b1),
                     ccg__in_name(ix, 0), ccg__shape_str(x, b0, sizeof b0));
  if (ccg__in_has(ix, 2)) {
    CCG_CHECK(ccg__same_dtype(ix, 0, 2));
    const ccg_shape *w = ccg__in_shape(ix, 2);
    if (w->rank != 1 || !ccg_dim_equal(w->dims[0], x->dims[1]))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "weight '%s' has shape %s; expected [C] with C dim 1 "
                       "of input '%s'",
                       ccg__in_name(ix, 2), ccg__shape_str(w, b1, sizeof b1),
                       ccg__in_name(ix, 0));
  }
  bool none = false;
  CCG_CHECK(check_reduction(ix, &none));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  memset(&ix->out_shape[0], 0, sizeof ix->out_shape[0]);
  if (none)
    ix->out_shape[0] = *t;
  if (ix->n_out > 1) {
    ix->out_dtype[1] = ccg__in_dtype(ix, 0);
    ix->out_shape[1] = *x;
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_SOFTMAX_CROSS_ENTROPY_LOSS = {
    CCG__ATTRS(loss_attrs), 0, infer_loss, NULL, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 12};
const ccg__op_def ccg__opdef_NEGATIVE_LOG_LIKELIHOOD_LOSS = {
    CCG__ATTRS(loss_attrs), 0, infer_loss, NULL, .dtypes = CCG__FLOAT_TYPES,
    .onnx_since = 12};
