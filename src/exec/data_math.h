/* Private: per-element arithmetic of the data family's kernels (Range,
 * CumSum, OneHot, EyeLike, Einsum, and the index remaps of Trilu, Tile, Pad,
 * DepthToSpace and SpaceToDepth), as static inline functions for the host
 * and, under nvcc, the device, so that the CPU tests check what the GPU
 * kernels compute. */
#ifndef CCG_EXEC_DATA_MATH_H
#define CCG_EXEC_DATA_MATH_H

#include "exec/kernels_math.h"

/* ---- remaps: output element j is input element src(j), or a fill -------- */

typedef enum ccg__remap_kind {
  CCG__REMAP_TRILU,
  CCG__REMAP_TILE,
  CCG__REMAP_PAD,
  CCG__REMAP_D2S, /* DepthToSpace */
  CCG__REMAP_S2D, /* SpaceToDepth */
} ccg__remap_kind;

typedef enum ccg__pad_mode {
  CCG__PAD_CONSTANT,
  CCG__PAD_REFLECT,
  CCG__PAD_EDGE,
  CCG__PAD_WRAP,
} ccg__pad_mode;

typedef struct ccg__remap {
  int kind, rank;
  int64_t odims[CCG_MAX_RANK], idims[CCG_MAX_RANK];
  int64_t begin[CCG_MAX_RANK]; /* Pad: the leading pads (negative crops) */
  int mode;                    /* Pad: ccg__pad_mode; D2S: 1 = CRD */
  int64_t k;                   /* Trilu: the diagonal; D2S/S2D: blocksize */
  bool upper;                  /* Trilu */
  /* Trilu: k_dev says k is a value fed or computed at run time, which the
   * kernel reads itself: one element of dtype kdt at kp (device memory,
   * set by the launcher) */
  bool k_dev;
  int kdt;
  const void *kp;
} ccg__remap;

/* Index i (any integer) of a padded dim of size n > 0, folded into [0, n)
 * by the mode; -1 for the constant. */
CCG_HD static inline int64_t ccg__pad_index(int mode, int64_t i, int64_t n) {
  if (i >= 0 && i < n)
    return i;
  switch (mode) {
  case CCG__PAD_EDGE:
    return i < 0 ? 0 : n - 1;
  case CCG__PAD_WRAP: {
    int64_t r = i % n;
    return r < 0 ? r + n : r;
  }
  case CCG__PAD_REFLECT: {
    if (n == 1)
      return 0;
    int64_t period = 2 * (n - 1), r = i % period;
    r = r < 0 ? r + period : r;
    return r < n ? r : period - r;
  }
  default:
    return -1;
  }
}

/* The input element output element j reads, or -1 for the fill. */
CCG_HD static inline int64_t ccg__remap_src(const ccg__remap *m, size_t j) {
  int64_t c[CCG_MAX_RANK] = {0};
  for (int d = m->rank - 1; d >= 0; d--) {
    size_t dim = (size_t)m->odims[d];
    c[d] = (int64_t)(j % dim);
    j /= dim;
  }
  int r = m->rank;
  if (m->kind == CCG__REMAP_TRILU) {
    int64_t diff = c[r - 1] - c[r - 2];
    int64_t k = m->k_dev ? ccg__ld_i64((ccg_dtype)m->kdt, m->kp, 0) : m->k;
    bool keep = m->upper ? diff >= k : diff <= k;
    if (!keep)
      return -1;
  } else if (m->kind == CCG__REMAP_TILE) {
    for (int d = 0; d < r; d++)
      c[d] %= m->idims[d];
  } else if (m->kind == CCG__REMAP_PAD) {
    for (int d = 0; d < r; d++) {
      c[d] = ccg__pad_index(m->mode, c[d] - m->begin[d], m->idims[d]);
      if (c[d] < 0)
        return -1;
    }
  } else {
    /* [N, C, H, W] both ways; b the blocksize, C' = C / (b*b) of the deep
     * side */
    int64_t b = m->k;
    bool d2s = m->kind == CCG__REMAP_D2S;
    int64_t deep = d2s ? m->idims[1] : m->odims[1], cs = deep / (b * b);
    int64_t ch = d2s ? c[1] : c[1] % cs;
    int64_t y = d2s ? c[2] : c[2] * b + (c[1] / cs) / b;
    int64_t x = d2s ? c[3] : c[3] * b + (c[1] / cs) % b;
    if (d2s) {
      int64_t bi = y % b, bj = x % b;
      c[1] = m->mode ? ch * b * b + bi * b + bj : (bi * b + bj) * cs + ch;
      c[2] = y / b;
      c[3] = x / b;
    } else {
      c[1] = ch;
      c[2] = y;
      c[3] = x;
    }
  }
  int64_t off = 0;
  for (int d = 0; d < r; d++)
    off = off * m->idims[d] + c[d];
  return off;
}

/* Copies one es-byte element. */
CCG_HD static inline void ccg__copy_bytes(void *dst, const void *src,
                                          size_t es) {
  switch (es) {
  case 8:
    *(uint64_t *)dst = *(const uint64_t *)src;
    break;
  case 4:
    *(uint32_t *)dst = *(const uint32_t *)src;
    break;
  case 2:
    *(uint16_t *)dst = *(const uint16_t *)src;
    break;
  default:
    for (size_t k = 0; k < es; k++)
      ((char *)dst)[k] = ((const char *)src)[k];
  }
}

/* Output element j of a remap; fill: one element (NULL: zeros). */
CCG_HD static inline void ccg__remap_elem(const ccg__remap *m, size_t es,
                                          const void *in, const void *fill,
                                          void *out, size_t j) {
  int64_t s = ccg__remap_src(m, j);
  char *o = (char *)out + j * es;
  if (s >= 0)
    ccg__copy_bytes(o, (const char *)in + (size_t)s * es, es);
  else if (fill)
    ccg__copy_bytes(o, fill, es);
  else
    for (size_t k = 0; k < es; k++)
      o[k] = 0;
}

/* ---- Range -------------------------------------------------------------- */

/* Element i of Range(start, ., delta): start + i * delta, in double for
 * floats (numpy's arange) and int64 for integers. */
CCG_HD static inline void ccg__range_elem(ccg_dtype dt, const void *start,
                                          const void *delta, void *out,
                                          size_t i) {
  if (ccg__math_of(dt) == CCG__MATH_I64)
    ccg__st_i64(dt, out, i,
                (int64_t)((uint64_t)ccg__ld_i64(dt, start, 0) +
                          (uint64_t)i * (uint64_t)ccg__ld_i64(dt, delta, 0)));
  else
    ccg__st_f64(dt, out, i,
                ccg__ld_f64(dt, start, 0) +
                    (double)i * ccg__ld_f64(dt, delta, 0));
}

/* ---- CumSum -------------------------------------------------------------- */

/* CumSum's view of a tensor of `rank` dims holding numel elements as
 * [lines / inner, len, inner] lines along `axis` (negative from the end);
 * false when the axis is out of range. */
CCG_HD static inline bool ccg__cumsum_geom(const int64_t *dims, int rank,
                                           size_t numel, int64_t axis,
                                           size_t *lines, size_t *len,
                                           size_t *inner) {
  int64_t ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank)
    return false;
  *inner = 1;
  for (int d = (int)ax + 1; d < rank; d++)
    *inner *= (size_t)dims[d];
  *len = (size_t)dims[ax];
  *lines = *len && *inner ? numel / *len : 0;
  return true;
}

/* Line t of a [outer, len, inner] tensor: its cumulative sums (exclusive:
 * without the element itself; reverse: from the end), floats in double,
 * integers in int64. */
CCG_HD static inline void ccg__cumsum_line(ccg_dtype dt, const void *in,
                                           void *out, size_t t, size_t len,
                                           size_t inner, bool exclusive,
                                           bool reverse) {
  size_t base = (t / inner) * len * inner + t % inner;
  bool ints = ccg__math_of(dt) == CCG__MATH_I64;
  double acc = 0.0;
  int64_t iacc = 0;
  for (size_t s = 0; s < len; s++) {
    size_t k = reverse ? len - 1 - s : s;
    size_t at = base + k * inner;
    if (ints) {
      int64_t v = ccg__ld_i64(dt, in, at);
      if (!exclusive)
        iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
      ccg__st_i64(dt, out, at, iacc);
      if (exclusive)
        iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
    } else {
      double v = ccg__ld_f64(dt, in, at);
      if (!exclusive)
        acc += v;
      ccg__st_f64(dt, out, at, acc);
      if (exclusive)
        acc += v;
    }
  }
}

/* ---- OneHot ------------------------------------------------------------- */

/* Output element j of [outer, depth, inner]: values[1] where the index
 * (negative from the end) is j's position along the depth, values[0]
 * elsewhere (indices out of range give a row of values[0]). */
CCG_HD static inline void ccg__onehot_elem(ccg_dtype di, const void *idx,
                                           size_t es, const void *values,
                                           void *out, size_t depth,
                                           size_t inner, size_t j) {
  size_t in = j % inner, d = (j / inner) % depth, o = j / inner / depth;
  int64_t k = ccg__math_of(di) == CCG__MATH_I64
                  ? ccg__ld_i64(di, idx, o * inner + in)
                  : (int64_t)ccg__ld_f64(di, idx, o * inner + in);
  if (k < 0)
    k += (int64_t)depth;
  bool on = k == (int64_t)d;
  ccg__copy_bytes((char *)out + j * es, (const char *)values + (on ? es : 0),
                  es);
}

/* ---- EyeLike ------------------------------------------------------------ */

/* Element j of a [rows, cols] EyeLike: 1 on diagonal k, 0 elsewhere. */
CCG_HD static inline void ccg__eye_elem(ccg_dtype dt, void *out, size_t cols,
                                        int64_t k, size_t j) {
  int64_t r = (int64_t)(j / cols), c = (int64_t)(j % cols);
  ccg__st_i64(dt, out, j, c - r == k);
}

/* ---- Einsum ------------------------------------------------------------- */

#define CCG__EIN_OPS 6
#define CCG__EIN_SUM 16

/* Output dims with each operand's element stride along them (0 where the
 * operand lacks the label or broadcasts it), and the summed labels the
 * same way. */
typedef struct ccg__ein_geom {
  int n_in, orank, nsum;
  int64_t odims[CCG_MAX_RANK];
  int64_t ost[CCG__EIN_OPS][CCG_MAX_RANK];
  int64_t sdims[CCG__EIN_SUM];
  int64_t sst[CCG__EIN_OPS][CCG__EIN_SUM];
  int64_t count; /* product of sdims */
  const void *ptr[CCG__EIN_OPS];
} ccg__ein_geom;

/* Output element j: the sum over the summed labels of the operands'
 * product, floats in double, integers in int64 (wrapping). */
CCG_HD static inline void ccg__einsum_elem(const ccg__ein_geom *g, ccg_dtype dt,
                                           void *out, size_t j) {
  int64_t off[CCG__EIN_OPS], idx[CCG__EIN_SUM];
  size_t at = j;
  for (int k = 0; k < g->n_in; k++)
    off[k] = 0;
  for (int d = g->orank - 1; d >= 0; d--) {
    size_t dim = (size_t)g->odims[d];
    int64_t c = (int64_t)(j % dim);
    j /= dim;
    for (int k = 0; k < g->n_in; k++)
      off[k] += c * g->ost[k][d];
  }
  for (int s = 0; s < g->nsum; s++)
    idx[s] = 0;
  bool ints = ccg__math_of(dt) == CCG__MATH_I64;
  double acc = 0.0;
  uint64_t iacc = 0;
  for (int64_t n = 0; n < g->count; n++) {
    if (ints) {
      uint64_t p = 1;
      for (int k = 0; k < g->n_in; k++)
        p *= (uint64_t)ccg__ld_i64(dt, g->ptr[k], (size_t)off[k]);
      iacc += p;
    } else {
      double p = 1.0;
      for (int k = 0; k < g->n_in; k++)
        p *= ccg__ld_f64(dt, g->ptr[k], (size_t)off[k]);
      acc += p;
    }
    for (int s = g->nsum - 1; s >= 0; s--) {
      idx[s]++;
      for (int k = 0; k < g->n_in; k++)
        off[k] += g->sst[k][s];
      if (idx[s] < g->sdims[s])
        break;
      for (int k = 0; k < g->n_in; k++)
        off[k] -= g->sst[k][s] * g->sdims[s];
      idx[s] = 0;
    }
  }
  if (ints)
    ccg__st_i64(dt, out, at, (int64_t)iacc);
  else
    ccg__st_f64(dt, out, at, acc);
}

#endif
