/* The CUDA device as this machine has it. Where CUDA itself (asked
 * without ccgraph) sees no GPU, asking for the device fails at create with
 * CCG_STATUS_BACKEND and a message with the reason (in a build with CUDA
 * the CUDA error text, or the library that cannot be loaded: the runtime
 * or the kernels' module). Where it sees one, the device compiles the
 * same graph and runs it to the CPU's result. Either way the CPU device
 * still compiles it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "ccgraph/ccgraph.h"
#include "cuda_probe.h"
#include "test_util.h"
#include "exec_test_util.h"

/* Relu of [-1, 2, -3, 4] on the device created from opts. */
static void runs_relu(ccg_graph *g, ccg_value_id o,
                      const ccg_exec_options *opts) {
  ccg_exec *x = NULL;
  assert_int_equal(ccg_exec_create(g, opts, &x), CCG_STATUS_OK);
  const float in[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  float out[4] = {9.0f, 9.0f, 9.0f, 9.0f};
  ccg_exec_tensor ti = XT_F32("a", in, 4);
  ccg_exec_tensor to = xt_out(ccg_value_name(g, o), out, sizeof out);
  assert_int_equal(ccg_exec_run(x, &ti, 1, &to, 1), CCG_STATUS_OK);
  assert_true(out[0] == 0.0f && out[1] == 2.0f && out[2] == 0.0f &&
              out[3] == 4.0f);
  ccg_exec_free(x);
}

static void cuda_device_as_found(void **state) {
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
  if (ccg_test_gpu_usable()) {
    print_message("CUDA sees a GPU: the cuda device must compile and run\n");
    runs_relu(g, o, &opts);
  } else {
    ccg_exec *x = NULL;
    assert_int_equal(ccg_exec_create(g, &opts, &x), CCG_STATUS_BACKEND);
    assert_null(x);
    const char *msg = ccg_last_error(g);
    print_message("refusal: %s\n", msg);
    assert_non_null(strstr(msg, "device cuda"));
    assert_true(strstr(msg, "cudaGetDeviceCount") ||
                strstr(msg, "built without CUDA") ||
                strstr(msg, "cannot load") || strstr(msg, "not built yet"));
  }
  /* the cpu device of the same graph still compiles and runs */
  opts.device = CCG_DEVICE_CPU;
  runs_relu(g, o, &opts);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(cuda_device_as_found)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
