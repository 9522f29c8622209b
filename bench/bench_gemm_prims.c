/* oneDNN matmul primitives beside dnnl_sgemm on the transformer block's
 * products at 1 thread, as the executor cuts them (docs/performance.md,
 * "GEMM through oneDNN matmul primitives: measured, not adopted"): a primitive
 * for the whole product and for whole-row tiles of 256, 128 and 64 rows (the
 * only tiles oneDNN 2.6 serves with brgemm), against dnnl_sgemm on the whole
 * product and on 256-column panels (what the executor runs). Each primitive is
 * made with one OpenMP thread and a user scratchpad; its implementation and
 * scratchpad size are printed. GFLOP/s on the thread's CPU clock (which a
 * shared machine's other jobs do not advance), the best of R batches of K
 * products; one JSON line at the end.
 * usage: bench_gemm_prims [--iters K] [--reps R] [--small] */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(x)                                                               \
  do {                                                                         \
    if ((x) != dnnl_success) {                                                 \
      fprintf(stderr, "bench_gemm_prims: %s failed\n", #x);                    \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

typedef struct prim {
  dnnl_primitive_t p;
  dnnl_memory_t a, b, c, s;
  void *pad;
  char impl[64];
  size_t pad_bytes;
} prim;

/* The primitive of rows x N x K, all dense, made for one thread. */
static void prim_make(dnnl_engine_t eng, long rows, long N, long K, prim *r) {
  dnnl_memory_desc_t ad, bd, cd;
  dnnl_dims_t da = {rows, K}, db = {K, N}, dc = {rows, N};
  CHECK(dnnl_memory_desc_init_by_tag(&ad, 2, da, dnnl_f32, dnnl_ab));
  CHECK(dnnl_memory_desc_init_by_tag(&bd, 2, db, dnnl_f32, dnnl_ab));
  CHECK(dnnl_memory_desc_init_by_tag(&cd, 2, dc, dnnl_f32, dnnl_ab));
  dnnl_matmul_desc_t md;
  CHECK(dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd));
  dnnl_primitive_attr_t attr;
  CHECK(dnnl_primitive_attr_create(&attr));
  CHECK(
      dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
  const char *impl = "?";
  CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
  snprintf(r->impl, sizeof r->impl, "%s", impl);
  const dnnl_memory_desc_t *sd =
      dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  r->pad_bytes = dnnl_memory_desc_get_size(sd);
  r->pad = aligned_alloc(64, (r->pad_bytes + 63) / 64 * 64 + 64);
  CHECK(dnnl_primitive_create(&r->p, pd));
  CHECK(dnnl_memory_create(&r->a, &ad, eng, DNNL_MEMORY_NONE));
  CHECK(dnnl_memory_create(&r->b, &bd, eng, DNNL_MEMORY_NONE));
  CHECK(dnnl_memory_create(&r->c, &cd, eng, DNNL_MEMORY_NONE));
  CHECK(dnnl_memory_create(&r->s, sd, eng, r->pad));
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
}

static void prim_free(prim *r) {
  dnnl_primitive_destroy(r->p);
  dnnl_memory_destroy(r->a);
  dnnl_memory_destroy(r->b);
  dnnl_memory_destroy(r->c);
  dnnl_memory_destroy(r->s);
  free(r->pad);
}

/* C = A B in tiles of `rows` rows (M a multiple of rows). */
static void prim_run(const prim *r, dnnl_stream_t st, long M, long N, long K,
                     long rows, const float *a, const float *b, float *c) {
  CHECK(dnnl_memory_set_data_handle(r->b, (void *)(uintptr_t)b));
  for (long i = 0; i < M; i += rows) {
    CHECK(dnnl_memory_set_data_handle(r->a, (void *)(uintptr_t)(a + i * K)));
    CHECK(dnnl_memory_set_data_handle(r->c, c + i * N));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, r->a},
                               {DNNL_ARG_WEIGHTS, r->b},
                               {DNNL_ARG_DST, r->c},
                               {DNNL_ARG_SCRATCHPAD, r->s}};
    CHECK(dnnl_primitive_execute(r->p, st, 4, args));
  }
}

/* C = A B on dnnl_sgemm in panels of `cols` columns. */
static void sgemm_run(long M, long N, long K, long cols, const float *a,
                      const float *b, float *c) {
  for (long j = 0; j < N; j += cols)
    CHECK(
        dnnl_sgemm('N', 'N', M, cols, K, 1.0f, a, K, b + j, N, 0.0f, c + j, N));
}

int main(int argc, char **argv) {
  int iters = 10, reps = 5;
  bool small = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--small") == 0)
      small = true;
    else {
      fprintf(stderr, "usage: bench_gemm_prims [--iters K] [--reps R] "
                      "[--small]\n");
      return 2;
    }
  }
  if (iters < 1 || reps < 1) {
    fprintf(stderr, "bench_gemm_prims: --iters and --reps want >= 1\n");
    return 2;
  }
  omp_set_num_threads(1);
  /* the h1024 s512 block: QKV and output projections, FFN up, FFN down */
  static const long big[][3] = {
      {512, 1024, 1024}, {512, 4096, 1024}, {512, 1024, 4096}};
  static const long tiny[][3] = {{128, 256, 64}};
  const long(*shapes)[3] = small ? tiny : big;
  int nshapes = small ? 1 : 3;
  static const long rows[] = {0, 256, 128, 64}; /* 0: whole */
  dnnl_engine_t eng;
  dnnl_stream_t st;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  printf("{\"bench\":\"gemm_prims\",\"threads\":1,\"rows\":[");
  for (int s = 0; s < nshapes; s++) {
    long M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    float *a = malloc(sizeof(float) * (size_t)(M * K));
    float *b = malloc(sizeof(float) * (size_t)(K * N));
    float *c = malloc(sizeof(float) * (size_t)(M * N));
    if (!a || !b || !c) {
      fprintf(stderr, "bench_gemm_prims: out of memory\n");
      return 1;
    }
    for (long i = 0; i < M * K; i++)
      a[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < K * N; i++)
      b[i] = (float)(i % 5) * 0.1f;
    double flops = 2.0 * (double)M * (double)N * (double)K * iters;
    for (int v = 0; v < 6; v++) {
      /* v 0..3: primitives by rows; 4: sgemm whole; 5: sgemm panels */
      long r = v < 4 ? (rows[v] ? rows[v] : M) : 0;
      if (v < 4 && (M % r != 0 || (v > 0 && r == M)))
        continue;
      prim p = {0};
      if (v < 4)
        prim_make(eng, r, N, K, &p);
      double best = 1e30;
      for (int k = -1; k < reps; k++) { /* k -1: kernels generated, untimed */
        double t0 = cpu_now();
        for (int it = 0; it < iters; it++) {
          if (v < 4)
            prim_run(&p, st, M, N, K, r, a, b, c);
          else
            sgemm_run(M, N, K, v == 4 ? N : (N < 256 ? N : 256), a, b, c);
        }
        double t = cpu_now() - t0;
        best = k >= 0 && t < best ? t : best;
      }
      char what[160];
      if (v < 4)
        snprintf(what, sizeof what,
                 "primitive, %s%ld rows (%s, scratchpad %zu B)",
                 v ? "tiles of " : "whole: ", r, p.impl, p.pad_bytes);
      else
        snprintf(what, sizeof what, "dnnl_sgemm, %s",
                 v == 4 ? "whole" : "256-column panels");
      printf("%s{\"M\":%ld,\"N\":%ld,\"K\":%ld,\"what\":\"%s\","
             "\"gflops\":%.1f}",
             s || v ? "," : "", M, N, K, what, flops / best / 1e9);
      fprintf(stderr, "%5ld x %5ld x %5ld  %-60s %7.1f GFLOP/s\n", M, N, K,
              what, flops / best / 1e9);
      if (v < 4)
        prim_free(&p);
    }
    free(a);
    free(b);
    free(c);
  }
  printf("]}\n");
  dnnl_stream_destroy(st);
  dnnl_engine_destroy(eng);
  return 0;
}
