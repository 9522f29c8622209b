/* A candidate f32 GEMM of ccgraph's own beside oneDNN's dnnl_sgemm, on the
 * transformer block's products cut into the executor's tiles (512 rows by
 * 256 columns, 128 where N < 512; src/exec/cpu/gemm.c), at 1 thread
 * (docs/performance.md, "A GEMM of ccgraph's own: measured, not adopted").
 * Dropping libdnnl would take its 9-10 MiB of code, relocated data and
 * generated kernels out of every process (the run-memory target), if a GEMM
 * of ccgraph's own kept oneDNN's speed. The candidate: an AVX-512 micro-kernel
 * of 14 rows by 32 columns (28 accumulators; per k two loads of B and 14
 * broadcasts of A), B packed per block of KC rows into 32-column panels, A
 * read in place for full 14-row strips (packing A for each 256-column tile
 * cost 18%) and packed for the last partial strip. Both run the same tiles;
 * the ratio is own / oneDNN on the thread's CPU clock, the best of R batches;
 * with B packed ahead: every tile's B packed once before the timed calls,
 * as an executor could hold a constant weight. Every product is checked
 * against oneDNN's (largest |difference| over the
 * largest |result|). Where the CPU has no AVX-512 it says so and stops.
 * --shape M,K,N[,T] (repeatable) measures those products instead (T: B
 * transposed); --tile-n W cuts them into W-column tiles instead of the
 * executor's 256 (128 where N < 512), W = N: one call per product.
 * usage: bench_gemm_own [--reps R] [--small] [--shape M,K,N[,T]]...
 *                       [--tile-n W] */
#include <immintrin.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MR 14
#define NR 32
#define KC 512

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rows k0..k0+kc of B (row-major K x N, or N x K when tb) as NR-column
 * panels of kc rows each, zeros past n: rows of B copied a vector at a
 * time, columns of a transposed B one element at a time. */
__attribute__((target("avx512f"))) static void pack_b(bool tb, const float *b,
                                                      int64_t ldb, int64_t k0,
                                                      int64_t kc, int64_t n,
                                                      float *bp) {
  for (int64_t p = 0; p < n; p += NR) {
    int64_t w = n - p < NR ? n - p : NR;
    float *dst = bp + p / NR * kc * NR;
    if (!tb) {
      __mmask16 m0 = w >= 16 ? 0xffff : (__mmask16)((1u << w) - 1);
      __mmask16 m1 = w >= 32   ? 0xffff
                     : w <= 16 ? 0
                               : (__mmask16)((1u << (w - 16)) - 1);
      for (int64_t kk = 0; kk < kc; kk++) {
        const float *src = b + (k0 + kk) * ldb + p;
        _mm512_store_ps(dst + kk * NR, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(dst + kk * NR + 16,
                        _mm512_maskz_loadu_ps(m1, src + 16));
      }
      continue;
    }
    for (int64_t q = 0; q < NR; q++) {
      const float *src = b + (p + q) * ldb + k0;
      for (int64_t kk = 0; kk < kc; kk++)
        dst[kk * NR + q] = q < w ? src[kk] : 0.0f;
    }
  }
}

/* A strip of mr < MR rows (k-major, MR per k, zeros past mr). */
static void pack_a(const float *a, int64_t lda, int64_t mr, int64_t kc,
                   float *ap) {
  for (int64_t kk = 0; kk < kc; kk++)
    for (int64_t r = 0; r < MR; r++)
      ap[kk * MR + r] = r < mr ? a[r * lda + kk] : 0.0f;
}

/* C's mr x nr corner of the strip: alpha * A B over kc, plus beta * C on
 * the first block (first) or plus C on the later ones. Row r of A is at
 * a + r * rs, its k-th element at + k * ks; inlined with ks constant, so
 * that the 14 rows are two base pointers and offsets of rs. */
__attribute__((target("avx512f,fma"), always_inline)) static inline void
kernel_body(int64_t kc, const float *a, int64_t rs, int64_t ks, const float *bp,
            float *c, int64_t ldc, int64_t mr, int64_t nr, float alpha,
            float beta, bool first) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; r++)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const float *a0 = a, *a7 = a + 7 * rs;
  for (int64_t kk = 0; kk < kc; kk++) {
    __m512 b0 = _mm512_load_ps(bp + kk * NR),
           b1 = _mm512_load_ps(bp + kk * NR + 16);
#define ROW(r, base, o)                                                        \
  do {                                                                         \
    __m512 av = _mm512_set1_ps(base[(o)*rs + kk * ks]);                        \
    acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);                            \
    acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);                            \
  } while (0)
    ROW(0, a0, 0);
    ROW(1, a0, 1);
    ROW(2, a0, 2);
    ROW(3, a0, 3);
    ROW(4, a0, 4);
    ROW(5, a0, 5);
    ROW(6, a0, 6);
    ROW(7, a7, 0);
    ROW(8, a7, 1);
    ROW(9, a7, 2);
    ROW(10, a7, 3);
    ROW(11, a7, 4);
    ROW(12, a7, 5);
    ROW(13, a7, 6);
#undef ROW
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
  __mmask16 m1 = nr >= 32   ? 0xffff
                 : nr <= 16 ? 0
                            : (__mmask16)((1u << (nr - 16)) - 1);
  for (int64_t r = 0; r < mr; r++) {
    float *cr = c + r * ldc;
    __m512 x0 = _mm512_mul_ps(acc[r][0], va), x1 = _mm512_mul_ps(acc[r][1], va);
    if (!first) {
      x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));
      x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));
    } else if (beta != 0.0f) { /* beta 0: C is not read (BLAS) */
      x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
      x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
    }
    _mm512_mask_storeu_ps(cr, m0, x0);
    _mm512_mask_storeu_ps(cr + 16, m1, x1);
  }
}

/* A read in place: rows lda apart, elements adjacent. */
__attribute__((target("avx512f,fma"))) static void
kernel_rows(int64_t kc, const float *a, int64_t lda, const float *bp, float *c,
            int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta,
            bool first) {
  kernel_body(kc, a, lda, 1, bp, c, ldc, mr, nr, alpha, beta, first);
}

/* A packed by pack_a: MR per k. */
__attribute__((target("avx512f,fma"))) static void
kernel_packed(int64_t kc, const float *ap, const float *bp, float *c,
              int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta,
              bool first) {
  kernel_body(kc, ap, 1, MR, bp, c, ldc, mr, nr, alpha, beta, first);
}

/* Row-major C[m, n] = alpha A[m, k] op(B) + beta C; bp holds KC x (n + NR)
 * floats (64-byte aligned), ap KC x MR. With `packed` B is not read: bp
 * already holds every KC block of it, packed, one after another (KC x
 * (n + NR) floats apart), as an executor would hold a constant weight
 * packed once ahead of its runs. */
static void own_sgemm(bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb,
                      float beta, float *c, int64_t ldc, float *bp, float *ap,
                      bool packed) {
  for (int64_t k0 = 0; k0 < k; k0 += KC) {
    int64_t kc = k - k0 < KC ? k - k0 : KC;
    float *blk = packed ? bp + k0 / KC * KC * (n + NR) : bp;
    if (!packed)
      pack_b(tb, b, ldb, k0, kc, n, blk);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      int64_t mr = m - i0 < MR ? m - i0 : MR;
      const float *as = a + i0 * lda + k0;
      if (mr < MR)
        pack_a(as, lda, mr, kc, ap);
      for (int64_t p = 0; p < n; p += NR) {
        int64_t nr = n - p < NR ? n - p : NR;
        const float *panel = blk + p / NR * kc * NR;
        float *cs = c + i0 * ldc + p;
        if (mr < MR)
          kernel_packed(kc, ap, panel, cs, ldc, mr, nr, alpha, beta, k0 == 0);
        else
          kernel_rows(kc, as, lda, panel, cs, ldc, mr, nr, alpha, beta,
                      k0 == 0);
      }
    }
  }
}

typedef struct shape {
  int64_t m, k, n;
  bool tb;
} shape;

typedef struct buffers {
  float *a, *b, *c_own, *c_dnnl, *bp, *ap;
  float *pre; /* every tile's B, packed ahead (pre_tile floats a tile) */
  size_t pre_tile;
} buffers;

enum { DNNL, OWN, OWN_PACKED };

static int64_t tile_n; /* --tile-n; 0: the executor's */

static int64_t tile_cols(const shape *s) {
  return tile_n > 0 ? tile_n : s->n >= 512 ? 256 : 128;
}

/* The product as the executor tiles it: by oneDNN, by the candidate, or by
 * the candidate with B packed ahead (bu->pre, filled by pack_ahead). */
static void tiled(const shape *s, const buffers *bu, int how) {
  int64_t bm = 512, bn = tile_cols(s);
  for (int64_t i0 = 0; i0 < s->m; i0 += bm)
    for (int64_t j0 = 0; j0 < s->n; j0 += bn) {
      int64_t m = s->m - i0 < bm ? s->m - i0 : bm;
      int64_t n = s->n - j0 < bn ? s->n - j0 : bn;
      const float *a = bu->a + i0 * s->k;
      const float *b = s->tb ? bu->b + j0 * s->k : bu->b + j0;
      int64_t ldb = s->tb ? s->k : s->n;
      float *c = (how == DNNL ? bu->c_dnnl : bu->c_own) + i0 * s->n + j0;
      if (how == DNNL)
        dnnl_sgemm('N', s->tb ? 'T' : 'N', m, n, s->k, 1.0f, a, s->k, b, ldb,
                   0.0f, c, s->n);
      else if (how == OWN)
        own_sgemm(s->tb, m, n, s->k, 1.0f, a, s->k, b, ldb, 0.0f, c, s->n,
                  bu->bp, bu->ap, false);
      else
        own_sgemm(s->tb, m, n, s->k, 1.0f, a, s->k, b, ldb, 0.0f, c, s->n,
                  bu->pre + (size_t)(j0 / bn) * bu->pre_tile, bu->ap, true);
    }
}

/* B packed once for every tile column and KC block, untimed. */
static void pack_ahead(const shape *s, buffers *bu) {
  int64_t bn = tile_cols(s);
  for (int64_t j0 = 0; j0 < s->n; j0 += bn) {
    int64_t n = s->n - j0 < bn ? s->n - j0 : bn;
    const float *b = s->tb ? bu->b + j0 * s->k : bu->b + j0;
    int64_t ldb = s->tb ? s->k : s->n;
    float *tile = bu->pre + (size_t)(j0 / bn) * bu->pre_tile;
    for (int64_t k0 = 0; k0 < s->k; k0 += KC) {
      int64_t kc = s->k - k0 < KC ? s->k - k0 : KC;
      pack_b(s->tb, b, ldb, k0, kc, n, tile + k0 / KC * KC * (n + NR));
    }
  }
}

static float *aligned_floats(size_t n) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "bench_gemm_own: out of memory\n");
    exit(3);
  }
  return p;
}

int main(int argc, char **argv) {
  int reps = 9;
  bool small = false;
  shape given[16];
  size_t n_given = 0;
  for (int i = 1; i < argc; i++) {
    long long m, k, n;
    char t = 'N', end = 0;
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--small") == 0) {
      small = true;
    } else if (strcmp(argv[i], "--tile-n") == 0 && i + 1 < argc) {
      tile_n = atoll(argv[++i]);
      if (tile_n < 1) {
        fprintf(stderr, "bench_gemm_own: --tile-n must be >= 1\n");
        return 1;
      }
    } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc &&
               n_given < 16) {
      int got = sscanf(argv[++i], "%lld,%lld,%lld,%c%c", &m, &k, &n, &t, &end);
      if (got < 3 || got > 4 || m < 1 || k < 1 || n < 1 ||
          (t != 'N' && t != 'T') || m * k > (1LL << 28) ||
          k * n > (1LL << 28)) {
        fprintf(stderr,
                "bench_gemm_own: --shape '%s': give M,K,N or M,K,N,T "
                "(positive, at most 2^28 elements an operand)\n",
                argv[i]);
        return 1;
      }
      given[n_given++] = (shape){m, k, n, t == 'T'};
    } else {
      fprintf(stderr, "usage: bench_gemm_own [--reps R] [--small] [--shape "
                      "M,K,N[,T]]... [--tile-n W]\n");
      return 1;
    }
  }
  if (reps < 1) {
    fprintf(stderr, "bench_gemm_own: --reps must be >= 1\n");
    return 1;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) {
    printf("SKIP: this CPU has no AVX-512 (the candidate kernel needs it)\n");
    printf("{\"bench\":\"gemm_own\",\"skipped\":true}\n");
    return 0;
  }
  omp_set_num_threads(1);
  /* the transformer block's products (h1024 s512; the last is attention's
   * scores per head, B transposed), or small ones with edges for the smoke
   * test */
  const shape big[] = {{512, 1024, 3072, false},
                       {512, 1024, 1024, false},
                       {512, 4096, 1024, false},
                       {512, 1024, 4096, false},
                       {512, 64, 512, true}},
              tiny[] = {{37, 45, 70, false}, {20, 600, 33, true}};
  const shape *shapes = n_given ? given : small ? tiny : big;
  size_t n_shapes = n_given ? n_given : small ? 2 : 5;
  printf("f32 GEMM at 1 thread on the executor's tiles: own (AVX-512 14x32, "
         "KC %d) / oneDNN dnnl_sgemm, best of %d;\nown: B packed in each "
         "call, as oneDNN does; B ahead: B packed once before the timed "
         "calls\n",
         KC, reps);
  printf("%-18s %10s %10s %9s %10s %9s %12s\n", "M,K,N B", "oneDNN GF",
         "own GF", "own/dnnl", "B ahead GF", "/dnnl", "rel. diff");
  double worst[2] = {0, 0}, worst_diff = 0;
  for (size_t i = 0; i < n_shapes; i++) {
    const shape *s = &shapes[i];
    buffers bu;
    size_t mk = (size_t)(s->m * s->k), kn = (size_t)(s->k * s->n),
           mn = (size_t)(s->m * s->n);
    int64_t bn = tile_cols(s), nkb = (s->k + KC - 1) / KC;
    bu.a = aligned_floats(mk);
    bu.b = aligned_floats(kn);
    bu.c_own = aligned_floats(mn);
    bu.c_dnnl = aligned_floats(mn);
    bu.bp = aligned_floats((size_t)KC * (size_t)(s->n + NR));
    bu.ap = aligned_floats((size_t)KC * MR);
    bu.pre_tile = (size_t)(nkb * KC * (bn + NR));
    bu.pre = aligned_floats(bu.pre_tile * (size_t)((s->n + bn - 1) / bn));
    uint32_t seed = 12345;
    for (size_t j = 0; j < mk + kn; j++) {
      seed = seed * 1664525u + 1013904223u;
      float v = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
      if (j < mk)
        bu.a[j] = v;
      else
        bu.b[j - mk] = v;
    }
    pack_ahead(s, &bu);
    double best[3] = {1e30, 1e30, 1e30}, rel = 0;
    tiled(s, &bu, DNNL); /* oneDNN makes its kernels at its first call */
    for (int r = 0; r < reps; r++)
      for (int how = DNNL; how <= OWN_PACKED; how++) {
        double t0 = cpu_now();
        tiled(s, &bu, how);
        double t = cpu_now() - t0;
        best[how] = t < best[how] ? t : best[how];
      }
    /* each of the candidate's two ways against oneDNN's product */
    for (int how = OWN; how <= OWN_PACKED; how++) {
      memset(bu.c_own, 0, mn * sizeof(float));
      tiled(s, &bu, how);
      double diff = 0, scale = 0;
      for (size_t j = 0; j < mn; j++) {
        double d = fabs((double)bu.c_own[j] - (double)bu.c_dnnl[j]);
        double v = fabs((double)bu.c_dnnl[j]);
        diff = d > diff || d != d ? d : diff;
        scale = v > scale ? v : scale;
      }
      double r = diff / (scale > 0 ? scale : 1);
      rel = r > rel || r != r ? r : rel;
    }
    double flops = 2.0 * (double)mn * (double)s->k;
    char label[32];
    snprintf(label, sizeof label, "%lld,%lld,%lld %s", (long long)s->m,
             (long long)s->k, (long long)s->n, s->tb ? "T" : "N");
    printf("%-18s %10.1f %10.1f %9.3f %10.1f %9.3f %12.2g\n", label,
           flops / best[DNNL] / 1e9, flops / best[OWN] / 1e9,
           best[OWN] / best[DNNL], flops / best[OWN_PACKED] / 1e9,
           best[OWN_PACKED] / best[DNNL], rel);
    for (int how = OWN; how <= OWN_PACKED; how++)
      if (best[how] / best[DNNL] > worst[how - OWN])
        worst[how - OWN] = best[how] / best[DNNL];
    worst_diff = rel > worst_diff || rel != rel ? rel : worst_diff;
    free(bu.a);
    free(bu.b);
    free(bu.c_own);
    free(bu.c_dnnl);
    free(bu.bp);
    free(bu.ap);
    free(bu.pre);
  }
  /* f32 sums over k up to 4096 in another order than oneDNN's */
  bool ok = worst_diff <= 1e-5;
  printf("{\"bench\":\"gemm_own\",\"worst_own_over_dnnl\":%.3f,"
         "\"worst_b_ahead_over_dnnl\":%.3f,\"worst_rel_diff\":%.3g,"
         "\"ok\":%s}\n",
         worst[0], worst[1], worst_diff, ok ? "true" : "false");
  return ok ? 0 : 1;
}
