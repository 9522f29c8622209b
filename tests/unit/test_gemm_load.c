/* oneDNN and OpenBLAS are loaded when a GEMM is to run on them, not
 * before: a process whose MatMul runs on ccgraph's own kernels (the
 * default where the CPU has AVX2) maps neither (its /proc/self/maps), and
 * CCG_GEMM=onednn maps oneDNN at create (a build without it refuses the
 * name). The order of the tests matters: the first runs before anything
 * asks for either library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "test_util.h"

/* Whether a mapping of this process names `lib`. */
static bool mapped(const char *lib) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, lib) != NULL;
  fclose(f);
  return found;
}

enum { N = 64 }; /* above the small-product loop's size */

/* A [N, N] times B [N, N] on the CPU, A all 1 and B(i, j) = j: every row
 * of the result is N * j. The status of create; its error in why. */
static ccg_status matmul(char *why, size_t size) {
  ccg_graph *g = NULL;
  assert_int_equal(ccg_graph_new(NULL, &g), CCG_STATUS_OK);
  ccg_shape s = ccg_shape_make(2, (int64_t[]){N, N});
  ccg_value_id a, b, o;
  assert_ok(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &s, &a));
  assert_ok(g, ccg_graph_add_input(g, "b", CCG_DTYPE_F32, &s, &b));
  assert_ok(g, ccg_matmul(g, a, b, &o));
  assert_ok(g, ccg_graph_add_output(g, o));
  ccg_exec_options opts = CCG_EXEC_OPTIONS_INIT;
  opts.threads = 1;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &opts, &x);
  snprintf(why, size, "%s", st == CCG_STATUS_OK ? "" : ccg_last_error(g));
  if (st == CCG_STATUS_OK) {
    static float in_a[N * N], in_b[N * N], out[N * N];
    for (int i = 0; i < N * N; i++) {
      in_a[i] = 1.0f;
      in_b[i] = (float)(i % N);
    }
    ccg_exec_tensor tin[2] = {{"a", {CCG_DTYPE_F32, 2, {N, N}, in_a}, NULL, 0},
                              {"b", {CCG_DTYPE_F32, 2, {N, N}, in_b}, NULL, 0}};
    ccg_exec_tensor tout = {ccg_value_name(g, o), {0}, out, sizeof out};
    assert_ok(x, ccg_exec_run(x, tin, 2, &tout, 1));
    for (int i = 0; i < N * N; i++)
      assert_true(out[i] == (float)(N * (i % N)));
  }
  ccg_exec_free(x);
  ccg_graph_free(g);
  return st;
}

static void default_maps_no_library(void **state) {
  (void)state;
  char why[1024];
  unsetenv("CCG_GEMM");
  assert_int_equal(matmul(why, sizeof why), CCG_STATUS_OK);
  assert_false(mapped("libopenblas"));
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      getenv("CCG_CPU_ISA")) {
    print_message("no check of oneDNN: below AVX2 (or CCG_CPU_ISA set) the "
                  "default GEMM may be oneDNN's\n");
    return;
  }
  assert_false(mapped("libdnnl"));
  assert_false(mapped("libgomp"));
#endif
}

static void onednn_asked_loads_it(void **state) {
  (void)state;
  char why[1024];
  setenv("CCG_GEMM", "onednn", 1);
  ccg_status st = matmul(why, sizeof why);
  unsetenv("CCG_GEMM");
#ifdef CCG_HAVE_ONEDNN
  assert_int_equal(st, CCG_STATUS_OK);
  assert_true(mapped("libdnnl"));
#else
  assert_int_equal(st, CCG_STATUS_INVALID_ARG);
  assert_non_null(strstr(why, "CCG_GEMM='onednn'"));
  assert_false(mapped("libdnnl"));
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(default_maps_no_library),
      cmocka_unit_test(onednn_asked_loads_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
