/* The CUDA executor: device memory from the memory plan (cudaMalloc, never
 * managed memory), uploads, one compute and one communication stream
 * joined by events at each dependency, optional CUDA Graph capture of a
 * whole step, and waits that poll against the deadline. Nodes are launched
 * by gpu_ops.c and gpu_coll.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/comm/nccl.h"
#include "exec/cpu/cpu.h"
#include "exec/cuda/gpu.h"
#include "exec/debug.h"

#define DEV_ALIGN 256

static size_t dev_round(size_t n) {
  return (n + DEV_ALIGN - 1) & ~(size_t)(DEV_ALIGN - 1);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

ccg_status ccg__cuda_fail(ccg_exec *x, const ccg__xnode *n, int err,
                          const char *what) {
  cudaError_t e = (cudaError_t)err;
  if (n)
    return ccg__xfail(x, n, CCG_STATUS_BACKEND, "%s: %s (%s)", what,
                      cudaGetErrorString(e), cudaGetErrorName(e));
  return ccg__error(&x->ctx, CCG_STATUS_BACKEND, "device cuda %d: %s: %s (%s)",
                    x->gpu ? x->gpu->dev : -1, what, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

ccg_status ccg__cublas_fail(ccg_exec *x, const ccg__xnode *n,
                            cublasStatus_t err, const char *what) {
  if (n)
    return ccg__xfail(x, n, CCG_STATUS_BACKEND, "cuBLAS %s: %s (%s)", what,
                      ccg__cublas_fn.cublasGetStatusString(err),
                      ccg__cublas_fn.cublasGetStatusName(err));
  return ccg__error(&x->ctx, CCG_STATUS_BACKEND, "cuBLAS %s: %s (%s)", what,
                    ccg__cublas_fn.cublasGetStatusString(err),
                    ccg__cublas_fn.cublasGetStatusName(err));
}

#define CU(call, what)                                                         \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      return ccg__cuda_fail(x, NULL, e_, what);                                \
  } while (0)

ccg_status ccg__gpu_rows(ccg_exec *x, const ccg__xnode *n, cudaStream_t st,
                         void *dst, size_t dpitch, const void *src,
                         size_t spitch, size_t row, size_t outer) {
  if (!row || !outer)
    return CCG_STATUS_OK;
  cudaError_t e;
  size_t max = x->gpu->max_pitch;
  if (outer > 1 && dpitch <= max && spitch <= max) {
    e = cudaMemcpy2DAsync(dst, dpitch, src, spitch, row, outer,
                          cudaMemcpyDeviceToDevice, st);
    return e ? ccg__cuda_fail(x, n, e, "cudaMemcpy2DAsync") : CCG_STATUS_OK;
  }
  for (size_t o = 0; o < outer; o++) {
    e = cudaMemcpyAsync((char *)dst + o * dpitch,
                        (const char *)src + o * spitch, row,
                        cudaMemcpyDeviceToDevice, st);
    if (e)
      return ccg__cuda_fail(x, n, e, "cudaMemcpyAsync");
  }
  return CCG_STATUS_OK;
}

/* ---- the device --------------------------------------------------------- */

/* -1: LOCAL_RANK (as launchers set it), else 0. */
static int pick_device(int index) {
  if (index >= 0)
    return index;
  const char *lr = getenv("LOCAL_RANK");
  char *end = NULL;
  long v = lr && *lr ? strtol(lr, &end, 10) : 0;
  return end && *end ? 0 : (int)(v < 0 ? 0 : v);
}

/* The CUDA runtime and the kernels are loaded here, when the device is
 * first asked for (module.h). */
static ccg_status cuda_probe(ccg_ctx *err, int device_index) {
  if (ccg__cuda_module_load(err) != CCG_STATUS_OK)
    return ccg__error_prefix(err, "device cuda (index %d)", device_index);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return ccg__error(err, CCG_STATUS_BACKEND,
                      "device cuda (index %d): cudaGetDeviceCount: %s (%s); "
                      "run with the cpu device",
                      device_index, cudaGetErrorString(e), cudaGetErrorName(e));
  int dev = pick_device(device_index);
  if (dev >= count)
    return ccg__error(err, CCG_STATUS_BACKEND,
                      "device cuda: GPU %d asked for (device_index %d, "
                      "LOCAL_RANK '%s') but this machine has %d",
                      dev, device_index,
                      getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : "", count);
  return CCG_STATUS_OK;
}

/* ---- create ------------------------------------------------------------- */

static ccg_status dev_alloc(ccg_exec *x, void **p, size_t bytes,
                            const char *what) {
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *p = NULL;
    return ccg__error(&x->ctx,
                      e == cudaErrorMemoryAllocation ? CCG_STATUS_OOM
                                                     : CCG_STATUS_BACKEND,
                      "device cuda %d: cudaMalloc of %zu bytes for %s: %s",
                      x->gpu->dev, bytes, what, cudaGetErrorString(e));
  }
  return CCG_STATUS_OK;
}

static bool talks_on_stream(const ccg__xnode *n) { return n->comm; }

static ccg_status make_events(ccg_exec *x) {
  ccg__gpu *g = x->gpu;
  unsigned fl = cudaEventDisableTiming;
  CU(cudaEventCreateWithFlags(&g->end, fl), "cudaEventCreate");
  CU(cudaEventCreateWithFlags(&g->tail, fl), "cudaEventCreate");
  for (size_t s = 0; s < x->n_steps; s++) {
    if (!talks_on_stream(&x->steps[s]))
      continue;
    ccg__gpu_step *gs = &g->steps[s];
    CU(cudaEventCreateWithFlags(&gs->ready, fl), "cudaEventCreate");
    CU(cudaEventCreateWithFlags(&gs->done, fl), "cudaEventCreate");
    CU(cudaEventCreateWithFlags(&gs->observed, fl), "cudaEventCreate");
  }
  return CCG_STATUS_OK;
}

static ccg_status make_blas(ccg_exec *x) {
  ccg__gpu *g = x->gpu;
  CCG_CHECK(ccg__cublas_load(&x->ctx));
  cublasStatus_t st = ccg__cublas_fn.cublasCreate(&g->blas);
  if (st != CUBLAS_STATUS_SUCCESS) {
    g->blas = NULL;
    return ccg__cublas_fail(x, NULL, st, "cublasCreate");
  }
  CCG_CHECK(dev_alloc(x, &g->blas_ws, CCG__GPU_BLAS_WORKSPACE,
                      "the cuBLAS workspace"));
  if ((st = ccg__cublas_fn.cublasSetStream(g->blas, g->cs)) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = ccg__cublas_fn.cublasSetWorkspace(g->blas, g->blas_ws,
                                              CCG__GPU_BLAS_WORKSPACE)) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = ccg__cublas_fn.cublasSetMathMode(
           g->blas, g->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                            : CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
    return ccg__cublas_fail(x, NULL, st, "set-up");
  return CCG_STATUS_OK;
}

/* Sizes of every block, the per-step tables and the nodes' checks. */
static ccg_status plan_blocks(ccg_exec *x, size_t *statics, size_t *inputs,
                              size_t *outs, size_t *tables) {
  ccg__gpu *g = x->gpu;
  size_t scratch = 0, comm = 0;
  *statics = *inputs = *outs = *tables = 0;
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    size_t need = 0;
    if (ccg__step_empty(n)) {
      g->steps[s].t_in = g->steps[s].t_out = SIZE_MAX;
      g->steps[s].t_ptrs = g->steps[s].t_slice = SIZE_MAX;
      continue;
    }
    CCG_CHECK(ccg__gpu_check(x, n, &need));
    scratch = need > scratch ? need : scratch;
    if (ccg_op_is_collective(n->op))
      comm = n->scratch > comm ? n->scratch : comm;
    size_t bytes = ccg__gpu_table_bytes(x, n, s);
    ccg__gpu_step *gs = &g->steps[s];
    size_t *offs[] = {&gs->t_in, &gs->t_out, &gs->t_ptrs, &gs->t_slice};
    for (size_t i = 0; i < sizeof offs / sizeof *offs; i++)
      if (*offs[i] != SIZE_MAX)
        *offs[i] += *tables;
    *tables += bytes;
  }
  for (size_t i = 0; i < x->n_vals; i++) {
    const ccg__xval *v = &x->vals[i];
    if (v->kind == CCG__V_STATIC)
      *statics += dev_round(v->nbytes);
    else if (v->kind == CCG__V_INPUT)
      *inputs += dev_round(v->nbytes);
    if (v->kind == CCG__V_ARENA && v->is_output)
      *outs += dev_round(v->nbytes);
  }
  x->scratch_bytes = scratch;
  x->comm_scratch_bytes = comm;
  return CCG_STATUS_OK;
}

static ccg_status place_values(ccg_exec *x, size_t outs) {
  ccg__gpu *g = x->gpu;
  size_t so = 0, io = 0, oo = 0;
  if (outs) {
    CU(cudaMallocHost(&g->host_out, outs), "cudaMallocHost");
  }
  for (size_t i = 0; i < x->n_vals; i++) {
    ccg__xval *v = &x->vals[i];
    switch (v->kind) {
    case CCG__V_ARENA:
      g->dptr[i] = (char *)g->arena + v->offset;
      if (v->is_output) {
        g->out_ptr[i] = (char *)g->host_out + oo;
        oo += dev_round(v->nbytes);
      }
      break;
    case CCG__V_STATIC:
      g->dptr[i] = (char *)g->statics + so;
      so += dev_round(v->nbytes);
      if (v->nbytes)
        CU(cudaMemcpy(g->dptr[i], v->init, v->nbytes, cudaMemcpyHostToDevice),
           "uploading the initializers");
      break;
    case CCG__V_INPUT:
      g->dptr[i] = (char *)g->inputs + io;
      io += dev_round(v->nbytes);
      break;
    default:
      g->dptr[i] = NULL;
      break;
    }
  }
  return CCG_STATUS_OK;
}

static ccg_status upload_tables(ccg_exec *x, size_t bytes) {
  if (!bytes)
    return CCG_STATUS_OK;
  char *host = calloc(1, bytes);
  if (!host)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t s = 0; s < x->n_steps; s++)
    ccg__gpu_fill_tables(x, &x->steps[s], s, host);
  cudaError_t e =
      cudaMemcpy(x->gpu->tables, host, bytes, cudaMemcpyHostToDevice);
  free(host);
  CU(e, "uploading the node tables");
  return CCG_STATUS_OK;
}

static ccg_status cuda_create(ccg_exec *x) {
  ccg__gpu *g = ccg__arena_calloc(&x->arena, 1, sizeof *g);
  if (!g)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  g->steps = ccg__arena_calloc(&x->arena, x->n_steps + 1, sizeof *g->steps);
  g->dptr = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof(void *));
  g->out_ptr = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof(void *));
  g->dirty = ccg__arena_calloc(&x->arena, x->n_vals + 1, sizeof(bool));
  if (!g->steps || !g->dptr || !g->out_ptr || !g->dirty)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  x->gpu = g;
  /* NCCL makes its own GPU current at every call (and talks over it): the
   * executor's streams and buffers must be on that GPU too */
  if (x->comm && x->device_index >= 0 &&
      x->device_index != ccg__nccl_device(x->comm))
    return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                      "device cuda: device_index %d but the nccl communicator "
                      "is on GPU %d (leave device_index at -1 to take it)",
                      x->device_index, ccg__nccl_device(x->comm));
  g->tf32 = x->tf32;
  g->use_graph = x->cuda_graph;
  g->dev = x->device_index >= 0 ? x->device_index
           : x->comm            ? ccg__nccl_device(x->comm)
                                : pick_device(-1);
  for (size_t s = 0; s < x->n_steps; s++)
    g->steps[s].flight = SIZE_MAX;
  CU(cudaSetDevice(g->dev), "cudaSetDevice");
  int max_pitch = 0;
  CU(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, g->dev),
     "cudaDeviceGetAttribute");
  g->max_pitch = max_pitch > 0 ? (size_t)max_pitch : 0;
  CU(cudaStreamCreateWithFlags(&g->cs, cudaStreamNonBlocking),
     "cudaStreamCreate");
  CU(cudaStreamCreateWithFlags(&g->ms, cudaStreamNonBlocking),
     "cudaStreamCreate");
  CCG_CHECK(make_events(x));
  CCG_CHECK(make_blas(x));
  size_t statics, inputs, outs, tables;
  CCG_CHECK(plan_blocks(x, &statics, &inputs, &outs, &tables));
  x->data_bytes = x->mem.peak_bytes;
  CCG_CHECK(dev_alloc(x, &g->arena, x->data_bytes, "the memory plan"));
  CCG_CHECK(dev_alloc(x, &g->statics, statics, "the initializers"));
  CCG_CHECK(dev_alloc(x, &g->inputs, inputs, "the inputs"));
  CCG_CHECK(dev_alloc(x, &g->scratch, x->scratch_bytes, "scratch"));
  CCG_CHECK(dev_alloc(x, &g->comm_scratch, x->comm_scratch_bytes,
                      "collective packing"));
  CCG_CHECK(dev_alloc(x, &g->tables, tables, "node tables"));
  CCG_CHECK(dev_alloc(x, (void **)&g->kerr,
                      CCG__KERR_WORDS * sizeof(unsigned long long),
                      "the kernel failure word"));
  CU(cudaMemset(g->kerr, 0, CCG__KERR_WORDS * sizeof(unsigned long long)),
     "cudaMemset");
  CCG_CHECK(place_values(x, outs));
  CCG_CHECK(upload_tables(x, tables));
  /* cudaMemcpy from pageable memory returns once the data is staged, and
   * the non-blocking streams do not wait for the legacy stream it uses:
   * the uploads must be complete before the first run's kernels read them */
  CU(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the uploads");
  return CCG_STATUS_OK;
}

static void cuda_destroy(ccg_exec *x) {
  ccg__gpu *g = x ? x->gpu : NULL;
  if (!g)
    return;
  cudaSetDevice(g->dev);
  if (g->cs)
    cudaStreamSynchronize(g->cs);
  if (g->ms)
    cudaStreamSynchronize(g->ms);
  if (g->gexec)
    cudaGraphExecDestroy(g->gexec);
  if (g->graph)
    cudaGraphDestroy(g->graph);
  for (size_t s = 0; s < x->n_steps; s++) {
    ccg__gpu_step *gs = &g->steps[s];
    if (gs->ready)
      cudaEventDestroy(gs->ready);
    if (gs->done)
      cudaEventDestroy(gs->done);
    if (gs->observed)
      cudaEventDestroy(gs->observed);
  }
  if (g->end)
    cudaEventDestroy(g->end);
  if (g->tail)
    cudaEventDestroy(g->tail);
  if (g->blas)
    ccg__cublas_fn.cublasDestroy(g->blas);
  void *blocks[] = {g->arena,        g->statics, g->inputs,  g->scratch,
                    g->comm_scratch, g->tables,  g->blas_ws, g->kerr};
  for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++)
    if (blocks[i])
      cudaFree(blocks[i]);
  if (g->host_out)
    cudaFreeHost(g->host_out);
  if (g->cs)
    cudaStreamDestroy(g->cs);
  if (g->ms)
    cudaStreamDestroy(g->ms);
  x->gpu = NULL;
}

/* ---- run ---------------------------------------------------------------- */

/* Inputs of this run, and initializers a run replaced (or that a previous
 * run replaced: their own data goes back). */
static ccg_status upload_inputs(ccg_exec *x) {
  ccg__gpu *g = x->gpu;
  for (size_t i = 0; i < x->n_vals; i++) {
    ccg__xval *v = &x->vals[i];
    if (!v->nbytes)
      continue;
    const void *src = NULL;
    if (v->kind == CCG__V_INPUT) {
      src = v->ptr;
    } else if (v->kind == CCG__V_STATIC && (v->ptr != v->init || g->dirty[i])) {
      src = v->ptr;
      g->dirty[i] = v->ptr != v->init;
    }
    if (src)
      CU(cudaMemcpyAsync(g->dptr[i], src, v->nbytes, cudaMemcpyHostToDevice,
                         g->cs),
         "copying the inputs in");
  }
  return CCG_STATUS_OK;
}

/* Enqueues the step: compute nodes on cs, collectives that talk on ms
 * after an event of cs, and cs waits for each collective where the first
 * node that needs it runs (n->join, overlap.c). Capturing, the host-side
 * observation events are recorded as external nodes of the graph. */
static ccg_status enqueue_step(ccg_exec *x, bool capturing) {
  ccg__gpu *g = x->gpu;
  size_t next = 0; /* steps before it: joined, or not collectives */
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    if (!n->comm) {
      /* joins come in the collectives' order (overlap.c) */
      for (; next < s; next++) {
        const ccg__xnode *c = &x->steps[next];
        if (c->comm && (size_t)c->join > s)
          break;
        if (c->comm)
          CU(cudaStreamWaitEvent(g->cs, g->steps[next].done, 0),
             "cudaStreamWaitEvent");
      }
      if (!ccg__step_empty(n))
        CCG_CHECK(ccg__gpu_launch(x, n, s));
      continue;
    }
    ccg__gpu_step *gs = &g->steps[s];
    CU(cudaEventRecord(gs->ready, g->cs), "cudaEventRecord");
    CU(cudaStreamWaitEvent(g->ms, gs->ready, 0), "cudaStreamWaitEvent");
    CCG_CHECK(ccg__gpu_collective(x, n, s, g->ms));
    /* observed first: joining `done` joins it too (a capture must end
     * with the communication stream joined) */
    CU(cudaEventRecordWithFlags(gs->observed, g->ms,
                                capturing ? cudaEventRecordExternal
                                          : cudaEventRecordDefault),
       "cudaEventRecord");
    CU(cudaEventRecord(gs->done, g->ms), "cudaEventRecord");
  }
  for (; next < x->n_steps; next++)
    if (x->steps[next].comm)
      CU(cudaStreamWaitEvent(g->cs, g->steps[next].done, 0),
         "cudaStreamWaitEvent");
  if (x->comm && x->n_comm) {
    /* Sends the communicator still holds (it pairs each with the next
     * recv) go now, and the compute stream joins them. Only after a node
     * that talks: a capture takes in the communication stream at the
     * first one, and waiting on an event recorded outside the capture
     * would break it. */
    ccg__coll k = {
        "Send", "(end of step)", x->rank,        NULL,          0,      0,
        0,      CCG_DTYPE_U8,    CCG_REDUCE_SUM, x->deadline_s, &x->ctx};
    ccg__nccl_set_stream(x->comm, g->ms);
    CCG_CHECK(ccg__nccl_release(x->comm, &k));
    CU(cudaEventRecord(g->tail, g->ms), "cudaEventRecord");
    CU(cudaStreamWaitEvent(g->cs, g->tail, 0), "cudaStreamWaitEvent");
  }
  return CCG_STATUS_OK;
}

static ccg_status capture_step(ccg_exec *x) {
  ccg__gpu *g = x->gpu;
  CU(cudaStreamBeginCapture(g->cs, cudaStreamCaptureModeThreadLocal),
     "cudaStreamBeginCapture");
  ccg_status st = enqueue_step(x, true);
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(g->cs, &graph);
  if (st != CCG_STATUS_OK || e != cudaSuccess) {
    if (graph)
      cudaGraphDestroy(graph);
    g->use_graph = false; /* later runs go eager */
    return st != CCG_STATUS_OK
               ? st
               : ccg__cuda_fail(x, NULL, e, "cudaStreamEndCapture");
  }
  e = cudaGraphInstantiate(&g->gexec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    g->gexec = NULL;
    g->use_graph = false; /* later runs go eager, as for a failed capture */
    return ccg__cuda_fail(x, NULL, e, "cudaGraphInstantiate");
  }
  g->graph = graph;
  return CCG_STATUS_OK;
}

/* Polls ev against the deadline (no communicator: nothing else to watch). */
static ccg_status wait_event(ccg_exec *x, cudaEvent_t ev, double t0) {
  struct timespec nap = {0, 20000};
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess)
      return CCG_STATUS_OK;
    if (e != cudaErrorNotReady)
      return ccg__cuda_fail(x, NULL, e, "running the step");
    if (now_s() - t0 > x->deadline_s)
      return ccg__error(&x->ctx, CCG_STATUS_TIMEOUT,
                        "device cuda %d: the step did not finish within the "
                        "deadline of %g s",
                        x->gpu->dev, x->deadline_s);
    nanosleep(&nap, NULL);
  }
}

static ccg__coll coll_of(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *v = n->n_in ? ccg__in(x, n, 0) : ccg__out(x, n, 0);
  ccg__coll k = {ccg_op_name(n->op), n->name,       x->rank,   n->p.group,
                 n->p.gsize,         n->p.gidx,     n->p.mask, v->dtype,
                 n->p.rop,           x->deadline_s, &x->ctx};
  return k;
}

/* Waits for every collective in order (naming the first that fails), then
 * for the whole step. */
static ccg_status wait_step(ccg_exec *x, double t0) {
  ccg__gpu *g = x->gpu;
  if (!x->comm)
    return wait_event(x, g->end, t0);
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    if (!n->comm)
      continue;
    ccg__coll k = coll_of(x, n);
    ccg_status st = ccg__nccl_wait(x->comm, g->steps[s].observed, &k);
    ccg__flight_end(x, g->steps[s].flight, st);
    if (st != CCG_STATUS_OK)
      return st;
  }
  ccg__coll k = {"Step",       "(end of run)", x->rank,       NULL,   0, 0, 0,
                 CCG_DTYPE_U8, CCG_REDUCE_SUM, x->deadline_s, &x->ctx};
  return ccg__nccl_wait(x->comm, g->end, &k);
}

static ccg_status check_kernels(ccg_exec *x) {
  unsigned long long w[CCG__KERR_WORDS];
  CU(cudaMemcpy(w, x->gpu->kerr, sizeof w, cudaMemcpyDeviceToHost),
     "reading the kernel failure word");
  if (w[0] == 0 || w[0] > x->n_steps)
    return CCG_STATUS_OK;
  return ccg__gpu_kernel_error(x, &x->steps[w[0] - 1], w[1], w[2]);
}

static ccg_status cuda_run(ccg_exec *x) {
  ccg__gpu *g = x->gpu;
  double t0 = now_s();
  CU(cudaSetDevice(g->dev), "cudaSetDevice");
  /* Dropout's training mode (an initializer replaced for this run, or a
   * graph input) is refused on the host, as the CPU does: ratio and
   * training_mode have host copies here (gpu_ops.c) */
  for (size_t s = 0; s < x->n_steps; s++)
    if (x->steps[s].op == CCG_OP_DROPOUT)
      CCG_CHECK(ccg__dropout_mode(x, &x->steps[s], true));
  CCG_CHECK(upload_inputs(x));
  CU(cudaMemsetAsync(g->kerr, 0, CCG__KERR_WORDS * sizeof(unsigned long long),
                     g->cs),
     "cudaMemsetAsync");
  for (size_t s = 0; s < x->n_steps; s++)
    if (x->steps[s].comm)
      g->steps[s].flight = ccg__flight_begin(x, &x->steps[s]);
  if (g->use_graph && g->graph_state == 1) {
    CCG_CHECK(capture_step(x));
    g->graph_state = 2;
  }
  if (g->gexec) {
    CU(cudaGraphLaunch(g->gexec, g->cs), "cudaGraphLaunch");
  } else {
    CCG_CHECK(enqueue_step(x, false));
    if (g->use_graph)
      g->graph_state = 1; /* the first run warms up; the next is captured */
  }
  /* the outputs the caller reads come back to the host mirror (the others
   * stay on the device: a training step's gradients the caller does not
   * ask for cost no copy) */
  for (size_t i = 0; i < x->n_vals; i++)
    if (g->out_ptr[i] && x->vals[i].fetch && x->vals[i].nbytes)
      CU(cudaMemcpyAsync(g->out_ptr[i], g->dptr[i], x->vals[i].nbytes,
                         cudaMemcpyDeviceToHost, g->cs),
         "copying the outputs out");
  CU(cudaEventRecord(g->end, g->cs), "cudaEventRecord");
  CCG_CHECK(wait_step(x, t0));
  CCG_CHECK(check_kernels(x));
  for (size_t i = 0; i < x->n_vals; i++)
    if (g->out_ptr[i])
      x->vals[i].ptr = g->out_ptr[i];
  return CCG_STATUS_OK;
}

/* Collectives go to the communication stream whenever there is a
 * communicator (the overlap marks and schedule serve the streams). */
static void cuda_configure(ccg_exec *x) { x->overlap = x->comm != NULL; }

const ccg__backend_vt ccg__cuda_backend = {
    "cuda",       cuda_probe, cuda_configure, cuda_create, cuda_run,
    cuda_destroy, true};
