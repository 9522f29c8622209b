/* Asking for the CUDA device where no GPU can be used fails at create with
 * CCG_STATUS_BACKEND and a message with the reason (in a build with CUDA
 * the CUDA error text, or the library that cannot be loaded: the runtime
 * or the kernels' module). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "ccgraph/ccgraph.h"

static void refused_at_create(void **state) {
  (void)state;
  ccg_graph *g = NULL;
  assert_int_equal(ccg_graph_new(NULL, &g), CCG_STATUS_OK);
  ccg_shape s = ccg_shape_make(1, (int64_t[]){4});
  ccg_value_id a, o;
  assert_int_equal(ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &s, &a),
                   CCG_STATUS_OK);
  assert_int_equal(ccg_relu(g, a, &o), CCG_STATUS_OK);
  assert_int_equal(ccg_graph_add_output(g, o), CCG_STATUS_OK);
  ccg_exec_options opts = CCG_EXEC_OPTIONS_INIT;
  opts.device = CCG_DEVICE_CUDA;
  ccg_exec *x = NULL;
  assert_int_equal(ccg_exec_create(g, &opts, &x), CCG_STATUS_BACKEND);
  assert_null(x);
  const char *msg = ccg_last_error(g);
  print_message("refusal: %s\n", msg);
  assert_non_null(strstr(msg, "device cuda"));
  assert_true(strstr(msg, "cudaGetDeviceCount") ||
              strstr(msg, "built without CUDA") || strstr(msg, "cannot load") ||
              strstr(msg, "not built yet"));
  /* the cpu device of the same graph still compiles */
  opts.device = CCG_DEVICE_CPU;
  assert_int_equal(ccg_exec_create(g, &opts, &x), CCG_STATUS_OK);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(refused_at_create)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
