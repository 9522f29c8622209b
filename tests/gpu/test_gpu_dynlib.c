/* cuBLAS and NCCL as the GPU path loads them (dlopen on first use, no GPU
 * needed): both load, every listed function resolves, and the NCCL loaded
 * is the version the headers describe. */
#include <stdio.h>

#include "exec/cuda/dynlib.h"

int main(void) {
  int fails = 0;
  if (ccg__cublas_load(NULL) != CCG_STATUS_OK) {
    fprintf(stderr, "%s\n", ccg_last_error(NULL));
    fails++;
  }
  if (ccg__nccl_load(NULL) != CCG_STATUS_OK) {
    fprintf(stderr, "%s\n", ccg_last_error(NULL));
    return 1;
  }
  int v = 0;
  if (ccg__nccl_fn.ncclGetVersion(&v) != ncclSuccess ||
      v != NCCL_VERSION_CODE) {
    fprintf(stderr, "NCCL %d loaded, the headers are %d\n", v,
            NCCL_VERSION_CODE);
    fails++;
  }
  const char *s =
      ccg__cublas_fn.cublasGetStatusName
          ? ccg__cublas_fn.cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED)
          : "(none)";
  printf("NCCL %d; cuBLAS says %s\n", v, s);
  return fails ? 1 : 0;
}
