/* Data movement: Reshape, Squeeze, Unsqueeze (copies, or nothing when the
 * planner put the output over the input), Transpose, Concat, Split, Expand,
 * Shape, Constant (graph data, no kernel) and ConstantOfShape. Any dtype:
 * these move bytes. */
#include <string.h>

#include "exec/cpu/cpu.h"

static ccg_status run_copy(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (o->ptr != a->ptr)
    memcpy(o->ptr, a->ptr, o->nbytes);
  return CCG_STATUS_OK;
}

/* chunk = source strides in output dim order.
 *
 * Where the output's last dim is strided in the input and another output
 * dim `d` is the input's contiguous one (attention's K transposed to
 * [heads, dim, seq]), each (d, last) plane is copied in square tiles:
 * element by element along the output rows, every read falls on a new
 * cache line, ~5x slower. Otherwise the output is copied row by row. Both
 * split over the pool by whole planes or rows; a copy gives the same bytes
 * whichever thread makes it. */
#define TR_TILE 16

typedef struct tr_planes {
  int d, n_outer;               /* the tiled dim; dims besides d, last */
  int64_t ni, nj, src_j, dst_i; /* plane: d's size, last's; strides */
  int64_t outer[CCG_MAX_RANK];  /* sizes of the other dims */
  int64_t src_o[CCG_MAX_RANK], dst_o[CCG_MAX_RANK];
} tr_planes;

/* The plane split of a Transpose of 4-byte elements, if it has one. */
static bool tr_planes_of(const ccg__xnode *n, const ccg__xval *o,
                         tr_planes *t) {
  int r = o->rank;
  const int64_t *st = n->p.chunk;
  if (r < 2 || ccg_dtype_size(o->dtype) != 4 || st[r - 1] == 1 ||
      o->dims[r - 1] < TR_TILE)
    return false;
  int64_t ost[CCG_MAX_RANK];
  ccg__strides(r, o->dims, ost);
  t->d = -1;
  for (int k = 0; k < r - 1; k++)
    if (st[k] == 1 && o->dims[k] >= TR_TILE)
      t->d = k;
  if (t->d < 0)
    return false;
  t->ni = o->dims[t->d];
  t->nj = o->dims[r - 1];
  t->src_j = st[r - 1];
  t->dst_i = ost[t->d];
  t->n_outer = 0;
  for (int k = 0; k < r - 1; k++)
    if (k != t->d) {
      t->outer[t->n_outer] = o->dims[k];
      t->src_o[t->n_outer] = st[k];
      t->dst_o[t->n_outer++] = ost[k];
    }
  return true;
}

static void tr_plane(float *dst, const float *src, const tr_planes *t) {
  for (int64_t i0 = 0; i0 < t->ni; i0 += TR_TILE) {
    int64_t ie = i0 + TR_TILE < t->ni ? i0 + TR_TILE : t->ni;
    for (int64_t j0 = 0; j0 < t->nj; j0 += TR_TILE) {
      int64_t je = j0 + TR_TILE < t->nj ? j0 + TR_TILE : t->nj;
      for (int64_t j = j0; j < je; j++)
        for (int64_t i = i0; i < ie; i++)
          dst[i * t->dst_i + j] = src[i + j * t->src_j];
    }
  }
}

/* Planes [begin, end) in the order of the output's other dims. */
static void transpose_planes(ccg_exec *x, const ccg__xnode *n, size_t begin,
                             size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  tr_planes t;
  if (!tr_planes_of(n, o, &t))
    return; /* never: run_transpose checked */
  for (size_t q = begin; q < end; q++) {
    int64_t so = 0, dso = 0, rest = (int64_t)q;
    for (int k = t.n_outer - 1; k >= 0; k--) {
      int64_t i = rest % t.outer[k];
      rest /= t.outer[k];
      so += i * t.src_o[k];
      dso += i * t.dst_o[k];
    }
    tr_plane((float *)o->ptr + dso, (const float *)a->ptr + so, &t);
  }
}

/* Output rows [begin, end) (rows of its last dim), in runs along the dim
 * before the last: one strided copy per run. */
static void transpose_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                           size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  int r = o->rank;
  const int64_t *st = n->p.chunk;
  size_t es = ccg_dtype_size(o->dtype);
  int64_t inner = o->dims[r - 1], idx[CCG_MAX_RANK] = {0}, off = 0;
  size_t rest = begin;
  for (int k = r - 2; k >= 0; k--) {
    idx[k] = (int64_t)(rest % (size_t)o->dims[k]);
    rest /= (size_t)o->dims[k];
    off += idx[k] * st[k];
  }
  char *out = (char *)o->ptr + begin * (size_t)inner * es;
  if (r == 1) {
    ccg__strided_copy(out, a->ptr, es, 1, &inner, st, off);
    return;
  }
  for (size_t row = begin; row < end;) {
    int64_t run = o->dims[r - 2] - idx[r - 2];
    if ((size_t)run > end - row)
      run = (int64_t)(end - row);
    int64_t dims[2] = {run, inner};
    ccg__strided_copy(out, a->ptr, es, 2, dims, &st[r - 2], off);
    out += (size_t)(run * inner) * es;
    row += (size_t)run;
    idx[r - 2] += run;
    off += run * st[r - 2];
    for (int k = r - 2; k >= 0 && idx[k] == o->dims[k]; k--) {
      off -= st[k] * o->dims[k];
      idx[k] = 0;
      if (k > 0) {
        idx[k - 1]++;
        off += st[k - 1];
      }
    }
  }
}

static ccg_status run_transpose(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (o->rank == 0 || o->numel == 0) {
    ccg__strided_copy(o->ptr, a->ptr, ccg_dtype_size(o->dtype), o->rank,
                      o->dims, n->p.chunk, 0);
    return CCG_STATUS_OK;
  }
  tr_planes t;
  size_t inner = (size_t)o->dims[o->rank - 1];
  if (tr_planes_of(n, o, &t)) {
    size_t plane = (size_t)(t.ni * t.nj);
    ccg__par_rows(x, n, o->numel / plane, plane, transpose_planes);
  } else {
    ccg__par_rows(x, n, o->numel / inner, inner, transpose_rows);
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_transpose(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  const int64_t *perm;
  size_t np = ccg__xattr_ints(x, n, "perm", &perm);
  int64_t ist[CCG_MAX_RANK];
  ccg__strides(a->rank, a->dims, ist);
  int64_t *st = ccg__arena_calloc(&x->arena, (size_t)a->rank + 1, 8);
  if (!st)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  for (int d = 0; d < a->rank; d++) {
    int64_t p = np ? perm[d] : a->rank - 1 - d;
    if (p < 0 || p >= a->rank)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "perm entry %lld is out of range", (long long)p);
    st[d] = ist[p];
  }
  n->p.chunk = st;
  n->run = run_transpose;
  return CCG_STATUS_OK;
}

/* axis; i0 = outer count, i1 = inner elements below the axis. */
static ccg_status run_concat(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  size_t es = ccg_dtype_size(o->dtype), outer = (size_t)n->p.i0;
  size_t orow = (size_t)o->dims[n->p.axis] * (size_t)n->p.i1 * es, at = 0;
  for (uint32_t k = 0; k < n->n_in; k++) {
    const ccg__xval *a = ccg__in(x, n, k);
    size_t row = (size_t)a->dims[n->p.axis] * (size_t)n->p.i1 * es;
    for (size_t oi = 0; oi < outer && row; oi++)
      memcpy((char *)o->ptr + oi * orow + at, (const char *)a->ptr + oi * row,
             row);
    at += row;
  }
  return CCG_STATUS_OK;
}

static ccg_status run_split(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  size_t es = ccg_dtype_size(a->dtype), outer = (size_t)n->p.i0;
  size_t irow = (size_t)a->dims[n->p.axis] * (size_t)n->p.i1 * es, at = 0;
  for (uint32_t k = 0; k < n->n_out; k++) {
    const ccg__xval *o = ccg__out(x, n, k);
    size_t row = (size_t)o->dims[n->p.axis] * (size_t)n->p.i1 * es;
    for (size_t oi = 0; oi < outer && row; oi++)
      memcpy((char *)o->ptr + oi * row, (const char *)a->ptr + oi * irow + at,
             row);
    at += row;
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_concat_split(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *ref =
      n->op == CCG_OP_CONCAT ? ccg__out(x, n, 0) : ccg__in(x, n, 0);
  int64_t axis;
  int ax;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xaxis(x, n, axis, ref->rank, &ax));
  int64_t outer, inner;
  ccg__xval_around(ref, ax, &outer, NULL, &inner);
  n->p.axis = ax;
  n->p.i0 = outer;
  n->p.i1 = inner;
  n->run = n->op == CCG_OP_CONCAT ? run_concat : run_split;
  return CCG_STATUS_OK;
}

/* chunk = source strides over the output dims (0 where broadcast). */
static ccg_status run_expand(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__strided_copy(o->ptr, a->ptr, ccg_dtype_size(o->dtype), o->rank, o->dims,
                    n->p.chunk, 0);
  return CCG_STATUS_OK;
}

static ccg_status prep_expand(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  int64_t *st = ccg__arena_calloc(&x->arena, (size_t)o->rank + 1, 8);
  if (!st)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  ccg__param_strides(a->rank, a->dims, o->rank, o->dims, st);
  n->p.chunk = st;
  n->run = run_expand;
  return CCG_STATUS_OK;
}

/* i0 = first dim written. */
static ccg_status run_shape(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  for (size_t i = 0; i < o->numel; i++)
    ccg__st_i64(o->dtype, o->ptr, i, a->dims[n->p.i0 + (int64_t)i]);
  return CCG_STATUS_OK;
}

static ccg_status prep_shape(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  int64_t start;
  CCG_CHECK(ccg__xattr_i(x, n, "start", &start));
  if (start < 0)
    start += a->rank;
  start = start < 0 ? 0 : start > a->rank ? a->rank : start;
  if (start + (int64_t)o->numel > a->rank)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "output of %zu dims does not fit rank %d from dim %lld",
                      o->numel, a->rank, (long long)start);
  n->p.i0 = start;
  n->run = run_shape;
  return CCG_STATUS_OK;
}

/* t = the one-element value (NULL: f32 zero). */
static ccg_status run_constant_of_shape(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  size_t es = ccg_dtype_size(o->dtype);
  if (!n->p.t) {
    memset(o->ptr, 0, o->nbytes);
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < o->numel; i++)
    memcpy((char *)o->ptr + i * es, n->p.t->data, es);
  return CCG_STATUS_OK;
}

static ccg_status prep_constant_of_shape(ccg_exec *x, ccg__xnode *n) {
  const ccg_attr *v = ccg_node_attr(x->g, n->id, "value");
  n->p.t = v && v->type == CCG_ATTR_TENSOR ? v->t : NULL;
  if (n->p.t && n->p.t->dtype != ccg__out(x, n, 0)->dtype)
    return ccg__xfail(x, n, CCG_STATUS_DTYPE,
                      "value is %s but the output is %s",
                      ccg_dtype_name(n->p.t->dtype),
                      ccg_dtype_name(ccg__out(x, n, 0)->dtype));
  n->run = run_constant_of_shape;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_shape(ccg_exec *x, ccg__xnode *n) {
  switch (n->op) {
  case CCG_OP_RESHAPE:
  case CCG_OP_SQUEEZE:
  case CCG_OP_UNSQUEEZE:
    n->run = run_copy;
    return CCG_STATUS_OK;
  case CCG_OP_TRANSPOSE:
    return prep_transpose(x, n);
  case CCG_OP_CONCAT:
  case CCG_OP_SPLIT:
    return prep_concat_split(x, n);
  case CCG_OP_EXPAND:
    return prep_expand(x, n);
  case CCG_OP_SHAPE:
    return prep_shape(x, n);
  case CCG_OP_CONSTANT:
    n->run = NULL; /* the output is the attribute's data (see exec.c) */
    return CCG_STATUS_OK;
  case CCG_OP_CONSTANT_OF_SHAPE:
    return prep_constant_of_shape(x, n);
  default:
    return ccg__xfail(x, n, CCG_STATUS_INTERNAL, "not a shape op");
  }
}
