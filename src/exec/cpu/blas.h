/* Private: OpenBLAS, loaded on first use (exec/dynlib.h). Debian's build
 * starts a thread per core when it is loaded, which spin for about a
 * tenth of a second of CPU before they sleep: a process whose GEMMs run on
 * oneDNN (the default) never loads it; f64 products and CCG_GEMM=openblas
 * do. The functions are called through a table filled by dlsym, their
 * types the header's own; ccgraph_blas_link_check links OpenBLAS and takes
 * the address of each, so a missing one fails the build. */
#ifndef CCG_EXEC_CPU_BLAS_H
#define CCG_EXEC_CPU_BLAS_H

#include <cblas.h>

#include "core/error.h"

#define CCG__BLAS_FNS(X)                                                       \
  X(cblas_sgemm)                                                               \
  X(cblas_dgemm)                                                               \
  X(openblas_get_num_threads)                                                  \
  X(openblas_set_num_threads)

#define CCG__DYN_FIELD(f) __typeof__(&f) f;
typedef struct ccg__blas_api {
  CCG__BLAS_FNS(CCG__DYN_FIELD)
} ccg__blas_api;
#undef CCG__DYN_FIELD

/* Filled by ccg__blas_load: ccg__blas_fn.cblas_sgemm(...). */
extern ccg__blas_api ccg__blas_fn;

/* Loads OpenBLAS once per process (thread-safe), its thread count set to
 * one (the executor's pool splits the work); CCG_STATUS_BACKEND naming the
 * library or function that is missing, every time it is asked for. */
ccg_status ccg__blas_load(ccg_ctx *err);

#endif
