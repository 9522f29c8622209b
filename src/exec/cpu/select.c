/* CPU kernels of the select family: ArgMax/ArgMin, GatherElements,
 * ScatterElements, TopK, NonZero and Compress, any dtype. The arithmetic
 * is select_math.h, shared with the CUDA kernels. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/select.h"
#include "exec/select_math.h"

/* ---- ArgMax, ArgMin ----------------------------------------------------- */

/* p: axis; i0 = ArgMin; i1 = len; i2 = inner; i3 = select_last_index. */
static ccg_status run_arg(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  for (size_t j = 0; j < o->numel; j++)
    ccg__arg_elem(a->dtype, a->ptr, o->ptr, j, n->p.i1, (size_t)n->p.i2,
                  n->p.i0 != 0, n->p.i3 != 0);
  return CCG_STATUS_OK;
}

static ccg_status prep_arg(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis, last, outer;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xattr_i(x, n, "select_last_index", &last));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &n->p.axis));
  ccg__xval_around(a, n->p.axis, &outer, &n->p.i1, &n->p.i2);
  if (n->p.i1 < 1 && ccg__out(x, n, 0)->numel)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "axis %d has size 0: no element to select", n->p.axis);
  n->p.i0 = n->op == CCG_OP_ARG_MIN;
  n->p.i3 = last != 0;
  n->run = run_arg;
  return CCG_STATUS_OK;
}

/* ---- GatherElements, ScatterElements ------------------------------------ */

ccg_status ccg__elems_index_error(ccg_exec *x, const ccg__xnode *n, int64_t bad,
                                  size_t at) {
  return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                    "index %lld (element %zu of '%s') is out of range for "
                    "axis %d of size %lld",
                    (long long)bad, at, ccg_value_name(x->g, n->in[1]),
                    n->p.axis, (long long)ccg__in(x, n, 0)->dims[n->p.axis]);
}

ccg__elems_geom ccg__elems_geom_of(const ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  return ccg__elems_geom_make(a->rank, n->p.axis, a->dims, iv->dims);
}

static ccg_status run_gather_elements(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0);
  ccg__elems_geom g = ccg__elems_geom_of(x, n);
  size_t es = ccg_dtype_size(a->dtype);
  for (size_t e = 0; e < o->numel; e++) {
    int64_t bad = 0;
    if (!ccg__gather_elems_elem(&g, es, a->ptr, iv->dtype, iv->ptr, o->ptr, e,
                                &bad))
      return ccg__elems_index_error(x, n, bad, e);
  }
  return CCG_STATUS_OK;
}

/* ScatterElements as one row-major walk over the indices, the data offset
 * carried from element to element: the per-element coordinate division of
 * the line loop was 7% of a tiny mixtral step. Two index elements meet on
 * the same data element only within one line (their other coordinates are
 * equal), and the walk keeps each line's index order: the same writes in
 * the same order as ccg__scatter_elems_line. False, with nothing written,
 * where an index is out of range (the line loop then names the first). */
static bool scatter_walk(const ccg__elems_geom *g, int red, ccg_dtype dt,
                         size_t es, void *o, const void *u, ccg_dtype di,
                         const void *idx, size_t numel) {
  int64_t kk;
  for (size_t e = 0; e < numel; e++)
    if (!ccg__gather_index(ccg__ld_i64(di, idx, e), g->adim, &kk))
      return false;
  int64_t c[CCG_MAX_RANK] = {0};
  size_t base = 0, step = (size_t)g->dst[g->axis];
  for (size_t e = 0; e < numel; e++) {
    ccg__gather_index(ccg__ld_i64(di, idx, e), g->adim, &kk);
    size_t off = base + (size_t)kk * step;
    /* the byte loop of ccg__sel_copy was a third of the walk's time: the sizes
     * the dtypes have get a copy of constant size */
    if (red == 0 && es == 4)
      memcpy((char *)o + off * 4, (const char *)u + e * 4, 4);
    else if (red == 0 && es == 8)
      memcpy((char *)o + off * 8, (const char *)u + e * 8, 8);
    else if (red == 0)
      ccg__sel_copy(es, u, e, o, off);
    else
      ccg__combine_elem(red, dt, o, off, dt, u, e);
    for (int d = g->rank - 1; d >= 0; d--) {
      size_t sd = d == g->axis ? 0 : (size_t)g->dst[d];
      if (++c[d] < g->idims[d]) {
        base += sd;
        break;
      }
      base -= (size_t)(c[d] - 1) * sd;
      c[d] = 0;
    }
  }
  return true;
}

/* p.i0: reduction (0 none, 1..4 add, mul, max, min). */
static ccg_status run_scatter_elements(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  const ccg__xval *u = ccg__in(x, n, 2), *o = ccg__out(x, n, 0);
  ccg__elems_geom g = ccg__elems_geom_of(x, n);
  if (o->ptr != a->ptr)
    memcpy(o->ptr, a->ptr, o->nbytes);
  if (g.rank > 0 &&
      scatter_walk(&g, (int)n->p.i0, o->dtype, ccg_dtype_size(o->dtype), o->ptr,
                   u->ptr, iv->dtype, iv->ptr, iv->numel))
    return CCG_STATUS_OK;
  size_t len = (size_t)iv->dims[n->p.axis];
  size_t lines = len ? iv->numel / len : 0;
  size_t es = ccg_dtype_size(o->dtype);
  for (size_t l = 0; l < lines; l++) {
    int64_t bad = 0;
    size_t at = 0;
    if (!ccg__scatter_elems_line(&g, (int)n->p.i0, o->dtype, es, o->ptr, u->ptr,
                                 iv->dtype, iv->ptr, l, &bad, &at))
      return ccg__elems_index_error(x, n, bad, at);
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_elements(ccg_exec *x, ccg__xnode *n) {
  int64_t axis;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &n->p.axis));
  /* symbolic dims are bound now: indices must stay inside data */
  for (int d = 0; d < a->rank; d++)
    if (d != n->p.axis && iv->dims[d] > a->dims[d])
      return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                        "indices '%s' has %lld elements in dim %d but data "
                        "only %lld",
                        ccg_value_name(x->g, n->in[1]), (long long)iv->dims[d],
                        d, (long long)a->dims[d]);
  if (n->op == CCG_OP_GATHER_ELEMENTS) {
    n->run = run_gather_elements;
    return CCG_STATUS_OK;
  }
  const char *red;
  CCG_CHECK(ccg__xattr_s(x, n, "reduction", &red));
  static const char *const reds[] = {"none", "add", "mul", "max", "min"};
  n->p.i0 = -1;
  for (int i = 0; i < 5; i++)
    if (strcmp(red, reds[i]) == 0)
      n->p.i0 = i;
  if (n->p.i0 < 0)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "reduction '%s'", red);
  n->run = run_scatter_elements;
  return CCG_STATUS_OK;
}

/* ---- TopK --------------------------------------------------------------- */

ccg_status ccg__top_k_check(ccg_exec *x, const ccg__xnode *n, int64_t k) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  int ax = n->p.axis;
  if (k < 0 || k > a->dims[ax] || k != o->dims[ax])
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "K is %lld; the axis %d has %lld elements and the "
                      "outputs were made for %lld",
                      (long long)k, ax, (long long)a->dims[ax],
                      (long long)o->dims[ax]);
  return CCG_STATUS_OK;
}

/* Beyond this K the insertion of select_math.h (O(len * K) per line) gives
 * way to a merge sort of the line; both give the same result, the order
 * being total (value, then index). */
#define TOP_K_SORT_FROM 32

/* Sorts the line's positions t < len (a stable merge sort, so equal values
 * keep the lower index first) into ord, with tmp as much space again. */
static void top_k_sort(const ccg__xval *a, size_t base, size_t stride,
                       int64_t len, bool largest, int64_t *ord, int64_t *tmp) {
  for (int64_t t = 0; t < len; t++)
    ord[t] = t;
  for (int64_t w = 1; w < len; w *= 2) {
    for (int64_t lo = 0; lo < len; lo += 2 * w) {
      int64_t mid = lo + w < len ? lo + w : len;
      int64_t hi = lo + 2 * w < len ? lo + 2 * w : len, i = lo, j = mid;
      for (int64_t k = lo; k < hi; k++) {
        bool right = false;
        if (i < mid && j < hi) {
          int c = ccg__sel_cmp(a->dtype, a->ptr, base + (size_t)ord[j] * stride,
                               a->ptr, base + (size_t)ord[i] * stride, true);
          right = largest ? c > 0 : c < 0;
        }
        tmp[k] = (i >= mid || right) ? ord[j++] : ord[i++];
      }
    }
    memcpy(ord, tmp, (size_t)len * sizeof *ord);
  }
}

/* p: axis; i0 = largest; i1 = len; i2 = inner. K is read at each run, so
 * a value that differs from the one the shapes were made with is caught. */
static ccg_status run_top_k(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *kv = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0), *oi = ccg__out(x, n, 1);
  int64_t k = ccg__ld_i64(kv->dtype, kv->ptr, 0), len = n->p.i1;
  CCG_CHECK(ccg__top_k_check(x, n, k));
  size_t inner = (size_t)n->p.i2, es = ccg_dtype_size(a->dtype);
  size_t lines = len ? a->numel / (size_t)len : 0;
  bool largest = n->p.i0 != 0;
  int64_t *ord = x->scratch, *idx = oi->ptr;
  for (size_t l = 0; l < lines; l++) {
    if (k <= TOP_K_SORT_FROM || !n->scratch) {
      ccg__topk_elem(a->dtype, es, a->ptr, o->ptr, idx, l, len, k, inner,
                     largest);
      continue;
    }
    size_t base = (l / inner) * (size_t)len * inner + l % inner;
    size_t obase = (l / inner) * (size_t)k * inner + l % inner;
    top_k_sort(a, base, inner, len, largest, ord, ord + len);
    for (int64_t s = 0; s < k; s++) {
      size_t at = obase + (size_t)s * inner;
      ccg__sel_copy(es, a->ptr, base + (size_t)ord[s] * inner, o->ptr, at);
      idx[at] = ord[s];
    }
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_top_k(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *kv = ccg__in(x, n, 1);
  int64_t axis, largest, outer;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xattr_i(x, n, "largest", &largest));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &n->p.axis));
  if (kv->numel != 1)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "K ('%s') has %zu elements; it holds one",
                      ccg_value_name(x->g, n->in[1]), kv->numel);
  ccg__xval_around(a, n->p.axis, &outer, &n->p.i1, &n->p.i2);
  n->p.i0 = largest != 0;
  if (ccg__out(x, n, 0)->dims[n->p.axis] > TOP_K_SORT_FROM)
    n->scratch = 2 * (size_t)n->p.i1 * sizeof(int64_t);
  n->run = run_top_k;
  return CCG_STATUS_OK;
}

/* ---- NonZero, Compress --------------------------------------------------- */

/* The bound output dim that holds the data-dependent size. */
static int sized_dim(const ccg__xnode *n) {
  return n->op == CCG_OP_NON_ZERO ? 1 : n->p.axis < 0 ? 0 : n->p.axis;
}

ccg_status ccg__select_run_sized(ccg_exec *x, const ccg__xnode *n,
                                 int64_t *count) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t cap = (size_t)o->dims[sized_dim(n)], got;
  if (n->op == CCG_OP_NON_ZERO) {
    got = ccg__nonzero_run(a->dtype, a->ptr, a->rank, a->dims, a->numel, o->ptr,
                           cap);
    if (got <= cap)
      ccg__sized_compact(o->ptr, sizeof(int64_t), (size_t)a->rank, cap, got, 1);
  } else {
    const ccg__xval *c = ccg__in(x, n, 1);
    int64_t outer = 1, len = (int64_t)a->numel, inner = 1;
    if (n->p.axis >= 0)
      ccg__xval_around(a, n->p.axis, &outer, &len, &inner);
    size_t es = ccg_dtype_size(a->dtype);
    got = ccg__compress_run(es, a->ptr, c->ptr, c->numel, (size_t)outer,
                            (size_t)len, (size_t)inner, o->ptr, cap);
    if (got <= cap)
      ccg__sized_compact(o->ptr, es, (size_t)outer, cap, got, (size_t)inner);
  }
  *count = (int64_t)got;
  if (got > cap)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "the data select %zu elements along output dim %d but "
                      "its buffer holds %zu",
                      got, sized_dim(n), cap);
  return CCG_STATUS_OK;
}

/* With the data-dependent dim bound to the exact count (by the run-time
 * specialization's count rule, or the caller's named dims), the output is
 * complete; any other binding is an error. */
static ccg_status run_sized(ccg_exec *x, const ccg__xnode *n) {
  int64_t count = 0;
  CCG_CHECK(ccg__select_run_sized(x, n, &count));
  int64_t bound = ccg__out(x, n, 0)->dims[sized_dim(n)];
  if (count != bound)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "the data select %lld elements along output dim %d but "
                      "it was bound to %lld",
                      (long long)count, sized_dim(n), (long long)bound);
  return CCG_STATUS_OK;
}

static ccg_status prep_sized(ccg_exec *x, ccg__xnode *n) {
  n->p.axis = -1;
  if (n->op == CCG_OP_COMPRESS && ccg_node_attr(x->g, n->id, "axis")) {
    int64_t axis;
    CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
    CCG_CHECK(ccg__xaxis(x, n, axis, ccg__in(x, n, 0)->rank, &n->p.axis));
  }
  n->run = run_sized;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_select(ccg_exec *x, ccg__xnode *n) {
  switch (n->op) {
  case CCG_OP_ARG_MAX:
  case CCG_OP_ARG_MIN:
    return prep_arg(x, n);
  case CCG_OP_GATHER_ELEMENTS:
  case CCG_OP_SCATTER_ELEMENTS:
    return prep_elements(x, n);
  case CCG_OP_TOP_K:
    return prep_top_k(x, n);
  case CCG_OP_NON_ZERO:
  case CCG_OP_COMPRESS:
    return prep_sized(x, n);
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
  }
}
