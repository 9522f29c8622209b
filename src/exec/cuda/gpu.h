/* Private: the CUDA executor's state (gpu.c: lifecycle, runs, streams, CUDA
 * Graphs; gpu_ops.c: one launch per compute node; gpu_coll.c: collectives
 * on device memory). Host C: the CUDA runtime is reached through dynlib.h's
 * table, the kernels through module.h's. */
#ifndef CCG_EXEC_CUDA_GPU_H
#define CCG_EXEC_CUDA_GPU_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "exec/cuda/dynlib.h"
#include "exec/cuda/module.h"
#include "exec/internal.h"

#define CCG__GPU_BLAS_WORKSPACE ((size_t)32 << 20)

/* Per step: what gpu.c made for it at create. */
typedef struct ccg__gpu_step {
  /* tables in the device block `tables` (offsets; SIZE_MAX: none) */
  size_t t_in, t_out;   /* collectives: chunk starts (n+1 int64) */
  size_t t_ptrs;        /* batched MatMul: 3 x batch device pointers */
  size_t t_slice;       /* Slice: its ccg__slice */
  size_t flight;        /* comm nodes: the recorder slot of this run */
  cudaEvent_t ready;    /* comm nodes: the compute stream when issued */
  cudaEvent_t done;     /* comm nodes: the communication stream after it */
  cudaEvent_t observed; /* comm nodes: done, recorded for the host's waits */
} ccg__gpu_step;

typedef struct ccg__gpu {
  int dev;
  cudaStream_t cs;  /* compute */
  cudaStream_t ms;  /* communication */
  cudaStream_t cur; /* where the collective of the moment enqueues */
  cudaEvent_t end;  /* both streams done */
  cudaEvent_t tail; /* the communication stream after the step's last call */
  cublasHandle_t blas;
  bool tf32;
  size_t max_pitch; /* cudaDevAttrMaxPitch: the widest 2-D copy pitch */
  bool use_graph;   /* capture a whole step once, replay it after */
  int graph_state;  /* 0: next run eager, 1: capture next, 2: replay */
  cudaGraph_t graph;
  cudaGraphExec_t gexec;

  void **dptr;        /* per value: its device memory */
  bool *dirty;        /* per STATIC value: device holds a run's override */
  void *arena;        /* the memory plan's intermediates */
  void *statics;      /* initializers and Constants, uploaded at create */
  void *inputs;       /* graph inputs, copied in at each run */
  void *scratch;      /* compute nodes */
  void *comm_scratch; /* packing of collectives */
  void *tables;       /* per-step tables (ccg__gpu_step) */
  void *blas_ws;      /* cuBLAS workspace (fixed: capture needs it) */
  unsigned long long *kerr; /* device: first kernel failure (kernels.h) */
  void *host_out;           /* pinned mirror of the graph's outputs */
  void **out_ptr;           /* per value: its place in host_out, or NULL */
  ccg__gpu_step *steps;
} ccg__gpu;

/* A value's device memory. */
static inline void *ccg__dptr(const ccg_exec *x, ccg_value_id v) {
  return v == CCG_NONE ? NULL : x->gpu->dptr[v];
}
static inline void *ccg__din(const ccg_exec *x, const ccg__xnode *n,
                             uint32_t i) {
  return n->in[i] == CCG_NONE ? NULL : x->gpu->dptr[n->in[i]];
}
static inline void *ccg__dout(const ccg_exec *x, const ccg__xnode *n,
                              uint32_t i) {
  return n->out[i] == CCG_NONE ? NULL : x->gpu->dptr[n->out[i]];
}
static inline void *ccg__dtable(const ccg_exec *x, size_t off) {
  return off == SIZE_MAX ? NULL : (char *)x->gpu->tables + off;
}

/* A failed CUDA / cuBLAS call on node n (NULL: the executor), with the
 * library's error text. */
ccg_status ccg__cuda_fail(ccg_exec *x, const ccg__xnode *n, int err,
                          const char *what);
ccg_status ccg__cublas_fail(ccg_exec *x, const ccg__xnode *n,
                            cublasStatus_t err, const char *what);

/* `outer` rows of `row` bytes, src rows `spitch` bytes apart, dst rows
 * `dpitch` apart, enqueued on st: one 2-D copy, or a copy per row where
 * there is one row or a pitch exceeds what 2-D copies take. */
ccg_status ccg__gpu_rows(ccg_exec *x, const ccg__xnode *n, cudaStream_t st,
                         void *dst, size_t dpitch, const void *src,
                         size_t spitch, size_t row, size_t outer);

/* gpu_ops.c. At create: whether the node has a device kernel for its
 * dtypes (UNSUPPORTED naming it otherwise), its compute scratch bytes and
 * table bytes (host-side contents written into `host_tables` at `off`
 * when non-NULL, after the device pointers are known). At run: enqueue it
 * on the compute stream. */
ccg_status ccg__gpu_check(ccg_exec *x, const ccg__xnode *n, size_t *scratch);
size_t ccg__gpu_table_bytes(const ccg_exec *x, const ccg__xnode *n, size_t s);
void ccg__gpu_fill_tables(ccg_exec *x, const ccg__xnode *n, size_t s,
                          char *host_tables);
ccg_status ccg__gpu_launch(ccg_exec *x, const ccg__xnode *n, size_t s);
/* cuBLAS's data type of an IR float dtype, and the compute type a GEMM of
 * that dtype uses (TF32 only with ccg_exec_options.tf32). gpu_ops.c. */
cudaDataType ccg__blas_type(ccg_dtype dt);
cublasComputeType_t ccg__blas_compute(const ccg_exec *x, ccg_dtype dt);
/* The families in files of their own (gpu_<family>.c): the check (with the
 * node's device scratch bytes) and the launch, as above. */
#define CCG__GPU_FAMILY(f)                                                     \
  ccg_status ccg__gpu_check_##f(ccg_exec *x, const ccg__xnode *n,              \
                                size_t *scratch);                              \
  ccg_status ccg__gpu_launch_##f(ccg_exec *x, const ccg__xnode *n, size_t s);
CCG__GPU_FAMILY(logic)
CCG__GPU_FAMILY(loss)
CCG__GPU_FAMILY(data)
CCG__GPU_FAMILY(select)
CCG__GPU_FAMILY(vision)
#undef CCG__GPU_FAMILY
/* The message for a kernel failure recorded for node n (detail and value:
 * the kernel's words [1] and [2]). */
ccg_status ccg__gpu_kernel_error(ccg_exec *x, const ccg__xnode *n,
                                 unsigned long long detail,
                                 unsigned long long value);

/* gpu_coll.c: enqueues collective n (a comm node) on the communication
 * stream: the packing kernels around the communicator's calls. Collectives
 * that do not talk (groups of one, ShardSlice) run on the compute stream
 * through ccg__gpu_launch. */
ccg_status ccg__gpu_collective(ccg_exec *x, const ccg__xnode *n, size_t s,
                               cudaStream_t st);

#endif
