/* CPU kernels of the loss family: SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss, through the arithmetic of exec/loss_math.h that
 * the CUDA kernels share. */
#include <string.h>

#include "exec/cpu/loss.h"

#include "exec/cpu/cpu.h"

const ccg__xval *ccg__loss_weight(const ccg_exec *x, const ccg__xnode *n) {
  return n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
}

ccg__loss_args ccg__loss_args_of(const ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *w = ccg__loss_weight(x, n);
  ccg__loss_args a;
  memset(&a, 0, sizeof a);
  a.softmax = n->op == CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS;
  a.has_ii = n->p.axis != 0;
  a.ii = n->p.i1;
  a.C = (size_t)n->p.i2;
  a.D = (size_t)n->p.i3;
  a.dx = ccg__in(x, n, 0)->dtype;
  a.dt = ccg__in(x, n, 1)->dtype;
  a.dw = w ? w->dtype : a.dx;
  return a;
}

bool ccg__loss_has_log_prob(const ccg__xnode *n) {
  return n->n_out > 1 && n->out[1] != CCG_NONE;
}

ccg_status ccg__loss_bad_target(ccg_exec *x, const ccg__xnode *n, size_t p,
                                int64_t t) {
  return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                    "target %lld (element %zu of '%s') is not a class index "
                    "in [0, %lld)%s",
                    (long long)t, p, ccg_value_name(x->g, n->in[1]),
                    (long long)n->p.i2, n->p.axis ? " nor ignore_index" : "");
}

static ccg_status run_loss(ccg_exec *x, const ccg__xnode *n) {
  ccg__loss_args a = ccg__loss_args_of(x, n);
  const ccg__xval *xv = ccg__in(x, n, 0), *tv = ccg__in(x, n, 1);
  const ccg__xval *wv = ccg__loss_weight(x, n), *o = ccg__out(x, n, 0);
  const void *w = wv ? wv->ptr : NULL;
  size_t P = tv->numel;
  if (ccg__loss_has_log_prob(n)) {
    const ccg__xval *lp = ccg__out(x, n, 1);
    for (size_t p = 0; p < P; p++)
      ccg__loss_log_prob(&a, xv->ptr, lp->dtype, lp->ptr, p);
  }
  bool none = n->p.i0 == 0;
  double *ls = x->scratch, *ws = ls + P;
  for (size_t p = 0; p < P; p++) {
    double l, wt;
    int64_t t;
    if (!ccg__loss_elem(&a, xv->ptr, tv->ptr, w, p, &l, &wt, &t))
      return ccg__loss_bad_target(x, n, p, t);
    if (none) {
      ccg__st_f64(o->dtype, o->ptr, p, l);
    } else {
      ls[p] = l;
      ws[p] = wt;
    }
  }
  if (none)
    return CCG_STATUS_OK;
  size_t nch = (P + CCG__LOSS_CHUNK - 1) / CCG__LOSS_CHUNK;
  double *lsum = ws + P, *wsum = lsum + nch;
  for (size_t c = 0; c < nch; c++) {
    lsum[c] = ccg__loss_chunk_sum(ls, P, c);
    wsum[c] = ccg__loss_chunk_sum(ws, P, c);
  }
  ccg__st_f64(o->dtype, o->ptr, 0,
              ccg__loss_final(n->p.i0 == 2, lsum, wsum, nch));
  return CCG_STATUS_OK;
}

size_t ccg__loss_scratch(const ccg_exec *x, const ccg__xnode *n) {
  if (n->p.i0 == 0)
    return 0;
  size_t P = ccg__in(x, n, 1)->numel;
  size_t nch = (P + CCG__LOSS_CHUNK - 1) / CCG__LOSS_CHUNK;
  return (2 * P + 2 * nch) * sizeof(double);
}

ccg_status ccg__prep_loss(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *xv = ccg__in(x, n, 0), *tv = ccg__in(x, n, 1);
  if (!ccg_dtype_is_float(xv->dtype))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(xv->dtype));
  const char *red = NULL;
  CCG_CHECK(ccg__xattr_s(x, n, "reduction", &red));
  n->p.i0 = strcmp(red, "none") == 0 ? 0 : strcmp(red, "sum") == 0 ? 1 : 2;
  const ccg_attr *ii = ccg_node_attr(x->g, n->id, "ignore_index");
  n->p.axis = ii != NULL;
  n->p.i1 = ii ? ii->i : 0;
  n->p.i2 = xv->dims[1];
  int64_t D = 1;
  for (int d = 2; d < xv->rank; d++)
    D *= xv->dims[d];
  n->p.i3 = D;
  if ((size_t)(xv->dims[0] * D) != tv->numel)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "target has %zu elements; the input gives %lld",
                      tv->numel, (long long)(xv->dims[0] * D));
  const ccg__xval *w = ccg__loss_weight(x, n);
  if (w && (w->rank != 1 || w->dims[0] != xv->dims[1]))
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "weight has %zu elements; the input has %lld classes",
                      w->numel, (long long)xv->dims[1]);
  n->scratch = ccg__loss_scratch(x, n);
  n->run = run_loss;
  return CCG_STATUS_OK;
}
