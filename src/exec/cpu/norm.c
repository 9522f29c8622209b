/* Softmax (max-subtracted, sums in double) and LayerNormalization (two-pass
 * mean and variance in double, with the optional mean and inverse standard
 * deviation outputs). Any float dtype; math in f32/double. */
#include <string.h>

#include "exec/cpu/cpu.h"

/* ---- Softmax ------------------------------------------------------------ */

/* i0 = outer, i1 = axis length, i2 = inner. */
static ccg_status run_softmax(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t outer = (size_t)n->p.i0, len = (size_t)n->p.i1,
         inner = (size_t)n->p.i2;
  for (size_t oi = 0; oi < outer; oi++)
    for (size_t ii = 0; ii < inner; ii++)
      ccg__softmax_line(a->dtype, a->ptr, o->dtype, o->ptr,
                        oi * len * inner + ii, len, inner);
  return CCG_STATUS_OK;
}

static ccg_status prep_softmax(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis;
  int ax;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &ax));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; d++)
    outer *= a->dims[d];
  for (int d = ax + 1; d < a->rank; d++)
    inner *= a->dims[d];
  n->p.i0 = outer;
  n->p.i1 = a->rank ? a->dims[ax] : 1;
  n->p.i2 = inner;
  n->run = run_softmax;
  return CCG_STATUS_OK;
}

/* ---- LayerNormalization ------------------------------------------------- */

/* Expands a scale or bias value to the normalized shape (dims[axis:]) as
 * f32, following ONNX broadcasting. */
static void expand_param(const ccg__xval *p, const ccg__xval *xv, int axis,
                         float *dst) {
  int r = xv->rank - axis;
  int64_t st[CCG_MAX_RANK];
  size_t total = ccg__param_strides(p->rank, p->dims, r, xv->dims + axis, st);
  for (size_t j = 0; j < total; j++)
    dst[j] =
        ccg__ld_f32(p->dtype, p->ptr,
                    (size_t)ccg__strided_offset(r, xv->dims + axis, st, 0, j));
}

/* i0 = outer, i1 = normalized size, axis; f0 = epsilon. Scratch: scale
 * and bias (f32 each). */
static ccg_status run_layer_norm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *sc = ccg__in(x, n, 1);
  const ccg__xval *bi = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *o = ccg__out(x, n, 0);
  const ccg__xval *mo =
      n->n_out > 1 && n->out[1] != CCG_NONE ? ccg__out(x, n, 1) : NULL;
  const ccg__xval *io =
      n->n_out > 2 && n->out[2] != CCG_NONE ? ccg__out(x, n, 2) : NULL;
  size_t outer = (size_t)n->p.i0, len = (size_t)n->p.i1;
  float *scale = x->scratch, *bias = scale + len;
  expand_param(sc, a, n->p.axis, scale);
  if (bi)
    expand_param(bi, a, n->p.axis, bias);
  else
    memset(bias, 0, len * sizeof(float));
  for (size_t oi = 0; oi < outer; oi++) {
    float m, invstd;
    ccg__layer_norm_line(a->dtype, a->ptr, o->dtype, o->ptr, oi, len, scale,
                         bias, n->p.f0, &m, &invstd);
    if (mo)
      ccg__st_f32(mo->dtype, mo->ptr, oi, m);
    if (io)
      ccg__st_f32(io->dtype, io->ptr, oi, invstd);
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_layer_norm(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis;
  int ax;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xattr_f(x, n, "epsilon", &n->p.f0));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &ax));
  int64_t outer = 1, len = 1;
  for (int d = 0; d < ax; d++)
    outer *= a->dims[d];
  for (int d = ax; d < a->rank; d++)
    len *= a->dims[d];
  n->p.axis = ax;
  n->p.i0 = outer;
  n->p.i1 = len;
  n->scratch = (size_t)len * 2 * sizeof(float);
  n->run = run_layer_norm;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_norm(ccg_exec *x, ccg__xnode *n) {
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  if (!ccg_dtype_is_float(dt))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(dt));
  return n->op == CCG_OP_SOFTMAX ? prep_softmax(x, n) : prep_layer_norm(x, n);
}
