/* The GEMM libraries Debian packages, side by side in one run on the
 * transformer shapes: OpenBLAS, BLIS and oneDNN, each loaded with dlopen
 * (so that their cblas_sgemm symbols do not collide; a library that is not
 * installed is reported absent and skipped). At 1 thread each library runs
 * single-threaded; at 2 threads it runs twice: with its own threads, and
 * single-threaded calls on column blocks split over our threads (what the
 * executor's pool does). Prints GFLOP/s per shape and one JSON line. The
 * environment is used as it is (OPENBLAS_CORETYPE included). 1-thread
 * figures are per CPU second of the thread, 2-thread ones per wall second.
 * --tile W: the column tiles of the split runs (default: two halves).
 * Each figure is the best of R batches of K products (K x 10 for the
 * small shapes).
 * usage: bench_gemm [--iters K] [--reps R] [--small] [--tile W] */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float,
                               const float *, int, const float *, int, float,
                               float *, int);
typedef int (*dnnl_sgemm_fn)(char, char, long, long, long, float, const float *,
                             long, const float *, long, float, float *, long);
typedef void (*set_threads_fn)(int);
typedef void (*set_threads_l_fn)(long);

typedef struct lib {
  const char *name;
  cblas_sgemm_fn cblas;
  dnnl_sgemm_fn dnnl;
  void (*set_threads)(int);
  set_threads_fn set_i;
  set_threads_l_fn set_l;
  char info[96];
} lib;

/* Single-threaded runs are timed on the thread's CPU clock, which a
 * shared machine's other jobs do not advance; the 2-thread ones on the
 * wall clock. */
static double now(bool cpu) {
  struct timespec ts;
  clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void lib_threads(const lib *l, int t) {
  if (l->set_i)
    l->set_i(t);
  if (l->set_l)
    l->set_l(t);
}

/* Row-major C[M,N] = A[M,K] * op(B); B is [K,N], or [N,K] when tb. */
static void lib_gemm(const lib *l, int tb, int M, int N, int K, const float *a,
                     const float *b, int ldb, float *c, int ldc) {
  if (l->cblas)
    l->cblas(ROW_MAJOR, NO_TRANS, tb ? TRANS : NO_TRANS, M, N, K, 1.0f, a, K, b,
             ldb, 0.0f, c, ldc);
  else
    l->dnnl('N', tb ? 'T' : 'N', M, N, K, 1.0f, a, K, b, ldb, 0.0f, c, ldc);
}

static int load(lib *l, const char *name, const char *so) {
  memset(l, 0, sizeof *l);
  l->name = name;
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    printf("%-9s absent (%s)\n", name, dlerror());
    return 0;
  }
  l->cblas = (cblas_sgemm_fn)(uintptr_t)dlsym(h, "cblas_sgemm");
  l->dnnl = (dnnl_sgemm_fn)(uintptr_t)dlsym(h, "dnnl_sgemm");
  l->set_i = (set_threads_fn)(uintptr_t)dlsym(h, "openblas_set_num_threads");
  l->set_l =
      (set_threads_l_fn)(uintptr_t)dlsym(h, "bli_thread_set_num_threads");
  const char *(*core)(void) =
      (const char *(*)(void))(uintptr_t)dlsym(h, "openblas_get_corename");
  int (*arch)(void) = (int (*)(void))(uintptr_t)dlsym(h, "bli_arch_query_id");
  const char *(*arch_s)(int) =
      (const char *(*)(int))(uintptr_t)dlsym(h, "bli_arch_string");
  if (core)
    snprintf(l->info, sizeof l->info, "core %s", core());
  else if (arch && arch_s)
    snprintf(l->info, sizeof l->info, "arch %s", arch_s(arch()));
  if (!l->cblas && !l->dnnl) {
    printf("%-9s has no sgemm entry\n", name);
    return 0;
  }
  /* oneDNN's threading is its own (OpenMP, OMP_NUM_THREADS). */
  return 1;
}

/* Our split: column blocks (multiples of 64) over T threads, each a
 * single-threaded call. */
typedef struct job {
  const lib *l;
  int tb, M, N, K, width;
  const float *a, *b;
  float *c;
} job;

static atomic_int go, done, next_tile;
static job shared_job;
static atomic_int quit;

static void run_tile(const job *j, int t) {
  int n0 = t * j->width, n1 = n0 + j->width < j->N ? n0 + j->width : j->N;
  const float *b = j->tb ? j->b + (size_t)n0 * j->K : j->b + n0;
  lib_gemm(j->l, j->tb, j->M, n1 - n0, j->K, j->a, b, j->tb ? j->K : j->N,
           j->c + n0, j->N);
}

static void take_tiles(const job *j) {
  int t, tiles = (j->N + j->width - 1) / j->width;
  while ((t = atomic_fetch_add(&next_tile, 1)) < tiles)
    run_tile(j, t);
}

static void *worker(void *arg) {
  int seen = *(const int *)arg;
  for (;;) {
    int g;
    while ((g = atomic_load(&go)) == seen && !atomic_load(&quit))
      ;
    if (atomic_load(&quit))
      return NULL;
    seen = g;
    job j = shared_job;
    take_tiles(&j);
    atomic_fetch_add(&done, 1);
  }
}

/* Column tiles of `width` (0: two halves rounded to 64), taken by `threads`
 * threads (1 or 2) from one counter. */
static void tiled(const lib *l, int threads, int width, int tb, int M, int N,
                  int K, const float *a, const float *b, float *c) {
  if (width <= 0)
    width = (N / 2 + 63) / 64 * 64;
  shared_job = (job){l, tb, M, N, K, width, a, b, c};
  atomic_store(&done, 0);
  atomic_store(&next_tile, 0);
  if (threads > 1)
    atomic_fetch_add(&go, 1);
  job j = shared_job;
  take_tiles(&j);
  while (threads > 1 && atomic_load(&done) < 1)
    ;
}

static double err_vs(const float *c, const float *ref, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)c[i] - ref[i]) / (1.0 + fabs(ref[i]));
    e = d > e ? d : e;
  }
  return e;
}

int main(int argc, char **argv) {
  int iters = 2, small_only = 0, width = 0, reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tile") && i + 1 < argc)
      width = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--small"))
      small_only = 1;
    else {
      fprintf(
          stderr,
          "usage: bench_gemm [--iters K] [--reps R] [--small] [--tile W]\n");
      return 2;
    }
  }
  lib libs[3];
  int nl = 0;
  nl += load(&libs[nl], "openblas", "libopenblas.so.0");
  nl += load(&libs[nl], "blis", "libblis.so.4");
  nl += load(&libs[nl], "onednn", "libdnnl.so.2");
  const char *ct = getenv("OPENBLAS_CORETYPE");
  printf("OPENBLAS_CORETYPE=%s\n", ct ? ct : "(unset)");
  for (int i = 0; i < nl; i++)
    printf("%-9s %s\n", libs[i].name, libs[i].info);
  static const int shapes[][3] = {{512, 1024, 1024}, {512, 1024, 3072},
                                  {512, 1024, 4096}, {128, 256, 256},
                                  {128, 256, 768},   {128, 256, 1024}};
  printf("\n%-15s %-9s %8s %8s %8s %8s   GFLOP/s\n", "M,K,N,transB", "lib",
         "1t", "1t-tiled", "2t-lib", "2t-tiled");
  static const char *mode_name[] = {"1t", "1t_tiled", "2t_lib", "2t_tiled"};
  char json[16384] = "";
  size_t jl = 0;
  double first_1t[3] = {0};
  for (size_t s = small_only ? 3 : 0; s < 6; s++) {
    int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
    float *a = malloc((size_t)M * K * 4), *b = malloc((size_t)K * N * 4);
    float *c = malloc((size_t)M * N * 4), *ref = malloc((size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++)
      a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < (size_t)K * N; i++)
      b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    double flop = 2.0 * M * N * K;
    int it = flop > 1e9 ? iters : iters * 10;
    for (int tb = 0; tb < 2; tb++) {
      /* a 10x10 corner in double precision */
      for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++) {
          double acc = 0;
          for (int k = 0; k < K; k++)
            acc += (double)a[(size_t)i * K + k] *
                   (tb ? b[(size_t)j * K + k] : b[(size_t)k * N + j]);
          ref[(size_t)i * N + j] = (float)acc;
        }
      for (int l = 0; l < nl; l++) {
        const lib *L = &libs[l];
        /* a library far behind on the first shape (a generic build) is
         * not worth the machine's time on the others */
        double best_first = 0;
        for (int q = 0; q < nl; q++)
          best_first = fmax(best_first, first_1t[q]);
        if (first_1t[l] > 0 && first_1t[l] < best_first / 4) {
          printf("%4d,%4d,%4d,%s %-9s skipped (1t below a quarter of the "
                 "best on the first shape)\n",
                 M, K, N, tb ? "T" : "N", L->name);
          continue;
        }
        double gf[4];
        for (int mode = 0; mode < 4; mode++) {
          lib_threads(L, mode == 2 ? 2 : 1);
          int thr = mode == 3 ? 2 : 1;
          /* the worker spins only while the split runs */
          pthread_t th;
          if (thr == 2) {
            static int seen;
            seen = atomic_load(&go);
            atomic_store(&quit, 0);
            pthread_create(&th, NULL, worker, &seen);
          }
          int ldb = tb ? K : N;
          memset(c, 0, (size_t)M * N * 4);
          /* best of `reps` batches after a warm-up: the machine may be
           * shared */
          double best = 1e30;
          for (int r = 0; r <= reps; r++) {
            double t0 = now(mode < 2);
            for (int k = 0; k < (r ? it : 1); k++) {
              if (mode == 1 || mode == 3)
                tiled(L, thr, width, tb, M, N, K, a, b, c);
              else
                lib_gemm(L, tb, M, N, K, a, b, ldb, c, N);
            }
            if (r)
              best = fmin(best, now(mode < 2) - t0);
          }
          gf[mode] = flop * it / best / 1e9;
          if (thr == 2) {
            atomic_store(&quit, 1);
            pthread_join(th, NULL);
          }
          double e = 0;
          for (int i = 0; i < 10; i++)
            e = fmax(e, err_vs(c + (size_t)i * N, ref + (size_t)i * N, 10));
          if (e > 1e-4)
            printf("!! %s %s wrong result: max rel err %.2e\n", L->name,
                   mode_name[mode], e);
        }
        lib_threads(L, 1);
        if (s == (small_only ? 3u : 0u) && tb == 0)
          first_1t[l] = gf[0];
        printf("%4d,%4d,%4d,%s %-9s %8.1f %8.1f %8.1f %8.1f\n", M, K, N,
               tb ? "T" : "N", L->name, gf[0], gf[1], gf[2], gf[3]);
        fflush(stdout);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s{\"lib\":\"%s\",\"m\":%d,\"k\":%d,\"n\":%d,"
                               "\"tb\":%d",
                               jl ? "," : "", L->name, M, K, N, tb);
        for (int mode = 0; mode < 4; mode++)
          jl += (size_t)snprintf(json + jl, sizeof json - jl, ",\"%s\":%.1f",
                                 mode_name[mode], gf[mode]);
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
      }
    }
    free(a);
    free(b);
    free(c);
    free(ref);
  }
  printf("{\"bench\":\"gemm\",\"rows\":[%s]}\n", json);
  return 0;
}
