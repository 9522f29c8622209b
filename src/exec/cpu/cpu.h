/* Private: helpers shared by the CPU kernels (element access in any dtype,
 * broadcast walks) and the kernels' entry points. */
#ifndef CCG_EXEC_CPU_H
#define CCG_EXEC_CPU_H

#include <stddef.h>

#include "exec/internal.h"
#include "exec/kernels_math.h"

/* Elements per block when a kernel converts f16/bf16/f64 to f32 and back. */
#define CCG__BLOCK 256

/* One element of any dtype as double / int64 (bool and u8 read as 0/1 and
 * 0..255). Slow paths and small integer tensors only. */
static inline double ccg__ld_f64(ccg_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case CCG_DTYPE_F32:
    return ((const float *)p)[i];
  case CCG_DTYPE_F16:
    return ccg__f16_to_f32(((const uint16_t *)p)[i]);
  case CCG_DTYPE_BF16:
    return ccg__bf16_to_f32(((const uint16_t *)p)[i]);
  case CCG_DTYPE_F64:
    return ((const double *)p)[i];
  case CCG_DTYPE_I64:
    return (double)((const int64_t *)p)[i];
  case CCG_DTYPE_I32:
    return ((const int32_t *)p)[i];
  case CCG_DTYPE_I8:
    return ((const int8_t *)p)[i];
  case CCG_DTYPE_U8:
  case CCG_DTYPE_BOOL:
    return ((const uint8_t *)p)[i];
  default:
    return 0.0;
  }
}

static inline int64_t ccg__ld_i64(ccg_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case CCG_DTYPE_I64:
    return ((const int64_t *)p)[i];
  case CCG_DTYPE_I32:
    return ((const int32_t *)p)[i];
  case CCG_DTYPE_I8:
    return ((const int8_t *)p)[i];
  case CCG_DTYPE_U8:
  case CCG_DTYPE_BOOL:
    return ((const uint8_t *)p)[i];
  default: {
    /* floats: truncate toward zero, saturating; NaN gives 0 */
    double v = ccg__ld_f64(dt, p, i);
    if (!(v == v))
      return 0;
    if (v >= 9.2233720368547758e18)
      return INT64_MAX;
    if (v <= -9.2233720368547758e18)
      return INT64_MIN;
    return (int64_t)v;
  }
  }
}

static inline void ccg__st_f64(ccg_dtype dt, void *p, size_t i, double v) {
  switch (dt) {
  case CCG_DTYPE_F32:
    ((float *)p)[i] = (float)v;
    break;
  case CCG_DTYPE_F16:
    ((uint16_t *)p)[i] = ccg__f32_to_f16((float)v);
    break;
  case CCG_DTYPE_BF16:
    ((uint16_t *)p)[i] = ccg__f32_to_bf16((float)v);
    break;
  case CCG_DTYPE_F64:
    ((double *)p)[i] = v;
    break;
  default:
    break;
  }
}

/* Integer stores wrap (two's complement), as ONNX Cast does in practice. */
static inline void ccg__st_i64(ccg_dtype dt, void *p, size_t i, int64_t v) {
  switch (dt) {
  case CCG_DTYPE_I64:
    ((int64_t *)p)[i] = v;
    break;
  case CCG_DTYPE_I32:
    ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v;
    break;
  case CCG_DTYPE_I8:
    ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v;
    break;
  case CCG_DTYPE_U8:
    ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v;
    break;
  case CCG_DTYPE_BOOL:
    ((uint8_t *)p)[i] = v != 0;
    break;
  default:
    ccg__st_f64(dt, p, i, (double)v);
    break;
  }
}

/* n elements from src[off + k*stride] (stride 0 or 1) into f32. */
void ccg__load_f32(ccg_dtype dt, const void *src, size_t off, size_t stride,
                   size_t n, float *dst);
/* n f32 elements into dst[off..] of dtype dt. */
void ccg__store_f32(ccg_dtype dt, void *dst, size_t off, size_t n,
                    const float *src);

/* Broadcast walk: the output's dims with every operand's element strides
 * (0 where it is broadcast), adjacent dims merged where all operands allow,
 * so equal shapes make one long row. */
#define CCG__BCAST_MAX 3
typedef struct ccg__bcast {
  int rank, n;
  int64_t dims[CCG_MAX_RANK];
  int64_t st[CCG__BCAST_MAX][CCG_MAX_RANK];
} ccg__bcast;
void ccg__bcast_init(ccg__bcast *b, const ccg__xval *out,
                     const ccg__xval *const *ins, int n);
/* Calls row(ctx, out_offset, in_offsets, inner) for every row, where inner
 * elements follow with stride b->st[k][rank-1] (0 or 1). Stops at the first
 * failure. */
typedef ccg_status (*ccg__row_fn)(void *ctx, size_t out_off,
                                  const int64_t *in_off, size_t inner);
ccg_status ccg__bcast_walk(const ccg__bcast *b, ccg__row_fn row, void *ctx);

/* Copies with permuted/strided source: out is dense with dims `dims`,
 * element (i0..) comes from src at base + sum i_d * st[d]. */
void ccg__strided_copy(void *dst, const void *src, size_t esize, int rank,
                       const int64_t *dims, const int64_t *st, int64_t base);

/* Row-major strides of a value's dims. */
void ccg__strides(int rank, const int64_t *dims, int64_t *st);

/* Per-family preparation (attributes into n->p, n->run, n->scratch). */
ccg_status ccg__prep_elementwise(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_matmul(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_norm(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_reduce(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_shape(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_index(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_collective(ccg_exec *x, ccg__xnode *n);

/* Attribute reads with the op's defaults; failures recorded on x naming
 * the node. */
ccg_status ccg__xattr_i(ccg_exec *x, const ccg__xnode *n, const char *name,
                        int64_t *out);
ccg_status ccg__xattr_f(ccg_exec *x, const ccg__xnode *n, const char *name,
                        float *out);
ccg_status ccg__xattr_s(ccg_exec *x, const ccg__xnode *n, const char *name,
                        const char **out);
/* An INTS attribute (count 0 and NULL when absent). */
size_t ccg__xattr_ints(ccg_exec *x, const ccg__xnode *n, const char *name,
                       const int64_t **out);
/* Normalizes axis into [0, rank). */
ccg_status ccg__xaxis(ccg_exec *x, const ccg__xnode *n, int64_t axis, int rank,
                      int *out);

#endif
