/* CPU kernels of the vision family. Conv is im2col + OpenBLAS sgemm per
 * image and group; ConvTranspose is sgemm + col2im (a gather over the
 * window taps, so no two writers meet); the pools walk their windows. The
 * index math is vision_math.h, shared with the CUDA kernels. f16 and bf16
 * convolutions go through sgemm on f32 copies; f64 ones take a direct loop
 * in double over the same column matrix (f64 keeps its precision, which
 * the gradient checks rely on). */
#include <math.h>
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/vision.h"

const ccg__win *ccg__win_of(const ccg__xnode *n) {
  return (const ccg__win *)(const void *)n->p.list;
}

/* Element i of input `in` (absent: 0). */
static double ld(const ccg__xval *v, size_t i) {
  return v ? ccg__ld_f64(v->dtype, v->ptr, i) : 0.0;
}

/* f32 data of v: its own, or converted into the scratch at *scr. */
static const float *f32_of(const ccg__xval *v, float **scr) {
  if (v->dtype == CCG_DTYPE_F32)
    return v->ptr;
  float *dst = *scr;
  ccg__load_f32(v->dtype, v->ptr, 0, 1, v->numel, dst);
  *scr += v->numel;
  return dst;
}

/* Row `row` (channel c, tap kk) of one group's column matrix into dst, in
 * f32: ccg__im2col_elem's values (the CUDA kernel's), walked with an
 * odometer over the outer output dims instead of a division per element. */
static void im2col_row(const ccg__win *w, ccg_dtype dt, const void *x,
                       size_t xoff, int64_t row, float *dst) {
  int nsp = w->nsp, last = nsp - 1;
  int64_t kd[CCG_MAX_RANK], base[CCG_MAX_RANK], od[CCG_MAX_RANK] = {0};
  ccg__win_unflat(nsp, w->k, row % w->nk, kd);
  for (int d = 0; d < nsp; d++)
    base[d] = kd[d] * w->dil[d] - w->pad[d];
  size_t cx = xoff + (size_t)(row / w->nk * w->nbig);
  int64_t inner = w->small[last], bl = w->big[last], sl = w->st[last];
  for (int64_t o = 0; o < w->nsmall; o += inner) {
    bool ok = true;
    int64_t off = 0;
    for (int d = 0; d < last; d++) {
      int64_t p = od[d] * w->st[d] + base[d];
      ok = ok && p >= 0 && p < w->big[d];
      off = off * w->big[d] + p;
    }
    size_t at = cx + (size_t)(off * bl);
    for (int64_t i = 0; i < inner; i++) {
      int64_t p = i * sl + base[last];
      bool in = ok && p >= 0 && p < bl;
      dst[o + i] = !in                   ? 0.0f
                   : dt == CCG_DTYPE_F32 ? ((const float *)x)[at + (size_t)p]
                                         : ccg__ld_f32(dt, x, at + (size_t)p);
    }
    for (int d = last - 1; d >= 0; d--) {
      if (++od[d] < w->small[d])
        break;
      od[d] = 0;
    }
  }
}

/* f64 convolutions multiply in double, the others through sgemm. */
static bool conv_blas(ccg_dtype dt) { return dt != CCG_DTYPE_F64; }

static void conv_bias(const ccg__win *w, const ccg__xval *bv,
                      const ccg__xval *yv) {
  int64_t ns = w->nsmall;
  for (int64_t b = 0; b < w->batch; b++)
    for (int64_t m = 0; m < w->csmall; m++) {
      size_t off = (size_t)((b * w->csmall + m) * ns);
      double bias = ld(bv, (size_t)m);
      for (int64_t o = 0; o < ns; o++)
        ccg__st_f64(yv->dtype, yv->ptr, off + (size_t)o,
                    ld(yv, off + (size_t)o) + bias);
    }
}

/* Y_g [mg, ns] = W_g [mg, rows] col [rows, ns]; scratch: col, then W and
 * a Y block in f32 unless they are f32. */
static ccg_status run_conv(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  const ccg__xval *xv = ccg__in(x, n, 0), *wv = ccg__in(x, n, 1);
  const ccg__xval *bv = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *yv = ccg__out(x, n, 0);
  bool blas = conv_blas(yv->dtype), direct = yv->dtype == CCG_DTYPE_F32;
  int64_t G = w->group, cg = w->cbig / G, mg = w->csmall / G;
  int64_t rows = cg * w->nk, ns = w->nsmall;
  float *colf = x->scratch, *scr = colf + rows * ns;
  double *cold = x->scratch;
  const float *wf = blas ? f32_of(wv, &scr) : NULL;
  for (int64_t b = 0; b < w->batch; b++)
    for (int64_t g = 0; g < G; g++) {
      size_t xoff = (size_t)((b * w->cbig + g * cg) * w->nbig);
      size_t yoff = (size_t)((b * w->csmall + g * mg) * ns);
      for (int64_t r = 0; blas && r < rows; r++)
        im2col_row(w, xv->dtype, xv->ptr, xoff, r, colf + r * ns);
      for (int64_t j = 0; !blas && j < rows * ns; j++)
        cold[j] = ccg__im2col_elem(w, xv->dtype, xv->ptr, xoff, j);
      if (blas) {
        float *yf = direct ? (float *)yv->ptr + yoff : scr;
        ccg__gemm gm = CCG__GEMM_INIT;
        gm.m = mg;
        gm.n = ns;
        gm.k = rows;
        gm.lda = rows;
        gm.ldb = ns;
        gm.ldc = ns;
        gm.a = wf + g * mg * rows;
        gm.b = colf;
        gm.c = yf;
        ccg__sgemm(x, &gm);
        if (!direct)
          ccg__store_f32(yv->dtype, yv->ptr, yoff, (size_t)(mg * ns), yf);
        continue;
      }
      for (int64_t m = 0; m < mg; m++)
        for (int64_t o = 0; o < ns; o++) {
          double acc = 0.0;
          for (int64_t r = 0; r < rows; r++)
            acc += ld(wv, (size_t)((g * mg + m) * rows + r)) * cold[r * ns + o];
          ccg__st_f64(yv->dtype, yv->ptr, yoff + (size_t)(m * ns + o), acc);
        }
    }
  if (bv)
    conv_bias(w, bv, yv);
  return CCG_STATUS_OK;
}

/* col [mg*nk, ns] = W_g^T X_g, then col2im; scratch: col, then W and an X
 * block in f32 unless they are f32. */
static ccg_status run_conv_transpose(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  const ccg__xval *xv = ccg__in(x, n, 0), *wv = ccg__in(x, n, 1);
  const ccg__xval *bv = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *yv = ccg__out(x, n, 0);
  bool blas = conv_blas(yv->dtype), direct = yv->dtype == CCG_DTYPE_F32;
  ccg_dtype cdt = blas ? CCG_DTYPE_F32 : CCG_DTYPE_F64;
  int64_t G = w->group, cg = w->csmall / G, mg = w->cbig / G;
  int64_t rows = mg * w->nk, ns = w->nsmall;
  float *colf = x->scratch, *scr = colf + rows * ns;
  double *cold = x->scratch;
  const float *wf = blas ? f32_of(wv, &scr) : NULL;
  for (int64_t b = 0; b < w->batch; b++)
    for (int64_t g = 0; g < G; g++) {
      size_t xoff = (size_t)((b * w->csmall + g * cg) * ns);
      size_t yoff = (size_t)((b * w->cbig + g * mg) * w->nbig);
      if (blas && cg > 0 && rows > 0 && ns > 0) {
        const float *xf = (const float *)xv->ptr + xoff;
        if (!direct) {
          ccg__load_f32(xv->dtype, xv->ptr, xoff, 1, (size_t)(cg * ns), scr);
          xf = scr;
        }
        ccg__gemm gm = CCG__GEMM_INIT;
        gm.ta = true;
        gm.m = rows;
        gm.n = ns;
        gm.k = cg;
        gm.lda = rows;
        gm.ldb = ns;
        gm.ldc = ns;
        gm.a = wf + g * cg * rows;
        gm.b = xf;
        gm.c = colf;
        ccg__sgemm(x, &gm);
      } else if (blas) {
        memset(colf, 0, (size_t)(rows * ns) * sizeof(float));
      } else {
        for (int64_t r = 0; r < rows; r++)
          for (int64_t i = 0; i < ns; i++) {
            double acc = 0.0;
            for (int64_t c = 0; c < cg; c++)
              acc += ld(wv, (size_t)((g * cg + c) * rows + r)) *
                     ld(xv, xoff + (size_t)(c * ns + i));
            cold[r * ns + i] = acc;
          }
      }
      for (int64_t m = 0; m < mg; m++) {
        double bias = ld(bv, (size_t)(g * mg + m));
        for (int64_t p = 0; p < w->nbig; p++)
          ccg__st_f64(yv->dtype, yv->ptr, yoff + (size_t)(m * w->nbig + p),
                      bias + ccg__col2im_elem(w, cdt, x->scratch, m, p));
      }
    }
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
  int64_t rows = w->cbig / G * w->nk; /* both: big channels x taps */
  int64_t kdim = t ? w->csmall / G : rows;
  if (rows > INT32_MAX || w->nsmall > INT32_MAX || kdim > INT32_MAX ||
      w->csmall > INT32_MAX)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "the column matrix [%lld, %lld] exceeds the BLAS index "
                      "range",
                      (long long)rows, (long long)w->nsmall);
  /* the column matrix of one image and group (f32 for BLAS, double for
   * f64), then f32 copies of W and of one group's X or Y block */
  const ccg__xval *y = ccg__out(x, n, 0), *wv = ccg__in(x, n, 1);
  bool blas = conv_blas(y->dtype);
  size_t s = (size_t)(rows * w->nsmall) * (blas ? sizeof(float) : 8);
  if (blas && y->dtype != CCG_DTYPE_F32) {
    int64_t blk = w->csmall / G * w->nsmall; /* Conv: Y, ConvT: X */
    s += (wv->numel + (size_t)blk) * sizeof(float);
  }
  n->scratch = s;
  n->run = t ? run_conv_transpose : run_conv;
  return CCG_STATUS_OK;
}

/* ---- Resize ------------------------------------------------------------ */

const ccg__rsz *ccg__rsz_of(const ccg__xnode *n) {
  return (const ccg__rsz *)(const void *)n->p.list;
}

ccg__rsz ccg__rsz_with_roi(const ccg_exec *x, const ccg__xnode *n,
                           const void *roi) {
  ccg__rsz r = *ccg__rsz_of(n);
  r.roi_p = roi;
  r.roi_dt = (int)ccg__in(x, n, 1)->dtype;
  r.roi_na = (int)n->p.i0;
  for (int i = 0; i < r.roi_na; i++)
    r.roi_axis[i] = (int)n->p.perm[i];
  return r;
}

static ccg_status run_resize(ccg_exec *x, const ccg__xnode *n) {
  const ccg__rsz *r = ccg__rsz_of(n);
  const ccg__xval *xv = ccg__in(x, n, 0), *yv = ccg__out(x, n, 0);
  ccg__rsz with_roi;
  if (n->p.i0 > 0) { /* roi from this run's data */
    with_roi = ccg__rsz_with_roi(x, n, ccg__in(x, n, 1)->ptr);
    r = &with_roi;
  }
  for (size_t j = 0; j < yv->numel; j++)
    ccg__st_f64(yv->dtype, yv->ptr, j,
                ccg__resize_elem(r, xv->dtype, xv->ptr, (int64_t)j));
  return CCG_STATUS_OK;
}

/* Input i's graph data (an initializer or Constant), or NULL when it is
 * absent, empty or computed at run time. */
static const ccg__xval *static_in(ccg_exec *x, const ccg__xnode *n,
                                  uint32_t i) {
  const ccg__xval *v = i < n->n_in ? ccg__in(x, n, i) : NULL;
  return v && v->numel > 0 ? v : NULL;
}

static ccg_status need_static(ccg_exec *x, const ccg__xnode *n,
                              const ccg__xval *v, const char *what) {
  if (v->kind == CCG__V_STATIC && v->init)
    return CCG_STATUS_OK;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                    "input '%s' is fed or computed at run time; give an "
                    "initializer or Constant",
                    what);
}

static ccg_status resize_enums(ccg_exec *x, const ccg__xnode *n, int *e) {
  static const char *const attrs[4] = {"mode", "coordinate_transformation_mode",
                                       "nearest_mode",
                                       "keep_aspect_ratio_policy"};
  for (int i = 0; i < 4; i++) {
    const char *s;
    CCG_CHECK(ccg__xattr_s(x, n, attrs[i], &s));
    if ((e[i] = ccg__rsz_parse(i, s)) < 0)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "%s '%s' is not known",
                        attrs[i], s);
  }
  return CCG_STATUS_OK;
}

/* sizes' entry i: graph data, or the known contents of a program that
 * run-time specialization compiled for the sizes a run fed (the program
 * serves only runs that feed the same). */
static bool size_entry(ccg_exec *x, const ccg__xnode *n, const ccg__xval *sz,
                       int i, int64_t *v) {
  ccg_dim k[CCG_MAX_RANK];
  if (sz->kind == CCG__V_STATIC && sz->init) {
    *v = ccg__ld_i64(sz->dtype, sz->init, (size_t)i);
    return true;
  }
  if (ccg_value_known(x->g, n->in[3], k) <= i || ccg_dim_is_sym(k[i]))
    return false;
  *v = k[i].size;
  return true;
}

/* scales' data: graph data, or a specialized program's copy of what the
 * run fed (the program serves only runs that feed the same). */
static const void *scales_data(ccg_exec *x, const ccg__xnode *n,
                               const ccg__xval *sc) {
  if (sc->kind == CCG__V_STATIC)
    return sc->init;
  const ccg_tensor *t = ccg_value_data(x->g, n->in[2]);
  return t && t->dtype == sc->dtype ? t->data : NULL;
}

/* Per resized dim the factor the coordinates use: the scales, or
 * sizes / input (one factor for all under keep_aspect_ratio_policy). */
static ccg_status resize_scales(ccg_exec *x, const ccg__xnode *n, ccg__rsz *r,
                                const int *axes, int na, int policy) {
  const ccg__xval *sz = static_in(x, n, 3), *sc = static_in(x, n, 2);
  if (sz && policy != 0) {
    double s = policy == 1 ? INFINITY : 0;
    for (int i = 0; i < na; i++) {
      int64_t e;
      if (!size_entry(x, n, sz, i, &e))
        return need_static(x, n, sz, "sizes");
      double q = (double)e / (double)r->in[axes[i]];
      s = policy == 1 ? fmin(s, q) : fmax(s, q);
    }
    for (int i = 0; i < na; i++)
      r->scale[axes[i]] = s;
  } else if (sz) {
    for (int i = 0; i < na; i++)
      r->scale[axes[i]] = (double)r->out[axes[i]] / (double)r->in[axes[i]];
  } else if (sc) {
    const void *d = scales_data(x, n, sc);
    if (!d)
      return need_static(x, n, sc, "scales");
    if (sc->numel != (size_t)na)
      return ccg__xfail(x, n, CCG_STATUS_SHAPE, "scales has %zu entries",
                        sc->numel);
    for (int i = 0; i < na; i++)
      r->scale[axes[i]] = ccg__ld_f64(sc->dtype, d, (size_t)i);
  } else {
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "neither scales nor sizes is given");
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_resize(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *xv = ccg__in(x, n, 0), *yv = ccg__out(x, n, 0);
  ccg__rsz *r = ccg__arena_calloc(&x->arena, 1, sizeof *r);
  if (!r)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  int e[4], axes[CCG_MAX_RANK], na = 0;
  CCG_CHECK(resize_enums(x, n, e));
  r->mode = e[0];
  r->ctm = e[1];
  r->nearest = e[2];
  r->rank = xv->rank;
  float a, ext;
  int64_t excl;
  CCG_CHECK(ccg__xattr_f(x, n, "cubic_coeff_a", &a));
  CCG_CHECK(ccg__xattr_f(x, n, "extrapolation_value", &ext));
  CCG_CHECK(ccg__xattr_i(x, n, "exclude_outside", &excl));
  r->cubic_a = a;
  r->extrapolation = ext;
  r->exclude_outside = excl != 0;
  for (int d = 0; d < r->rank; d++) {
    r->in[d] = xv->dims[d];
    r->out[d] = yv->dims[d];
    r->scale[d] = 1.0;
    r->roi_lo[d] = 0.0;
    r->roi_hi[d] = 1.0;
  }
  const int64_t *av;
  size_t k = ccg__xattr_ints(x, n, "axes", &av);
  for (int i = 0; i < (k ? (int)k : r->rank); i++)
    if (k)
      CCG_CHECK(ccg__xaxis(x, n, av[i], r->rank, &axes[na++]));
    else
      axes[na++] = i;
  CCG_CHECK(resize_scales(x, n, r, axes, na, e[3]));
  const ccg__xval *roi = static_in(x, n, 1);
  n->p.i0 = 0;
  if (r->ctm == CCG__CTM_TF_CROP_AND_RESIZE && roi) {
    if (roi->numel != 2 * (size_t)na)
      return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                        "roi has %zu entries; expected %d", roi->numel, 2 * na);
    /* roi sets no size: a fed or computed one is read by each run */
    if (roi->kind != CCG__V_STATIC || !roi->init) {
      n->p.i0 = na;
      memcpy(n->p.perm, axes, sizeof axes);
    }
    for (int i = 0; i < na && !n->p.i0; i++) {
      r->roi_lo[axes[i]] = ccg__ld_f64(roi->dtype, roi->init, (size_t)i);
      r->roi_hi[axes[i]] = ccg__ld_f64(roi->dtype, roi->init, (size_t)(na + i));
    }
  }
  n->p.list = (const int64_t *)(const void *)r;
  n->p.n_list = 0;
  n->run = run_resize;
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
  case CCG_OP_RESIZE:
    return prep_resize(x, n);
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
  }
}
