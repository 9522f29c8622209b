/* Collectives of the CUDA executor: the body shared with the CPU
 * (collective.c) over device memory, its copies and packing kernels
 * enqueued on the stream of the moment (the communication stream for nodes
 * that talk, the compute stream for groups of one and ShardSlice), and the
 * communicator's calls on that stream (comm/nccl.h). */
#include "exec/comm/nccl.h"
#include "exec/cuda/gpu.h"

static void *dev_ptr(const ccg_exec *x, ccg_value_id v) {
  return ccg__dptr(x, v);
}

static ccg_status dev_copy(ccg_exec *x, const ccg__xnode *n, void *dst,
                           const void *src, size_t bytes) {
  if (dst == src || !bytes)
    return CCG_STATUS_OK;
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, x->gpu->cur);
  return e ? ccg__cuda_fail(x, n, e, "cudaMemcpyAsync") : CCG_STATUS_OK;
}

static ccg_status dev_zero(ccg_exec *x, const ccg__xnode *n, void *dst,
                           size_t bytes) {
  if (!bytes)
    return CCG_STATUS_OK;
  cudaError_t e = cudaMemsetAsync(dst, 0, bytes, x->gpu->cur);
  return e ? ccg__cuda_fail(x, n, e, "cudaMemsetAsync") : CCG_STATUS_OK;
}

static ccg_status dev_rows(ccg_exec *x, const ccg__xnode *n, void *dst,
                           size_t dpitch, const void *src, size_t spitch,
                           size_t row, size_t outer) {
  return ccg__gpu_rows(x, n, x->gpu->cur, dst, dpitch, src, spitch, row, outer);
}

/* The packing kernel over the chunk starts made at create (gpu_ops.c). */
static ccg_status dev_chunks(ccg_exec *x, const ccg__xnode *n, int which,
                             void *packed, void *full, size_t es, size_t outer,
                             size_t inner, const int64_t *sizes, int nr,
                             bool unpack) {
  size_t s = (size_t)(n - x->steps), total = 0;
  for (int r = 0; r < nr; r++)
    total += (size_t)sizes[r];
  total *= outer * inner;
  if (!total)
    return CCG_STATUS_OK;
  const ccg__gpu_step *gs = &x->gpu->steps[s];
  const int64_t *before = ccg__dtable(x, which ? gs->t_out : gs->t_in);
  int e = ccg__cu_pack(x->gpu->cur, es, packed, full, outer, inner, before, nr,
                       total, unpack);
  return e ? ccg__cuda_fail(x, n, e, "packing kernel") : CCG_STATUS_OK;
}

static const ccg__xmem dev_mem = {dev_ptr, dev_copy, dev_zero, dev_rows,
                                  dev_chunks};

ccg_status ccg__gpu_collective(ccg_exec *x, const ccg__xnode *n, size_t s,
                               cudaStream_t st) {
  (void)s;
  x->gpu->cur = st;
  if (x->comm)
    ccg__nccl_set_stream(x->comm, st);
  return ccg__collective_body(x, n, &x->ctx, x->gpu->comm_scratch, &dev_mem);
}
