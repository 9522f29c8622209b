/* Softmax (max-subtracted, sums in double) and LayerNormalization (two-pass
 * mean and variance in double, with the optional mean and inverse standard
 * deviation outputs). Any float dtype; math in f32/double. */
#include <string.h>

#include "exec/cpu/cpu.h"

/* ---- Softmax ------------------------------------------------------------ */

/* i0 = outer, i1 = axis length, i2 = inner. Scratch: one f32 row. */
static ccg_status run_softmax(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t outer = (size_t)n->p.i0, len = (size_t)n->p.i1,
         inner = (size_t)n->p.i2;
  float *row = x->scratch;
  for (size_t oi = 0; oi < outer; oi++) {
    for (size_t ii = 0; ii < inner; ii++) {
      size_t base = oi * len * inner + ii;
      if (inner == 1)
        ccg__load_f32(a->dtype, a->ptr, base, 1, len, row);
      else
        for (size_t k = 0; k < len; k++)
          ccg__load_f32(a->dtype, a->ptr, base + k * inner, 0, 1, row + k);
      float mx = row[0];
      for (size_t k = 1; k < len; k++)
        mx = row[k] > mx ? row[k] : mx;
      double sum = 0.0;
      for (size_t k = 0; k < len; k++) {
        row[k] = expf(row[k] - mx);
        sum += row[k];
      }
      float inv = (float)(1.0 / sum);
      for (size_t k = 0; k < len; k++)
        row[k] *= inv;
      if (inner == 1)
        ccg__store_f32(o->dtype, o->ptr, base, len, row);
      else
        for (size_t k = 0; k < len; k++)
          ccg__store_f32(o->dtype, o->ptr, base + k * inner, 1, row + k);
    }
  }
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
  n->scratch = (size_t)n->p.i1 * sizeof(float);
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
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) {
    int ip = d - (r - p->rank);
    int64_t size = ip >= 0 ? p->dims[ip] : 1;
    st[d] = size == 1 ? 0 : s;
    s *= size;
  }
  size_t total = 1;
  for (int d = 0; d < r; d++)
    total *= (size_t)xv->dims[axis + d];
  for (size_t j = 0; j < total; j++) {
    size_t rem = j, off = 0;
    for (int d = r - 1; d >= 0; d--) {
      size_t dim = (size_t)xv->dims[axis + d];
      off += (rem % dim) * (size_t)st[d];
      rem /= dim;
    }
    ccg__load_f32(p->dtype, p->ptr, off, 0, 1, dst + j);
  }
}

/* i0 = outer, i1 = normalized size, axis; f0 = epsilon. Scratch: row,
 * scale, bias (f32 each). */
static ccg_status run_layer_norm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *sc = ccg__in(x, n, 1);
  const ccg__xval *bi = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *o = ccg__out(x, n, 0);
  const ccg__xval *mo =
      n->n_out > 1 && n->out[1] != CCG_NONE ? ccg__out(x, n, 1) : NULL;
  const ccg__xval *io =
      n->n_out > 2 && n->out[2] != CCG_NONE ? ccg__out(x, n, 2) : NULL;
  size_t outer = (size_t)n->p.i0, len = (size_t)n->p.i1;
  float *row = x->scratch, *scale = row + len, *bias = scale + len;
  expand_param(sc, a, n->p.axis, scale);
  if (bi)
    expand_param(bi, a, n->p.axis, bias);
  else
    memset(bias, 0, len * sizeof(float));
  for (size_t oi = 0; oi < outer; oi++) {
    ccg__load_f32(a->dtype, a->ptr, oi * len, 1, len, row);
    double sum = 0.0;
    for (size_t k = 0; k < len; k++)
      sum += row[k];
    double mean = len ? sum / (double)len : 0.0, var = 0.0;
    for (size_t k = 0; k < len; k++) {
      double d = row[k] - mean;
      var += d * d;
    }
    var = len ? var / (double)len : 0.0;
    float invstd = (float)(1.0 / sqrt(var + (double)n->p.f0));
    float m = (float)mean;
    for (size_t k = 0; k < len; k++)
      row[k] = (row[k] - m) * invstd * scale[k] + bias[k];
    ccg__store_f32(o->dtype, o->ptr, oi * len, len, row);
    if (mo)
      ccg__store_f32(mo->dtype, mo->ptr, oi, 1, &m);
    if (io)
      ccg__store_f32(io->dtype, io->ptr, oi, 1, &invstd);
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
  n->scratch = (size_t)len * 3 * sizeof(float);
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
