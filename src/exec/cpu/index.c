/* Slice (bounds read at run time, ONNX clamping, any steps), Gather,
 * GatherND and ScatterND (replace or combine; negative indices, bounds
 * checked). Any dtype. */
#include <math.h>
#include <string.h>

#include "exec/cpu/cpu.h"

ccg_status ccg__slice_check(ccg_exec *x, const ccg__xnode *n,
                            const ccg__slice_args *sa, ccg__slice *out) {
  size_t bad = 0;
  int64_t ax = 0, count = 0;
  switch (ccg__slice_setup(sa, out, &bad, &ax, &count)) {
  case CCG__SLICE_OK:
    return CCG_STATUS_OK;
  case CCG__SLICE_AXIS:
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "axes entry %zu is out of range for rank %d", bad,
                      sa->rank);
  case CCG__SLICE_STEP:
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "steps entry %zu is 0",
                      bad);
  default:
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "bounds give %lld elements on axis %lld but the bound "
                      "output shape has %lld",
                      (long long)count, (long long)ax,
                      (long long)sa->odims[ax]);
  }
}

ccg__slice_args ccg__slice_args_of(const ccg_exec *x, const ccg__xnode *n,
                                   ccg__value_ptr_fn ptr) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *sv = ccg__in(x, n, 1), *ev = ccg__in(x, n, 2);
  const ccg__xval *av = n->n_in > 3 ? ccg__in(x, n, 3) : NULL;
  const ccg__xval *pv = n->n_in > 4 ? ccg__in(x, n, 4) : NULL;
  ccg__slice_args sa = {a->rank,
                        a->dims,
                        o->dims,
                        sv->numel,
                        sv->dtype,
                        ev->dtype,
                        av ? av->dtype : CCG_DTYPE_I64,
                        pv ? pv->dtype : CCG_DTYPE_I64,
                        ptr(x, n->in[1]),
                        ptr(x, n->in[2]),
                        av ? ptr(x, n->in[3]) : NULL,
                        pv ? ptr(x, n->in[4]) : NULL};
  return sa;
}

static ccg_status run_slice(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__slice_args sa = ccg__slice_args_of(x, n, ccg__host_ptr);
  ccg__slice sl;
  CCG_CHECK(ccg__slice_check(x, n, &sa, &sl));
  if (o->numel)
    ccg__strided_copy(o->ptr, a->ptr, ccg_dtype_size(o->dtype), a->rank,
                      o->dims, sl.st, sl.base);
  return CCG_STATUS_OK;
}

/* axis; i0 = outer, i1 = inner elements. */
/* Output rows [begin, end) of a Gather (row oi * ni + j: outer index oi,
 * index entry j), the indices already checked. */
static void gather_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                        size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0);
  size_t es = ccg_dtype_size(a->dtype), row = (size_t)n->p.i1 * es;
  int64_t dim = a->dims[n->p.axis];
  size_t ni = iv->numel;
  for (size_t r = begin; r < end; r++) {
    size_t oi = r / ni, j = r % ni;
    int64_t k = 0;
    ccg__gather_index(ccg__ld_i64(iv->dtype, iv->ptr, j), dim, &k);
    memcpy((char *)o->ptr + (oi * ni + j) * row,
           (const char *)a->ptr + (oi * (size_t)dim + (size_t)k) * row, row);
  }
}

static ccg_status run_gather(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  int64_t dim = a->dims[n->p.axis];
  size_t ni = iv->numel, outer = (size_t)n->p.i0;
  for (size_t j = 0; j < ni; j++) {
    int64_t k = ccg__ld_i64(iv->dtype, iv->ptr, j), kk;
    if (!ccg__gather_index(k, dim, &kk))
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "index %lld (element %zu of '%s') is out of range for "
                        "dim %d of size %lld",
                        (long long)k, j, ccg_value_name(x->g, n->in[1]),
                        n->p.axis, (long long)dim);
  }
  ccg__par_rows(x, n, outer * ni, (size_t)n->p.i1, gather_rows);
  return CCG_STATUS_OK;
}

/* Index row r of input 1 (k entries over data a's dims) is out of range:
 * the error names the entry at fault. */
static ccg_status index_row_error(ccg_exec *x, const ccg__xnode *n, size_t r,
                                  int k, const ccg__xval *a) {
  const ccg__xval *iv = ccg__in(x, n, 1);
  for (int d = 0; d < k; d++) {
    int64_t j = ccg__ld_i64(iv->dtype, iv->ptr, r * (size_t)k + (size_t)d);
    int64_t dim = a->dims[d];
    if (j < -dim || j >= dim)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "index %lld (row %zu, entry %d of '%s') is out of "
                        "range for dim %d of size %lld",
                        (long long)j, r, d, ccg_value_name(x->g, n->in[1]), d,
                        (long long)dim);
  }
  return ccg__xfail(x, n, CCG_STATUS_INTERNAL, "index row %zu", r);
}

/* ScatterND: out = data, then each index row's slice of `slice` elements
 * is replaced (p.i0 = 0) or combined (1..4: add, mul, max, min); p.i1 =
 * k, the index length. Negative indices count from the end; out of range is an
 * error. */
static ccg_status run_scatter_nd(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  const ccg__xval *u = ccg__in(x, n, 2), *o = ccg__out(x, n, 0);
  int k = (int)n->p.i1;
  size_t es = ccg_dtype_size(o->dtype), slice = 1, rows = 0;
  for (int d = k; d < a->rank; d++)
    slice *= (size_t)a->dims[d];
  rows = k ? iv->numel / (size_t)k : 0;
  if (o->ptr != a->ptr)
    memcpy(o->ptr, a->ptr, o->nbytes);
  for (size_t r = 0; r < rows; r++) {
    size_t off = 0;
    if (!ccg__scatter_row(iv->dtype, iv->ptr, r, k, a->dims, &off))
      return index_row_error(x, n, r, k, a);
    off *= slice;
    if (!n->p.i0) {
      memcpy((char *)o->ptr + off * es, (const char *)u->ptr + r * slice * es,
             slice * es);
    } else if (n->p.i0 == 1 && o->dtype == CCG_DTYPE_F32) {
      float *dst = (float *)o->ptr + off;
      const float *src = (const float *)u->ptr + r * slice;
      for (size_t i = 0; i < slice; i++)
        dst[i] += src[i];
    } else {
      for (size_t i = 0; i < slice; i++)
        ccg__combine_elem((int)n->p.i0, o->dtype, o->ptr, off + i, u->dtype,
                          u->ptr, r * slice + i);
    }
  }
  return CCG_STATUS_OK;
}

/* GatherND: out row r = data's slice at index row r; p.i1 = k. */
static ccg_status run_gather_nd(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0);
  int k = (int)n->p.i1;
  size_t es = ccg_dtype_size(o->dtype), slice = 1;
  for (int d = k; d < a->rank; d++)
    slice *= (size_t)a->dims[d];
  size_t rows = iv->numel / (size_t)k;
  for (size_t r = 0; r < rows; r++) {
    size_t off = 0;
    if (!ccg__scatter_row(iv->dtype, iv->ptr, r, k, a->dims, &off))
      return index_row_error(x, n, r, k, a);
    memcpy((char *)o->ptr + r * slice * es,
           (const char *)a->ptr + off * slice * es, slice * es);
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_gather_nd(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *iv = ccg__in(x, n, 1);
  n->p.i1 = iv->rank ? iv->dims[iv->rank - 1] : 0;
  if (n->p.i1 < 1)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "indices need a last dim of 1 or more");
  n->run = run_gather_nd;
  return CCG_STATUS_OK;
}

static ccg_status prep_scatter_nd(ccg_exec *x, ccg__xnode *n) {
  const char *red;
  CCG_CHECK(ccg__xattr_s(x, n, "reduction", &red));
  const ccg__xval *iv = ccg__in(x, n, 1);
  static const char *const reds[] = {"none", "add", "mul", "max", "min"};
  n->p.i0 = 0;
  for (int i = 1; i < 5; i++)
    if (strcmp(red, reds[i]) == 0)
      n->p.i0 = i;
  n->p.i1 = iv->rank ? iv->dims[iv->rank - 1] : 0;
  n->run = run_scatter_nd;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_index(ccg_exec *x, ccg__xnode *n) {
  if (n->op == CCG_OP_SLICE) {
    n->run = run_slice;
    return CCG_STATUS_OK;
  }
  if (n->op == CCG_OP_SCATTER_ND)
    return prep_scatter_nd(x, n);
  if (n->op == CCG_OP_GATHER_ND)
    return prep_gather_nd(x, n);
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis;
  int ax;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &ax));
  int64_t outer, inner;
  ccg__xval_around(a, ax, &outer, NULL, &inner);
  n->p.axis = ax;
  n->p.i0 = outer;
  n->p.i1 = inner;
  n->run = run_gather;
  return CCG_STATUS_OK;
}
