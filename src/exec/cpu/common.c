/* Helpers every CPU kernel family uses, and the table that sends each op to
 * its family's preparation. */
#include <assert.h>
#include <string.h>

#include "exec/cpu/cpu.h"

void ccg__load_f32(ccg_dtype dt, const void *src, size_t off, size_t stride,
                   size_t n, float *dst) {
  switch (dt) {
  case CCG_DTYPE_F32: {
    const float *s = (const float *)src + off;
    for (size_t i = 0; i < n; i++)
      dst[i] = s[i * stride];
    break;
  }
  case CCG_DTYPE_F16: {
    const uint16_t *s = (const uint16_t *)src + off;
    for (size_t i = 0; i < n; i++)
      dst[i] = ccg__f16_to_f32(s[i * stride]);
    break;
  }
  case CCG_DTYPE_BF16: {
    const uint16_t *s = (const uint16_t *)src + off;
    for (size_t i = 0; i < n; i++)
      dst[i] = ccg__bf16_to_f32(s[i * stride]);
    break;
  }
  default:
    for (size_t i = 0; i < n; i++)
      dst[i] = (float)ccg__ld_f64(dt, src, off + i * stride);
    break;
  }
}

void ccg__store_f32(ccg_dtype dt, void *dst, size_t off, size_t n,
                    const float *src) {
  switch (dt) {
  case CCG_DTYPE_F32:
    memcpy((float *)dst + off, src, n * sizeof(float));
    break;
  case CCG_DTYPE_F16: {
    uint16_t *d = (uint16_t *)dst + off;
    for (size_t i = 0; i < n; i++)
      d[i] = ccg__f32_to_f16(src[i]);
    break;
  }
  case CCG_DTYPE_BF16: {
    uint16_t *d = (uint16_t *)dst + off;
    for (size_t i = 0; i < n; i++)
      d[i] = ccg__f32_to_bf16(src[i]);
    break;
  }
  default:
    for (size_t i = 0; i < n; i++)
      ccg__st_f64(dt, dst, off + i, src[i]);
    break;
  }
}

void ccg__strides(int rank, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    st[d] = s;
    s *= dims[d];
  }
}

void ccg__bcast_init(ccg__bcast *b, const ccg__xval *out,
                     const ccg__xval *const *ins, int n) {
  assert(n <= CCG__BCAST_MAX);
  int64_t dims[CCG_MAX_RANK], st[CCG__BCAST_MAX][CCG_MAX_RANK];
  int rank = out->rank;
  for (int d = 0; d < rank; d++)
    dims[d] = out->dims[d];
  for (int k = 0; k < n; k++) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int id = d - (rank - ins[k]->rank);
      int64_t size = id >= 0 ? ins[k]->dims[id] : 1;
      st[k][d] = (size == 1 && dims[d] != 1) ? 0 : s;
      s *= size;
    }
  }
  /* Drop size-1 dims, then merge a dim into the next when every operand is
   * contiguous across the two. */
  b->n = n;
  b->rank = 0;
  for (int d = 0; d < rank; d++) {
    if (dims[d] == 1)
      continue;
    int r = b->rank;
    bool merge = r > 0;
    for (int k = 0; k < n && merge; k++)
      merge = b->st[k][r - 1] == st[k][d] * dims[d];
    if (merge) {
      b->dims[r - 1] *= dims[d];
      for (int k = 0; k < n; k++)
        b->st[k][r - 1] = st[k][d];
    } else {
      b->dims[r] = dims[d];
      for (int k = 0; k < n; k++)
        b->st[k][r] = st[k][d];
      b->rank++;
    }
  }
  if (b->rank == 0) {
    b->rank = 1;
    b->dims[0] = 1;
    for (int k = 0; k < n; k++)
      b->st[k][0] = 1;
  }
  for (int k = 0; k < n; k++) /* a size-1 inner dim: stride is irrelevant */
    if (b->dims[b->rank - 1] == 1)
      b->st[k][b->rank - 1] = 0;
}

ccg_status ccg__bcast_walk(const ccg__bcast *b, ccg__row_fn row, void *ctx) {
  int r = b->rank;
  size_t inner = (size_t)b->dims[r - 1];
  size_t outer = 1;
  for (int d = 0; d < r - 1; d++)
    outer *= (size_t)b->dims[d];
  if (inner == 0 || outer == 0)
    return CCG_STATUS_OK;
  int64_t idx[CCG_MAX_RANK] = {0}, off[CCG__BCAST_MAX] = {0};
  for (size_t o = 0; o < outer; o++) {
    ccg_status st = row(ctx, o * inner, off, inner);
    if (st != CCG_STATUS_OK)
      return st;
    for (int d = r - 2; d >= 0; d--) {
      idx[d]++;
      for (int k = 0; k < b->n; k++)
        off[k] += b->st[k][d];
      if (idx[d] < b->dims[d])
        break;
      for (int k = 0; k < b->n; k++)
        off[k] -= b->st[k][d] * b->dims[d];
      idx[d] = 0;
    }
  }
  return CCG_STATUS_OK;
}

void ccg__strided_copy(void *dst, const void *src, size_t esize, int rank,
                       const int64_t *dims, const int64_t *st, int64_t base) {
  size_t total = 1;
  for (int d = 0; d < rank; d++)
    total *= (size_t)dims[d];
  if (total == 0)
    return;
  if (rank == 0) {
    memcpy(dst, (const char *)src + base * (int64_t)esize, esize);
    return;
  }
  int64_t idx[CCG_MAX_RANK] = {0}, off = base;
  size_t inner = (size_t)dims[rank - 1];
  int64_t ist = st[rank - 1];
  char *o = dst;
  const char *s = src;
  for (size_t done = 0; done < total; done += inner) {
    if (ist == 1) {
      memcpy(o, s + off * (int64_t)esize, inner * esize);
      o += inner * esize;
    } else if (esize == 4) {
      for (size_t i = 0; i < inner; i++, o += 4)
        memcpy(o, s + (off + (int64_t)i * ist) * 4, 4);
    } else {
      for (size_t i = 0; i < inner; i++, o += esize)
        memcpy(o, s + (off + (int64_t)i * ist) * (int64_t)esize, esize);
    }
    for (int d = rank - 2; d >= 0; d--) {
      idx[d]++;
      off += st[d];
      if (idx[d] < dims[d])
        break;
      off -= st[d] * dims[d];
      idx[d] = 0;
    }
  }
}

/* ---- attributes --------------------------------------------------------- */

ccg_status ccg__xattr_i(ccg_exec *x, const ccg__xnode *n, const char *name,
                        int64_t *out) {
  if (ccg_node_attr_int(x->g, n->id, name, out) == CCG_STATUS_OK)
    return CCG_STATUS_OK;
  return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "%s", ccg_last_error(x->g));
}

ccg_status ccg__xattr_f(ccg_exec *x, const ccg__xnode *n, const char *name,
                        float *out) {
  if (ccg_node_attr_float(x->g, n->id, name, out) == CCG_STATUS_OK)
    return CCG_STATUS_OK;
  return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "%s", ccg_last_error(x->g));
}

ccg_status ccg__xattr_s(ccg_exec *x, const ccg__xnode *n, const char *name,
                        const char **out) {
  if (ccg_node_attr_string(x->g, n->id, name, out) == CCG_STATUS_OK)
    return CCG_STATUS_OK;
  return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "%s", ccg_last_error(x->g));
}

size_t ccg__xattr_ints(ccg_exec *x, const ccg__xnode *n, const char *name,
                       const int64_t **out) {
  const ccg_attr *a = ccg_node_attr(x->g, n->id, name);
  if (!a || a->type != CCG_ATTR_INTS) {
    *out = NULL;
    return 0;
  }
  *out = a->ints;
  return a->n;
}

ccg_status ccg__xaxis(ccg_exec *x, const ccg__xnode *n, int64_t axis, int rank,
                      int *out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank > 0 ? rank : 1))
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "axis %lld is out of range for rank %d", (long long)axis,
                      rank);
  *out = (int)a;
  return CCG_STATUS_OK;
}

/* ---- dispatch ----------------------------------------------------------- */

typedef ccg_status (*prep_fn)(ccg_exec *x, ccg__xnode *n);

/* Each family's preparation, as ccg_op_family_of says (one file each). */
static const prep_fn family_prep[] = {
    [CCG_OP_FAMILY_ELEMENTWISE] = ccg__prep_elementwise,
    [CCG_OP_FAMILY_LOGIC] = ccg__prep_logic,
    [CCG_OP_FAMILY_MATMUL] = ccg__prep_matmul,
    [CCG_OP_FAMILY_NORM] = ccg__prep_norm,
    [CCG_OP_FAMILY_REDUCE] = ccg__prep_reduce,
    [CCG_OP_FAMILY_LOSS] = ccg__prep_loss,
    [CCG_OP_FAMILY_SHAPE] = ccg__prep_shape,
    [CCG_OP_FAMILY_DATA] = ccg__prep_data,
    [CCG_OP_FAMILY_INDEX] = ccg__prep_index,
    [CCG_OP_FAMILY_SELECT] = ccg__prep_select,
    [CCG_OP_FAMILY_VISION] = ccg__prep_vision,
    [CCG_OP_FAMILY_COLLECTIVE] = ccg__prep_collective,
};
_Static_assert(sizeof(family_prep) / sizeof(family_prep[0]) ==
                   CCG_OP_FAMILY_COUNT,
               "family_prep must cover ccg_op_family");

static prep_fn family_of(ccg_op op) {
  ccg_op_family f = ccg_op_family_of(op);
  return f < CCG_OP_FAMILY_COUNT ? family_prep[f] : NULL;
}

ccg_status ccg__prepare_node(ccg_exec *x, ccg__xnode *n) {
  prep_fn f = family_of(n->op);
  if (!f)
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
  n->inplace = -1;
  return f(x, n);
}

bool ccg__op_inplace_ok(ccg_op op) {
  switch (op) {
  case CCG_OP_IDENTITY:
  case CCG_OP_ADD:
  case CCG_OP_SUB:
  case CCG_OP_MUL:
  case CCG_OP_DIV:
  case CCG_OP_POW:
  case CCG_OP_NEG:
  case CCG_OP_RELU:
  case CCG_OP_GELU:
  case CCG_OP_TANH:
  case CCG_OP_ERF:
  case CCG_OP_SIGMOID:
  case CCG_OP_EXP:
  case CCG_OP_LOG:
  case CCG_OP_SQRT:
  case CCG_OP_WHERE:
  case CCG_OP_DROPOUT:
  case CCG_OP_RESHAPE:
  case CCG_OP_FLATTEN:
  case CCG_OP_SQUEEZE:
  case CCG_OP_UNSQUEEZE:
    return true;
  default:
    return false;
  }
}

void *ccg__host_ptr(const ccg_exec *x, ccg_value_id v) {
  return x->vals[v].ptr;
}

/* ---- parallel splits ----------------------------------------------------
 * Chunks fixed by the shape (pool.h): the same bytes for any thread count. */

typedef struct rows_job {
  ccg_exec *x;
  const ccg__xnode *n;
  ccg__rows_fn fn;
} rows_job;

static void rows_chunk(void *ctx, size_t begin, size_t end) {
  const rows_job *j = ctx;
  j->fn(j->x, j->n, begin, end);
}

void ccg__par_rows(ccg_exec *x, const ccg__xnode *n, size_t rows,
                   size_t row_elems, ccg__rows_fn fn) {
  size_t per = row_elems ? CCG__PAR_GRAIN / row_elems : rows;
  rows_job j = {x, n, fn};
  ccg__parallel_for(x->pool, rows, per ? per : 1,
                    (double)rows * (double)row_elems, rows_chunk, &j);
}

typedef struct walk_job {
  const ccg__bcast *b;
  ccg__row_fn row;
  void *ctx;
  size_t inner;
} walk_job;

/* Output elements [begin, end): the pieces of the rows they cross, each
 * with its operands' offsets. */
static void walk_chunk(void *vctx, size_t begin, size_t end) {
  const walk_job *j = vctx;
  for (size_t e = begin; e < end;) {
    int64_t off[CCG__BCAST_MAX];
    ccg__bcast_offsets(j->b, e, off);
    size_t left = j->inner - e % j->inner;
    size_t len = end - e < left ? end - e : left;
    (void)j->row(j->ctx, e, off, len);
    e += len;
  }
}

void ccg__bcast_walk_par(ccg_exec *x, const ccg__bcast *b, ccg__row_fn row,
                         void *ctx) {
  size_t total = 1;
  for (int d = 0; d < b->rank; d++)
    total *= (size_t)b->dims[d];
  walk_job j = {b, row, ctx, (size_t)b->dims[b->rank - 1]};
  if (total && j.inner)
    ccg__parallel_for(x->pool, total, CCG__PAR_GRAIN, (double)total, walk_chunk,
                      &j);
}
