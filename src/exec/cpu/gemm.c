/* The one f32 GEMM entry point of the CPU kernels (MatMul, Gemm, Einsum's
 * matrix products, Conv's im2col products): the product's split over the
 * executor's pool into tiles, the call that makes each, and the epilogue.
 * A tile runs on ccgraph's own blocked kernels (gemm_blocked.c) where the
 * array math is AVX2 or wider (but a product of few rows streaming a large
 * B from memory on oneDNN, where the build has it), else on oneDNN's
 * dnnl_sgemm where the build has it, else OpenBLAS; oneDNN and OpenBLAS
 * are loaded when first needed. CCG_GEMM=ccgraph|onednn|openblas chooses
 * one for every product (docs/performance.md, "GEMM and threads", "A GEMM
 * of ccgraph's own").
 * Every call is single-threaded: the threads are the pool's (OpenBLAS is
 * set to one thread for the whole process the first time it serves a GEMM
 * here). */
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#ifdef CCG_HAVE_ONEDNN
#include "exec/cpu/onednn.h"
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

/* Which library f32 GEMMs run on (cpu.h); where it is oneDNN or OpenBLAS
 * and err is given (at create), it is loaded, or the error names why it
 * cannot be. */
ccg_status ccg__gemm_lib(ccg_ctx *err, ccg__isa isa, ccg__gemm_lib_kind *lib) {
  const char *env = getenv("CCG_GEMM");
  bool own = isa >= CCG__ISA_AVX2;
#if !defined(__x86_64__) || !defined(__GNUC__)
  own = false; /* the kernels are x86's */
#endif
  /* the default: ccgraph's kernels wherever they run (docs/performance.md,
   * "A GEMM of ccgraph's own") */
#ifdef CCG_HAVE_ONEDNN
  *lib = own ? CCG__GEMM_LIB_MIXED : CCG__GEMM_LIB_ONEDNN;
#else
  *lib = own ? CCG__GEMM_LIB_BLOCKED : CCG__GEMM_LIB_OPENBLAS;
#endif
  if (env && *env && strcmp(env, "openblas") == 0) {
    *lib = CCG__GEMM_LIB_OPENBLAS;
  } else if (env && *env && strcmp(env, "ccgraph") == 0) {
    if (!own)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "CCG_GEMM='ccgraph': its kernels need AVX2 and FMA "
                        "on x86-64, and the array math here is %s",
                        isa >= CCG__ISA_AVX2 ? "not x86's" : "scalar");
    *lib = CCG__GEMM_LIB_BLOCKED;
#ifdef CCG_HAVE_ONEDNN
  } else if (env && *env && strcmp(env, "onednn") == 0) {
    *lib = CCG__GEMM_LIB_ONEDNN;
  } else if (env && *env) {
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "CCG_GEMM='%s': give ccgraph, onednn or openblas", env);
#else
  } else if (env && *env) {
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "CCG_GEMM='%s': give ccgraph or openblas (oneDNN was "
                      "off at configure time)",
                      env);
#endif
  }
  if (!err)
    return CCG_STATUS_OK;
#ifdef CCG_HAVE_ONEDNN
  if (*lib == CCG__GEMM_LIB_ONEDNN)
    return ccg__onednn_load(err);
#endif
  return *lib == CCG__GEMM_LIB_OPENBLAS ? ccg__blas_load(err) : CCG_STATUS_OK;
}

/* C = alpha op(A) op(B) + beta C one element at a time: where ccgraph's
 * kernels cannot have their packing buffer (out of memory), the product is
 * still made, slowly, with no library to load in the middle of a run. */
static void plain(const ccg__gemm *g, int64_t m, int64_t n, const float *a,
                  const float *b, float *c) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float s = 0.0f;
      for (int64_t k = 0; k < g->k; k++)
        s += (g->ta ? a[k * g->lda + i] : a[i * g->lda + k]) *
             (g->tb ? b[j * g->ldb + k] : b[k * g->ldb + j]);
      float *o = c + i * g->ldc + j;
      *o = g->beta != 0.0f ? g->alpha * s + g->beta * *o : g->alpha * s;
    }
}

static void call(ccg__gemm_lib_kind lib, const ccg__gemm *g, int64_t m,
                 int64_t n, const float *a, const float *b, float *c) {
  if (ccg__gemm_lib_own(lib)) {
    if (!ccg__sgemm_blocked(g->vm ? g->vm->isa : CCG__ISA_SCALAR, g, m, n, a, b,
                            c))
      plain(g, m, n, a, b, c);
    return;
  }
#ifdef CCG_HAVE_ONEDNN
  if (lib != CCG__GEMM_LIB_OPENBLAS) {
    /* this thread's OpenMP team is one: the pool's threads are the only
     * ones (an ICV of the thread, not of the process) */
    if (ccg__onednn_fn.omp_get_max_threads() != 1)
      ccg__onednn_fn.omp_set_num_threads(1);
    ccg__onednn_fn.dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', m, n, g->k,
                              g->alpha, a, g->lda, b, g->ldb, g->beta, c,
                              g->ldc);
    return;
  }
#endif
  ccg__blas_fn.cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                           g->tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                           (int)g->k, g->alpha, a, (int)g->lda, b, (int)g->ldb,
                           g->beta, c, (int)g->ldc);
}

/* ---- Small products -----------------------------------------------------
 * Below SMALL_MAX_FLOPS the library's per-call set-up (it allocates and
 * packs its operands) costs more than the product: a tiny mixtral step
 * spent 16% of its time in it. These run a plain loop instead: per C
 * element the sum over k in order, one product added at a time, scaled by
 * alpha and added to beta times C (C is not read where beta is 0, as
 * BLAS); a product and a sum round each (no contraction under -std=c11).
 * Results do not depend on the thread count (one call per tile, as the
 * library's). On x86 the AVX2 build of the loop runs where the executor's
 * array math is AVX2 or wider, the library below that; elsewhere the
 * portable build (4 floats a vector). Measured on 1-thread calls, the loop
 * took 0.3 of the library's time at 8x8x8, 0.4 at 16x16x32, 1.2 at
 * 16x32x32 (docs/performance.md, "Small GEMMs and ScatterElements"). */
#define SMALL_MAX_FLOPS 32768.0
/* B transposed is copied to rows first: at most this many elements */
#define SMALL_PACK 8192

/* The vector of the loop: VW floats, 4 (SSE, NEON) in the portable build,
 * 8 in the AVX2 one. */
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));

/* Columns [j, j + 8 * NV) of row i, NV of 1 or 4: the sums stay in
 * registers over k (named, so that an -O2 build keeps them there). */
#define SMALL_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define SMALL_OUT(p, s)                                                        \
  do {                                                                         \
    VT o_ = (s)*alpha, y_;                                                     \
    if (beta != 0.0f) {                                                        \
      SMALL_LOAD(y_, p);                                                       \
      o_ += y_ * beta;                                                         \
    }                                                                          \
    memcpy((p), &o_, sizeof o_);                                               \
  } while (0)
/* Rows i .. i + 3, columns [j, j + W): the sums of 4 rows by W / VW vectors
 * stay in registers over k (named, so that an -O2 build keeps them there);
 * B's row is loaded once for the 4 rows. */
#define SMALL_4ROWS(W, DECL, LOADS, FMAS, OUTS)                                \
  for (; j + (W) <= n; j += (W)) {                                             \
    DECL;                                                                      \
    for (int64_t k = 0; k < kk; k++) {                                         \
      const float *br = bp + k * ldb + j;                                      \
      VT x0 = (VT){0} + a0[k * sak], x1 = (VT){0} + a1[k * sak];               \
      VT x2 = (VT){0} + a2[k * sak], x3 = (VT){0} + a3[k * sak];               \
      LOADS;                                                                   \
      FMAS;                                                                    \
    }                                                                          \
    OUTS;                                                                      \
  }
#define SMALL_ROW1(W, DECL, LOADS, FMAS, OUTS)                                 \
  for (; j + (W) <= n; j += (W)) {                                             \
    DECL;                                                                      \
    for (int64_t k = 0; k < kk; k++) {                                         \
      const float *br = bp + k * ldb + j;                                      \
      VT x0 = (VT){0} + a0[k * sak];                                           \
      LOADS;                                                                   \
      FMAS;                                                                    \
    }                                                                          \
    OUTS;                                                                      \
  }
/* The last n - j (< VW) columns of the row from a0 to c0: k outside, so
 * that B is read along its rows; each sum the same as in a vector lane. */
#define SMALL_TAIL(a0, c0)                                                     \
  if (j < n) {                                                                 \
    float s[VW] = {0};                                                         \
    for (int64_t k = 0; k < kk; k++) {                                         \
      float x = (a0)[k * sak];                                                 \
      const float *br = bp + k * ldb;                                          \
      for (int64_t q = j; q < n; q++)                                          \
        s[q - j] += x * br[q];                                                 \
    }                                                                          \
    for (int64_t q = j; q < n; q++)                                            \
      (c0)[q] =                                                                \
          beta != 0.0f ? s[q - j] * alpha + (c0)[q] * beta : s[q - j] * alpha; \
  }

#define SMALL_BODY                                                             \
  {                                                                            \
    int64_t kk = g->k, ldb = g->ldb, ldc = g->ldc;                             \
    int64_t sai = g->ta ? 1 : g->lda, sak = g->ta ? g->lda : 1;                \
    float alpha = g->alpha, beta = g->beta;                                    \
    const float *bp = b;                                                       \
    if (g->tb) {                                                               \
      for (int64_t k = 0; k < kk; k++)                                         \
        for (int64_t q = 0; q < n; q++)                                        \
          pack[k * n + q] = b[q * g->ldb + k];                                 \
      bp = pack;                                                               \
      ldb = n;                                                                 \
    }                                                                          \
    int64_t i = 0;                                                             \
    for (; i + 4 <= m; i += 4) {                                               \
      const float *a0 = a + i * sai, *a1 = a0 + sai, *a2 = a1 + sai,           \
                  *a3 = a2 + sai;                                              \
      float *c0 = c + i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc; \
      int64_t j = 0;                                                           \
      SMALL_4ROWS(                                                             \
          2 * VW, VT s00 = {0}; VT s01 = {0}; VT s10 = {0}; VT s11 = {0};      \
          VT s20 = {0}; VT s21 = {0}; VT s30 = {0}; VT s31 = {0}; VT y0;       \
          VT y1, SMALL_LOAD(y0, br); SMALL_LOAD(y1, br + VW), s00 += x0 * y0;  \
          s01 += x0 * y1; s10 += x1 * y0; s11 += x1 * y1; s20 += x2 * y0;      \
          s21 += x2 * y1; s30 += x3 * y0;                                      \
          s31 += x3 * y1, SMALL_OUT(c0 + j, s00); SMALL_OUT(c0 + j + VW, s01); \
          SMALL_OUT(c1 + j, s10); SMALL_OUT(c1 + j + VW, s11);                 \
          SMALL_OUT(c2 + j, s20); SMALL_OUT(c2 + j + VW, s21);                 \
          SMALL_OUT(c3 + j, s30); SMALL_OUT(c3 + j + VW, s31))                 \
      SMALL_4ROWS(VW, VT s00 = {0}; VT s10 = {0}; VT s20 = {0}; VT s30 = {0};  \
                  VT y0, SMALL_LOAD(y0, br), s00 += x0 * y0; s10 += x1 * y0;   \
                  s20 += x2 * y0; s30 += x3 * y0, SMALL_OUT(c0 + j, s00);      \
                  SMALL_OUT(c1 + j, s10); SMALL_OUT(c2 + j, s20);              \
                  SMALL_OUT(c3 + j, s30))                                      \
      SMALL_TAIL(a0, c0)                                                       \
      SMALL_TAIL(a1, c1)                                                       \
      SMALL_TAIL(a2, c2)                                                       \
      SMALL_TAIL(a3, c3)                                                       \
    }                                                                          \
    for (; i < m; i++) {                                                       \
      const float *a0 = a + i * sai;                                           \
      float *c0 = c + i * ldc;                                                 \
      int64_t j = 0;                                                           \
      SMALL_ROW1(                                                              \
          2 * VW, VT s00 = {0}; VT s01 = {0}; VT y0;                           \
          VT y1, SMALL_LOAD(y0, br); SMALL_LOAD(y1, br + VW), s00 += x0 * y0;  \
          s01 += x0 * y1, SMALL_OUT(c0 + j, s00); SMALL_OUT(c0 + j + VW, s01)) \
      SMALL_ROW1(VW, VT s00 = {0}; VT y0, SMALL_LOAD(y0, br), s00 += x0 * y0,  \
                                   SMALL_OUT(c0 + j, s00))                     \
      SMALL_TAIL(a0, c0)                                                       \
    }                                                                          \
  }

#define VT v4f
#define VW 4
static void small_plain(const ccg__gemm *g, int64_t m, int64_t n,
                        const float *a, const float *b, float *c, float *pack) {
  SMALL_BODY
}
#undef VT
#undef VW

#if defined(__x86_64__) && defined(__GNUC__)
#define VT v8f
#define VW 8
static __attribute__((target("avx2,fma"))) void
small_avx2(const ccg__gemm *g, int64_t m, int64_t n, const float *a,
           const float *b, float *c, float *pack) {
  SMALL_BODY
}
#undef VT
#undef VW
#endif

static void small(const ccg__gemm *g, int64_t m, int64_t n, const float *a,
                  const float *b, float *c) {
  float pack[SMALL_PACK];
#if defined(__x86_64__) && defined(__GNUC__)
  if (g->vm && g->vm->isa >= CCG__ISA_AVX2) {
    small_avx2(g, m, n, a, b, c, pack);
    return;
  }
#endif
  small_plain(g, m, n, a, b, c, pack);
}

/* Whether the small-product loop serves g: the whole product under
 * SMALL_MAX_FLOPS per batch entry (one tile, as plan gives it), and B's
 * transposed copy within its buffer. */
static bool small_fits(const ccg__gemm *g) {
#if defined(__x86_64__) && defined(__GNUC__)
  /* the portable loop (4 floats a vector) does not beat the library there */
  if (!g->vm || g->vm->isa < CCG__ISA_AVX2)
    return false;
#endif
  return 2.0 * (double)g->m * (double)g->n * (double)g->k < SMALL_MAX_FLOPS &&
         (!g->tb || g->k * g->n <= SMALL_PACK);
}

/* oneDNN allocates its packing block on every call (posix_memalign, 128
 * bytes aligned). glibc splits the alignment's remainder off into a small
 * chunk that its per-thread cache keeps in use, right after the block: the
 * freed block can merge with nothing, the next call's (as large, plus the
 * alignment) does not fit in it, and the heap grows by a block per call
 * until that cache is full, seven calls per size per thread. Those are the
 * first calls of a process: the h1024 transformer block's first step left
 * 3.4 MiB behind at one thread, 17 MiB at two (docs/performance.md, "Run
 * memory"). Trimming after each library call of a program's first run
 * gives their pages back; later runs reuse the top block and leave nothing
 * to trim. Other allocators keep no such remainders. */
#define TRIM_PAD ((size_t)4 << 20)
static void release_freed(void) {
#if defined(__GLIBC__)
  /* the freed blocks in glibc's bins go back; 4 MiB at the top of the
   * heap stay, so that the next call does not fault its block in again
   * (trimming the top to nothing made the h1024 block's first step 50-100
   * ms slower, keeping it the cost is within the noise) */
  (void)malloc_trim(TRIM_PAD);
#endif
}

/* Products left to oneDNN under the default (MIXED), where the build has
 * it: at most STREAM_MAX_M rows over a B of STREAM_MIN_B floats (16 MiB)
 * or more, or at most FEW_ROWS rows (FEW_ROWS_T with B transposed). Such
 * products are bound by B's journey from memory or cache: oneDNN's sgemm
 * overlaps its loads with the arithmetic, where the kernels pack B first
 * or read it a panel at a time (bench_gemm_own, own / oneDNN: the MLP at
 * batch 64 1.3, one row of a 4096 x 4096 B 1.7; 1,1024,1024 1.5 (AVX2 5.1),
 * 4,1024,1024 1.17, 8,1024,1024 0.97; with B transposed 1 row 5.1, 4 rows
 * 2.4, 8 rows 2.0, 16 rows 0.75). */
#ifdef CCG_HAVE_ONEDNN
#define STREAM_MAX_M 128
#define STREAM_MIN_B ((int64_t)1 << 22)
#define FEW_ROWS 4
#define FEW_ROWS_T 8

static bool left_to_onednn(const ccg__gemm *g) {
  return (g->m <= STREAM_MAX_M && g->k * g->n >= STREAM_MIN_B) ||
         g->m <= (g->tb ? FEW_ROWS_T : FEW_ROWS);
}
#endif

typedef struct job {
  const ccg__gemm *g;
  tiling t;
  ccg__gemm_lib_kind lib;
  bool small; /* the small-product loop, not the library */
  bool trim;  /* release_freed after each library call */
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
    if (g->k > 0 && j->small) {
      small(g, m, n, a, b, c);
    } else if (g->k > 0) {
      call(j->lib, g, m, n, a, b, c);
      if (j->trim)
        release_freed();
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

static void sgemm(ccg__pool *pool, const ccg__gemm *g, ccg__gemm_path path,
                  ccg__gemm_lib_kind lib, bool trim);

void ccg__sgemm(const ccg_exec *x, ccg__gemm *g) {
  g->vm = x->vm;
  sgemm(x->pool, g, CCG__GEMM_AUTO, (ccg__gemm_lib_kind)x->gemm_lib,
        x->first_run);
}

void ccg__sgemm_path(ccg__pool *pool, const ccg__gemm *g, ccg__gemm_path path) {
  ccg_ctx ctx; /* a library that cannot be loaded: the product is left */
  ccg__ctx_init(&ctx);
  ccg__gemm_lib_kind lib;
  if (ccg__gemm_lib(&ctx, g->vm ? g->vm->isa : CCG__ISA_SCALAR, &lib) ==
      CCG_STATUS_OK)
    sgemm(pool, g, path, lib, false);
}

static void sgemm(ccg__pool *pool, const ccg__gemm *g, ccg__gemm_path path,
                  ccg__gemm_lib_kind lib, bool trim) {
  int64_t batch = g->batch > 0 ? g->batch : 1;
  if (g->m <= 0 || g->n <= 0)
    return;
  job j = {g, plan(g->m, g->n, g->k), CCG__GEMM_LIB_ONEDNN, false, false};
  if (path == CCG__GEMM_AUTO)
    j.small = small_fits(g);
  else
    j.small =
        path == CCG__GEMM_SMALL && (!g->tb || g->k * j.t.bn <= SMALL_PACK);
  j.lib = lib;
#ifdef CCG_HAVE_ONEDNN
  /* a product left to oneDNN is loaded then if it was not (and stays on
   * the kernels where it cannot be) */
  if (lib == CCG__GEMM_LIB_MIXED && path == CCG__GEMM_AUTO && !j.small &&
      left_to_onednn(g)) {
    ccg_ctx quiet; /* a library that cannot be loaded is no error here */
    ccg__ctx_init(&quiet);
    if (ccg__onednn_load(&quiet) == CCG_STATUS_OK)
      j.lib = CCG__GEMM_LIB_ONEDNN;
  }
#endif
  j.trim = trim && j.lib == CCG__GEMM_LIB_ONEDNN;
#ifdef CCG_HAVE_ONEDNN
  /* the caller's thread gets its OpenMP setting back */
  int omp_was =
      j.lib == CCG__GEMM_LIB_ONEDNN ? ccg__onednn_fn.omp_get_max_threads() : 1;
#endif
  /* OpenBLAS's thread count is the process's, not the call's: its own
   * threads would run under every tile of ours, so it stays one
   * (docs/exec.md, "Threads"), whoever else in the process set it. */
  if (j.lib == CCG__GEMM_LIB_OPENBLAS &&
      ccg__blas_fn.openblas_get_num_threads() != 1)
    ccg__blas_fn.openblas_set_num_threads(1);
  size_t tiles = (size_t)(batch * j.t.nm * j.t.nn);
  double flops =
      2.0 * (double)batch * (double)g->m * (double)g->n * (double)g->k;
  ccg__parallel_for(pool, tiles, 1, flops / CCG__PAR_FLOPS_PER_WORK, tile, &j);
#ifdef CCG_HAVE_ONEDNN
  if (omp_was != 1)
    ccg__onednn_fn.omp_set_num_threads(omp_was);
#endif
}
