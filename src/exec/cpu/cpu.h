/* Private: helpers shared by the CPU kernels (element access in any dtype,
 * broadcast walks) and the kernels' entry points. */
#ifndef CCG_EXEC_CPU_H
#define CCG_EXEC_CPU_H

#include <stddef.h>

#include "exec/cpu/pool.h"
#include "exec/index_math.h"
#include "exec/cpu/vecmath.h"
#include "exec/internal.h"

/* Elements per block when a kernel converts f16/bf16/f64 to f32 and back. */
#define CCG__BLOCK 256

/* n elements from src[off + k*stride] (stride 0 or 1) into f32. */
void ccg__load_f32(ccg_dtype dt, const void *src, size_t off, size_t stride,
                   size_t n, float *dst);
/* n f32 elements into dst[off..] of dtype dt. */
void ccg__store_f32(ccg_dtype dt, void *dst, size_t off, size_t n,
                    const float *src);

/* Broadcast walk (ccg__bcast in index_math.h). */
void ccg__bcast_init(ccg__bcast *b, const ccg__xval *out,
                     const ccg__xval *const *ins, int n);
/* Calls row(ctx, out_offset, in_offsets, inner) for every row, where inner
 * elements follow with stride b->st[k][rank-1] (0 or 1). Stops at the first
 * failure. */
typedef ccg_status (*ccg__row_fn)(void *ctx, size_t out_off,
                                  const int64_t *in_off, size_t inner);
ccg_status ccg__bcast_walk(const ccg__bcast *b, ccg__row_fn row, void *ctx);

/* Elements per chunk of the parallel splits (a multiple of 64, so that
 * chunks start on cache lines and vector boundaries). */
#define CCG__PAR_GRAIN 16384
/* ccg__bcast_walk over the executor's pool, in chunks of CCG__PAR_GRAIN
 * output elements (a chunk may start or end inside a row). For rows that
 * cannot fail: their status is not looked at. */
void ccg__bcast_walk_par(ccg_exec *x, const ccg__bcast *b, ccg__row_fn row,
                         void *ctx);
/* fn(x, n, begin, end) over the rows [0, rows) of row_elems elements each,
 * in chunks of about CCG__PAR_GRAIN elements on the executor's pool; a row
 * stays on one thread. */
typedef void (*ccg__rows_fn)(ccg_exec *x, const ccg__xnode *n, size_t begin,
                             size_t end);
void ccg__par_rows(ccg_exec *x, const ccg__xnode *n, size_t rows,
                   size_t row_elems, ccg__rows_fn fn);

/* Copies with permuted/strided source: out is dense with dims `dims`,
 * element (i0..) comes from src at base + sum i_d * st[d]. */
void ccg__strided_copy(void *dst, const void *src, size_t esize, int rank,
                       const int64_t *dims, const int64_t *st, int64_t base);

/* Row-major strides of a value's dims. */
void ccg__strides(int rank, const int64_t *dims, int64_t *st);

/* Chunks of `sizes` (n of them) along the middle axis of a [outer,
 * sum(sizes), inner] tensor `full` into rank-major order in `packed`, or
 * back when `unpack` (collective.c). */
void ccg__chunk_copy(void *packed, void *full, size_t es, size_t outer,
                     size_t inner, const int64_t *sizes, int n, bool unpack);

/* Slice node n's bounds arguments over the memory its bounds inputs are in
 * (ptr: the values' host data, or the device's). */
typedef void *(*ccg__value_ptr_fn)(const ccg_exec *x, ccg_value_id v);
/* A value's host data during a run (its ptr). */
void *ccg__host_ptr(const ccg_exec *x, ccg_value_id v);
ccg__slice_args ccg__slice_args_of(const ccg_exec *x, const ccg__xnode *n,
                                   ccg__value_ptr_fn ptr);

/* MatMul's batch walk (matmul.c's n->p): from the batch index idx and the
 * element offsets of A's and B's matrices, the next batch entry's. */
static inline void ccg__matmul_batch_next(const ccg__xnode *n, int64_t *idx,
                                          int64_t *ao, int64_t *bo) {
  for (int d = (int)n->p.n_list - 1; d >= 0; d--) {
    idx[d]++;
    *ao += n->p.chunk[d];
    *bo += n->p.chunk2[d];
    if (idx[d] < n->p.list[d])
      return;
    *ao -= n->p.chunk[d] * n->p.list[d];
    *bo -= n->p.chunk2[d] * n->p.list[d];
    idx[d] = 0;
  }
}

/* Slice bounds (ccg__slice_setup) with a failure recorded on x naming the
 * node and the entry at fault. */
ccg_status ccg__slice_check(ccg_exec *x, const ccg__xnode *n,
                            const ccg__slice_args *sa, ccg__slice *out);

/* Dropout runs in inference mode only: training mode with a ratio above 0
 * is CCG_STATUS_UNSUPPORTED naming the node. Reads the graph's data at
 * create (at_run false: values fed at run time are not known yet) or the
 * run's host data (the values' ptr). */
ccg_status ccg__dropout_mode(ccg_exec *x, const ccg__xnode *n, bool at_run);

/* ---- GEMM (gemm.c) ------------------------------------------------------
 * Row-major C = alpha op(A) op(B) + beta C for `batch` entries (0 or 1: one),
 * then the epilogue on each output row: bias[j] added (a vector of n, or
 * NULL), then the activation `act` (CCG_OP_COUNT: none) as the unary kernel
 * computes it. Tiles fixed by the shape run on the pool: the same bytes for
 * any thread count. */
typedef struct ccg__gemm {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int64_t batch, stride_c; /* entry t writes c + t * stride_c */
  /* entry t's element offsets into a and b; NULL: all 0 */
  void (*batch_off)(const void *ctx, int64_t t, int64_t *ao, int64_t *bo);
  const void *batch_ctx;
  const float *bias;
  ccg_op act;
  ccg__unp act_p;
  /* the executor's array math: bias and act; its instruction set, the
   * small-product loop's (NULL: the portable one) */
  const ccg__vm *vm;
} ccg__gemm;
#define CCG__GEMM_INIT                                                         \
  { .alpha = 1.0f, .act = CCG_OP_COUNT }
struct ccg__pool;
/* The executor's product: on x's pool, with x's array math (g->vm is set
 * here, so no caller can leave the bias add or the small loop without
 * it). */
void ccg__sgemm(const ccg_exec *x, ccg__gemm *g);
/* ccg__sgemm on a chosen path, for the tests that hold one to the other:
 * the library, or the small-product loop (which any size may take where
 * B is not transposed or a tile's k * n is at most 8192; else the library
 * runs). */
typedef enum ccg__gemm_path {
  CCG__GEMM_AUTO,
  CCG__GEMM_LIBRARY,
  CCG__GEMM_SMALL
} ccg__gemm_path;
void ccg__sgemm_path(struct ccg__pool *pool, const ccg__gemm *g,
                     ccg__gemm_path path);
/* What f32 GEMMs run on: ccgraph's own blocked kernels (gemm_blocked.c;
 * where the CPU has AVX2 + FMA or wider), oneDNN's dnnl_sgemm, or
 * OpenBLAS's cblas_sgemm. */
typedef enum ccg__gemm_lib {
  CCG__GEMM_LIB_BLOCKED, /* every product (CCG_GEMM=ccgraph) */
  /* the default: ccgraph's kernels, but the products of very few rows, or
   * of few rows streaming a large B, on oneDNN where the build has it
   * (gemm.c, left_to_onednn) */
  CCG__GEMM_LIB_MIXED,
  CCG__GEMM_LIB_ONEDNN,
  CCG__GEMM_LIB_OPENBLAS
} ccg__gemm_lib_kind;
/* Whether lib runs products on ccgraph's own kernels (BLOCKED, MIXED). */
static inline bool ccg__gemm_lib_own(int lib) {
  return lib == CCG__GEMM_LIB_BLOCKED || lib == CCG__GEMM_LIB_MIXED;
}
/* What f32 GEMMs run on for the array math isa: CCG_GEMM (ccgraph, onednn
 * or openblas), else ccgraph's own where isa is AVX2 or wider (MIXED where
 * the build has oneDNN), else oneDNN where built with it, else OpenBLAS.
 * Where err is given, the library chosen is loaded. A bad CCG_GEMM, or
 * ccgraph below AVX2, is CCG_STATUS_INVALID_ARG naming it, on err. */
ccg_status ccg__gemm_lib(ccg_ctx *err, ccg__isa isa, ccg__gemm_lib_kind *lib);
/* The tile m x n of g at a, b, c on ccgraph's own kernels for isa; false
 * (nothing written) where isa is below AVX2 or the thread's packing buffer
 * cannot be had. */
bool ccg__sgemm_blocked(ccg__isa isa, const ccg__gemm *g, int64_t m, int64_t n,
                        const float *a, const float *b, float *c);
/* Unary op `op` (attributes p) on n f32 elements with the executor's
 * array math vm; o may be a. */
void ccg__un_f32_block(const ccg__vm *vm, ccg_op op, ccg__unp p, const float *a,
                       float *o, size_t n);
/* A unary node's attributes (from n->p). */
ccg__unp ccg__unp_of(const ccg__xnode *n);

/* Per-family preparation (attributes into n->p, n->run, n->scratch). */
ccg_status ccg__prep_elementwise(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_matmul(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_norm(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_reduce(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_shape(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_index(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_collective(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_logic(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_loss(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_data(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_select(ccg_exec *x, ccg__xnode *n);
ccg_status ccg__prep_vision(ccg_exec *x, ccg__xnode *n);

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
