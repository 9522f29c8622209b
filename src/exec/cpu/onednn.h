/* Private: oneDNN, loaded on first use (exec/dynlib.h), as OpenBLAS is
 * (blas.h). Its library, libstdc++ and libgomp under it, and the kernels
 * its first sgemm generates are 9-10 MiB resident in every process that
 * maps them (docs/performance.md, "Run memory: every MiB of the peak"): a
 * process whose GEMMs run on ccgraph's own kernels (the default where the
 * CPU has AVX2) never loads it; CCG_GEMM=onednn, or a CPU below AVX2, does.
 * The functions are called through a table filled by dlsym, their types
 * the headers' own; ccgraph_onednn_link_check links oneDNN and takes the
 * address of each, so a missing one fails the build. */
#ifndef CCG_EXEC_CPU_ONEDNN_H
#define CCG_EXEC_CPU_ONEDNN_H

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include "core/error.h"

/* oneDNN's sgemm */
#define CCG__DNNL_FNS(X) X(dnnl_sgemm)
/* the OpenMP runtime oneDNN runs on: the calling thread's team size */
#define CCG__GOMP_FNS(X)                                                       \
  X(omp_get_max_threads)                                                       \
  X(omp_set_num_threads)

#define CCG__DYN_FIELD(f) __typeof__(&f) f;
typedef struct ccg__onednn_api {
  CCG__DNNL_FNS(CCG__DYN_FIELD)
  CCG__GOMP_FNS(CCG__DYN_FIELD)
} ccg__onednn_api;
#undef CCG__DYN_FIELD

/* Filled by ccg__onednn_load: ccg__onednn_fn.dnnl_sgemm(...). */
extern ccg__onednn_api ccg__onednn_fn;

/* Loads oneDNN and its OpenMP runtime once per process (thread-safe);
 * CCG_STATUS_BACKEND naming the library or function that is missing, every
 * time it is asked for. */
ccg_status ccg__onednn_load(ccg_ctx *err);

#endif
