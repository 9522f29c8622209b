/* ccgraph's own f32 GEMM (src/exec/cpu/gemm_blocked.c, the executor's
 * default where the CPU has AVX2) beside oneDNN's dnnl_sgemm, on the same
 * products cut into the executor's tiles (up to 512 rows by 256 columns,
 * 128 where N < 512; src/exec/cpu/gemm.c), at 1 thread
 * (docs/performance.md, "A GEMM of ccgraph's own"). The ratio is own /
 * oneDNN on the thread's CPU clock, the best of R batches, the two run in
 * turns. Every product is checked against oneDNN's (largest |difference|
 * over the largest |result|). The default shapes: the h1024 transformer
 * block's products, attention's per block of 32 query rows (scores with K
 * transposed, then times V), and products of few rows streaming a large B
 * (the 4096 x 4096 MLP at batch 64, and a single row). --isa avx2 runs the
 * AVX2 kernels (oneDNN as the environment has it: DNNL_MAX_CPU_ISA=AVX2
 * holds it to the same); --shape M,K,N[,T] (repeatable) measures those
 * products instead (T: B transposed); --tile-n W cuts them into W-column
 * tiles. --isa picks the kernels (default: the widest the CPU has); where
 * the CPU lacks them it says so and stops.
 * usage: bench_gemm_own [--reps R] [--small] [--isa avx2|avx512]
 *                       [--shape M,K,N[,T]]... [--tile-n W] */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/vecmath.h"

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
  int64_t m, k, n;
  bool tb;
} shape;

static int64_t tile_n; /* --tile-n; 0: the executor's */

static int64_t tile_cols(const shape *s) {
  return tile_n > 0 ? tile_n : s->n >= 512 ? 256 : 128;
}

/* The product as the executor tiles it, by oneDNN or by ccgraph's kernels
 * for isa. */
static void tiled(const shape *s, const float *a, const float *b, float *c,
                  bool dnnl, ccg__isa isa) {
  int64_t bm = 512, bn = tile_cols(s);
  for (int64_t i0 = 0; i0 < s->m; i0 += bm)
    for (int64_t j0 = 0; j0 < s->n; j0 += bn) {
      int64_t m = s->m - i0 < bm ? s->m - i0 : bm;
      int64_t n = s->n - j0 < bn ? s->n - j0 : bn;
      const float *at = a + i0 * s->k;
      const float *bt = s->tb ? b + j0 * s->k : b + j0;
      int64_t ldb = s->tb ? s->k : s->n;
      float *ct = c + i0 * s->n + j0;
      if (dnnl) {
        dnnl_sgemm('N', s->tb ? 'T' : 'N', m, n, s->k, 1.0f, at, s->k, bt, ldb,
                   0.0f, ct, s->n);
        continue;
      }
      ccg__gemm g = CCG__GEMM_INIT;
      g.tb = s->tb;
      g.m = m;
      g.n = n;
      g.k = s->k;
      g.lda = s->k;
      g.ldb = ldb;
      g.ldc = s->n;
      g.a = at;
      g.b = bt;
      g.c = ct;
      if (!ccg__sgemm_blocked(isa, &g, m, n, at, bt, ct)) {
        fprintf(stderr, "bench_gemm_own: the kernels declined the tile\n");
        exit(3);
      }
    }
}

static float *floats(size_t n) {
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
  ccg__isa isa = CCG__ISA_COUNT; /* the widest the CPU has */
  shape given[16];
  size_t n_given = 0;
  for (int i = 1; i < argc; i++) {
    long long m, k, n;
    char t = 'N', end = 0;
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--small") == 0) {
      small = true;
    } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "avx2") != 0 && strcmp(v, "avx512") != 0) {
        fprintf(stderr, "bench_gemm_own: --isa '%s': give avx2 or avx512\n", v);
        return 1;
      }
      isa = strcmp(v, "avx2") == 0 ? CCG__ISA_AVX2 : CCG__ISA_AVX512;
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
      fprintf(stderr, "usage: bench_gemm_own [--reps R] [--small] [--isa "
                      "avx2|avx512] [--shape M,K,N[,T]]... [--tile-n W]\n");
      return 1;
    }
  }
  if (reps < 1) {
    fprintf(stderr, "bench_gemm_own: --reps must be >= 1\n");
    return 1;
  }
  if (isa == CCG__ISA_COUNT)
    isa = ccg__isa_supported(CCG__ISA_AVX512) ? CCG__ISA_AVX512 : CCG__ISA_AVX2;
  if (!ccg__isa_supported(isa)) {
    printf("SKIP: this CPU has no %s (the kernels need it)\n",
           isa == CCG__ISA_AVX2 ? "AVX2 and FMA" : "AVX-512F");
    printf("{\"bench\":\"gemm_own\",\"skipped\":true}\n");
    return 0;
  }
  omp_set_num_threads(1);
  const shape big[] = {{512, 1024, 3072, false}, {512, 1024, 1024, false},
                       {512, 4096, 1024, false}, {512, 1024, 4096, false},
                       {32, 64, 512, true},      {32, 512, 64, false},
                       {64, 4096, 4096, false},  {1, 4096, 4096, false}},
              tiny[] = {{37, 45, 70, false}, {20, 600, 33, true}};
  const shape *shapes = n_given ? given : small ? tiny : big;
  size_t n_shapes = n_given ? n_given : small ? 2 : sizeof big / sizeof big[0];
  printf("f32 GEMM at 1 thread on the executor's tiles: ccgraph's kernels "
         "(%s) / oneDNN dnnl_sgemm, best of %d\n",
         isa == CCG__ISA_AVX2 ? "AVX2 6x16" : "AVX-512 14x32", reps);
  printf("%-18s %10s %10s %9s %12s\n", "M,K,N B", "oneDNN GF", "own GF",
         "own/dnnl", "rel. diff");
  double worst = 0, worst_diff = 0;
  for (size_t i = 0; i < n_shapes; i++) {
    const shape *s = &shapes[i];
    size_t mk = (size_t)(s->m * s->k), kn = (size_t)(s->k * s->n),
           mn = (size_t)(s->m * s->n);
    float *a = floats(mk), *b = floats(kn), *c_own = floats(mn),
          *c_dnnl = floats(mn);
    uint32_t seed = 12345;
    for (size_t j = 0; j < mk + kn; j++) {
      seed = seed * 1664525u + 1013904223u;
      float v = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
      if (j < mk)
        a[j] = v;
      else
        b[j - mk] = v;
    }
    double best[2] = {1e30, 1e30};
    tiled(s, a, b, c_dnnl, true, isa); /* oneDNN makes its kernels */
    tiled(s, a, b, c_own, false, isa); /* the thread's packing buffer */
    for (int r = 0; r < reps; r++)
      for (int how = 0; how < 2; how++) {
        double t0 = cpu_now();
        tiled(s, a, b, how == 0 ? c_dnnl : c_own, how == 0, isa);
        double t = cpu_now() - t0;
        best[how] = t < best[how] ? t : best[how];
      }
    double diff = 0, scale = 0;
    for (size_t j = 0; j < mn; j++) {
      double d = fabs((double)c_own[j] - (double)c_dnnl[j]);
      double v = fabs((double)c_dnnl[j]);
      diff = d > diff || d != d ? d : diff;
      scale = v > scale ? v : scale;
    }
    double rel = diff / (scale > 0 ? scale : 1);
    double flops = 2.0 * (double)mn * (double)s->k;
    char label[32];
    snprintf(label, sizeof label, "%lld,%lld,%lld %s", (long long)s->m,
             (long long)s->k, (long long)s->n, s->tb ? "T" : "N");
    printf("%-18s %10.1f %10.1f %9.3f %12.2g\n", label, flops / best[0] / 1e9,
           flops / best[1] / 1e9, best[1] / best[0], rel);
    worst = best[1] / best[0] > worst ? best[1] / best[0] : worst;
    worst_diff = rel > worst_diff || rel != rel ? rel : worst_diff;
    free(a);
    free(b);
    free(c_own);
    free(c_dnnl);
  }
  /* f32 sums over k up to 4096 in another order than oneDNN's */
  bool ok = worst_diff <= 1e-5;
  printf("{\"bench\":\"gemm_own\",\"isa\":\"%s\",\"worst_own_over_dnnl\":%.3f,"
         "\"worst_rel_diff\":%.3g,\"ok\":%s}\n",
         isa == CCG__ISA_AVX2 ? "avx2" : "avx512", worst, worst_diff,
         ok ? "true" : "false");
  return ok ? 0 : 1;
}
