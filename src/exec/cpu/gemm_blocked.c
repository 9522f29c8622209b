/* ccgraph's own f32 GEMM for the executor's tiles (gemm.c): register-blocked
 * micro-kernels chosen by the executor's instruction set (AVX-512F: strips
 * of up to 14 rows by 32 columns, 28 accumulators; AVX2 + FMA: 6 rows by
 * 16, 12 accumulators). B goes by blocks of KC rows and NC columns: packed
 * into NR-column panels (zeros past n) in the calling thread's buffer, its
 * source rows loaded ahead, or read in place where the tile has few rows.
 * A is read in place, rows lda apart, or, transposed, an MR-wide run of a
 * row of A^T per k; the rows split into strips as even as they go, a
 * kernel instance for each strip height. Per C element the sum runs over k
 * in order within a block, one fused multiply-add a step (in a strip of
 * fewer than 4 rows, in 2 to 4 interleaved partial sums added in order at
 * the end), and the blocks add in order; each tile is one call, so the
 * bytes do not depend on the thread count (docs/performance.md, "ccgraph's
 * own GEMM, adopted"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define KC 512
/* B's rows are read this many ahead while packing: rows lie a whole row of
 * B apart, on pages of their own, where the hardware's prefetchers do not
 * follow (packing a 512 x 256 block of a 1024 x 3072 B from memory took
 * the product from 1.02 to 1.10 of oneDNN's time without it) */
#define PF_ROWS 32

/* A tile of at most this many rows reads B's full panels in place, rows
 * ldb apart, rather than packing them, where the whole of B is at most
 * IN_PLACE_MAX_B floats (4 MiB): with few strips to share it, packing
 * costs more than the strided reads of a B that stays in cache from step
 * to step (the h256 transformer block's step: 1.84-1.88 ms against
 * 2.00-2.02 packing every panel), but not one streamed from memory (the
 * 4096 x 4096 MLP at batch 64: 28.7 ms a step in place, 25.8 packed; all of
 * the h1024 block's 512-row tiles in place: 66.4 ms against 65.0-65.2) */
#define IN_PLACE_MAX_M 128
#define IN_PLACE_MAX_B ((int64_t)1 << 20)
/* Columns of B packed at a time: the executor's tiles are 128 to 511
 * columns (gemm.c), so one block serves them; a wider product (a tiny one
 * kept whole) goes by blocks, and the thread's buffer stays KC x NC
 * floats, 1 MiB */
#define NC 512

/* The calling thread's packing buffer of KC x NC floats, made at its
 * first product and freed when the thread ends. */
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static bool buf_key_ok;

static void buf_key_init(void) {
  buf_key_ok = pthread_key_create(&buf_key, free) == 0;
}

/* At exit, or where the library is unloaded: the key goes, so that no
 * thread's end calls into unmapped code; this thread's buffer is freed
 * (a live thread's would be left). */
__attribute__((destructor)) static void buf_key_drop(void) {
  if (!buf_key_ok)
    return;
  free(pthread_getspecific(buf_key));
  pthread_key_delete(buf_key);
  buf_key_ok = false;
}

/* NULL where the buffer cannot be had. */
static float *thread_buf(void) {
  pthread_once(&buf_once, buf_key_init);
  if (!buf_key_ok)
    return NULL;
  float *b = pthread_getspecific(buf_key);
  if (!b) {
    b = aligned_alloc(64, (size_t)KC * NC * sizeof(float));
    if (b && pthread_setspecific(buf_key, b) != 0) {
      free(b);
      b = NULL;
    }
  }
  return b;
}

/* ---- AVX-512 ---------------------------------------------------------- */
#define MR16 14
#define NR16 32

static inline __attribute__((target("avx512f"))) __mmask16 mask16(int64_t w) {
  return w >= 16  ? (__mmask16)0xffff
         : w <= 0 ? (__mmask16)0
                  : (__mmask16)((1u << w) - 1);
}

/* r[j] becomes column j of the 16 x 16 block whose rows r held. */
static inline __attribute__((target("avx512f"), always_inline)) void
transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* u[4g + c]: rows 4g .. 4g + 3 of column 4L + c in each 128-bit lane L */
  for (int g = 0; g < 4; g++) {
    u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
  }
  for (int c = 0; c < 4; c++) {
    t[c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    t[8 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
  }
  for (int c = 0; c < 8; c++) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
  }
}

/* Rows k0 .. k0 + kc of op(B) as NR16-column panels of kc rows, zeros past
 * n. */
static __attribute__((target("avx512f"))) void pack_b16(bool tb, const float *b,
                                                        int64_t ldb, int64_t k0,
                                                        int64_t kc, int64_t n,
                                                        float *bp) {
  for (int64_t p = 0; p < n; p += NR16) {
    int64_t w = n - p < NR16 ? n - p : NR16;
    float *dst = bp + p / NR16 * kc * NR16;
    if (!tb) {
      __mmask16 m0 = mask16(w), m1 = mask16(w - 16);
      for (int64_t kk = 0; kk < kc; kk++) {
        const float *src = b + (k0 + kk) * ldb + p;
        if (kk + PF_ROWS < kc) {
          _mm_prefetch((const char *)(src + PF_ROWS * ldb), _MM_HINT_T0);
          _mm_prefetch((const char *)(src + PF_ROWS * ldb + 16), _MM_HINT_T0);
        }
        _mm512_store_ps(dst + kk * NR16, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(dst + kk * NR16 + 16,
                        _mm512_maskz_loadu_ps(m1, src + 16));
      }
      continue;
    }
    /* B^T's rows p .. p + 31 (w of them): 16 rows by 16 k at a time,
     * transposed in registers */
    for (int64_t h = 0; h < 2; h++)
      for (int64_t kk = 0; kk < kc; kk += 16) {
        __mmask16 mk = mask16(kc - kk);
        __m512 r[16];
        for (int64_t q = 0; q < 16; q++)
          r[q] = 16 * h + q < w ? _mm512_maskz_loadu_ps(
                                      mk, b + (p + 16 * h + q) * ldb + k0 + kk)
                                : _mm512_setzero_ps();
        transpose16(r);
        int64_t cols = kc - kk < 16 ? kc - kk : 16;
        for (int64_t j = 0; j < cols; j++)
          _mm512_store_ps(dst + (kk + j) * NR16 + 16 * h, r[j]);
      }
  }
}

/* A strip of R <= MR16 rows by the panel's NR16 columns: alpha times the
 * sum over kc, plus beta * C on the first block (C not read where beta is
 * 0) or plus C on later ones. Row r of A at a + r * rs, its k-th element
 * + k * ks. One instance per R (constant, so that the accumulators stay in
 * registers), for A's rows (rs = lda, ks = 1) and for A transposed (rs =
 * 1, ks = lda). */
__attribute__((target("avx512f,fma"), always_inline)) static inline void
strip16(const int R, int64_t kc, const float *a, int64_t rs, int64_t ks,
        const float *bp, int64_t bs, float *c, int64_t ldc, int64_t nr,
        float alpha, float beta, bool first) {
  /* U interleaved sums over k where R rows give fewer than 8 chains of
   * multiply-adds (two pipes, four cycles each): one row alone waited on
   * each addition (bench_gemm_own, 1,1024,1024: 2.5x oneDNN's time) */
  const int U = 2 * R >= 8 ? 1 : (8 + 2 * R - 1) / (2 * R);
  __m512 acc[4][MR16][2];
#pragma GCC unroll 4
  for (int u = 0; u < U; u++)
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
      acc[u][r][0] = acc[u][r][1] = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + U <= kc; kk += U)
#pragma GCC unroll 4
    for (int u = 0; u < U; u++) {
      __m512 b0 = _mm512_loadu_ps(bp + (kk + u) * bs),
             b1 = _mm512_loadu_ps(bp + (kk + u) * bs + 16);
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        __m512 av = _mm512_set1_ps(a[r * rs + (kk + u) * ks]);
        acc[u][r][0] = _mm512_fmadd_ps(av, b0, acc[u][r][0]);
        acc[u][r][1] = _mm512_fmadd_ps(av, b1, acc[u][r][1]);
      }
    }
  for (; kk < kc; kk++) {
    __m512 b0 = _mm512_loadu_ps(bp + kk * bs),
           b1 = _mm512_loadu_ps(bp + kk * bs + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      __m512 av = _mm512_set1_ps(a[r * rs + kk * ks]);
      acc[0][r][0] = _mm512_fmadd_ps(av, b0, acc[0][r][0]);
      acc[0][r][1] = _mm512_fmadd_ps(av, b1, acc[0][r][1]);
    }
  }
#pragma GCC unroll 4
  for (int u = 1; u < U; u++)
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      acc[0][r][0] = _mm512_add_ps(acc[0][r][0], acc[u][r][0]);
      acc[0][r][1] = _mm512_add_ps(acc[0][r][1], acc[u][r][1]);
    }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
    __m512 x0 = _mm512_mul_ps(acc[0][r][0], va),
           x1 = _mm512_mul_ps(acc[0][r][1], va);
    if (!first) {
      x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));
      x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));
    } else if (beta != 0.0f) {
      x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
      x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
    }
    _mm512_mask_storeu_ps(cr, m0, x0);
    _mm512_mask_storeu_ps(cr + 16, m1, x1);
  }
}

typedef void (*strip_fn)(int64_t kc, const float *a, int64_t lda,
                         const float *bp, int64_t bs, float *c, int64_t ldc,
                         int64_t nr, float alpha, float beta, bool first);
#define STRIP16(R)                                                             \
  static __attribute__((target("avx512f,fma"))) void s16r_##R(                 \
      int64_t kc, const float *a, int64_t lda, const float *bp, int64_t bs,    \
      float *c, int64_t ldc, int64_t nr, float alpha, float beta,              \
      bool first) {                                                            \
    strip16(R, kc, a, lda, 1, bp, bs, c, ldc, nr, alpha, beta, first);         \
  }                                                                            \
  static __attribute__((target("avx512f,fma"))) void s16c_##R(                 \
      int64_t kc, const float *a, int64_t lda, const float *bp, int64_t bs,    \
      float *c, int64_t ldc, int64_t nr, float alpha, float beta,              \
      bool first) {                                                            \
    strip16(R, kc, a, 1, lda, bp, bs, c, ldc, nr, alpha, beta, first);         \
  }
STRIP16(1)
STRIP16(2)
STRIP16(3)
STRIP16(4)
STRIP16(5)
STRIP16(6)
STRIP16(7)
STRIP16(8)
STRIP16(9)
STRIP16(10)
STRIP16(11)
STRIP16(12)
STRIP16(13)
STRIP16(14)
static const strip_fn strips16[2][MR16 + 1] = {
    {NULL, s16r_1, s16r_2, s16r_3, s16r_4, s16r_5, s16r_6, s16r_7, s16r_8,
     s16r_9, s16r_10, s16r_11, s16r_12, s16r_13, s16r_14},
    {NULL, s16c_1, s16c_2, s16c_3, s16c_4, s16c_5, s16c_6, s16c_7, s16c_8,
     s16c_9, s16c_10, s16c_11, s16c_12, s16c_13, s16c_14}};

/* ---- AVX2 ------------------------------------------------------------- */
#define MR8 6
#define NV8 2 /* vectors of 8 a row of the strip */
#define NR8 (8 * NV8)

static inline __attribute__((target("avx2"))) __m256i mask8(int64_t w) {
  const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                             0,  0,  0,  0,  0,  0,  0,  0};
  w = w < 0 ? 0 : w > 8 ? 8 : w;
  return _mm256_loadu_si256((const __m256i *)(lanes + 8 - w));
}

/* r[j] becomes column j of the 8 x 8 block whose rows r held. */
static inline __attribute__((target("avx2"), always_inline)) void
transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 2; g++) {
    u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

static __attribute__((target("avx2"))) void pack_b8(bool tb, const float *b,
                                                    int64_t ldb, int64_t k0,
                                                    int64_t kc, int64_t n,
                                                    float *bp) {
  for (int64_t p = 0; p < n; p += NR8) {
    int64_t w = n - p < NR8 ? n - p : NR8;
    float *dst = bp + p / NR8 * kc * NR8;
    if (!tb) {
      __m256i m[NV8];
      for (int v = 0; v < NV8; v++)
        m[v] = mask8(w - 8 * v);
      for (int64_t kk = 0; kk < kc; kk++) {
        const float *src = b + (k0 + kk) * ldb + p;
        if (kk + PF_ROWS < kc)
          for (int v = 0; v < NV8; v += 2)
            _mm_prefetch((const char *)(src + PF_ROWS * ldb + 8 * v),
                         _MM_HINT_T0);
        for (int v = 0; v < NV8; v++)
          _mm256_store_ps(dst + kk * NR8 + 8 * v,
                          _mm256_maskload_ps(src + 8 * v, m[v]));
      }
      continue;
    }
    for (int64_t h = 0; h < NV8; h++)
      for (int64_t kk = 0; kk < kc; kk += 8) {
        __m256i mk = mask8(kc - kk);
        __m256 r[8];
        for (int64_t q = 0; q < 8; q++)
          r[q] =
              8 * h + q < w
                  ? _mm256_maskload_ps(b + (p + 8 * h + q) * ldb + k0 + kk, mk)
                  : _mm256_setzero_ps();
        transpose8(r);
        int64_t cols = kc - kk < 8 ? kc - kk : 8;
        for (int64_t j = 0; j < cols; j++)
          _mm256_store_ps(dst + (kk + j) * NR8 + 8 * h, r[j]);
      }
  }
}

/* Strip rows 0 .. R - 1 by the panel's NR8 columns; R is constant in
 * each instance (strip8(MR8, ...) is the full strip). */
__attribute__((target("avx2,fma"), always_inline)) static inline void
strip8(const int R, int64_t kc, const float *a, int64_t rs, int64_t ks,
       const float *bp, int64_t bs, float *c, int64_t ldc, int64_t nr,
       float alpha, float beta, bool first) {
  /* U interleaved sums over k, as strip16 */
  const int U = NV8 * R >= 8 ? 1 : (8 + NV8 * R - 1) / (NV8 * R);
  __m256 acc[4][MR8][NV8];
#pragma GCC unroll 4
  for (int u = 0; u < U; u++)
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int v = 0; v < NV8; v++)
        acc[u][r][v] = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + U <= kc; kk += U)
#pragma GCC unroll 4
    for (int u = 0; u < U; u++) {
      __m256 bv[NV8];
#pragma GCC unroll 4
      for (int v = 0; v < NV8; v++)
        bv[v] = _mm256_loadu_ps(bp + (kk + u) * bs + 8 * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        __m256 av = _mm256_broadcast_ss(a + r * rs + (kk + u) * ks);
#pragma GCC unroll 4
        for (int v = 0; v < NV8; v++)
          acc[u][r][v] = _mm256_fmadd_ps(av, bv[v], acc[u][r][v]);
      }
    }
  for (; kk < kc; kk++) {
    __m256 bv[NV8];
#pragma GCC unroll 4
    for (int v = 0; v < NV8; v++)
      bv[v] = _mm256_loadu_ps(bp + kk * bs + 8 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      __m256 av = _mm256_broadcast_ss(a + r * rs + kk * ks);
#pragma GCC unroll 4
      for (int v = 0; v < NV8; v++)
        acc[0][r][v] = _mm256_fmadd_ps(av, bv[v], acc[0][r][v]);
    }
  }
#pragma GCC unroll 4
  for (int u = 1; u < U; u++)
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int v = 0; v < NV8; v++)
        acc[0][r][v] = _mm256_add_ps(acc[0][r][v], acc[u][r][v]);
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  __m256i m[NV8];
#pragma GCC unroll 4
  for (int v = 0; v < NV8; v++)
    m[v] = mask8(nr - 8 * v);
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV8; v++) {
      __m256 x = _mm256_mul_ps(acc[0][r][v], va);
      if (!first)
        x = _mm256_add_ps(x, _mm256_maskload_ps(cr + 8 * v, m[v]));
      else if (beta != 0.0f)
        x = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr + 8 * v, m[v]), x);
      _mm256_maskstore_ps(cr + 8 * v, m[v], x);
    }
  }
}

#define STRIP8(R)                                                              \
  static __attribute__((target("avx2,fma"))) void s8r_##R(                     \
      int64_t kc, const float *a, int64_t lda, const float *bp, int64_t bs,    \
      float *c, int64_t ldc, int64_t nr, float alpha, float beta,              \
      bool first) {                                                            \
    strip8(R, kc, a, lda, 1, bp, bs, c, ldc, nr, alpha, beta, first);          \
  }                                                                            \
  static __attribute__((target("avx2,fma"))) void s8c_##R(                     \
      int64_t kc, const float *a, int64_t lda, const float *bp, int64_t bs,    \
      float *c, int64_t ldc, int64_t nr, float alpha, float beta,              \
      bool first) {                                                            \
    strip8(R, kc, a, 1, lda, bp, bs, c, ldc, nr, alpha, beta, first);          \
  }
STRIP8(1)
STRIP8(2)
STRIP8(3)
STRIP8(4)
STRIP8(5)
STRIP8(6)
static const strip_fn strips8[2][MR8 + 1] = {
    {NULL, s8r_1, s8r_2, s8r_3, s8r_4, s8r_5, s8r_6},
    {NULL, s8c_1, s8c_2, s8c_3, s8c_4, s8c_5, s8c_6}};

/* ---- the driver ------------------------------------------------------- */

/* One kernel call: strip rows [i0, i0 + mr) of the block from k0 by the
 * panel at bp (rows bs floats apart) into C's columns from p. */
static void kernel(bool wide, const ccg__gemm *g, int64_t mr, int64_t kc,
                   const float *as, const float *panel, int64_t bs, float *cs,
                   int64_t nr, bool first) {
  int64_t lda = g->lda, ldc = g->ldc;
  strip_fn f = wide ? strips16[g->ta][mr] : strips8[g->ta][mr];
  f(kc, as, lda, panel, bs, cs, ldc, nr, g->alpha, g->beta, first);
}

/* Columns [0, n) of the tile, n <= NC, with bp's room for KC x NC. */
static void columns(bool wide, const ccg__gemm *g, int64_t m, int64_t n,
                    const float *a, const float *b, float *c, float *bp) {
  int64_t MR = wide ? MR16 : MR8, NR = wide ? NR16 : NR8;
  int64_t lda = g->lda, ldb = g->ldb, ldc = g->ldc;
  bool in_place =
      !g->tb && m <= IN_PLACE_MAX_M && g->k * g->n <= IN_PLACE_MAX_B;
  /* strips as even as they go: 32 rows are 11 + 11 + 10, not 14 + 14 + 4,
   * whose last strip would run at a fraction of the kernel's rate */
  int64_t strips = (m + MR - 1) / MR, base = m / strips, extra = m % strips;
  for (int64_t k0 = 0; k0 < g->k; k0 += KC) {
    int64_t kc = g->k - k0 < KC ? g->k - k0 : KC;
    bool first = k0 == 0;
    /* in place: full panels read from B, the last partial one packed */
    int64_t packed_from = in_place ? n / NR * NR : 0;
    if (packed_from < n) {
      const float *src = g->tb ? b + packed_from * ldb : b + packed_from;
      if (wide)
        pack_b16(g->tb, src, ldb, k0, kc, n - packed_from, bp);
      else
        pack_b8(g->tb, src, ldb, k0, kc, n - packed_from, bp);
    }
    for (int64_t st = 0, i0 = 0; st < strips; st++) {
      int64_t mr = base + (st < extra);
      const float *as = g->ta ? a + k0 * lda + i0 : a + i0 * lda + k0;
      for (int64_t p = 0; p < n; p += NR) {
        bool own = p >= packed_from;
        kernel(wide, g, mr, kc, as,
               own ? bp + (p - packed_from) / NR * kc * NR : b + k0 * ldb + p,
               own ? NR : ldb, c + i0 * ldc + p, n - p < NR ? n - p : NR,
               first);
      }
      i0 += mr;
    }
  }
}

bool ccg__sgemm_blocked(ccg__isa isa, const ccg__gemm *g, int64_t m, int64_t n,
                        const float *a, const float *b, float *c) {
  if (isa < CCG__ISA_AVX2)
    return false;
  if (m <= 0 || n <= 0) /* nothing to write (and no strips to split) */
    return true;
  float *bp = thread_buf();
  if (!bp)
    return false;
  for (int64_t j0 = 0; j0 < n; j0 += NC)
    columns(isa >= CCG__ISA_AVX512, g, m, n - j0 < NC ? n - j0 : NC, a,
            g->tb ? b + j0 * g->ldb : b + j0, c + j0, bp);
  return true;
}

#else

bool ccg__sgemm_blocked(ccg__isa isa, const ccg__gemm *g, int64_t m, int64_t n,
                        const float *a, const float *b, float *c) {
  (void)isa, (void)g, (void)m, (void)n, (void)a, (void)b, (void)c;
  return false;
}

#endif
