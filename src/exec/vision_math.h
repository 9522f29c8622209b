/* Private: the window arithmetic of the vision family (Conv, ConvTranspose,
 * the pools), as static inline functions for the host and, under nvcc, the
 * device, so the CPU tests check what the CUDA kernels compute. The graph's
 * shape rules use the pad and size rules too, so both layers agree. */
#ifndef CCG_EXEC_VISION_MATH_H
#define CCG_EXEC_VISION_MATH_H

#include "exec/kernels_math.h"

/* auto_pad values. */
typedef enum ccg__autopad {
  CCG__PAD_NOTSET,
  CCG__PAD_SAME_UPPER,
  CCG__PAD_SAME_LOWER,
  CCG__PAD_VALID
} ccg__autopad;

/* One windowed op's geometry. The "big" side is where windows read: the
 * input of Conv and the pools, the output of ConvTranspose; the "small" side
 * has one element per window. Window k_d of small index o_d covers big
 * index o_d * st_d - pad_d + k_d * dil_d (pad: the begin pads, which the
 * executor may hold negative for ConvTranspose's output_shape). */
typedef struct ccg__win {
  int nsp; /* spatial dims */
  int64_t big[CCG_MAX_RANK], small[CCG_MAX_RANK], k[CCG_MAX_RANK];
  int64_t st[CCG_MAX_RANK], dil[CCG_MAX_RANK];
  int64_t pad[CCG_MAX_RANK], pad_end[CCG_MAX_RANK];
  int64_t nbig, nsmall, nk; /* products over the spatial dims */
  int64_t batch, cbig, csmall, group;
  /* pools: count_include_pad; MaxPool: storage_order */
  int include_pad, col_major;
} ccg__win;

/* Stores a pool's result in any of its dtypes (MaxPool takes i8 and u8). */
CCG_HD static inline void ccg__vis_store(ccg_dtype dt, void *p, size_t i,
                                         double v) {
  if (dt == CCG_DTYPE_I8 || dt == CCG_DTYPE_U8)
    ccg__st_i64(dt, p, i, ccg__f64_to_i64(v));
  else
    ccg__st_f64(dt, p, i, v);
}

/* The extent of a dilated kernel. */
CCG_HD static inline int64_t ccg__win_extent(int64_t k, int64_t dil) {
  return (k - 1) * dil + 1;
}

/* Conv's and the pools' output size of one dim, with the begin and end pads
 * (*pb, *pe: the pads attribute's on entry, the ones used on return);
 * -1 when the window does not fit. */
static inline int64_t ccg__win_out_size(ccg__autopad ap, bool ceil_mode,
                                        int64_t in, int64_t k, int64_t st,
                                        int64_t dil, int64_t *pb, int64_t *pe) {
  int64_t ext = ccg__win_extent(k, dil), o;
  switch (ap) {
  case CCG__PAD_SAME_UPPER:
  case CCG__PAD_SAME_LOWER: {
    o = (in + st - 1) / st;
    int64_t total = (o - 1) * st + ext - in;
    total = total > 0 ? total : 0;
    *pb = ap == CCG__PAD_SAME_UPPER ? total / 2 : total - total / 2;
    *pe = total - *pb;
    return o;
  }
  case CCG__PAD_VALID:
    *pb = *pe = 0;
    o = in - ext + 1;
    return o <= 0 ? -1 : (o + st - 1) / st;
  default:
    break;
  }
  int64_t span = in + *pb + *pe - ext;
  if (span < 0)
    return -1;
  o = (ceil_mode ? (span + st - 1) / st : span / st) + 1;
  /* a last window that starts in the end padding is dropped (PyTorch's and
   * ONNX's reference rule) */
  if (ceil_mode && (o - 1) * st >= in + *pb)
    o--;
  return o;
}

/* ConvTranspose's begin and end pads from its total padding (stride (in-1)
 * + output_padding + extent - out), as ONNX says: SAME_UPPER puts the odd
 * one at the end, the others at the start. The halves round down, so a
 * negative total (an output_shape past the full size) grows the end. */
static inline void ccg__convt_pads(ccg__autopad ap, int64_t total, int64_t *pb,
                                   int64_t *pe) {
  int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
  *pb = ap == CCG__PAD_SAME_UPPER ? half : total - half;
  *pe = total - *pb;
}

/* Splits flat spatial index i over dims (last fastest) into c. */
CCG_HD static inline void ccg__win_unflat(int nsp, const int64_t *dims,
                                          int64_t i, int64_t *c) {
  for (int d = nsp - 1; d >= 0; d--) {
    c[d] = i % dims[d];
    i /= dims[d];
  }
}

/* The big-side flat index window tap kk of small index o reads, or -1 where
 * it falls in the padding. */
CCG_HD static inline int64_t ccg__win_src(const ccg__win *w, int64_t o,
                                          int64_t kk) {
  int64_t pos = 0, m = 1;
  for (int d = w->nsp - 1; d >= 0; d--) {
    int64_t od = o % w->small[d], kd = kk % w->k[d];
    o /= w->small[d];
    kk /= w->k[d];
    int64_t p = od * w->st[d] - w->pad[d] + kd * w->dil[d];
    if (p < 0 || p >= w->big[d])
      return -1;
    pos += p * m;
    m *= w->big[d];
  }
  return pos;
}

/* The small-side flat index whose window tap kk lands on big index p, or
 * -1 (the inverse of ccg__win_src: ConvTranspose's col2im, the pools'
 * gradients). */
CCG_HD static inline int64_t ccg__win_dst(const ccg__win *w, int64_t p,
                                          int64_t kk) {
  int64_t o = 0, m = 1;
  for (int d = w->nsp - 1; d >= 0; d--) {
    int64_t pd = p % w->big[d], kd = kk % w->k[d];
    p /= w->big[d];
    kk /= w->k[d];
    int64_t t = pd + w->pad[d] - kd * w->dil[d];
    if (t < 0 || t % w->st[d] != 0 || t / w->st[d] >= w->small[d])
      return -1;
    o += (t / w->st[d]) * m;
    m *= w->small[d];
  }
  return o;
}

/* im2col: element j of the column matrix [cin * nk, nsmall] of one image
 * and group (x: that group's first channel). */
CCG_HD static inline double ccg__im2col_elem(const ccg__win *w, ccg_dtype dt,
                                             const void *x, size_t xoff,
                                             int64_t j) {
  int64_t o = j % w->nsmall, row = j / w->nsmall;
  int64_t c = row / w->nk, kk = row % w->nk;
  int64_t pos = ccg__win_src(w, o, kk);
  return pos < 0 ? 0.0 : ccg__ld_f64(dt, x, xoff + (size_t)(c * w->nbig + pos));
}

/* col2im: big element p of channel m (within its group) from the column
 * matrix [cout * nk, nsmall] (f32 or the col's dtype). */
CCG_HD static inline double ccg__col2im_elem(const ccg__win *w, ccg_dtype dt,
                                             const void *col, int64_t m,
                                             int64_t p) {
  double acc = 0.0;
  for (int64_t kk = 0; kk < w->nk; kk++) {
    int64_t o = ccg__win_dst(w, p, kk);
    if (o >= 0)
      acc += ccg__ld_f64(dt, col, (size_t)((m * w->nk + kk) * w->nsmall + o));
  }
  return acc;
}

/* Storage index of big element pos of plane `plane` (n * C + c) as MaxPool's
 * Indices give it: row-major, or column-major over the spatial dims. */
CCG_HD static inline int64_t ccg__pool_index(const ccg__win *w, int64_t plane,
                                             int64_t pos) {
  if (!w->col_major)
    return plane * w->nbig + pos;
  int64_t c[CCG_MAX_RANK], idx = 0, m = 1;
  ccg__win_unflat(w->nsp, w->big, pos, c);
  for (int d = 0; d < w->nsp; d++) {
    idx += c[d] * m;
    m *= w->big[d];
  }
  return plane * w->nbig + idx;
}

/* MaxPool of window o of one plane: the maximum (NaN wins) and the big
 * index it is at (-1 for a window wholly in the padding). */
CCG_HD static inline double ccg__maxpool_elem(const ccg__win *w, ccg_dtype dt,
                                              const void *x, size_t xoff,
                                              int64_t o, int64_t *arg) {
  double best = -INFINITY;
  *arg = -1;
  for (int64_t kk = 0; kk < w->nk; kk++) {
    int64_t pos = ccg__win_src(w, o, kk);
    if (pos < 0)
      continue;
    double v = ccg__ld_f64(dt, x, xoff + (size_t)pos);
    if (*arg < 0 || v > best || (v != v && best == best)) {
      best = v;
      *arg = pos;
    }
  }
  return best;
}

/* AveragePool's divisor for window o: the taps inside the input, or with
 * count_include_pad also those in the pads (not past them: a ceil_mode
 * window's overhang does not count). */
CCG_HD static inline int64_t ccg__avgpool_count(const ccg__win *w, int64_t o) {
  int64_t c[CCG_MAX_RANK], count = 1;
  ccg__win_unflat(w->nsp, w->small, o, c);
  for (int d = 0; d < w->nsp; d++) {
    int64_t lo = w->include_pad ? -w->pad[d] : 0;
    int64_t hi = w->include_pad ? w->big[d] + w->pad_end[d] : w->big[d];
    int64_t n = 0;
    for (int64_t kd = 0; kd < w->k[d]; kd++) {
      int64_t p = c[d] * w->st[d] - w->pad[d] + kd * w->dil[d];
      n += p >= lo && p < hi;
    }
    count *= n;
  }
  return count;
}

CCG_HD static inline double ccg__avgpool_elem(const ccg__win *w, ccg_dtype dt,
                                              const void *x, size_t xoff,
                                              int64_t o) {
  double acc = 0.0;
  for (int64_t kk = 0; kk < w->nk; kk++) {
    int64_t pos = ccg__win_src(w, o, kk);
    if (pos >= 0)
      acc += ccg__ld_f64(dt, x, xoff + (size_t)pos);
  }
  int64_t n = ccg__avgpool_count(w, o);
  return n > 0 ? acc / (double)n : NAN;
}

/* ---- Resize ----------------------------------------------------------------
 * Output element j reads, per dim, the taps around its source coordinate
 * (1 for nearest, 2 for linear, 4 for cubic) with the ONNX reference's
 * weights; N-D is the product of the per-dim weights. */

typedef enum ccg__rsz_mode {
  CCG__RSZ_NEAREST,
  CCG__RSZ_LINEAR,
  CCG__RSZ_CUBIC
} ccg__rsz_mode;

typedef enum ccg__rsz_ctm {
  CCG__CTM_HALF_PIXEL,
  CCG__CTM_HALF_PIXEL_SYMMETRIC,
  CCG__CTM_PYTORCH_HALF_PIXEL,
  CCG__CTM_ALIGN_CORNERS,
  CCG__CTM_ASYMMETRIC,
  CCG__CTM_TF_HALF_PIXEL_FOR_NN,
  CCG__CTM_TF_CROP_AND_RESIZE
} ccg__rsz_ctm;

typedef enum ccg__rsz_nearest {
  CCG__NEAREST_ROUND_PREFER_FLOOR,
  CCG__NEAREST_ROUND_PREFER_CEIL,
  CCG__NEAREST_FLOOR,
  CCG__NEAREST_CEIL
} ccg__rsz_nearest;

typedef struct ccg__rsz {
  int rank;
  int mode, ctm, nearest, exclude_outside;
  int64_t in[CCG_MAX_RANK], out[CCG_MAX_RANK];
  double scale[CCG_MAX_RANK], roi_lo[CCG_MAX_RANK], roi_hi[CCG_MAX_RANK];
  double cubic_a, extrapolation;
  /* a roi fed or computed at run time, read where the kernel runs (host or
   * device memory): 2 * roi_na entries of dtype roi_dt, the starts then the
   * ends of the axes roi_axis; NULL: roi_lo and roi_hi */
  const void *roi_p;
  int roi_dt, roi_na;
  int roi_axis[CCG_MAX_RANK];
} ccg__rsz;

/* Host: the value of a Resize string attribute (which: 0 mode, 1
 * coordinate_transformation_mode, 2 nearest_mode, 3
 * keep_aspect_ratio_policy, in the enums' order), or -1. */
static inline int ccg__rsz_parse(int which, const char *v) {
  static const char *const names[4][7] = {
      {"nearest", "linear", "cubic"},
      {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
       "align_corners", "asymmetric", "tf_half_pixel_for_nn",
       "tf_crop_and_resize"},
      {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"},
      {"stretch", "not_larger", "not_smaller"}};
  for (int i = 0; i < 7; i++)
    if (names[which][i] && strcmp(v, names[which][i]) == 0)
      return i;
  return -1;
}

/* The source coordinate of output index x along dim d. */
CCG_HD static inline double ccg__rsz_coord(const ccg__rsz *r, int d,
                                           int64_t x) {
  /* the reference's length_resized is in * scale, unrounded (sizes give
   * scale = out / in, so then it is out) */
  double s = r->scale[d], in = (double)r->in[d], out = in * s;
  double xf = (double)x;
  switch (r->ctm) {
  case CCG__CTM_HALF_PIXEL_SYMMETRIC: {
    double adj = (double)r->out[d] / out;
    return in / 2 * (1 - adj) + (xf + 0.5) / s - 0.5;
  }
  case CCG__CTM_PYTORCH_HALF_PIXEL:
    return out > 1 ? (xf + 0.5) / s - 0.5 : 0.0;
  case CCG__CTM_ALIGN_CORNERS:
    return out == 1 ? 0.0 : xf * (in - 1) / (out - 1);
  case CCG__CTM_ASYMMETRIC:
    return xf / s;
  case CCG__CTM_TF_HALF_PIXEL_FOR_NN:
    return (xf + 0.5) / s;
  case CCG__CTM_TF_CROP_AND_RESIZE: {
    double lo = r->roi_lo[d], hi = r->roi_hi[d];
    for (int i = 0; r->roi_p && i < r->roi_na; i++)
      if (r->roi_axis[i] == d) {
        lo = ccg__ld_f64((ccg_dtype)r->roi_dt, r->roi_p, (size_t)i);
        hi = ccg__ld_f64((ccg_dtype)r->roi_dt, r->roi_p,
                         (size_t)(r->roi_na + i));
      }
    return out > 1 ? lo * (in - 1) + xf * (hi - lo) * (in - 1) / (out - 1)
                   : 0.5 * (lo + hi) * (in - 1);
  }
  default:
    return (xf + 0.5) / s - 0.5;
  }
}

CCG_HD static inline int64_t ccg__rsz_clamp(int64_t i, int64_t n) {
  return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* The taps of output index x along dim d: up to 4 source indices (clamped
 * to the edge) and weights; the count, or 0 when the coordinate falls
 * outside the crop (tf_crop_and_resize: the extrapolation value). */
CCG_HD static inline int ccg__rsz_taps(const ccg__rsz *r, int d, int64_t x,
                                       int64_t *idx, double *wt) {
  int64_t n = r->in[d];
  double c = ccg__rsz_coord(r, d, x);
  if (r->ctm == CCG__CTM_TF_CROP_AND_RESIZE && (c < 0 || c > (double)(n - 1)))
    return 0;
  if (r->mode == CCG__RSZ_NEAREST) {
    double f = floor(c);
    int64_t i;
    switch (r->nearest) {
    case CCG__NEAREST_ROUND_PREFER_CEIL:
      i = (int64_t)(c - f == 0.5 ? f + 1 : floor(c + 0.5));
      break;
    case CCG__NEAREST_FLOOR:
      i = (int64_t)f;
      break;
    case CCG__NEAREST_CEIL:
      i = (int64_t)ceil(c);
      break;
    default:
      i = (int64_t)(c - f == 0.5 ? f : floor(c + 0.5));
      break;
    }
    idx[0] = ccg__rsz_clamp(i, n);
    wt[0] = 1.0;
    return 1;
  }
  /* an integral coordinate takes ratio 1 from the index below, as the
   * reference does (the same value, other neighbours for cubic) */
  double f = floor(c), t = c - f;
  if (t == 0.0) {
    f -= 1;
    t = 1.0;
  }
  int64_t base = (int64_t)f;
  int k;
  if (r->mode == CCG__RSZ_LINEAR) {
    wt[0] = 1 - t;
    wt[1] = t;
    k = 2;
    for (int i = 0; i < 2; i++)
      idx[i] = base + i;
  } else {
    double A = r->cubic_a, u = 1 - t;
    wt[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    wt[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    wt[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
    wt[3] = ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A;
    k = 4;
    for (int i = 0; i < 4; i++)
      idx[i] = base - 1 + i;
  }
  double sum = 0;
  for (int i = 0; i < k; i++) {
    if (r->exclude_outside && (idx[i] < 0 || idx[i] >= n))
      wt[i] = 0;
    sum += wt[i];
    idx[i] = ccg__rsz_clamp(idx[i], n);
  }
  if (r->exclude_outside && sum != 0)
    for (int i = 0; i < k; i++)
      wt[i] /= sum;
  return k;
}

/* Output element j of Resize. */
CCG_HD static inline double ccg__resize_elem(const ccg__rsz *r, ccg_dtype dt,
                                             const void *x, int64_t j) {
  int64_t idx[CCG_MAX_RANK][4], pos[CCG_MAX_RANK];
  double wt[CCG_MAX_RANK][4];
  int cnt[CCG_MAX_RANK], at[CCG_MAX_RANK];
  for (int d = r->rank - 1; d >= 0; d--) {
    pos[d] = j % r->out[d];
    j /= r->out[d];
  }
  for (int d = 0; d < r->rank; d++) {
    cnt[d] = ccg__rsz_taps(r, d, pos[d], idx[d], wt[d]);
    if (cnt[d] == 0)
      return r->extrapolation;
    at[d] = 0;
  }
  double acc = 0;
  for (;;) {
    double w = 1;
    int64_t off = 0;
    for (int d = 0; d < r->rank; d++) {
      w *= wt[d][at[d]];
      off = off * r->in[d] + idx[d][at[d]];
    }
    if (w != 0)
      acc += w * ccg__ld_f64(dt, x, (size_t)off);
    int d = r->rank - 1;
    while (d >= 0 && ++at[d] == cnt[d])
      at[d--] = 0;
    if (d < 0)
      break;
  }
  return acc;
}

#endif
