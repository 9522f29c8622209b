/* Private: what the CUDA executor needs of the `nccl` communicator
 * (nccl.c). Its primitives (the ccg__comm_vt entries) take device
 * pointers, enqueue on the stream set by ccg__nccl_set_stream and return
 * once enqueued; completion is observed through CUDA events and
 * ccg__nccl_wait. Built only with CUDA. */
#ifndef CCG_EXEC_COMM_NCCL_H
#define CCG_EXEC_COMM_NCCL_H

#include <cuda_runtime_api.h>

#include "exec/comm/comm.h"

/* True if c is the nccl communicator. */
bool ccg__comm_is_nccl(const ccg_comm *c);
/* The CUDA device the communicator was made on (its ranks' GPU). */
int ccg__nccl_device(const ccg_comm *c);
/* The stream the next calls enqueue on. */
void ccg__nccl_set_stream(ccg_comm *c, cudaStream_t s);
/* Gives held sends (see nccl_coll.c) to NCCL on their stream, without
 * waiting: the executor calls it at the end of each step, before it joins
 * the communication stream. */
ccg_status ccg__nccl_release(ccg_comm *c, const ccg__coll *k);
/* Waits until `ev` (recorded after the calls of collective k) has
 * completed, polling ncclCommGetAsyncError of every communicator while it
 * waits. An asynchronous NCCL error, a CUDA error or k->deadline_s passing
 * aborts every communicator (ncclCommAbort) and returns CCG_STATUS_COMM
 * (CCG_STATUS_TIMEOUT for the deadline) naming k->op and k->node on
 * k->err; the communicator stays failed. */
ccg_status ccg__nccl_wait(ccg_comm *c, cudaEvent_t ev, const ccg__coll *k);

#endif
