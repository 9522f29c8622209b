/* The CUDA runtime and the kernels' module are loaded when the CUDA device
 * is asked for, not before: a process that runs a CPU step maps neither
 * (its /proc/self/maps), and asking for the device maps both where the
 * runtime is installed (a build without CUDA refuses and maps nothing).
 * The order of the tests matters: the first runs before anything asks
 * for CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

/* relu of a 4-vector, created on `device`; the status of create. */
static ccg_status relu_on(ccg_device device, char *why, size_t size) {
  ccg_graph *g = NULL;
  assert_int_equal(ccg_graph_new(NULL, &g), CCG_STATUS_OK);
  ccg_shape s = ccg_shape_make(1, (int64_t[]){4});
  ccg_value_id a, o;
  assert_ok(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &s, &a));
  assert_ok(g, ccg_relu(g, a, &o));
  assert_ok(g, ccg_graph_add_output(g, o));
  ccg_exec_options opts = CCG_EXEC_OPTIONS_INIT;
  opts.device = device;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &opts, &x);
  snprintf(why, size, "%s", st == CCG_STATUS_OK ? "" : ccg_last_error(g));
  if (st == CCG_STATUS_OK && device == CCG_DEVICE_CPU) {
    float in[4] = {-1, 2, -3, 4}, out[4] = {0};
    ccg_exec_tensor tin = {"a", {CCG_DTYPE_F32, 1, {4}, in}, NULL, 0};
    ccg_exec_tensor tout = {ccg_value_name(g, o), {0}, out, sizeof out};
    assert_ok(x, ccg_exec_run(x, &tin, 1, &tout, 1));
    assert_true(out[0] == 0 && out[1] == 2 && out[3] == 4);
  }
  ccg_exec_free(x);
  ccg_graph_free(g);
  return st;
}

static void cpu_step_maps_no_cuda(void **state) {
  (void)state;
  char why[1024];
  assert_int_equal(relu_on(CCG_DEVICE_CPU, why, sizeof why), CCG_STATUS_OK);
  assert_false(ccg_test_mapped("libcudart"));
  assert_false(ccg_test_mapped("libccgraph_cuda"));
  assert_false(ccg_test_mapped("libcublas"));
  assert_false(ccg_test_mapped("libnccl"));
}

static void cuda_device_loads_it(void **state) {
  (void)state;
  char why[1024];
  ccg_status st = relu_on(CCG_DEVICE_CUDA, why, sizeof why);
  print_message("cuda device: %s\n", st == CCG_STATUS_OK ? "created" : why);
#ifdef CCG_HAVE_CUDA
  if (strstr(why, "the CUDA runtime: cannot load")) {
    /* no runtime installed: refused, naming it, with nothing mapped */
    assert_int_equal(st, CCG_STATUS_BACKEND);
    assert_false(ccg_test_mapped("libccgraph_cuda"));
    return;
  }
  assert_true(st == CCG_STATUS_OK || st == CCG_STATUS_BACKEND);
  assert_true(ccg_test_mapped("libcudart"));
  assert_true(ccg_test_mapped("libccgraph_cuda"));
#else
  assert_int_equal(st, CCG_STATUS_BACKEND);
  assert_non_null(strstr(why, "built without CUDA"));
  assert_false(ccg_test_mapped("libcudart"));
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cpu_step_maps_no_cuda),
      cmocka_unit_test(cuda_device_loads_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
