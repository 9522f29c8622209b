/* The CUDA backend in a build without CUDA: the probe refuses, saying how
 * to build it (the CUDA executor is src/exec/cuda/gpu.c), so nothing else
 * of it is ever reached. */
#include "exec/internal.h"

static ccg_status off_probe(ccg_ctx *err, int device_index) {
  return ccg__error(err, CCG_STATUS_BACKEND,
                    "device cuda (index %d): this ccgraph was built without "
                    "CUDA (configure with -DCCG_WITH_CUDA=ON where the CUDA "
                    "toolkit, cuBLAS and NCCL are installed)",
                    device_index);
}

static ccg_status off_create(ccg_exec *x) {
  return off_probe(&x->ctx, x->device_index);
}

static ccg_status off_run(ccg_exec *x) {
  return off_probe(&x->ctx, x->device_index);
}

static void off_destroy(ccg_exec *x) { (void)x; }

const ccg__backend_vt ccg__cuda_backend = {"cuda",     off_probe, NULL,
                                           off_create, off_run,   off_destroy};
