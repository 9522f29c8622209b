/* ccgraph's own blocked f32 GEMM (src/exec/cpu/gemm_blocked.c) against a
 * double-precision product, for each instruction set this CPU runs (AVX2,
 * AVX-512): shapes across the strip (6, 14 rows), panel (16, 32 columns) and
 * KC-block (512) edges, A and B transposed or not, padded leading
 * dimensions, B's panels read in place (up to 128 rows) or packed (more
 * rows, or B transposed), alpha and beta (C is not read where beta is 0: it
 * holds NaN), and C's padding left as it was. Tolerance: (k + 2) * 2^-23 *
 * (|alpha| sum over k of |a b| + |beta c|) + 1e-7, the bound of a float sum of
 * k terms in order; a wrong element, row or panel is off by the terms' own
 * size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/vecmath.h"

static float val(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

typedef struct bcase {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad;
  float alpha, beta;
} bcase;

/* one case on isa; fails naming the first element out of tolerance */
static void check(ccg__isa isa, const bcase *t) {
  int64_t lda = (t->ta ? t->m : t->k) + t->pad;
  int64_t ldb = (t->tb ? t->k : t->n) + t->pad;
  int64_t ldc = t->n + t->pad;
  size_t na = (size_t)((t->ta ? t->k : t->m) * lda),
         nb = (size_t)((t->tb ? t->n : t->k) * ldb), nc = (size_t)(t->m * ldc);
  float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b),
        *c0 = malloc(nc * sizeof *c0), *c = malloc(nc * sizeof *c);
  assert_true(a && b && c0 && c);
  uint32_t s = (uint32_t)(t->m * 7919 + t->n * 131 + t->k);
  for (size_t i = 0; i < na; i++)
    a[i] = val(&s);
  for (size_t i = 0; i < nb; i++)
    b[i] = val(&s);
  for (size_t i = 0; i < nc; i++)
    c0[i] = t->beta != 0.0f ? val(&s) : NAN; /* never read where beta is 0 */
  memcpy(c, c0, nc * sizeof *c);
  ccg__gemm g = CCG__GEMM_INIT;
  g.ta = t->ta;
  g.tb = t->tb;
  g.m = t->m;
  g.n = t->n;
  g.k = t->k;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.alpha = t->alpha;
  g.beta = t->beta;
  g.a = a;
  g.b = b;
  g.c = c;
  assert_true(ccg__sgemm_blocked(isa, &g, t->m, t->n, a, b, c));
  for (int64_t i = 0; i < t->m; i++) {
    for (int64_t j = 0; j < t->n; j++) {
      double sum = 0.0, mag = 0.0;
      for (int64_t k = 0; k < t->k; k++) {
        double x = t->ta ? a[k * lda + i] : a[i * lda + k];
        double y = t->tb ? b[j * ldb + k] : b[k * ldb + j];
        sum += x * y;
        mag += fabs(x * y);
      }
      double want = t->alpha * sum, cin = 0.0;
      if (t->beta != 0.0f) {
        cin = c0[i * ldc + j];
        want += t->beta * cin;
      }
      double tol = (double)(t->k + 2) * 0x1p-23 *
                       (fabs(t->alpha) * mag + fabs(t->beta * cin)) +
                   1e-7;
      double got = c[i * ldc + j];
      if (!(fabs(got - want) <= tol))
        fail_msg("isa %d, %lldx%lldx%lld ta %d tb %d pad %lld: C[%lld,%lld] "
                 "%g, want %g (tolerance %g)",
                 (int)isa, (long long)t->m, (long long)t->n, (long long)t->k,
                 t->ta, t->tb, (long long)t->pad, (long long)i, (long long)j,
                 got, want, tol);
    }
    for (int64_t j = t->n; j < ldc; j++)
      assert_memory_equal(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float));
  }
  free(a);
  free(b);
  free(c0);
  free(c);
}

/* A CPU without AVX2 runs none of the kernels: what can be checked is that
 * the default then leaves every product to a library. */
static void no_kernels_here(void) {
  const ccg__vm *vm;
  assert_int_equal(ccg__vm_select(NULL, &vm), CCG_STATUS_OK);
  ccg__gemm_lib_kind lib;
  assert_int_equal(ccg__gemm_lib(NULL, vm->isa, &lib), CCG_STATUS_OK);
  assert_false(ccg__gemm_lib_own(lib));
  print_message("no AVX2 here: the kernels cannot run; the default GEMM "
                "is a library's\n");
}

static const int64_t ms[] = {1, 5, 6, 7, 13, 14, 15, 29, 33};
static const int64_t ns[] = {1, 8, 15, 16, 17, 31, 32, 33, 70};
static const int64_t ks[] = {1, 7, 16, 17, 64, 513};

/* every m x n x k of the lists, the transposes and scalars cycling through
 * the combinations, on each instruction set the CPU runs */
static void test_shapes(void **state) {
  (void)state;
  int ran = 0;
  for (int isa = CCG__ISA_AVX2; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    ran++;
    int v = 0;
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
      for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
        for (size_t q = 0; q < sizeof ks / sizeof *ks; q++, v++) {
          static const float alphas[] = {1.0f, -1.5f, 0.5f};
          static const float betas[] = {0.0f, 1.0f, 0.25f, 0.0f};
          bcase t = {ms[i],        ns[j], ks[q],         (v & 1) != 0,
                     (v & 2) != 0, v % 3, alphas[v % 3], betas[v % 4]};
          check((ccg__isa)isa, &t);
        }
  }
  if (!ran)
    no_kernels_here();
}

/* the transformer block's shapes as the executor tiles them, and K past
 * two blocks */
static void test_large(void **state) {
  (void)state;
  const bcase big[] = {
      {64, 256, 1024, false, false, 0, 1.0f, 0.0f},
      {32, 512, 64, false, true, 0, 1.0f, 0.0f},
      {32, 64, 512, false, false, 0, 1.0f, 0.0f},
      {40, 96, 1100, true, false, 3, 1.0f, 1.0f},
      {30, 48, 1030, false, true, 1, 2.0f, 0.5f},
      /* over 128 rows: B's panels packed, not read in place */
      {200, 70, 600, false, false, 2, 1.0f, 0.0f},
      {141, 33, 40, true, false, 0, -1.0f, 1.0f},
      /* over 512 columns: B packed 512 columns at a time */
      {20, 1100, 40, false, true, 1, 1.0f, 0.0f},
      {150, 1030, 24, false, false, 0, 1.0f, 0.5f},
  };
  int ran = 0;
  for (int isa = CCG__ISA_AVX2; isa < CCG__ISA_COUNT; isa++) {
    if (!ccg__isa_supported((ccg__isa)isa))
      continue;
    ran++;
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
      check((ccg__isa)isa, &big[i]);
    /* an empty tile: done, nothing written */
    float a = 1.0f, b = 2.0f, c = 7.0f;
    ccg__gemm g = CCG__GEMM_INIT;
    g.n = g.k = g.lda = g.ldb = g.ldc = 1;
    assert_true(ccg__sgemm_blocked((ccg__isa)isa, &g, 0, 1, &a, &b, &c));
    assert_true(ccg__sgemm_blocked((ccg__isa)isa, &g, 1, 0, &a, &b, &c));
    assert_true(c == 7.0f);
  }
  if (!ran)
    no_kernels_here();
}

/* below AVX2 nothing is written and the caller is told */
static void test_scalar_declined(void **state) {
  (void)state;
  float a = 1.0f, b = 2.0f, c = 7.0f;
  ccg__gemm g = CCG__GEMM_INIT;
  g.m = g.n = g.k = g.lda = g.ldb = g.ldc = 1;
  g.a = &a;
  g.b = &b;
  g.c = &c;
  assert_false(ccg__sgemm_blocked(CCG__ISA_SCALAR, &g, 1, 1, &a, &b, &c));
  assert_true(c == 7.0f);
  /* and the default for scalar array math is a library */
  if (!getenv("CCG_GEMM")) {
    ccg__gemm_lib_kind lib;
    assert_int_equal(ccg__gemm_lib(NULL, CCG__ISA_SCALAR, &lib), CCG_STATUS_OK);
    assert_false(ccg__gemm_lib_own(lib));
  }
}

/* A thread whose packing buffer cannot be had (the address space capped
 * just above what the process maps) still gets the product, through
 * gemm.c's element-by-element fallback: the kernels decline and write
 * nothing, the executor's entry point fills C. Run in a child process, so
 * that the cap stays there. */
enum { OM = 20, OK_ = 40, ON = 33 };
static float om_a[OM * OK_], om_b[OK_ * ON], om_c[OM * ON], om_d[OM * ON];

static void *om_thread(void *arg) {
  (void)arg;
  struct rlimit lim;
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (!f || fscanf(f, "%lu", &pages) != 1)
    return (void *)1;
  fclose(f);
  lim.rlim_cur = lim.rlim_max =
      (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 10);
  if (setrlimit(RLIMIT_AS, &lim) != 0)
    return (void *)2;
  const ccg__vm *vm;
  if (ccg__vm_select(NULL, &vm) != CCG_STATUS_OK)
    return (void *)3;
  ccg__gemm g = CCG__GEMM_INIT;
  g.m = OM;
  g.n = ON;
  g.k = OK_;
  g.lda = OK_;
  g.ldb = ON;
  g.ldc = ON;
  g.a = om_a;
  g.b = om_b;
  g.vm = vm;
  g.c = om_c;
  for (int i = 0; i < OM * ON; i++)
    om_c[i] = om_d[i] = -7.0f;
  if (ccg__sgemm_blocked(vm->isa, &g, OM, ON, om_a, om_b, om_c))
    return (void *)4; /* the buffer was had after all */
  for (int i = 0; i < OM * ON; i++)
    if (om_c[i] != -7.0f)
      return (void *)5; /* declined, yet wrote */
  ccg__sgemm_path(NULL, &g, CCG__GEMM_LIBRARY);
  for (int i = 0; i < OM; i++)
    for (int j = 0; j < ON; j++) {
      double want = 0;
      for (int q = 0; q < OK_; q++)
        want += (double)om_a[i * OK_ + q] * om_b[q * ON + j];
      if (fabs(om_c[i * ON + j] - want) > 1e-4)
        return (void *)6;
    }
  return NULL;
}

static void test_out_of_memory(void **state) {
  (void)state;
  const ccg__vm *vm;
  assert_int_equal(ccg__vm_select(NULL, &vm), CCG_STATUS_OK);
  if (vm->isa < CCG__ISA_AVX2 || getenv("CCG_GEMM")) {
    print_message("the kernels do not serve products here: nothing to "
                  "check\n");
    return;
  }
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's allocator stops the process where a block cannot be had */
  print_message("under AddressSanitizer an allocation cannot fail quietly: "
                "nothing to check\n");
  return;
#endif
  uint32_t s = 99;
  for (int i = 0; i < OM * OK_; i++)
    om_a[i] = val(&s);
  for (int i = 0; i < OK_ * ON; i++)
    om_b[i] = val(&s);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* one arena, large blocks mapped, nothing kept at the heap's top: a
     * block the cap does not allow then cannot come from reserve */
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    mallopt(M_TOP_PAD, 0);
    malloc_trim(0);
    pthread_attr_t at;
    pthread_t t;
    void *ret = (void *)9;
    if (pthread_attr_init(&at) != 0 ||
        pthread_attr_setstacksize(&at, (size_t)256 << 10) != 0 ||
        pthread_create(&t, &at, om_thread, NULL) != 0 ||
        pthread_join(t, &ret) != 0)
      _exit(8);
    _exit((int)(intptr_t)ret);
  }
  int status = 0;
  assert_true(waitpid(pid, &status, 0) == pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_large),
      cmocka_unit_test(test_scalar_declined),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
