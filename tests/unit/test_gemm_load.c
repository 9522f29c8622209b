/* oneDNN and OpenBLAS are loaded when a GEMM is to run on them, not
 * before: a process whose MatMul runs on ccgraph's own kernels (the
 * default where the CPU has AVX2 and FMA) maps neither (its /proc/self/maps);
 * the products it leaves to oneDNN (few rows, or few rows streaming a large
 * B) load oneDNN there where the build has it (each in a child process);
 * CCG_GEMM=onednn maps oneDNN at create (a build without it refuses the name).
 * The order of the tests matters: the first runs before anything asks for
 * either library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

enum { N = 64 }; /* above the small-product loop's size */

/* A [m, k] times B [k, n] on the CPU, A all 1 and B(i, j) = j: every row
 * of the result is k * j. The status of create; its error in why. */
static ccg_status matmul_of(int64_t m, int64_t k, int64_t n, char *why,
                            size_t size) {
  ccg_graph *g = NULL;
  assert_int_equal(ccg_graph_new(NULL, &g), CCG_STATUS_OK);
  ccg_shape sa = ccg_shape_make(2, (int64_t[]){m, k});
  ccg_shape sb = ccg_shape_make(2, (int64_t[]){k, n});
  ccg_value_id a, b, o;
  assert_ok(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &sa, &a));
  assert_ok(g, ccg_graph_add_input(g, "b", CCG_DTYPE_F32, &sb, &b));
  assert_ok(g, ccg_matmul(g, a, b, &o));
  assert_ok(g, ccg_graph_add_output(g, o));
  ccg_exec_options opts = CCG_EXEC_OPTIONS_INIT;
  opts.threads = 1;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &opts, &x);
  snprintf(why, size, "%s", st == CCG_STATUS_OK ? "" : ccg_last_error(g));
  if (st == CCG_STATUS_OK) {
    float *in_a = malloc((size_t)(m * k) * sizeof(float));
    float *in_b = malloc((size_t)(k * n) * sizeof(float));
    float *out = malloc((size_t)(m * n) * sizeof(float));
    assert_true(in_a && in_b && out);
    for (int64_t i = 0; i < m * k; i++)
      in_a[i] = 1.0f;
    for (int64_t i = 0; i < k * n; i++)
      in_b[i] = (float)(i % n);
    ccg_exec_tensor tin[2] = {{"a", {CCG_DTYPE_F32, 2, {m, k}, in_a}, NULL, 0},
                              {"b", {CCG_DTYPE_F32, 2, {k, n}, in_b}, NULL, 0}};
    ccg_exec_tensor tout = {
        ccg_value_name(g, o), {0}, out, (size_t)(m * n) * sizeof(float)};
    assert_ok(x, ccg_exec_run(x, tin, 2, &tout, 1));
    for (int64_t i = 0; i < m * n; i++)
      assert_true(out[i] == (float)(k * (i % n)));
    free(in_a);
    free(in_b);
    free(out);
  }
  ccg_exec_free(x);
  ccg_graph_free(g);
  return st;
}

static ccg_status matmul(char *why, size_t size) {
  return matmul_of(N, N, N, why, size);
}

/* Whether ccgraph's own kernels are the default here: the CPU has AVX2
 * and FMA, and nothing caps the array math. */
static bool own_default(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      !getenv("CCG_CPU_ISA"))
    return true;
#endif
  print_message("no check of oneDNN: below AVX2 (or with CCG_CPU_ISA set) "
                "the default GEMM may be oneDNN's\n");
  return false;
}

static void default_maps_no_library(void **state) {
  (void)state;
  char why[1024];
  unsetenv("CCG_GEMM");
  assert_int_equal(matmul(why, sizeof why), CCG_STATUS_OK);
  assert_false(ccg_test_mapped("libopenblas"));
  if (!own_default())
    return;
  assert_false(ccg_test_mapped("libdnnl"));
  assert_false(ccg_test_mapped("libgomp"));
}

/* In a child process (nothing loaded yet there): an m x k x n MatMul
 * under the default; whether it mapped oneDNN. */
static bool loads_onednn(int64_t m, int64_t k, int64_t n) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char why[1024];
    unsetenv("CCG_GEMM");
    bool ok = matmul_of(m, k, n, why, sizeof why) == CCG_STATUS_OK;
    _exit(!ok ? 2 : ccg_test_mapped("libdnnl") ? 0 : 1);
  }
  int status = 0;
  assert_true(waitpid(pid, &status, 0) == pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 2);
  return WEXITSTATUS(status) == 0;
}

/* The products the default leaves to oneDNN load it at run: 5 rows by a
 * 2048 x 2048 B (16 MiB), and 2 rows by a small one; 64 rows by a small B
 * and 8 rows (B not transposed) stay on the kernels. */
static void products_left_to_onednn(void **state) {
  (void)state;
  if (!own_default())
    return;
#ifdef CCG_HAVE_ONEDNN
  assert_true(loads_onednn(5, 2048, 2048));
  assert_true(loads_onednn(2, 256, 256));
#else
  assert_false(loads_onednn(5, 2048, 2048));
  assert_false(loads_onednn(2, 256, 256));
#endif
  assert_false(loads_onednn(64, 256, 256));
  assert_false(loads_onednn(8, 256, 256));
}

static void onednn_asked_loads_it(void **state) {
  (void)state;
  char why[1024];
  setenv("CCG_GEMM", "onednn", 1);
  ccg_status st = matmul(why, sizeof why);
  unsetenv("CCG_GEMM");
#ifdef CCG_HAVE_ONEDNN
  assert_int_equal(st, CCG_STATUS_OK);
  assert_true(ccg_test_mapped("libdnnl"));
#else
  assert_int_equal(st, CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(why, "CCG_GEMM='onednn'"));
  assert_false(ccg_test_mapped("libdnnl"));
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(default_maps_no_library),
      cmocka_unit_test(products_left_to_onednn),
      cmocka_unit_test(onednn_asked_loads_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
