/* Private: the CUDA runtime, cuBLAS and NCCL, loaded when a GPU is first
 * asked for. libcublasLt alone is hundreds of megabytes whose constructors
 * run at load, and the runtime starts up at load too: a process that never
 * touches a GPU (the tool on a CPU, the tests) maps none of them. The
 * functions are called through tables filled by dlsym; their types are the
 * headers' own. The build links a program against the three libraries that
 * takes the address of every function in the lists
 * (tests/gpu/gpu_link_check.c), so a missing symbol fails the build as a
 * direct link would. The CUDA kernels come with the runtime, in a module
 * of their own (module.h). */
#ifndef CCG_EXEC_CUDA_DYNLIB_H
#define CCG_EXEC_CUDA_DYNLIB_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/error.h"

/* The CUDA runtime's functions that the host C code calls. After this
 * header, such a name is its table entry (CCG__CUDART_DIRECT keeps the
 * runtime's own names: for the files that fill the table or link the
 * runtime themselves); a call of one missing here references the runtime
 * directly, and libccgraph's link (--no-undefined) fails: add it. */
#define CCG__CUDART_FNS(X)                                                     \
  X(cudaDeviceGetAttribute)                                                    \
  X(cudaDeviceSynchronize)                                                     \
  X(cudaEventCreateWithFlags)                                                  \
  X(cudaEventDestroy)                                                          \
  X(cudaEventQuery)                                                            \
  X(cudaEventRecord)                                                           \
  X(cudaEventRecordWithFlags)                                                  \
  X(cudaFree)                                                                  \
  X(cudaFreeHost)                                                              \
  X(cudaGetDeviceCount)                                                        \
  X(cudaGetErrorName)                                                          \
  X(cudaGetErrorString)                                                        \
  X(cudaGraphDestroy)                                                          \
  X(cudaGraphExecDestroy)                                                      \
  X(cudaGraphInstantiate)                                                      \
  X(cudaGraphLaunch)                                                           \
  X(cudaMalloc)                                                                \
  X(cudaMallocHost)                                                            \
  X(cudaMemcpy)                                                                \
  X(cudaMemcpy2DAsync)                                                         \
  X(cudaMemcpyAsync)                                                           \
  X(cudaMemset)                                                                \
  X(cudaMemsetAsync)                                                           \
  X(cudaSetDevice)                                                             \
  X(cudaStreamBeginCapture)                                                    \
  X(cudaStreamCreateWithFlags)                                                 \
  X(cudaStreamDestroy)                                                         \
  X(cudaStreamEndCapture)                                                      \
  X(cudaStreamSynchronize)                                                     \
  X(cudaStreamWaitEvent)

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

/* The runtime's entries are p_<name>: the names themselves are macros
 * below. */
#define CCG__CUDART_FIELD(f) __typeof__(&f) p_##f;
typedef struct ccg__cudart_api {
  CCG__CUDART_FNS(CCG__CUDART_FIELD)
} ccg__cudart_api;
#undef CCG__CUDART_FIELD
#define CCG__DYN_FIELD(f) __typeof__(&f) f;
typedef struct ccg__cublas_api {
  CCG__CUBLAS_FNS(CCG__DYN_FIELD)
} ccg__cublas_api;
typedef struct ccg__nccl_api {
  CCG__NCCL_FNS(CCG__DYN_FIELD)
} ccg__nccl_api;
#undef CCG__DYN_FIELD

/* Filled by the loaders: ccg__cublas_fn.cublasGemmEx(...). */
extern ccg__cudart_api ccg__cudart_fn;
extern ccg__cublas_api ccg__cublas_fn;
extern ccg__nccl_api ccg__nccl_fn;

/* Load the library once per process (thread-safe); a library or symbol
 * that cannot be found is CCG_STATUS_BACKEND naming it, with dlerror's
 * text, every time it is asked for. */
ccg_status ccg__cudart_load(ccg_ctx *err);
ccg_status ccg__cublas_load(ccg_ctx *err);
ccg_status ccg__nccl_load(ccg_ctx *err);

#ifndef CCG__CUDART_DIRECT
#ifdef __CUDART_API_PER_THREAD_DEFAULT_STREAM
#error "the table holds the runtime's legacy-stream entries (no _ptds/_ptsz)"
#endif
#define cudaDeviceGetAttribute (*ccg__cudart_fn.p_cudaDeviceGetAttribute)
#define cudaDeviceSynchronize (*ccg__cudart_fn.p_cudaDeviceSynchronize)
#define cudaEventCreateWithFlags (*ccg__cudart_fn.p_cudaEventCreateWithFlags)
#define cudaEventDestroy (*ccg__cudart_fn.p_cudaEventDestroy)
#define cudaEventQuery (*ccg__cudart_fn.p_cudaEventQuery)
#define cudaEventRecord (*ccg__cudart_fn.p_cudaEventRecord)
#define cudaEventRecordWithFlags (*ccg__cudart_fn.p_cudaEventRecordWithFlags)
#define cudaFree (*ccg__cudart_fn.p_cudaFree)
#define cudaFreeHost (*ccg__cudart_fn.p_cudaFreeHost)
#define cudaGetDeviceCount (*ccg__cudart_fn.p_cudaGetDeviceCount)
#define cudaGetErrorName (*ccg__cudart_fn.p_cudaGetErrorName)
#define cudaGetErrorString (*ccg__cudart_fn.p_cudaGetErrorString)
#define cudaGraphDestroy (*ccg__cudart_fn.p_cudaGraphDestroy)
#define cudaGraphExecDestroy (*ccg__cudart_fn.p_cudaGraphExecDestroy)
#define cudaGraphInstantiate (*ccg__cudart_fn.p_cudaGraphInstantiate)
#define cudaGraphLaunch (*ccg__cudart_fn.p_cudaGraphLaunch)
#define cudaMalloc (*ccg__cudart_fn.p_cudaMalloc)
#define cudaMallocHost (*ccg__cudart_fn.p_cudaMallocHost)
#define cudaMemcpy (*ccg__cudart_fn.p_cudaMemcpy)
#define cudaMemcpy2DAsync (*ccg__cudart_fn.p_cudaMemcpy2DAsync)
#define cudaMemcpyAsync (*ccg__cudart_fn.p_cudaMemcpyAsync)
#define cudaMemset (*ccg__cudart_fn.p_cudaMemset)
#define cudaMemsetAsync (*ccg__cudart_fn.p_cudaMemsetAsync)
#define cudaSetDevice (*ccg__cudart_fn.p_cudaSetDevice)
#define cudaStreamBeginCapture (*ccg__cudart_fn.p_cudaStreamBeginCapture)
#define cudaStreamCreateWithFlags (*ccg__cudart_fn.p_cudaStreamCreateWithFlags)
#define cudaStreamDestroy (*ccg__cudart_fn.p_cudaStreamDestroy)
#define cudaStreamEndCapture (*ccg__cudart_fn.p_cudaStreamEndCapture)
#define cudaStreamSynchronize (*ccg__cudart_fn.p_cudaStreamSynchronize)
#define cudaStreamWaitEvent (*ccg__cudart_fn.p_cudaStreamWaitEvent)
#endif

#endif
