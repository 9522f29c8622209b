/* The CUDA device as far as this build goes: a build with the CUDA runtime
 * asks it whether a GPU can be used and refuses with its error text; the
 * CUDA executor itself (src/exec/cuda, issue 7) is not in the build yet,
 * so a usable GPU is refused too, saying so. */
#include "exec/internal.h"

#ifdef CCG_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

ccg_status ccg__cuda_probe(ccg_ctx *err, int device_index) {
#ifdef CCG_HAVE_CUDA
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return ccg__error(err, CCG_STATUS_BACKEND,
                      "device cuda (index %d): cudaGetDeviceCount: %s (%s); "
                      "run with the cpu device",
                      device_index, cudaGetErrorString(e), cudaGetErrorName(e));
  return ccg__error(err, CCG_STATUS_BACKEND,
                    "device cuda (index %d): %d GPU(s) found, but the CUDA "
                    "executor is not built yet (issue 7); run with the cpu "
                    "device",
                    device_index, count);
#else
  return ccg__error(err, CCG_STATUS_BACKEND,
                    "device cuda (index %d): this ccgraph was built without "
                    "CUDA (configure with -DCCG_WITH_CUDA=ON where the CUDA "
                    "toolkit, cuBLAS and NCCL are installed)",
                    device_index);
#endif
}

ccg_status ccg__cuda_create(ccg_exec *x) {
  return ccg__cuda_probe(&x->ctx, x->device_index);
}

ccg_status ccg__cuda_run(ccg_exec *x) {
  return ccg__cuda_probe(&x->ctx, x->device_index);
}

void ccg__cuda_free(ccg_exec *x) { (void)x; }
