/* Private: cuBLAS and NCCL, loaded when a GPU is first asked for.
 * libcublasLt alone is hundreds of megabytes whose constructors run at
 * load: a process that never touches a GPU (the tool on a CPU, the tests)
 * does not map them. The functions are called through tables filled by
 * dlsym; their types are the headers' own. The build links a program
 * against both libraries that takes the address of every function in the
 * lists (tests/gpu/gpu_link_check.c), so a missing symbol fails the build
 * as a direct link would. */
#ifndef CCG_EXEC_CUDA_DYNLIB_H
#define CCG_EXEC_CUDA_DYNLIB_H

#include <cublas_v2.h>
#include <nccl.h>

#include "core/error.h"

/* The functions ccgraph calls (the headers' names; cuBLAS's _v2 macros
 * apply). */
#define CCG__CUBLAS_FNS(X)                                                     \
  X(cublasCreate)                                                              \
  X(cublasDestroy)                                                             \
  X(cublasSetStream)                                                           \
  X(cublasSetWorkspace)                                                        \
  X(cublasSetMathMode)                                                         \
  X(cublasGemmEx)                                                              \
  X(cublasGemmBatchedEx)                                                       \
  X(cublasGetStatusString)                                                     \
  X(cublasGetStatusName)

#define CCG__NCCL_FNS(X)                                                       \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRankConfig)                                                    \
  X(ncclCommSplit)                                                             \
  X(ncclCommGetAsyncError)                                                     \
  X(ncclCommAbort)                                                             \
  X(ncclCommFinalize)                                                          \
  X(ncclCommDestroy)                                                           \
  X(ncclCommCount)                                                             \
  X(ncclCommUserRank)                                                          \
  X(ncclAllReduce)                                                             \
  X(ncclAllGather)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclBroadcast)                                                             \
  X(ncclReduce)                                                                \
  X(ncclSend)                                                                  \
  X(ncclRecv)                                                                  \
  X(ncclGroupStart)                                                            \
  X(ncclGroupEnd)                                                              \
  X(ncclGetErrorString)                                                        \
  X(ncclGetLastError)                                                          \
  X(ncclGetVersion)

#define CCG__DYN_FIELD(f) __typeof__(&f) f;
typedef struct ccg__cublas_api {
  CCG__CUBLAS_FNS(CCG__DYN_FIELD)
} ccg__cublas_api;
typedef struct ccg__nccl_api {
  CCG__NCCL_FNS(CCG__DYN_FIELD)
} ccg__nccl_api;
#undef CCG__DYN_FIELD

/* Filled by the loaders: ccg__cublas_fn.cublasGemmEx(...). */
extern ccg__cublas_api ccg__cublas_fn;
extern ccg__nccl_api ccg__nccl_fn;

/* Load the library once per process (thread-safe); a library or symbol
 * that cannot be found is CCG_STATUS_BACKEND naming it, with dlerror's
 * text, every time it is asked for. */
ccg_status ccg__cublas_load(ccg_ctx *err);
ccg_status ccg__nccl_load(ccg_ctx *err);

#endif
