/* CPU kernels of the vision family. Conv is im2col + OpenBLAS sgemm per
 * image and group; ConvTranspose is sgemm + col2im (a gather over the
 * window taps, so no two writers meet); the pools walk their windows. The
 * index math is vision_math.h, shared with the CUDA kernels. f16, bf16 and
 * f64 convolutions compute in f32 (converted in the node's scratch). */
#include <cblas.h>
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/vision.h"

const ccg__win *ccg__win_of(const ccg__xnode *n) {
  return (const ccg__win *)(const void *)n->p.list;
}

static const float *as_f32(const ccg__xval *v, float **scratch) {
  if (v->dtype == CCG_DTYPE_F32)
    return v->ptr;
  float *dst = *scratch;
  ccg__load_f32(v->dtype, v->ptr, 0, 1, v->numel, dst);
  *scratch += v->numel;
  return dst;
}

static ccg_status run_conv(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  const ccg__xval *xv = ccg__in(x, n, 0), *wv = ccg__in(x, n, 1);
  const ccg__xval *bv = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *yv = ccg__out(x, n, 0);
  float *scr = x->scratch;
  const float *xs = as_f32(xv, &scr), *ws = as_f32(wv, &scr);
  const float *bs = bv ? as_f32(bv, &scr) : NULL;
  float *y = yv->dtype == CCG_DTYPE_F32 ? yv->ptr : scr;
  if (y != yv->ptr)
    scr += yv->numel;
  float *col = scr;
  int64_t G = w->group, cg = w->cbig / G, mg = w->csmall / G;
  int64_t rows = cg * w->nk;
  for (int64_t b = 0; b < w->batch; b++)
    for (int64_t g = 0; g < G; g++) {
      const float *xg = xs + (b * w->cbig + g * cg) * w->nbig;
      float *yg = y + (b * w->csmall + g * mg) * w->nsmall;
      for (int64_t j = 0; j < rows * w->nsmall; j++)
        col[j] = (float)ccg__im2col_elem(w, CCG_DTYPE_F32, xg, 0, j);
      if (rows == 0) {
        memset(yg, 0, (size_t)(mg * w->nsmall) * sizeof(float));
        continue;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mg,
                  (int)w->nsmall, (int)rows, 1.0f, ws + g * mg * rows,
                  (int)rows, col, (int)w->nsmall, 0.0f, yg, (int)w->nsmall);
    }
  if (bs)
    for (int64_t b = 0; b < w->batch; b++)
      for (int64_t m = 0; m < w->csmall; m++) {
        float *row = y + (b * w->csmall + m) * w->nsmall;
        for (int64_t o = 0; o < w->nsmall; o++)
          row[o] += bs[m];
      }
  if (y != yv->ptr)
    ccg__store_f32(yv->dtype, yv->ptr, 0, yv->numel, y);
  return CCG_STATUS_OK;
}

static ccg_status run_conv_transpose(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  const ccg__xval *xv = ccg__in(x, n, 0), *wv = ccg__in(x, n, 1);
  const ccg__xval *bv = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *yv = ccg__out(x, n, 0);
  float *scr = x->scratch;
  const float *xs = as_f32(xv, &scr), *ws = as_f32(wv, &scr);
  const float *bs = bv ? as_f32(bv, &scr) : NULL;
  float *y = yv->dtype == CCG_DTYPE_F32 ? yv->ptr : scr;
  if (y != yv->ptr)
    scr += yv->numel;
  float *col = scr;
  int64_t G = w->group, cg = w->csmall / G, mg = w->cbig / G;
  int64_t rows = mg * w->nk;
  for (int64_t b = 0; b < w->batch; b++)
    for (int64_t g = 0; g < G; g++) {
      const float *xg = xs + (b * w->csmall + g * cg) * w->nsmall;
      float *yg = y + (b * w->cbig + g * mg) * w->nbig;
      if (cg > 0 && rows > 0 && w->nsmall > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows,
                    (int)w->nsmall, (int)cg, 1.0f, ws + g * cg * rows,
                    (int)rows, xg, (int)w->nsmall, 0.0f, col, (int)w->nsmall);
      else
        memset(col, 0, (size_t)(rows * w->nsmall) * sizeof(float));
      for (int64_t m = 0; m < mg; m++) {
        float bias = bs ? bs[g * mg + m] : 0.0f;
        for (int64_t p = 0; p < w->nbig; p++)
          yg[m * w->nbig + p] =
              bias + (float)ccg__col2im_elem(w, CCG_DTYPE_F32, col, m, p);
      }
    }
  if (y != yv->ptr)
    ccg__store_f32(yv->dtype, yv->ptr, 0, yv->numel, y);
  return CCG_STATUS_OK;
}

static ccg_status run_pool(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  const ccg__xval *xv = ccg__in(x, n, 0), *yv = ccg__out(x, n, 0);
  const ccg__xval *iv =
      n->n_out > 1 && n->out[1] != CCG_NONE ? ccg__out(x, n, 1) : NULL;
  int64_t planes = w->batch * w->cbig;
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t o = 0; o < w->nsmall; o++) {
      size_t j = (size_t)(pl * w->nsmall + o), off = (size_t)(pl * w->nbig);
      double v;
      if (n->op == CCG_OP_AVERAGE_POOL || n->op == CCG_OP_GLOBAL_AVERAGE_POOL) {
        v = ccg__avgpool_elem(w, xv->dtype, xv->ptr, off, o);
      } else {
        int64_t arg;
        v = ccg__maxpool_elem(w, xv->dtype, xv->ptr, off, o, &arg);
        if (iv)
          ((int64_t *)iv->ptr)[j] = arg < 0 ? -1 : ccg__pool_index(w, pl, arg);
      }
      ccg__vis_store(yv->dtype, yv->ptr, j, v);
    }
  return CCG_STATUS_OK;
}

/* ---- preparation --------------------------------------------------------- */

static ccg_status win_ints(ccg_exec *x, const ccg__xnode *n, const char *name,
                           int cnt, int64_t def, int64_t *out) {
  const int64_t *v;
  size_t k = ccg__xattr_ints(x, n, name, &v);
  for (int i = 0; i < cnt; i++)
    out[i] = k == (size_t)cnt ? v[i] : def;
  if (k != 0 && k != (size_t)cnt)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "%s has %zu entries; expected %d", name, k, cnt);
  return CCG_STATUS_OK;
}

static ccg_status autopad_of(ccg_exec *x, const ccg__xnode *n,
                             ccg__autopad *ap) {
  const char *s;
  CCG_CHECK(ccg__xattr_s(x, n, "auto_pad", &s));
  *ap = strcmp(s, "SAME_UPPER") == 0   ? CCG__PAD_SAME_UPPER
        : strcmp(s, "SAME_LOWER") == 0 ? CCG__PAD_SAME_LOWER
        : strcmp(s, "VALID") == 0      ? CCG__PAD_VALID
                                       : CCG__PAD_NOTSET;
  return CCG_STATUS_OK;
}

/* The window geometry from the bound shapes: the pads come from the
 * attributes and the sizes the shape rule gave (vision_math.h's rules). */
static ccg_status win_prep(ccg_exec *x, const ccg__xnode *n, ccg__win *w) {
  const ccg__xval *xv = ccg__in(x, n, 0), *yv = ccg__out(x, n, 0);
  bool t = n->op == CCG_OP_CONV_TRANSPOSE;
  bool global =
      n->op == CCG_OP_GLOBAL_AVERAGE_POOL || n->op == CCG_OP_GLOBAL_MAX_POOL;
  const ccg__xval *bigv = t ? yv : xv, *smallv = t ? xv : yv;
  memset(w, 0, sizeof *w);
  if (xv->rank < 3 || yv->rank != xv->rank)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE, "X has rank %d; expected >= 3",
                      xv->rank);
  int nsp = w->nsp = xv->rank - 2;
  w->batch = xv->dims[0];
  w->cbig = bigv->dims[1];
  w->csmall = smallv->dims[1];
  w->group = 1;
  w->nbig = w->nsmall = w->nk = 1;
  for (int d = 0; d < nsp; d++) {
    w->big[d] = bigv->dims[d + 2];
    w->small[d] = smallv->dims[d + 2];
    w->nbig *= w->big[d];
    w->nsmall *= w->small[d];
  }
  if (global) {
    for (int d = 0; d < nsp; d++) {
      w->k[d] = w->big[d];
      w->st[d] = w->dil[d] = 1;
      w->nk *= w->k[d];
    }
    return CCG_STATUS_OK;
  }
  ccg__autopad ap;
  CCG_CHECK(autopad_of(x, n, &ap));
  int64_t pads[2 * CCG_MAX_RANK], opad[CCG_MAX_RANK];
  CCG_CHECK(win_ints(x, n, "kernel_shape", nsp, 0, w->k));
  CCG_CHECK(win_ints(x, n, "strides", nsp, 1, w->st));
  CCG_CHECK(win_ints(x, n, "dilations", nsp, 1, w->dil));
  CCG_CHECK(win_ints(x, n, "pads", 2 * nsp, 0, pads));
  if (n->op == CCG_OP_CONV || t) {
    const ccg__xval *wv = ccg__in(x, n, 1);
    CCG_CHECK(ccg__xattr_i(x, n, "group", &w->group));
    for (int d = 0; d < nsp; d++)
      w->k[d] = wv->dims[d + 2];
  }
  for (int d = 0; d < nsp; d++)
    w->nk *= w->k[d];
  if (t) {
    const int64_t *os;
    bool given = ccg__xattr_ints(x, n, "output_shape", &os) > 0 ||
                 ap == CCG__PAD_SAME_UPPER || ap == CCG__PAD_SAME_LOWER;
    CCG_CHECK(win_ints(x, n, "output_padding", nsp, 0, opad));
    for (int d = 0; d < nsp; d++) {
      int64_t total = w->st[d] * (w->small[d] - 1) + opad[d] +
                      ccg__win_extent(w->k[d], w->dil[d]) - w->big[d];
      if (given)
        ccg__convt_pads(ap, total, &w->pad[d], &w->pad_end[d]);
      else
        w->pad[d] = ap == CCG__PAD_VALID ? 0 : pads[d];
    }
    return CCG_STATUS_OK;
  }
  int64_t ceil_mode = 0;
  if (n->op != CCG_OP_CONV)
    CCG_CHECK(ccg__xattr_i(x, n, "ceil_mode", &ceil_mode));
  for (int d = 0; d < nsp; d++) {
    w->pad[d] = pads[d];
    w->pad_end[d] = pads[nsp + d];
    int64_t o =
        ccg__win_out_size(ap, ceil_mode != 0, w->big[d], w->k[d], w->st[d],
                          w->dil[d], &w->pad[d], &w->pad_end[d]);
    if (o != w->small[d])
      return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                        "spatial dim %d: the windows give %lld outputs, the "
                        "output has %lld",
                        d, (long long)o, (long long)w->small[d]);
  }
  return CCG_STATUS_OK;
}

static ccg_status vision_prep_win(ccg_exec *x, ccg__xnode *n) {
  ccg__win *w = ccg__arena_calloc(&x->arena, 1, sizeof *w);
  if (!w)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  CCG_CHECK(win_prep(x, n, w));
  if (n->op == CCG_OP_AVERAGE_POOL) {
    int64_t cip;
    CCG_CHECK(ccg__xattr_i(x, n, "count_include_pad", &cip));
    w->include_pad = cip != 0;
  } else if (n->op == CCG_OP_MAX_POOL) {
    int64_t so;
    CCG_CHECK(ccg__xattr_i(x, n, "storage_order", &so));
    w->col_major = so != 0;
  }
  n->p.list = (const int64_t *)(const void *)w;
  n->p.n_list = 0;
  return CCG_STATUS_OK;
}

static ccg_status prep_conv(ccg_exec *x, ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  bool t = n->op == CCG_OP_CONV_TRANSPOSE;
  int64_t G = w->group;
  if (w->cbig % G || w->csmall % G)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "channels %lld and %lld are not multiples of group %lld",
                      (long long)w->cbig, (long long)w->csmall, (long long)G);
  int64_t rows = (t ? w->cbig / G : w->cbig / G) * w->nk;
  int64_t kdim = t ? w->csmall / G : rows;
  if (rows > INT32_MAX || w->nsmall > INT32_MAX || kdim > INT32_MAX ||
      w->csmall > INT32_MAX)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "the column matrix [%lld, %lld] exceeds the BLAS index "
                      "range",
                      (long long)rows, (long long)w->nsmall);
  size_t s = (size_t)(rows * w->nsmall) * sizeof(float);
  for (uint32_t i = 0; i < n->n_in; i++) {
    const ccg__xval *v = ccg__in(x, n, i);
    if (v && v->dtype != CCG_DTYPE_F32)
      s += v->numel * sizeof(float);
  }
  const ccg__xval *y = ccg__out(x, n, 0);
  if (y->dtype != CCG_DTYPE_F32)
    s += y->numel * sizeof(float);
  n->scratch = s;
  n->run = t ? run_conv_transpose : run_conv;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_vision(ccg_exec *x, ccg__xnode *n) {
  ccg_dtype dt = ccg__in(x, n, 0)->dtype;
  bool ok =
      ccg_dtype_is_float(dt) ||
      (n->op == CCG_OP_MAX_POOL && (dt == CCG_DTYPE_I8 || dt == CCG_DTYPE_U8));
  if (!ok)
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(dt));
  switch (n->op) {
  case CCG_OP_CONV:
  case CCG_OP_CONV_TRANSPOSE:
    CCG_CHECK(vision_prep_win(x, n));
    return prep_conv(x, n);
  case CCG_OP_MAX_POOL:
  case CCG_OP_AVERAGE_POOL:
  case CCG_OP_GLOBAL_AVERAGE_POOL:
  case CCG_OP_GLOBAL_MAX_POOL:
    CCG_CHECK(vision_prep_win(x, n));
    n->run = run_pool;
    return CCG_STATUS_OK;
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
  }
}
