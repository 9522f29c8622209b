/* ReduceSum, ReduceMean, ReduceMax over any set of axes. Floats accumulate
 * in double, integers in int64, in input order (deterministic). */
#include <string.h>

#include "exec/cpu/cpu.h"

/* perm[d] = 1 if input dim d is reduced; chunk = per input dim, the output
 * element stride (0 on reduced dims); i0 = elements reduced per output. */
static ccg_status run_reduce(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  bool is_int = !ccg_dtype_is_float(a->dtype);
  bool is_max = n->op == CCG_OP_REDUCE_MAX;
  double *accf = x->scratch;
  int64_t *acci = x->scratch;
  for (size_t j = 0; j < o->numel; j++) {
    if (is_int)
      acci[j] = is_max ? INT64_MIN : 0;
    else
      accf[j] = is_max ? -INFINITY : 0.0;
  }
  int r = a->rank;
  const int64_t *ost = n->p.chunk;
  if (a->numel > 0) {
    size_t inner = r ? (size_t)a->dims[r - 1] : 1;
    size_t is = r ? (size_t)ost[r - 1] : 0;
    int64_t idx[CCG_MAX_RANK] = {0};
    size_t off = 0;
    for (size_t base = 0; base < a->numel; base += inner) {
      for (size_t i = 0; i < inner; i++) {
        size_t j = off + i * is;
        if (is_int) {
          acci[j] = ccg__red_i64(is_max, acci[j],
                                 ccg__ld_i64(a->dtype, a->ptr, base + i));
        } else {
          double v = a->dtype == CCG_DTYPE_F32
                         ? ((const float *)a->ptr)[base + i]
                         : ccg__ld_f64(a->dtype, a->ptr, base + i);
          accf[j] = ccg__red_f64(is_max, accf[j], v);
        }
      }
      for (int d = r - 2; d >= 0; d--) {
        idx[d]++;
        off += (size_t)ost[d];
        if (idx[d] < a->dims[d])
          break;
        off -= (size_t)(ost[d] * a->dims[d]);
        idx[d] = 0;
      }
    }
  }
  int64_t count = n->p.i0;
  for (size_t j = 0; j < o->numel; j++) {
    if (is_int) {
      int64_t v = acci[j];
      if (n->op == CCG_OP_REDUCE_MEAN)
        v = count ? v / count : 0;
      ccg__st_i64(o->dtype, o->ptr, j, v);
    } else {
      double v = accf[j];
      if (n->op == CCG_OP_REDUCE_MEAN)
        v = count ? v / (double)count : NAN;
      ccg__st_f64(o->dtype, o->ptr, j, v);
    }
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_reduce(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (a->dtype == CCG_DTYPE_BOOL)
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype bool");
  const int64_t *axes;
  size_t n_axes = ccg__xattr_ints(x, n, "axes", &axes);
  int64_t noop;
  CCG_CHECK(ccg__xattr_i(x, n, "noop_with_empty_axes", &noop));
  bool red[CCG_MAX_RANK] = {false};
  for (size_t i = 0; i < n_axes; i++) {
    int ax;
    CCG_CHECK(ccg__xaxis(x, n, axes[i], a->rank, &ax));
    red[ax] = true;
  }
  if (n_axes == 0 && !noop)
    for (int d = 0; d < a->rank; d++)
      red[d] = true;
  int64_t *ost = ccg__arena_calloc(&x->arena, (size_t)a->rank + 1, 8);
  if (!ost)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  int64_t s = 1, count = 1;
  for (int d = a->rank - 1; d >= 0; d--) {
    if (red[d]) {
      ost[d] = 0;
      count *= a->dims[d];
    } else {
      ost[d] = s;
      s *= a->dims[d];
    }
  }
  if ((size_t)s != o->numel)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "output has %zu elements, the reduction gives %lld",
                      o->numel, (long long)s);
  n->p.chunk = ost;
  n->p.i0 = count;
  n->scratch = o->numel * 8;
  n->run = run_reduce;
  return CCG_STATUS_OK;
}
