/* Private: index arithmetic of the kernels (broadcast offsets, strided and
 * permuted copies, Slice bounds, the rank-major packing of collectives), as
 * static inline functions for the host and, under nvcc, the device, so that
 * the CPU tests check what the GPU kernels compute. */
#ifndef CCG_EXEC_INDEX_MATH_H
#define CCG_EXEC_INDEX_MATH_H

#include "exec/kernels_math.h"
#include "exec/reduce_math.h"

/* Broadcast walk: the output's dims with every operand's element strides
 * (0 where it is broadcast), adjacent dims merged where all operands allow,
 * so equal shapes make one long row. */
#define CCG__BCAST_MAX 3
typedef struct ccg__bcast {
  int rank, n;
  int64_t dims[CCG_MAX_RANK];
  int64_t st[CCG__BCAST_MAX][CCG_MAX_RANK];
} ccg__bcast;

/* Offsets into every operand of output element i (row-major over dims). */
CCG_HD static inline void ccg__bcast_offsets(const ccg__bcast *b, size_t i,
                                             int64_t *off) {
  for (int k = 0; k < b->n; k++)
    off[k] = 0;
  for (int d = b->rank - 1; d >= 0; d--) {
    int64_t dim = b->dims[d];
    int64_t c = dim ? (int64_t)(i % (size_t)dim) : 0;
    i = dim ? i / (size_t)dim : 0;
    for (int k = 0; k < b->n; k++)
      off[k] += c * b->st[k][d];
  }
}

/* Element j of a dense [dims] tensor taken from base + sum(i_d * st[d]):
 * Transpose, Expand, Slice and broadcast parameters. */
CCG_HD static inline int64_t ccg__strided_offset(int rank, const int64_t *dims,
                                                 const int64_t *st,
                                                 int64_t base, size_t j) {
  int64_t off = base;
  for (int d = rank - 1; d >= 0; d--) {
    size_t dim = (size_t)dims[d];
    off += (int64_t)(j % dim) * st[d];
    j /= dim;
  }
  return off;
}

/* Element strides of a [pdims] tensor (rank prank) broadcast, ONNX style
 * (right-aligned), to [dims] of rank r: 0 where it is broadcast. Returns
 * the element count of [dims]. Also Expand's source strides. */
CCG_HD static inline size_t ccg__param_strides(int prank, const int64_t *pdims,
                                               int r, const int64_t *dims,
                                               int64_t *st) {
  int64_t s = 1;
  size_t total = 1;
  for (int d = r - 1; d >= 0; d--) {
    int ip = d - (r - prank);
    int64_t size = ip >= 0 ? pdims[ip] : 1;
    st[d] = size == 1 ? 0 : s;
    s *= size;
    total *= (size_t)dims[d];
  }
  return total;
}

/* Collective packing: a [outer, total, inner] tensor cut along its middle
 * axis into n chunks (chunk r spans [before[r], before[r+1]); before has
 * n+1 entries, before[n] = total) is laid out chunk after chunk, each chunk
 * [outer, size_r, inner]. Returns the full tensor's index of packed element
 * p. */
CCG_HD static inline size_t ccg__pack_full_index(size_t p, size_t outer,
                                                 size_t inner,
                                                 const int64_t *before, int n) {
  /* the chunk: the last r whose packed start outer*before[r]*inner <= p */
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if ((size_t)before[mid] * outer * inner <= p)
      lo = mid;
    else
      hi = mid - 1;
  }
  size_t size = (size_t)(before[lo + 1] - before[lo]);
  size_t q = p - (size_t)before[lo] * outer * inner;
  size_t row = size * inner;
  size_t o = q / row, rem = q % row;
  return (o * (size_t)before[n] + (size_t)before[lo]) * inner + rem;
}

/* ---- Slice ---------------------------------------------------------------
 * Bounds as ONNX defines them (negative from the end, clamped, any nonzero
 * step), from starts/ends and the optional axes/steps (NULL: 0..n-1 and 1).
 * The result: out element j is in[ccg__strided_offset(r, odims, st, base,
 * j)]. */
typedef struct ccg__slice {
  int64_t base;
  int64_t st[CCG_MAX_RANK];
} ccg__slice;

typedef enum ccg__slice_err {
  CCG__SLICE_OK,
  CCG__SLICE_AXIS,  /* entry `bad` names an axis out of range */
  CCG__SLICE_STEP,  /* entry `bad` has step 0 */
  CCG__SLICE_COUNT, /* entry `bad` gives `count` elements, not odims[axis] */
} ccg__slice_err;

typedef struct ccg__slice_args {
  int rank;
  const int64_t *dims, *odims;
  size_t n; /* entries in starts (and the others) */
  ccg_dtype ds, de, da, dp;
  const void *starts, *ends, *axes, *steps;
} ccg__slice_args;

CCG_HD static inline ccg__slice_err
ccg__slice_setup(const ccg__slice_args *a, ccg__slice *out, size_t *bad,
                 int64_t *bad_axis, int64_t *count_out) {
  int r = a->rank;
  int64_t start[CCG_MAX_RANK], step[CCG_MAX_RANK];
  for (int d = 0; d < r; d++) {
    start[d] = 0;
    step[d] = 1;
  }
  for (size_t i = 0; i < a->n; i++) {
    int64_t ax = a->axes ? ccg__ld_i64(a->da, a->axes, i) : (int64_t)i;
    ax = ax < 0 ? ax + r : ax;
    *bad = i;
    *bad_axis = ax;
    if (ax < 0 || ax >= r)
      return CCG__SLICE_AXIS;
    int64_t dim = a->dims[ax];
    int64_t s = ccg__ld_i64(a->ds, a->starts, i);
    int64_t e = ccg__ld_i64(a->de, a->ends, i);
    int64_t p = a->steps ? ccg__ld_i64(a->dp, a->steps, i) : 1;
    if (p == 0)
      return CCG__SLICE_STEP;
    s = s < 0 ? s + dim : s;
    e = e < 0 ? e + dim : e;
    int64_t count;
    if (p > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
      count = e > s ? (e - s + p - 1) / p : 0;
    } else {
      s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      count = s > e ? (s - e - p - 1) / -p : 0;
    }
    *count_out = count;
    if (count != a->odims[ax])
      return CCG__SLICE_COUNT;
    start[ax] = s;
    step[ax] = p;
  }
  int64_t ist = 1;
  out->base = 0;
  for (int d = r - 1; d >= 0; d--) {
    out->base += start[d] * ist;
    out->st[d] = step[d] * ist;
    ist *= a->dims[d];
  }
  return CCG__SLICE_OK;
}

/* Gather: an index k of a dim of size `dim` (negative from the end); false
 * when out of range. */
CCG_HD static inline bool ccg__gather_index(int64_t k, int64_t dim,
                                            int64_t *out) {
  if (k < -dim || k >= dim)
    return false;
  *out = k < 0 ? k + dim : k;
  return true;
}

/* ---- views, reductions, Gather, ScatterND -------------------------------
 * The per-element bodies of the device kernels (src/exec/cuda), here so the
 * CPU tests run them too (tests/unit/test_device_math.c). */

/* Dims and strides of a strided view (Transpose, Expand, broadcast
 * parameters). */
typedef struct ccg__view {
  int rank;
  int64_t dims[CCG_MAX_RANK];
  int64_t st[CCG_MAX_RANK];
  int64_t base;
} ccg__view;

/* Reduce* ops: input offsets of kept dims (over the output) and of
 * reduced dims (over the reduced elements, in input order). */
typedef struct ccg__red_geom {
  int nk, nr;
  int64_t kd[CCG_MAX_RANK], ks[CCG_MAX_RANK];
  int64_t rd[CCG_MAX_RANK], rs[CCG_MAX_RANK];
  int64_t count;
} ccg__red_geom;

/* Geometry of a reduction over input dims whose output strides `ost` are 0
 * (the CPU preparation's n->p.chunk): kept dims and reduced dims (size > 1)
 * with their input strides, in input order. */
static inline ccg__red_geom ccg__red_geom_make(int rank, const int64_t *dims,
                                               const int64_t *ost,
                                               int64_t count) {
  ccg__red_geom g;
  memset(&g, 0, sizeof g);
  int64_t st = 1, ist[CCG_MAX_RANK];
  for (int d = rank - 1; d >= 0; d--) {
    ist[d] = st;
    st *= dims[d];
  }
  for (int d = 0; d < rank; d++) {
    if (ost[d] == 0 && dims[d] != 1) {
      g.rd[g.nr] = dims[d];
      g.rs[g.nr++] = ist[d];
    } else {
      g.kd[g.nk] = dims[d];
      g.ks[g.nk++] = ist[d];
    }
  }
  g.count = count;
  return g;
}

/* Worker k0 of ks over the reduced elements k0, k0 + ks, ... of the output
 * element whose first input element is at `base`: its accumulator from
 * ccg__rd_init (floats in double, `shift` as in ccg__rd_step_f64; integers
 * in int64). Parts join through ccg__rd_merge. */
CCG_HD static inline double ccg__reduce_part_f64(ccg__rd_kind kind,
                                                 const ccg__red_geom *g,
                                                 ccg_dtype di, const void *a,
                                                 int64_t base, double shift,
                                                 int64_t k0, int64_t ks) {
  double acc = ccg__rd_init_f64(kind);
  for (int64_t k = k0; k < g->count; k += ks)
    acc =
        ccg__rd_step_f64(kind, acc,
                         ccg__ld_f64(di, a,
                                     (size_t)ccg__strided_offset(
                                         g->nr, g->rd, g->rs, base, (size_t)k)),
                         shift);
  return acc;
}

CCG_HD static inline int64_t
ccg__reduce_part_i64(ccg__rd_kind kind, const ccg__red_geom *g, ccg_dtype di,
                     const void *a, int64_t base, int64_t k0, int64_t ks) {
  int64_t acc = ccg__rd_init_i64(kind);
  for (int64_t k = k0; k < g->count; k += ks)
    acc = ccg__rd_step_i64(
        kind, acc,
        ccg__ld_i64(
            di, a,
            (size_t)ccg__strided_offset(g->nr, g->rd, g->rs, base, (size_t)k)));
  return acc;
}

/* Output element j of a Reduce* op (exec/reduce_math.h): the reduced
 * elements in input order, floats in double, integers in int64 (the CPU's
 * arithmetic), by one worker. */
CCG_HD static inline void ccg__reduce_elem(ccg_op op, const ccg__red_geom *g,
                                           ccg_dtype di, const void *a,
                                           ccg_dtype dout, void *o, size_t j) {
  int64_t base = ccg__strided_offset(g->nk, g->kd, g->ks, 0, j);
  ccg__rd_kind kind = ccg__rd_kind_of(op);
  if (ccg__math_of(di) == CCG__MATH_I64) {
    int64_t acc = ccg__reduce_part_i64(kind, g, di, a, base, 0, 1);
    ccg__st_i64(dout, o, j, ccg__rd_final_i64(kind, acc, g->count));
    return;
  }
  double shift =
      ccg__rd_two_pass(kind)
          ? ccg__reduce_part_f64(CCG__RD_MAX, g, di, a, base, 0.0, 0, 1)
          : 0.0;
  double acc = ccg__reduce_part_f64(kind, g, di, a, base, shift, 0, 1);
  ccg__st_f64(dout, o, j, ccg__rd_final_f64(kind, acc, g->count, shift));
}

/* Gather's output element e ([outer, ni, inner]): the source element, or
 * false when index j (*bad) is out of range. */
CCG_HD static inline bool ccg__gather_src(ccg_dtype di, const void *idx,
                                          size_t ni, size_t inner, int64_t dim,
                                          size_t e, size_t *src, size_t *bad) {
  size_t in = e % inner, j = (e / inner) % ni, oi = e / inner / ni;
  int64_t k;
  if (!ccg__gather_index(ccg__ld_i64(di, idx, j), dim, &k)) {
    *bad = j;
    return false;
  }
  *src = (oi * (size_t)dim + (size_t)k) * inner + in;
  return true;
}

/* The flat offset of ScatterND's index row r (k entries over dims), or
 * false when an entry is out of range. */
CCG_HD static inline bool ccg__scatter_row(ccg_dtype di, const void *idx,
                                           size_t r, int k, const int64_t *dims,
                                           size_t *off) {
  size_t o = 0;
  for (int d = 0; d < k; d++) {
    int64_t j = ccg__ld_i64(di, idx, r * (size_t)k + (size_t)d);
    int64_t dim = dims[d];
    if (j < -dim || j >= dim)
      return false;
    o = o * (size_t)dim + (size_t)(j < 0 ? j + dim : j);
  }
  *off = o;
  return true;
}

#endif
