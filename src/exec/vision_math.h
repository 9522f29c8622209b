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

#endif
