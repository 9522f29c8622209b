/* ccgraph executor: compiles a graph once for one rank (schedule, bound
 * shapes, memory plan, kernels) and runs it many times with no allocation.
 * Ranks talk through a communicator; `local` runs every rank of a mesh as a
 * thread of one process. An executor is used by one thread at a time; two
 * executors never interfere. */
#ifndef CCGRAPH_EXEC_H
#define CCGRAPH_EXEC_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ccg_exec ccg_exec;
typedef struct ccg_comm ccg_comm;

/* A communicator for `nranks` ranks that are threads of this process: each
 * rank's executor gets the same handle and its own rank. Waits spin, then
 * yield; every wait has a deadline. After a failure (a rank erred or timed
 * out) the communicator stays failed: make a new one. "new": free with
 * ccg_comm_free once every executor using it is freed. Errors go to the
 * thread's context. */
CCG_API ccg_status ccg_comm_local_new(int nranks, ccg_comm **out);
/* A communicator over MPI_COMM_WORLD: this process is one rank (its MPI
 * rank, see ccg_comm_rank) of ccg_comm_size ranks. Initializes MPI with
 * MPI_Init_thread asking for MPI_THREAD_MULTIPLE unless the program already
 * has (then MPI is finalized at exit); with a lower thread level every MPI
 * call of the communicator is serialized behind a lock. Collective: every
 * process calls it, and later creates its executors in the same order (the
 * first executor of each mesh shape makes the sub-communicators, see
 * docs/exec.md). Built without MPI: CCG_STATUS_UNSUPPORTED. "new": free with
 * ccg_comm_free on every rank once its executors are freed. Errors go to
 * the thread's context. */
CCG_API ccg_status ccg_comm_mpi_new(ccg_comm **out);
/* True if this build has the mpi communicator. */
CCG_API bool ccg_comm_mpi_available(void);
/* A communicator over NCCL for one GPU per process: this process is rank
 * `rank` of `world_size`, its GPU is `local_rank` (cudaSetDevice), and its
 * buffers must be device memory, so it serves executors created with
 * CCG_DEVICE_CUDA only. The NCCL unique id travels by the rendezvous:
 * "mpi" (MPI_Bcast over MPI_COMM_WORLD; rank and world from MPI),
 * "file:PATH" (rank 0 writes PATH, the others wait for it; PATH must not
 * exist before the launch) or "tcp:HOST:PORT" (rank 0 listens). NULL or
 * unset fields come from the environment as torchrun-style launchers set
 * it: RANK, WORLD_SIZE, LOCAL_RANK, CCG_RENDEZVOUS, else MASTER_ADDR and
 * MASTER_PORT (tcp), else "mpi" under mpirun; with nothing set, rank 0 of
 * a world of one. A bad option or variable fails with
 * CCG_STATUS_INVALID_ARG naming it, before CUDA is touched. Collective:
 * every rank calls it. Communicators are non-blocking: every wait polls
 * ncclCommGetAsyncError against the deadline and aborts on failure
 * (docs/gpu.md). Built without CUDA:
 * CCG_STATUS_UNSUPPORTED; no usable GPU: CCG_STATUS_BACKEND with the CUDA
 * error text. "new": free with ccg_comm_free once its executors are freed.
 * Errors go to the thread's context. */
typedef struct ccg_nccl_options {
  size_t size;            /* sizeof(ccg_nccl_options) */
  int rank;               /* -1: RANK (or the MPI rank) */
  int world_size;         /* -1: WORLD_SIZE (or the MPI size) */
  int local_rank;         /* -1: LOCAL_RANK, else 0: the GPU to use */
  const char *rendezvous; /* NULL: from the environment */
  double timeout_s;       /* rendezvous and communicator set-up; 300 s */
} ccg_nccl_options;
#define CCG_NCCL_OPTIONS_INIT                                                  \
  { sizeof(ccg_nccl_options), -1, -1, -1, NULL, 300.0 }
CCG_API ccg_status ccg_comm_nccl_new(const ccg_nccl_options *opts,
                                     ccg_comm **out);
/* True if this build has the nccl communicator (a GPU may still lack). */
CCG_API bool ccg_comm_nccl_available(void);
CCG_API void ccg_comm_free(ccg_comm *comm);
/* "local", "mpi", ... Static string. */
CCG_API const char *ccg_comm_name(const ccg_comm *comm);
CCG_API int ccg_comm_size(const ccg_comm *comm);
/* The rank this process holds (mpi: its rank in MPI_COMM_WORLD, to pass as
 * ccg_exec_options.rank); -1 where the process holds every rank (local) or
 * comm is NULL. */
CCG_API int ccg_comm_rank(const ccg_comm *comm);

/* Where an executor runs. */
typedef enum ccg_device {
  CCG_DEVICE_CPU,
  CCG_DEVICE_CUDA,
  CCG_DEVICE_COUNT
} ccg_device;

/* A value of the graph by name. Inputs: `tensor` holds dtype, dims and data
 * (borrowed for the call). Outputs: run fills `tensor` (data borrowed from
 * the executor, valid until its next run or free) and, when `dst` is set,
 * copies the data there (`dst_bytes` must be large enough). */
typedef struct ccg_exec_tensor {
  const char *name;
  ccg_tensor tensor;
  void *dst;
  size_t dst_bytes;
} ccg_exec_tensor;

/* A binding of a named dim ("batch" = 8). */
typedef struct ccg_exec_dim {
  const char *name;
  int64_t value;
} ccg_exec_dim;

typedef struct ccg_exec_options {
  size_t size;    /* sizeof(ccg_exec_options) */
  int rank;       /* global rank of this executor in the mesh (default 0) */
  ccg_comm *comm; /* borrowed; NULL: one rank, groups of size 1 only */
  /* Symbolic dims are bound at create time from these input shapes (only
   * dtype and dims are read) and these named dims. */
  const ccg_exec_tensor *input_shapes;
  size_t n_input_shapes;
  const ccg_exec_dim *dims;
  size_t n_dims;
  double deadline_s;              /* every blocking wait; default 300 s */
  const ccg_allocator *allocator; /* default libc; copied */
  /* Before each collective, the ranks of its group exchange a fingerprint
   * (op, group, dtype, shapes, reduce_op, root, split sizes) through the
   * communicator and fail in that collective, naming the ranks and nodes,
   * when they differ; a Send sends one to its Recv. Every rank must have
   * it on. Also on when the environment has CCG_DEBUG_COLLECTIVES=1.
   * docs/verify.md. */
  bool debug_collectives;
  /* Collectives kept by the flight recorder (default 32; 0: none). */
  size_t flight_records;
  /* 1: collectives run in schedule order on a communication thread of this
   * executor while the compute nodes that do not need their results go on;
   * 0: on the calling thread. -1 (the default): 1 when the processors this
   * process may use (sched_getaffinity) number at least twice the ranks it
   * runs (a local communicator's size, else 1): a core for each rank and
   * one for its communication thread; else 0. The environment variable
   * CCG_EXEC_OVERLAP=0 or 1 overrides it. Same results either way. */
  int overlap;
  /* CCG_DEVICE_CUDA: the step runs on a GPU (docs/gpu.md); a
   * communicator must then be the nccl one. Where no GPU can be used,
   * create fails with CCG_STATUS_BACKEND and the CUDA error text. */
  ccg_device device;
  int device_index; /* CUDA: the GPU; -1: the nccl communicator's, else
                       LOCAL_RANK, else 0 */
  /* CUDA: 1 captures the second run's step (kernels, cuBLAS, NCCL calls)
   * into a CUDA Graph and replays it from the third on; inputs are copied
   * in before each replay. */
  int cuda_graph;
  /* CUDA: 1 lets f32 GEMMs use TF32 tensor cores (about 1e-3 relative
   * error); 0 (default): full f32. */
  int tf32;
  /* Run-time specialization (docs/exec.md): a run whose input shapes (or,
   * where a dim is set by data, whose small integer inputs' contents)
   * differ from what the executor was compiled for compiles a program for
   * them once and keeps it; this many programs (up to 1024) are kept
   * besides the one made at create (0: the default, 4), the least recently
   * used one giving way. -1: none: every dim must be bound at create and a run
   * with other shapes is refused. */
  int max_specializations;
  /* CPU: threads of the executor's intra-op pool (GEMM tiles, element
   * ranges, rows), the calling thread included; 1 starts no thread. 0 (the
   * default): the processors this process may use divided by the ranks it
   * runs (a local communicator's size, else 1), at least 1. The environment
   * variable CCG_THREADS overrides it. Each executor owns its pool, joined
   * by ccg_exec_free. Results are the same bytes for any count. GEMM
   * kernels and libraries run single-threaded under the pool: where
   * OpenBLAS serves f32 GEMMs (CCG_GEMM=openblas) it is set to one thread
   * for the process. */
  int threads;
} ccg_exec_options;
#define CCG_EXEC_OPTIONS_INIT                                                  \
  {                                                                            \
    sizeof(ccg_exec_options), 0, NULL, NULL, 0, NULL, 0, 300.0, NULL, false,   \
        32, -1, CCG_DEVICE_CPU, -1, 0, 0, 0, 0                                 \
  }

/* Compiles `g` for one rank: the schedule (the same on every rank), every
 * shape bound to numbers, the memory plan and the kernels. Where the
 * options leave a dim unbound (an input shape not given, a dim set by data
 * not given with input_shapes' data), the runs bind it (run-time
 * specialization, docs/exec.md); with max_specializations -1 that is an
 * error naming the symbol and the value, or the node and dim. Initializers
 * read the rank's own data where the graph holds per-rank data
 * (ccg_value_rank_data). The graph is borrowed and must outlive the executor
 * unchanged; like any use of a graph, creation is not safe from several
 * threads at once (ccg_exec_run_local takes care of it). "new": free with
 * ccg_exec_free. Errors go to g. */
CCG_API ccg_status ccg_exec_create(ccg_graph *g, const ccg_exec_options *opts,
                                   ccg_exec **out);
CCG_API void ccg_exec_free(ccg_exec *x);

/* Runs one step. `inputs` name graph inputs (every one must be given, with
 * the graph's dtype and rank and its numeric dims) or initializers
 * (replacing their data for this call, for per-rank weights). `outputs` name
 * any values; they are filled as ccg_exec_tensor says. On a GPU only the
 * outputs named come back to the host; the others cost no copy. Inputs
 * whose shapes (or shape-setting contents) no kept program was compiled for
 * compile one first (docs/exec.md); otherwise it allocates nothing. A failure
 * is recorded on x, names the node and op (or the input and dim), and makes the
 * other ranks of the communicator fail instead of waiting. */
CCG_API ccg_status ccg_exec_run(ccg_exec *x, const ccg_exec_tensor *inputs,
                                size_t n_inputs, ccg_exec_tensor *outputs,
                                size_t n_outputs);

/* The memory plan (of the program that ran last; an executor that has
 * compiled nothing yet fails with CCG_STATUS_INVALID_ARG):
 * `peak_bytes` is the arena of planned intermediates (on the CPU the
 * kernels' scratch too, each alive at its step);
 * `naive_bytes` the sum of every intermediate's size and step scratch (no
 * reuse);
 * `max_live_bytes` the largest sum of sizes alive at one step (a lower bound
 * for any plan of this schedule). */
typedef struct ccg_exec_memory {
  size_t peak_bytes;
  size_t naive_bytes;
  size_t max_live_bytes;
  size_t n_inplace; /* outputs written over a dying input */
} ccg_exec_memory;
CCG_API ccg_status ccg_exec_memory_info(const ccg_exec *x,
                                        ccg_exec_memory *out);

/* Run-time specialization so far: `compiles` programs compiled (at create
 * and by runs that brought new input shapes or shape-setting contents),
 * `cached` of them kept now (the one made at create included), `evicted`
 * dropped to make room. A run served by a kept program compiles nothing
 * and allocates nothing. */
typedef struct ccg_exec_specs {
  size_t compiles;
  size_t cached;
  size_t evicted;
} ccg_exec_specs;
CCG_API ccg_status ccg_exec_specializations(const ccg_exec *x,
                                            ccg_exec_specs *out);

/* The flight recorder: the last collectives (and sends, receives) this
 * executor issued, with their state. It is printed to the log and added to
 * the error message when a run fails in communication (CCG_STATUS_COMM or
 * CCG_STATUS_TIMEOUT). */
typedef enum ccg_flight_state {
  CCG_FLIGHT_ISSUED,    /* started, not finished (waiting or stalled) */
  CCG_FLIGHT_COMPLETED, /* finished */
  CCG_FLIGHT_FAILED,    /* returned an error */
  CCG_FLIGHT_STATE_COUNT
} ccg_flight_state;
/* "issued", "completed", "failed"; "invalid" out of range. */
CCG_API const char *ccg_flight_state_name(ccg_flight_state s);
typedef struct ccg_flight_entry {
  uint64_t seq;     /* 0 = the first collective this executor issued */
  const char *op;   /* static */
  const char *node; /* borrowed from the graph */
  char shape[64];   /* "[4,8]": input (Recv: output) shape on this rank */
  ccg_dtype dtype;
  int group_size;
  ccg_flight_state state;
  double t_issued_s, t_done_s; /* CLOCK_MONOTONIC seconds; done 0 if not */
} ccg_flight_entry;
/* Copies up to `max` of the most recent entries (of the program that ran
 * last) into out, oldest first, and returns how many. Safe to call between runs
 * (not during one). */
CCG_API size_t ccg_exec_flight_record(const ccg_exec *x, ccg_flight_entry *out,
                                      size_t max);
/* The schedule: node ids of g in the order they run (ccg_graph_num_nodes
 * of g entries), of the program that ran last (NULL with *n 0 before any
 * was compiled). Borrowed. */
CCG_API const ccg_node_id *ccg_exec_schedule(const ccg_exec *x, size_t *n);

/* Runs `nranks` ranks of `g` (its mesh's world size) as threads on a fresh
 * local communicator, one step each. inputs[r] holds n_inputs tensors of
 * rank r (also used to bind its symbolic dims); outputs[r] holds n_outputs
 * tensors, each with `dst` set. opts (may be NULL) gives the deadline, dims
 * and allocator; rank and comm are ignored. rank_status (may be NULL) gets
 * each rank's status. On failure the message on g lists every failed rank.
 * Every thread is joined before return. */
CCG_API ccg_status ccg_exec_run_local(
    ccg_graph *g, int nranks, const ccg_exec_options *opts,
    const ccg_exec_tensor *const *inputs, size_t n_inputs,
    ccg_exec_tensor *const *outputs, size_t n_outputs, ccg_status *rank_status);

/* The same with one graph per rank: graphs[r] runs as rank r (per-rank
 * models as ccg_onnx_export_ranks writes them, or a pipeline's stages);
 * every graph's mesh has a world of nranks. Each rank compiles once and
 * runs `steps` steps (outputs hold the last). An output whose dst is NULL
 * gets its data copied into new memory: tensor.data, freed by the caller
 * with free() (NULL on a rank that failed; free() takes either). seconds (may
 * be NULL) gets the time of one step: from the moment the last rank finished
 * compiling to the moment the last rank finished, over `steps`. Errors go to
 * the thread's context (ccg_last_error(NULL)) and list every failed rank. */
CCG_API ccg_status ccg_exec_run_local_ranks(
    ccg_graph *const *graphs, int nranks, const ccg_exec_options *opts,
    int steps, const ccg_exec_tensor *const *inputs, size_t n_inputs,
    ccg_exec_tensor *const *outputs, size_t n_outputs, ccg_status *rank_status,
    double *seconds);
/* The same where ranks have inputs and outputs of their own (the stages of
 * a pipeline): rank r gets n_inputs[r] inputs and n_outputs[r] outputs. */
CCG_API ccg_status ccg_exec_run_local_program(
    ccg_graph *const *graphs, int nranks, const ccg_exec_options *opts,
    int steps, const ccg_exec_tensor *const *inputs, const size_t *n_inputs,
    ccg_exec_tensor *const *outputs, const size_t *n_outputs,
    ccg_status *rank_status, double *seconds);

#ifdef __cplusplus
}
#endif
#endif
