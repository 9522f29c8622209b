/* The `nccl` communicator's primitives: each enqueues NCCL calls on the
 * group's communicator and the stream set by ccg__nccl_set_stream, and
 * returns once they are enqueued (completion: ccg__nccl_wait, flush).
 * Equal per-rank counts map onto NCCL's own collectives; unequal ones onto
 * grouped broadcasts, reduces or sends and receives. Reductions run in
 * NCCL's order, so their bits may differ from the local and mpi
 * communicators' fixed order (within the dtype's rounding).
 *
 * Send and Recv: NCCL has no tags, so a recv takes the peer's sends in the
 * order they were issued (tags are not checked), and a send blocks its
 * stream until the peer receives. So that two ranks sending to each other
 * and then receiving cannot block each other's streams, a send is held
 * back and given to NCCL together with this rank's next recv, in one
 * group; any other call, and flush, gives the held sends to NCCL first, so
 * issue order is kept. */
#include <assert.h>
#include <string.h>

#include "exec/comm/nccl_comm.h"
#include "exec/comm/rendezvous.h"

static const ncclRedOp_t RED_OPS[] = {ncclSum, ncclProd, ncclMin, ncclMax,
                                      ncclAvg};
static_assert(sizeof RED_OPS / sizeof RED_OPS[0] == CCG_REDUCE_OP_COUNT,
              "one NCCL op per ccg_reduce_op");

/* The NCCL type of a dtype; bool only moves (as bytes), never reduces. */
static bool nccl_type(ccg_dtype dt, bool reduce, ncclDataType_t *out) {
  switch (dt) {
  case CCG_DTYPE_F32:
    *out = ncclFloat32;
    return true;
  case CCG_DTYPE_F16:
    *out = ncclFloat16;
    return true;
  case CCG_DTYPE_BF16:
    *out = ncclBfloat16;
    return true;
  case CCG_DTYPE_F64:
    *out = ncclFloat64;
    return true;
  case CCG_DTYPE_I32:
    *out = ncclInt32;
    return true;
  case CCG_DTYPE_I64:
    *out = ncclInt64;
    return true;
  case CCG_DTYPE_I8:
    *out = ncclInt8;
    return true;
  case CCG_DTYPE_U8:
    *out = ncclUint8;
    return true;
  case CCG_DTYPE_BOOL:
    *out = ncclUint8;
    return !reduce;
  default:
    return false;
  }
}

/* What one call works with. */
typedef struct call {
  ncclComm_t comm;
  ncclDataType_t type;
  size_t es; /* bytes per element */
  double start;
} call;

static ccg_status give_sends(ccg__nccl *N, const ccg__coll *k);

/* Takes the lock and readies a call: refuses once failed, checks dtype
 * and op, finds the communicator (the world one for point-to-point), and
 * gives held sends to NCCL unless this call is a send or recv. The caller
 * ends with leave() whatever this returns. */
static ccg_status begin(ccg__nccl *N, const ccg__coll *k, bool reduce, bool p2p,
                        call *x) {
  pthread_mutex_lock(&N->lock);
  x->start = ccg__rdv_now();
  x->es = ccg_dtype_size(k->dtype);
  CCG_CHECK(ccg__nccl_check(N, k));
  if (!nccl_type(k->dtype, reduce, &x->type))
    return ccg__error(k->err, CCG_STATUS_UNSUPPORTED,
                      "%s at node '%s' on rank %d: the nccl communicator "
                      "cannot %s dtype %s",
                      k->op, k->node, k->rank, reduce ? "reduce" : "move",
                      ccg_dtype_name(k->dtype));
  if (reduce && (unsigned)k->rop >= CCG_REDUCE_OP_COUNT)
    return ccg__error(k->err, CCG_STATUS_INVALID_ARG,
                      "%s at node '%s' on rank %d: unknown reduction %d", k->op,
                      k->node, k->rank, (int)k->rop);
  cudaError_t e = cudaSetDevice(N->device);
  if (e != cudaSuccess)
    return ccg__nccl_fail(N, k, CCG_STATUS_BACKEND,
                          "%s at node '%s' on rank %d: cudaSetDevice(%d): %s",
                          k->op, k->node, k->rank, N->device,
                          cudaGetErrorString(e));
  if (p2p) {
    x->comm = N->world;
    return CCG_STATUS_OK;
  }
  CCG_CHECK(ccg__nccl_comm_of(N, k, &x->comm));
  return give_sends(N, k);
}

static ccg_status leave(ccg__nccl *N, ccg_status st) {
  pthread_mutex_unlock(&N->lock);
  return st;
}

/* ncclGroupEnd after grouped calls whose first failure is rc. */
static ccg_status end_group(ccg__nccl *N, const ccg__coll *k, const call *x,
                            ncclResult_t rc, const char *what) {
  ncclResult_t e = ccg__nccl_fn.ncclGroupEnd();
  if (rc == ncclSuccess || rc == ncclInProgress)
    rc = e;
  return ccg__nccl_settle(N, x->comm, rc, k, what, x->start);
}

static ncclResult_t first(ncclResult_t a, ncclResult_t b) {
  return a != ncclSuccess && a != ncclInProgress ? a : b;
}

/* Held sends into the open group. */
static ncclResult_t post_sends(ccg__nccl *N) {
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < N->n_sends; i++) {
    const ccg__nccl_send *s = &N->sends[i];
    rc = first(rc, ccg__nccl_fn.ncclSend(s->buf, s->count, s->type, s->peer,
                                         N->world, s->stream));
  }
  N->n_sends = 0;
  return rc;
}

static ccg_status give_sends(ccg__nccl *N, const ccg__coll *k) {
  if (N->n_sends == 0)
    return CCG_STATUS_OK;
  call x = {N->world, ncclUint8, 1, ccg__rdv_now()};
  ncclResult_t rc = ccg__nccl_fn.ncclGroupStart();
  return end_group(N, k, &x, first(rc, post_sends(N)), "ncclSend");
}

/* A device-to-device copy on the stream (a rank's own chunk). */
static ccg_status copy(ccg__nccl *N, const ccg__coll *k, void *dst,
                       const void *src, size_t bytes) {
  if (!bytes || dst == src)
    return CCG_STATUS_OK;
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, N->stream);
  if (e == cudaSuccess)
    return CCG_STATUS_OK;
  return ccg__nccl_fail(N, k, CCG_STATUS_BACKEND,
                        "%s at node '%s' on rank %d: cudaMemcpyAsync: %s",
                        k->op, k->node, k->rank, cudaGetErrorString(e));
}

static bool all_equal(const size_t *counts, int n) {
  for (int r = 1; r < n; r++)
    if (counts[r] != counts[0])
      return false;
  return true;
}

static ccg_status nccl_all_reduce(ccg_comm *c, const ccg__coll *k,
                                  const void *in, void *out, size_t count) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, true, false, &x);
  if (st == CCG_STATUS_OK && count)
    st = ccg__nccl_settle(N, x.comm,
                          ccg__nccl_fn.ncclAllReduce(in, out, count, x.type,
                                                     RED_OPS[k->rop], x.comm,
                                                     N->stream),
                          k, "ncclAllReduce", x.start);
  return leave(N, st);
}

static ccg_status nccl_all_gatherv(ccg_comm *c, const ccg__coll *k,
                                   const void *in, void *out,
                                   const size_t *counts) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, false, false, &x);
  if (st != CCG_STATUS_OK)
    return leave(N, st);
  if (all_equal(counts, k->gsize)) {
    if (counts[0])
      st = ccg__nccl_settle(N, x.comm,
                            ccg__nccl_fn.ncclAllGather(
                                in, out, counts[0], x.type, x.comm, N->stream),
                            k, "ncclAllGather", x.start);
    return leave(N, st);
  }
  /* unequal: rank r broadcasts its chunk into place */
  ncclResult_t rc = ccg__nccl_fn.ncclGroupStart();
  char *at = out;
  for (int r = 0; r < k->gsize; r++) {
    if (counts[r])
      rc = first(rc, ccg__nccl_fn.ncclBroadcast(r == k->gidx ? in : at, at,
                                                counts[r], x.type, r, x.comm,
                                                N->stream));
    at += counts[r] * x.es;
  }
  return leave(N, end_group(N, k, &x, rc, "ncclBroadcast (grouped)"));
}

static ccg_status nccl_reduce_scatterv(ccg_comm *c, const ccg__coll *k,
                                       const void *in, void *out,
                                       const size_t *counts) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, true, false, &x);
  if (st != CCG_STATUS_OK)
    return leave(N, st);
  ncclRedOp_t op = RED_OPS[k->rop];
  if (all_equal(counts, k->gsize)) {
    if (counts[0])
      st = ccg__nccl_settle(N, x.comm,
                            ccg__nccl_fn.ncclReduceScatter(in, out, counts[0],
                                                           x.type, op, x.comm,
                                                           N->stream),
                            k, "ncclReduceScatter", x.start);
    return leave(N, st);
  }
  /* unequal: chunk r is reduced onto rank r (out is only written there) */
  ncclResult_t rc = ccg__nccl_fn.ncclGroupStart();
  const char *at = in;
  for (int r = 0; r < k->gsize; r++) {
    if (counts[r])
      rc = first(rc, ccg__nccl_fn.ncclReduce(at, out, counts[r], x.type, op, r,
                                             x.comm, N->stream));
    at += counts[r] * x.es;
  }
  return leave(N, end_group(N, k, &x, rc, "ncclReduce (grouped)"));
}

static ccg_status nccl_all_to_allv(ccg_comm *c, const ccg__coll *k,
                                   const void *in, const size_t *send_counts,
                                   void *out, const size_t *recv_counts) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, false, false, &x);
  if (st != CCG_STATUS_OK)
    return leave(N, st);
  if (send_counts[k->gidx] != recv_counts[k->gidx])
    return leave(N, ccg__error(k->err, CCG_STATUS_INVALID_ARG,
                               "%s at node '%s' on rank %d: %zu elements to "
                               "itself but %zu expected from itself",
                               k->op, k->node, k->rank, send_counts[k->gidx],
                               recv_counts[k->gidx]));
  const char *src = in;
  char *dst = out;
  size_t self_in = 0, self_out = 0;
  for (int r = 0; r < k->gidx; r++) {
    self_in += send_counts[r];
    self_out += recv_counts[r];
  }
  st = copy(N, k, dst + self_out * x.es, src + self_in * x.es,
            send_counts[k->gidx] * x.es);
  if (st != CCG_STATUS_OK)
    return leave(N, st);
  ncclResult_t rc = ccg__nccl_fn.ncclGroupStart();
  for (int r = 0; r < k->gsize; r++) {
    if (r != k->gidx && send_counts[r])
      rc = first(rc, ccg__nccl_fn.ncclSend(src, send_counts[r], x.type, r,
                                           x.comm, N->stream));
    if (r != k->gidx && recv_counts[r])
      rc = first(rc, ccg__nccl_fn.ncclRecv(dst, recv_counts[r], x.type, r,
                                           x.comm, N->stream));
    src += send_counts[r] * x.es;
    dst += recv_counts[r] * x.es;
  }
  return leave(N, end_group(N, k, &x, rc, "ncclSend/ncclRecv (grouped)"));
}

static ccg_status nccl_broadcast(ccg_comm *c, const ccg__coll *k,
                                 const void *in, void *out, size_t count,
                                 int root) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, false, false, &x);
  if (st == CCG_STATUS_OK && count)
    st = ccg__nccl_settle(N, x.comm,
                          ccg__nccl_fn.ncclBroadcast(in, out, count, x.type,
                                                     root, x.comm, N->stream),
                          k, "ncclBroadcast", x.start);
  return leave(N, st);
}

static ccg_status nccl_reduce(ccg_comm *c, const ccg__coll *k, const void *in,
                              void *out, size_t count, int root) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, true, false, &x);
  if (st == CCG_STATUS_OK && count)
    st = ccg__nccl_settle(N, x.comm,
                          ccg__nccl_fn.ncclReduce(in, out, count, x.type,
                                                  RED_OPS[k->rop], root, x.comm,
                                                  N->stream),
                          k, "ncclReduce", x.start);
  /* the others' out: a copy of their in */
  if (st == CCG_STATUS_OK && k->gidx != root)
    st = copy(N, k, out, in, count * x.es);
  return leave(N, st);
}

static ccg_status nccl_shift(ccg_comm *c, const ccg__coll *k, const void *in,
                             int dst, void *out, int src, size_t count) {
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, false, false, &x);
  if (st != CCG_STATUS_OK || count == 0)
    return leave(N, st);
  if (dst == k->gidx && src == k->gidx)
    return leave(N, copy(N, k, out, in, count * x.es));
  ncclResult_t rc = ccg__nccl_fn.ncclGroupStart();
  if (dst >= 0)
    rc = first(
        rc, ccg__nccl_fn.ncclSend(in, count, x.type, dst, x.comm, N->stream));
  if (src >= 0)
    rc = first(
        rc, ccg__nccl_fn.ncclRecv(out, count, x.type, src, x.comm, N->stream));
  return leave(N, end_group(N, k, &x, rc, "ncclSend/ncclRecv (grouped)"));
}

static ccg_status bad_peer(const ccg__coll *k, int peer, int nranks) {
  return ccg__error(k->err, CCG_STATUS_INVALID_ARG,
                    "%s at node '%s' on rank %d: peer %d is out of range for "
                    "%d ranks",
                    k->op, k->node, k->rank, peer, nranks);
}

static ccg_status nccl_send(ccg_comm *c, const ccg__coll *k, const void *in,
                            size_t count, int peer, int64_t tag) {
  (void)tag; /* NCCL has no tags: issue order matches (see above) */
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, false, true, &x);
  if (st == CCG_STATUS_OK && (peer < 0 || peer >= c->nranks))
    st = bad_peer(k, peer, c->nranks);
  if (st != CCG_STATUS_OK || count == 0)
    return leave(N, st);
  if (N->n_sends == CCG__NCCL_SENDS)
    st = give_sends(N, k);
  if (st == CCG_STATUS_OK)
    N->sends[N->n_sends++] =
        (ccg__nccl_send){in, count, x.type, peer, N->stream};
  return leave(N, st);
}

static ccg_status nccl_recv(ccg_comm *c, const ccg__coll *k, void *out,
                            size_t count, int peer, int64_t tag) {
  (void)tag;
  ccg__nccl *N = (ccg__nccl *)c;
  call x;
  ccg_status st = begin(N, k, false, true, &x);
  if (st == CCG_STATUS_OK && (peer < 0 || peer >= c->nranks))
    st = bad_peer(k, peer, c->nranks);
  if (st != CCG_STATUS_OK || (count == 0 && N->n_sends == 0))
    return leave(N, st);
  /* the held sends and this recv in one group: the group opens first (one
   * statement each: C leaves the order of a call's arguments open) */
  ncclResult_t rc = ccg__nccl_fn.ncclGroupStart();
  rc = first(rc, post_sends(N));
  if (count)
    rc = first(
        rc, ccg__nccl_fn.ncclRecv(out, count, x.type, peer, x.comm, N->stream));
  return leave(N, end_group(N, k, &x, rc, "ncclSend/ncclRecv (grouped)"));
}

/* Gives held sends to NCCL; with `record`, then records N->done after
 * them. Takes the lock. */
static ccg_status release(ccg__nccl *N, const ccg__coll *k, bool record) {
  pthread_mutex_lock(&N->lock);
  ccg_status st = ccg__nccl_check(N, k);
  cudaError_t e = st == CCG_STATUS_OK ? cudaSetDevice(N->device) : cudaSuccess;
  if (e != cudaSuccess)
    st = ccg__nccl_fail(N, k, CCG_STATUS_BACKEND,
                        "%s at node '%s' on rank %d: cudaSetDevice(%d): %s",
                        k->op, k->node, k->rank, N->device,
                        cudaGetErrorString(e));
  if (st == CCG_STATUS_OK)
    st = give_sends(N, k);
  if (st == CCG_STATUS_OK && record &&
      (e = cudaEventRecord(N->done, N->stream)) != cudaSuccess)
    st = ccg__nccl_fail(N, k, CCG_STATUS_BACKEND,
                        "%s at node '%s' on rank %d: cudaEventRecord: %s",
                        k->op, k->node, k->rank, cudaGetErrorString(e));
  pthread_mutex_unlock(&N->lock);
  return st;
}

ccg_status ccg__nccl_release(ccg_comm *c, const ccg__coll *k) {
  return release((ccg__nccl *)c, k, false);
}

/* Gives held sends to NCCL and waits until the stream has done them. */
static ccg_status nccl_flush(ccg_comm *c, const ccg__coll *k) {
  ccg__nccl *N = (ccg__nccl *)c;
  CCG_CHECK(release(N, k, true));
  return ccg__nccl_wait_event(N, N->done, k);
}

const ccg__comm_vt ccg__nccl_vt = {
    "nccl",
    nccl_all_reduce,
    nccl_all_gatherv,
    nccl_reduce_scatterv,
    nccl_all_to_allv,
    nccl_broadcast,
    nccl_reduce,
    nccl_shift,
    nccl_send,
    nccl_recv,
    nccl_flush,
    ccg__nccl_abort,
    ccg__nccl_destroy,
    ccg__nccl_prepare,
};
