/* The Reduce* ops over any set of axes. Floats accumulate in double,
 * integers in int64, in input order, through the per-element arithmetic of
 * exec/reduce_math.h that the CUDA kernel shares; f32 sums along a row go
 * in eight lanes joined in a fixed order (sum_row_f32). The same bits at
 * any thread count. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/reduce_math.h"

/* Columns [c0, c1) of the last dim of row `base` of an f32 input added
 * into the accumulators acc[0..) (the last dim kept: one accumulator per
 * column), four at a time: the same double additions in the same order as
 * ccg__rd_step_f64 makes them one by one (ccg__rd_step_adds). */
typedef double rd_v4d __attribute__((vector_size(32)));
typedef float rd_v4f __attribute__((vector_size(16)));
static void add_row_f32(double *acc, const float *x, size_t c0, size_t c1) {
  size_t i = c0;
  for (; i + 4 <= c1; i += 4) {
    rd_v4f v;
    rd_v4d s;
    memcpy(&v, x + i, sizeof v);
    memcpy(&s, acc + i, sizeof s);
    s += __builtin_convertvector(v, rd_v4d);
    memcpy(acc + i, &s, sizeof s);
  }
  for (; i < c1; i++)
    acc[i] += (double)x[i];
}

/* The sum of row x[0..n) of an f32 input in double, in eight lanes (lane
 * i takes elements i, i + 8, ...) joined in a fixed order, then the tail:
 * the same bits at any thread count, and not one long chain of dependent
 * additions (a Softmax's backward sums rows of its whole width). */
static double sum_row_f32(const float *x, size_t n) {
  rd_v4d s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    rd_v4f v0, v1;
    memcpy(&v0, x + i, sizeof v0);
    memcpy(&v1, x + i + 4, sizeof v1);
    s0 += __builtin_convertvector(v0, rd_v4d);
    s1 += __builtin_convertvector(v1, rd_v4d);
  }
  s0 += s1;
  double t = (s0[0] + s0[1]) + (s0[2] + s0[3]);
  for (; i < n; i++)
    t += (double)x[i];
  return t;
}

/* One streaming pass over the input into acc (one slot per output
 * element), columns [c0, c1) of the last dim: ost = per input dim, the
 * output element stride (0 on reduced dims). `shift` (per output) is
 * LogSumExp's maximum, else NULL. */
static void reduce_cols(const ccg__xval *a, const int64_t *ost, ccg__rd_kind k,
                        void *acc, const double *shift, size_t c0, size_t c1) {
  bool is_int = !ccg_dtype_is_float(a->dtype);
  double *accf = acc;
  int64_t *acci = acc;
  int r = a->rank;
  size_t inner = r ? (size_t)a->dims[r - 1] : 1;
  size_t is = r ? (size_t)ost[r - 1] : 0;
  /* f32, a sum: the last dim kept (its output stride is then 1) or
   * reduced (0) */
  bool vec = a->dtype == CCG_DTYPE_F32 && ccg__rd_step_adds(k);
  int64_t idx[CCG_MAX_RANK] = {0};
  size_t off = 0;
  for (size_t base = 0; base < a->numel; base += inner) {
    if (vec && is == 1) {
      add_row_f32(accf + off, (const float *)a->ptr + base, c0, c1);
    } else if (vec) {
      accf[off] += sum_row_f32((const float *)a->ptr + base + c0, c1 - c0);
    } else {
      for (size_t i = c0; i < c1; i++) {
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

static void reduce_pass(const ccg__xval *a, const int64_t *ost, ccg__rd_kind k,
                        void *acc, const double *shift) {
  size_t inner = a->rank ? (size_t)a->dims[a->rank - 1] : 1;
  reduce_cols(a, ost, k, acc, shift, 0, inner);
}

/* A reduction split over the pool: by slabs of dim 0 or by blocks of the
 * last dim's columns. */
typedef struct rd_job {
  const ccg__xval *a;
  const int64_t *ost;
  ccg__rd_kind k;
  char *acc;
  const double *shift;
  size_t size; /* slabs: input elements per index of dim 0; columns: the
                  last dim */
} rd_job;

/* A pass over slabs [begin, end) of dim 0 when dim 0 is kept: each slab
 * feeds output elements of its own, in the same order as one pass. */

static void reduce_slabs(void *ctx, size_t begin, size_t end) {
  const rd_job *j = ctx;
  ccg__xval v = *j->a;
  v.dims[0] = (int64_t)(end - begin);
  v.numel = (end - begin) * j->size;
  v.ptr = (char *)j->a->ptr + begin * j->size * ccg_dtype_size(v.dtype);
  size_t out0 = begin * (size_t)j->ost[0];
  reduce_pass(&v, j->ost, j->k, j->acc + out0 * 8,
              j->shift ? j->shift + out0 : NULL);
}

/* Columns: a pass over column blocks [begin, end) of the last dim when it
 * is kept and dim 0 is not (a bias's gradient): each block's accumulators
 * take their elements in the same order as one pass. */
#define COL_BLOCK 64
static void reduce_col_blocks(void *ctx, size_t begin, size_t end) {
  const rd_job *j = ctx;
  size_t c1 = end * COL_BLOCK;
  reduce_cols(j->a, j->ost, j->k, j->acc, j->shift, begin * COL_BLOCK,
              c1 < j->size ? c1 : j->size);
}

/* reduce_pass, split over the pool by dim 0 where that dim is kept, else
 * by blocks of the last dim's columns where that one is. */
static void reduce_par(ccg_exec *x, const ccg__xval *a, const int64_t *ost,
                       ccg__rd_kind k, void *acc, const double *shift) {
  int r = a->rank;
  if (r >= 2 && a->dims[0] == 1) { /* [1, T, T]: split the next dim */
    ccg__xval v = *a;
    v.rank = r - 1;
    memmove(v.dims, a->dims + 1, (size_t)(r - 1) * sizeof v.dims[0]);
    reduce_par(x, &v, ost + 1, k, acc, shift);
    return;
  }
  if (r >= 2 && ost[0] == 0 && ost[r - 1] == 1 &&
      (size_t)a->dims[r - 1] >= 2 * COL_BLOCK) {
    size_t inner = (size_t)a->dims[r - 1];
    rd_job j = {a, ost, k, acc, shift, inner};
    ccg__parallel_for(x->pool, (inner + COL_BLOCK - 1) / COL_BLOCK, 1,
                      (double)a->numel, reduce_col_blocks, &j);
    return;
  }
  if (r == 0 || ost[0] == 0 || a->dims[0] < 2) {
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
