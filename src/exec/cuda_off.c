/* The CUDA device in a build without CUDA: every entry refuses, saying how
 * to build it (the CUDA executor is src/exec/cuda/gpu.c). */
#include "exec/internal.h"

ccg_status ccg__cuda_probe(ccg_ctx *err, int device_index) {
  return ccg__error(err, CCG_STATUS_BACKEND,
                    "device cuda (index %d): this ccgraph was built without "
                    "CUDA (configure with -DCCG_WITH_CUDA=ON where the CUDA "
                    "toolkit, cuBLAS and NCCL are installed)",
                    device_index);
}

ccg_status ccg__cuda_create(ccg_exec *x) {
  return ccg__cuda_probe(&x->ctx, x->device_index);
}

ccg_status ccg__cuda_run(ccg_exec *x) {
  return ccg__cuda_probe(&x->ctx, x->device_index);
}

void ccg__cuda_free(ccg_exec *x) { (void)x; }
