/* The one f32 GEMM entry point of the CPU kernels (MatMul, Gemm, Einsum's
 * matrix products, Conv's im2col products): the library call, its split
 * over the executor's pool, and the epilogue. The library is oneDNN's
 * dnnl_sgemm where the build has it (its JIT picks AVX-512 or AVX2 from the
 * CPU at run time; OpenBLAS follows the environment's OPENBLAS_CORETYPE,
 * which may hold it to AVX2), else OpenBLAS; CCG_GEMM=openblas|onednn
 * chooses (docs/performance.md, "GEMM and threads"). Every library call is
 * single-threaded: the threads are the pool's (OpenBLAS is set to one
 * thread for the whole process the first time it serves a GEMM here). */
#include <stdlib.h>
#include <string.h>

#ifdef CCG_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

#include "exec/cpu/blas.h"
#include "exec/cpu/cpu.h"
#include "exec/cpu/pool.h"

/* A tile should cost at least this many flops (tens of microseconds): the
 * library packs its operands once per call. */
#define TILE_MIN_FLOPS 4e6

typedef struct tiling {
  int64_t bm, bn, nm, nn; /* tile rows, columns; tiles down, across */
} tiling;

static int64_t up16(int64_t v) { return (v + 15) / 16 * 16; }

/* Fixed by the shape alone, never by the thread count: each C element is
 * computed by the same call whatever the threads, so results are the same
 * bytes. Panels of 256 columns (128 where N < 512) by up to 512 rows, fewer
 * where the product is small: a transformer block ran 15% faster at one
 * thread than with 128-row tiles, and 7% faster than with one call per
 * product (docs/performance.md). */
static tiling plan(int64_t M, int64_t N, int64_t K) {
  int64_t nn = N / (N >= 512 ? 256 : 128), nm = M / 512;
  nn = nn < 1 ? 1 : nn;
  nm = nm < 1 ? 1 : nm;
  double cap = 2.0 * (double)M * (double)N * (double)K / TILE_MIN_FLOPS;
  while ((double)(nm * nn) > cap && nm * nn > 1) {
    if (nm >= nn && nm > 1)
      nm--;
    else
      nn--;
  }
  tiling t;
  t.bm = up16((M + nm - 1) / nm);
  t.bn = up16((N + nn - 1) / nn);
  t.nm = (M + t.bm - 1) / t.bm;
  t.nn = (N + t.bn - 1) / t.bn;
  return t;
}

/* Which library f32 GEMMs run on; where it is OpenBLAS and err is given
 * (at create), it is loaded, or the error names why it cannot be. */
ccg_status ccg__gemm_lib(ccg_ctx *err, bool *onednn) {
  const char *env = getenv("CCG_GEMM");
#ifdef CCG_HAVE_ONEDNN
  *onednn = true;
#else
  *onednn = false;
#endif
  if (env && *env && strcmp(env, "openblas") == 0)
    *onednn = false;
#ifdef CCG_HAVE_ONEDNN
  else if (env && *env && strcmp(env, "onednn") != 0)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "CCG_GEMM='%s': give openblas or onednn", env);
#else
  else if (env && *env)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "CCG_GEMM='%s': this build has openblas only (oneDNN "
                      "was off at configure time)",
                      env);
#endif
  return *onednn || !err ? CCG_STATUS_OK : ccg__blas_load(err);
}

static void call(bool onednn, const ccg__gemm *g, int64_t m, int64_t n,
                 const float *a, const float *b, float *c) {
#ifdef CCG_HAVE_ONEDNN
  if (onednn) {
    /* this thread's OpenMP team is one: the pool's threads are the only
     * ones (an ICV of the thread, not of the process) */
    if (omp_get_max_threads() != 1)
      omp_set_num_threads(1);
    dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', m, n, g->k, g->alpha, a,
               g->lda, b, g->ldb, g->beta, c, g->ldc);
    return;
  }
#endif
  (void)onednn;
  ccg__blas_fn.cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                           g->tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                           (int)g->k, g->alpha, a, (int)g->lda, b, (int)g->ldb,
                           g->beta, c, (int)g->ldc);
}

typedef struct job {
  const ccg__gemm *g;
  tiling t;
  bool onednn;
} job;

/* Tile `k` of the batch entry it falls in: the product, then the epilogue
 * on the rows while they are in cache. */
static void tile(void *vctx, size_t begin, size_t end) {
  const job *j = vctx;
  const ccg__gemm *g = j->g;
  int64_t per = j->t.nm * j->t.nn;
  for (size_t k = begin; k < end; k++) {
    int64_t e = (int64_t)k / per, r = (int64_t)k % per;
    int64_t i0 = r / j->t.nn * j->t.bm, j0 = r % j->t.nn * j->t.bn;
    int64_t m = g->m - i0 < j->t.bm ? g->m - i0 : j->t.bm;
    int64_t n = g->n - j0 < j->t.bn ? g->n - j0 : j->t.bn;
    int64_t ao = 0, bo = 0;
    if (g->batch_off)
      g->batch_off(g->batch_ctx, e, &ao, &bo);
    const float *a = g->a + ao + (g->ta ? i0 : i0 * g->lda);
    const float *b = g->b + bo + (g->tb ? j0 * g->ldb : j0);
    float *c = g->c + e * g->stride_c + i0 * g->ldc + j0;
    if (g->k > 0) {
      call(j->onednn, g, m, n, a, b, c);
    } else if (g->beta == 0.0f) {
      for (int64_t i = 0; i < m; i++)
        memset(c + i * g->ldc, 0, (size_t)n * sizeof(float));
    }
    for (int64_t i = 0; i < m && (g->bias || g->act != CCG_OP_COUNT); i++) {
      float *row = c + i * g->ldc;
      /* the vector add (the same sums): an -O2 build leaves the plain loop
       * scalar, a tenth of a small block's step (docs/performance.md) */
      if (g->bias && g->vm)
        g->vm->bin(CCG_OP_ADD, row, 1, g->bias + j0, 1, row, (size_t)n);
      else if (g->bias)
        for (int64_t q = 0; q < n; q++)
          row[q] += g->bias[j0 + q];
      if (g->act != CCG_OP_COUNT)
        ccg__un_f32_block(g->vm, g->act, g->act_p, row, row, (size_t)n);
    }
  }
}

void ccg__sgemm(ccg__pool *pool, const ccg__gemm *g) {
  int64_t batch = g->batch > 0 ? g->batch : 1;
  if (g->m <= 0 || g->n <= 0)
    return;
  job j = {g, plan(g->m, g->n, g->k), false};
  if (ccg__gemm_lib(NULL, &j.onednn) != CCG_STATUS_OK)
    j.onednn = false; /* checked at create; never reached */
#ifdef CCG_HAVE_ONEDNN
  /* the caller's thread gets its OpenMP setting back */
  int omp_was = j.onednn ? omp_get_max_threads() : 1;
#endif
  /* OpenBLAS's thread count is the process's, not the call's: its own
   * threads would run under every tile of ours, so it stays one
   * (docs/exec.md, "Threads"), whoever else in the process set it. */
  if (!j.onednn && ccg__blas_fn.openblas_get_num_threads() != 1)
    ccg__blas_fn.openblas_set_num_threads(1);
  size_t tiles = (size_t)(batch * j.t.nm * j.t.nn);
  double flops =
      2.0 * (double)batch * (double)g->m * (double)g->n * (double)g->k;
  ccg__parallel_for(pool, tiles, 1, flops / CCG__PAR_FLOPS_PER_WORK, tile, &j);
#ifdef CCG_HAVE_ONEDNN
  if (omp_was != 1)
    omp_set_num_threads(omp_was);
#endif
}
