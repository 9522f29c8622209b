/* The Reduce* ops over any set of axes. Floats accumulate in double,
 * integers in int64, in input order (deterministic), through the per-element
 * arithmetic of exec/reduce_math.h that the CUDA kernel shares. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/reduce_math.h"

/* One streaming pass over the input into acc (one slot per output
 * element): ost = per input dim, the output element stride (0 on reduced
 * dims). `shift` (per output) is LogSumExp's maximum, else NULL. */
static void reduce_pass(const ccg__xval *a, const int64_t *ost, ccg__rd_kind k,
                        void *acc, const double *shift) {
  bool is_int = !ccg_dtype_is_float(a->dtype);
  double *accf = acc;
  int64_t *acci = acc;
  int r = a->rank;
  size_t inner = r ? (size_t)a->dims[r - 1] : 1;
  size_t is = r ? (size_t)ost[r - 1] : 0;
  int64_t idx[CCG_MAX_RANK] = {0};
  size_t off = 0;
  for (size_t base = 0; base < a->numel; base += inner) {
    for (size_t i = 0; i < inner; i++) {
      size_t j = off + i * is;
      if (is_int) {
        acci[j] = ccg__rd_step_i64(k, acci[j],
                                   ccg__ld_i64(a->dtype, a->ptr, base + i));
      } else {
        double v = a->dtype == CCG_DTYPE_F32
                       ? ((const float *)a->ptr)[base + i]
                       : ccg__ld_f64(a->dtype, a->ptr, base + i);
        accf[j] = ccg__rd_step_f64(k, accf[j], v, shift ? shift[j] : 0.0);
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

/* A pass over slabs [begin, end) of dim 0 when dim 0 is kept: each slab
 * feeds output elements of its own, in the same order as one pass. */
typedef struct rd_job {
  const ccg__xval *a;
  const int64_t *ost;
  ccg__rd_kind k;
  char *acc;
  const double *shift;
  size_t slab; /* input elements per index of dim 0 */
} rd_job;

static void reduce_slabs(void *ctx, size_t begin, size_t end) {
  const rd_job *j = ctx;
  ccg__xval v = *j->a;
  v.dims[0] = (int64_t)(end - begin);
  v.numel = (end - begin) * j->slab;
  v.ptr = (char *)j->a->ptr + begin * j->slab * ccg_dtype_size(v.dtype);
  size_t out0 = begin * (size_t)j->ost[0];
  reduce_pass(&v, j->ost, j->k, j->acc + out0 * 8,
              j->shift ? j->shift + out0 : NULL);
}

/* reduce_pass, split over the pool by dim 0 where that dim is kept. */
static void reduce_par(ccg_exec *x, const ccg__xval *a, const int64_t *ost,
                       ccg__rd_kind k, void *acc, const double *shift) {
  if (a->rank == 0 || ost[0] == 0 || a->dims[0] < 2) {
    reduce_pass(a, ost, k, acc, shift);
    return;
  }
  size_t rows = (size_t)a->dims[0], slab = a->numel / rows;
  rd_job j = {a, ost, k, acc, shift, slab};
  size_t per = slab ? CCG__PAR_GRAIN / slab : rows;
  ccg__parallel_for(x->pool, rows, per ? per : 1, (double)a->numel,
                    reduce_slabs, &j);
}

static ccg_status run_reduce(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  bool is_int = !ccg_dtype_is_float(a->dtype);
  ccg__rd_kind k = ccg__rd_kind_of(n->op);
  double *accf = x->scratch, *shift = NULL;
  int64_t *acci = x->scratch;
  if (ccg__rd_two_pass(k)) {
    shift = accf + o->numel;
    for (size_t j = 0; j < o->numel; j++)
      shift[j] = ccg__rd_init_f64(CCG__RD_MAX);
    if (a->numel > 0)
      reduce_par(x, a, n->p.chunk, CCG__RD_MAX, shift, NULL);
  }
  for (size_t j = 0; j < o->numel; j++) {
    if (is_int)
      acci[j] = ccg__rd_init_i64(k);
    else
      accf[j] = ccg__rd_init_f64(k);
  }
  if (a->numel > 0)
    reduce_par(x, a, n->p.chunk, k, x->scratch, shift);
  int64_t count = n->p.i0;
  for (size_t j = 0; j < o->numel; j++) {
    if (is_int)
      ccg__st_i64(o->dtype, o->ptr, j, ccg__rd_final_i64(k, acci[j], count));
    else
      ccg__st_f64(o->dtype, o->ptr, j,
                  ccg__rd_final_f64(k, accf[j], count, shift ? shift[j] : 0.0));
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_reduce(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (a->dtype == CCG_DTYPE_BOOL || (!ccg_dtype_is_float(a->dtype) &&
                                     !ccg__rd_int_ok(ccg__rd_kind_of(n->op))))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(a->dtype));
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
  n->scratch =
      o->numel * 8 * (ccg__rd_two_pass(ccg__rd_kind_of(n->op)) ? 2 : 1);
  n->run = run_reduce;
  return CCG_STATUS_OK;
}
