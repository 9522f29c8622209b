/* Whether CUDA itself (asked without ccgraph, which loads the runtime on
 * demand) sees a GPU: for the tests whose expectations differ on a machine
 * with one. A build without CUDA sees none. The test links CUDA::cudart and
 * defines CCG_HAVE_CUDA where the build has CUDA (tests/CMakeLists.txt). */
#ifndef CCG_TESTS_CUDA_PROBE_H
#define CCG_TESTS_CUDA_PROBE_H

#include <stdbool.h>

#ifdef CCG_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static inline bool ccg_test_gpu_usable(void) {
#ifdef CCG_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

#endif
