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

/* chunk = source strides in output dim order. */
/* Output rows [begin, end) along dim 0. */
static void transpose_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                           size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t es = ccg_dtype_size(o->dtype), row = o->numel / (size_t)o->dims[0];
  int64_t dims[CCG_MAX_RANK];
  memcpy(dims, o->dims, sizeof dims);
  dims[0] = (int64_t)(end - begin);
  ccg__strided_copy((char *)o->ptr + begin * row * es, a->ptr, es, o->rank,
                    dims, n->p.chunk, (int64_t)begin * n->p.chunk[0]);
}

static ccg_status run_transpose(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (o->rank == 0 || o->numel == 0) {
    ccg__strided_copy(o->ptr, a->ptr, ccg_dtype_size(o->dtype), o->rank,
                      o->dims, n->p.chunk, 0);
    return CCG_STATUS_OK;
  }
  ccg__par_rows(x, n, (size_t)o->dims[0], o->numel / (size_t)o->dims[0],
                transpose_rows);
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
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; d++)
    outer *= ref->dims[d];
  for (int d = ax + 1; d < ref->rank; d++)
    inner *= ref->dims[d];
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
