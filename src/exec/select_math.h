/* Private: the arithmetic of the selection kernels (ArgMax/ArgMin, TopK,
 * GatherElements, ScatterElements, NonZero, Compress) as static inline
 * functions for the host and, under nvcc, the device, so that the CPU tests
 * check what the GPU kernels compute. */
#ifndef CCG_EXEC_SELECT_MATH_H
#define CCG_EXEC_SELECT_MATH_H

#include "exec/index_math.h"

/* ---- ordering ------------------------------------------------------------
 * Elements compare in their own kind (integers as int64, so i64 beyond
 * 2^53 stays exact); NaN is above every number when nan_high, below every
 * number otherwise, and equal to NaN. */

CCG_HD static inline int ccg__sel_cmp(ccg_dtype dt, const void *p, size_t i,
                                      const void *q, size_t j, bool nan_high) {
  if (ccg__math_of(dt) == CCG__MATH_I64) {
    int64_t a = ccg__ld_i64(dt, p, i), b = ccg__ld_i64(dt, q, j);
    return a < b ? -1 : a > b;
  }
  double a = ccg__ld_f64(dt, p, i), b = ccg__ld_f64(dt, q, j);
  bool na = a != a, nb = b != b;
  if (na || nb) {
    int c = na && nb ? 0 : na ? 1 : -1;
    return nan_high ? c : -c;
  }
  return a < b ? -1 : a > b;
}

/* Element i of src to element j of dst, es bytes each. */
CCG_HD static inline void ccg__sel_copy(size_t es, const void *src, size_t i,
                                        void *dst, size_t j) {
  const unsigned char *s = (const unsigned char *)src + i * es;
  unsigned char *d = (unsigned char *)dst + j * es;
  for (size_t b = 0; b < es; b++)
    d[b] = s[b];
}

/* ArgMax (is_min false) / ArgMin of the `len` elements x[base + t*stride]:
 * the first extreme one, or the last when `last`. NaN wins both ways, as
 * numpy's argmax/argmin have it. */
CCG_HD static inline int64_t ccg__arg_line(ccg_dtype dt, const void *x,
                                           size_t base, size_t stride,
                                           int64_t len, bool is_min,
                                           bool last) {
  int64_t best = 0;
  for (int64_t t = 1; t < len; t++) {
    int c = ccg__sel_cmp(dt, x, base + (size_t)t * stride, x,
                         base + (size_t)best * stride, !is_min);
    if (is_min)
      c = -c;
    if (c > 0 || (last && c == 0))
      best = t;
  }
  return best;
}

/* ArgMax/ArgMin output element j of [outer, inner] over x viewed as
 * [outer, len, inner]. */
CCG_HD static inline void ccg__arg_elem(ccg_dtype dt, const void *x, int64_t *o,
                                        size_t j, int64_t len, size_t inner,
                                        bool is_min, bool last) {
  size_t base = (j / inner) * (size_t)len * inner + j % inner;
  o[j] = ccg__arg_line(dt, x, base, inner, len, is_min, last);
}

/* TopK on one line: x[base + t*stride], t < len, into the k slots
 * vals[obase + s*ostride] and idx[obase + s*ostride] (i64), best first;
 * among equal values the lower index comes first (ONNX). NaN ranks above
 * every number (as torch.topk has it): first when largest, last
 * otherwise. Insertion keeps the slots sorted, O(len * k). */
CCG_HD static inline void ccg__topk_line(ccg_dtype dt, size_t es, const void *x,
                                         size_t base, size_t stride,
                                         int64_t len, int64_t k, bool largest,
                                         void *vals, int64_t *idx, size_t obase,
                                         size_t ostride) {
  int64_t filled = 0;
  for (int64_t t = 0; t < len && k > 0; t++) {
    size_t xi = base + (size_t)t * stride;
    /* the new element goes after every slot it does not beat; a later
     * index never beats an equal value */
    int64_t pos = filled;
    while (pos > 0) {
      int c = ccg__sel_cmp(dt, x, xi, vals, obase + (size_t)(pos - 1) * ostride,
                           true);
      if (!(largest ? c > 0 : c < 0))
        break;
      pos--;
    }
    if (pos >= k)
      continue;
    int64_t end = filled < k ? filled : k - 1;
    for (int64_t s = end; s > pos; s--) {
      size_t to = obase + (size_t)s * ostride;
      size_t from = obase + (size_t)(s - 1) * ostride;
      ccg__sel_copy(es, vals, from, vals, to);
      idx[to] = idx[from];
    }
    size_t at = obase + (size_t)pos * ostride;
    ccg__sel_copy(es, x, xi, vals, at);
    idx[at] = t;
    if (filled < k)
      filled++;
  }
}

/* TopK line l of [outer, inner] lines over x [outer, len, inner] into
 * outputs [outer, k, inner]. */
CCG_HD static inline void ccg__topk_elem(ccg_dtype dt, size_t es, const void *x,
                                         void *vals, int64_t *idx, size_t l,
                                         int64_t len, int64_t k, size_t inner,
                                         bool largest) {
  size_t o = l / inner, in = l % inner;
  ccg__topk_line(dt, es, x, o * (size_t)len * inner + in, inner, len, k,
                 largest, vals, idx, o * (size_t)k * inner + in, inner);
}

/* ---- GatherElements, ScatterElements -------------------------------------
 * indices [idims] (rank r) address data [ddims]: element c of indices
 * names data's element with the same coordinates but c_axis replaced by
 * the index (negative from the end). */
typedef struct ccg__elems_geom {
  int rank, axis;
  int64_t idims[CCG_MAX_RANK];
  int64_t dst[CCG_MAX_RANK]; /* data's element strides */
  int64_t adim;              /* data's size along the axis */
} ccg__elems_geom;

static inline ccg__elems_geom ccg__elems_geom_make(int rank, int axis,
                                                   const int64_t *ddims,
                                                   const int64_t *idims) {
  ccg__elems_geom g;
  memset(&g, 0, sizeof g);
  g.rank = rank;
  g.axis = axis;
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    g.idims[d] = idims[d];
    g.dst[d] = s;
    s *= ddims[d];
  }
  g.adim = ddims[axis];
  return g;
}

/* The data offset of indices element e; false (index in *bad) when the
 * index is out of range. */
CCG_HD static inline bool ccg__elems_offset(const ccg__elems_geom *g,
                                            ccg_dtype di, const void *idx,
                                            size_t e, size_t *off,
                                            int64_t *bad) {
  int64_t k = ccg__ld_i64(di, idx, e), kk;
  if (!ccg__gather_index(k, g->adim, &kk)) {
    *bad = k;
    return false;
  }
  size_t rest = e, o = 0;
  for (int d = g->rank - 1; d >= 0; d--) {
    size_t dim = (size_t)g->idims[d];
    size_t c = rest % dim;
    rest /= dim;
    o += (d == g->axis ? (size_t)kk : c) * (size_t)g->dst[d];
  }
  *off = o;
  return true;
}

/* GatherElements output element e (over indices' shape). */
CCG_HD static inline bool ccg__gather_elems_elem(const ccg__elems_geom *g,
                                                 size_t es, const void *a,
                                                 ccg_dtype di, const void *idx,
                                                 void *o, size_t e,
                                                 int64_t *bad) {
  size_t off = 0;
  if (!ccg__elems_offset(g, di, idx, e, &off, bad))
    return false;
  ccg__sel_copy(es, a, off, o, e);
  return true;
}

/* ScatterElements over out (already a copy of data), one line of indices
 * along the axis: its elements all land in one line of data, so lines run
 * in parallel and each in index order (the CPU's order). red 0 replaces,
 * 1..4 add, mul, max, min. False (bad index in *bad, its element in *at)
 * on an out-of-range index; the elements before it are written. */
CCG_HD static inline bool ccg__scatter_elems_line(const ccg__elems_geom *g,
                                                  int red, ccg_dtype dt,
                                                  size_t es, void *o,
                                                  const void *u, ccg_dtype di,
                                                  const void *idx, size_t line,
                                                  int64_t *bad, size_t *at) {
  size_t inner = 1, len = (size_t)g->idims[g->axis];
  for (int d = g->axis + 1; d < g->rank; d++)
    inner *= (size_t)g->idims[d];
  size_t first = (line / inner) * len * inner + line % inner;
  for (size_t t = 0; t < len; t++) {
    size_t e = first + t * inner, off = 0;
    if (!ccg__elems_offset(g, di, idx, e, &off, bad)) {
      *at = e;
      return false;
    }
    if (red == 0)
      ccg__sel_copy(es, u, e, o, off);
    else
      ccg__combine_elem(red, dt, o, off, dt, u, e);
  }
  return true;
}

/* ---- NonZero, Compress ----------------------------------------------------
 */

CCG_HD static inline bool ccg__is_nonzero(ccg_dtype dt, const void *x,
                                          size_t i) {
  if (ccg__math_of(dt) == CCG__MATH_I64)
    return ccg__ld_i64(dt, x, i) != 0;
  return ccg__ld_f64(dt, x, i) != 0.0; /* NaN counts, as in numpy */
}

/* NonZero of x [dims] (rank r, n elements) into o, laid out [r, cap]
 * row-major with cap >= the count (the output's bound size, or an upper
 * bound such as n): column j holds the coordinates of the j-th nonzero
 * element in row-major order. Returns the count; with cap == count o is
 * exactly the [r, count] result. One pass, sequential: the device runs it
 * on one thread. */
CCG_HD static inline size_t ccg__nonzero_run(ccg_dtype dt, const void *x, int r,
                                             const int64_t *dims, size_t n,
                                             int64_t *o, size_t cap) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!ccg__is_nonzero(dt, x, i))
      continue;
    if (count < cap) {
      size_t rest = i;
      for (int d = r - 1; d >= 0; d--) {
        o[(size_t)d * cap + count] = (int64_t)(rest % (size_t)dims[d]);
        rest /= (size_t)dims[d];
      }
    }
    count++;
  }
  return count;
}

/* Compress of x viewed as [outer, len, inner] by the bool condition c
 * (clen <= len entries; the rest count as false) into o [outer, cap,
 * inner], cap >= the kept count. Returns the kept count. */
CCG_HD static inline size_t
ccg__compress_run(size_t es, const void *x, const uint8_t *c, size_t clen,
                  size_t outer, size_t len, size_t inner, void *o, size_t cap) {
  size_t kept = 0;
  for (size_t t = 0; t < clen && t < len; t++)
    kept += c[t] != 0;
  if (kept > cap)
    return kept;
  const unsigned char *src = (const unsigned char *)x;
  unsigned char *dst = (unsigned char *)o;
  size_t row = inner * es;
  for (size_t oi = 0; oi < outer; oi++) {
    size_t j = 0;
    for (size_t t = 0; t < clen && t < len; t++) {
      if (!c[t])
        continue;
      const unsigned char *s = src + (oi * len + t) * row;
      unsigned char *d = dst + (oi * cap + j) * row;
      for (size_t b = 0; b < row; b++)
        d[b] = s[b];
      j++;
    }
  }
  return kept;
}

/* The [rows, count, inner] prefix of a [rows, cap, inner] result moved
 * together at the buffer's start (in place: every byte moves to a lower or
 * equal offset, in increasing order). */
CCG_HD static inline void ccg__sized_compact(void *o, size_t es, size_t rows,
                                             size_t cap, size_t count,
                                             size_t inner) {
  if (cap == count)
    return;
  unsigned char *b = (unsigned char *)o;
  size_t row = count * inner * es, from = cap * inner * es;
  for (size_t r = 1; r < rows; r++)
    for (size_t k = 0; k < row; k++)
      b[r * row + k] = b[r * from + k];
}

#endif
