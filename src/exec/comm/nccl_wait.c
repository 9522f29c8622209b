/* The `nccl` communicator's waits, failures and sub-communicators. Every
 * communicator is non-blocking (config.blocking = 0): a call may answer
 * ncclInProgress, and nothing may be called on that communicator until
 * ncclCommGetAsyncError stops saying so; every such poll, and every wait
 * for the GPU, runs against the deadline. A failure anywhere aborts every
 * communicator of this process, so no later call can hang on it; the
 * other processes see their NCCL calls fail or time out. */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm/nccl_comm.h"
#include "exec/comm/rendezvous.h"

#define SPINS 64          /* polls before the first sleep */
#define NAP_MIN 2e-6      /* seconds, doubling up to */
#define NAP_MAX 1e-3      /* this between polls */
#define NFP CCG__VIEW_LEN /* a rank's view of prepare */

static double next_nap(unsigned it, double nap) {
  if (it < SPINS) {
    ccg__cpu_pause();
    return nap;
  }
  ccg__rdv_nap(nap);
  return nap * 2 < NAP_MAX ? nap * 2 : NAP_MAX;
}

ncclConfig_t ccg__nccl_config(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

void ccg__nccl_abort_all(ccg__nccl *N) {
  for (size_t i = N->n_subs; i-- > 0;)
    if (N->subs[i].comm) {
      ccg__nccl_fn.ncclCommAbort(N->subs[i].comm);
      N->subs[i].comm = NULL;
    }
  if (N->world) {
    ccg__nccl_fn.ncclCommAbort(N->world);
    N->world = NULL;
  }
  N->n_sends = 0;
}

ccg_status ccg__nccl_fail(ccg__nccl *N, const ccg__coll *k, ccg_status st,
                          const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ccg__verror(k->err, st, fmt, ap);
  va_end(ap);
  if (!N->failed) {
    snprintf(N->failed_msg, sizeof N->failed_msg, "%s", ccg_last_error(k->err));
    N->failed = true;
    ccg__nccl_abort_all(N);
  }
  return st;
}

ccg_status ccg__nccl_check(ccg__nccl *N, const ccg__coll *k) {
  if (!N->failed)
    return CCG_STATUS_OK;
  return ccg__error(k->err, CCG_STATUS_COMM,
                    "%s at node '%s' on rank %d: the nccl communicator has "
                    "failed and was aborted: %s",
                    k->op, k->node, k->rank, N->failed_msg);
}

/* NCCL's own words on the last failure, or a placeholder. */
static const char *last_error(ncclComm_t comm) {
  const char *s = ccg__nccl_fn.ncclGetLastError(comm);
  return s && *s ? s : "no further detail from NCCL";
}

ccg_status ccg__nccl_settle(ccg__nccl *N, ncclComm_t comm, ncclResult_t rc,
                            const ccg__coll *k, const char *call,
                            double start) {
  double nap = NAP_MIN;
  for (unsigned it = 0; rc == ncclInProgress; it++) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t q = comm ? ccg__nccl_fn.ncclCommGetAsyncError(comm, &state)
                          : ncclInvalidArgument;
    rc = q != ncclSuccess ? q : state;
    if (rc != ncclInProgress)
      break;
    if (ccg__rdv_now() - start > k->deadline_s)
      return ccg__nccl_fail(N, k, CCG_STATUS_TIMEOUT,
                            "%s at node '%s' on rank %d: %s did not complete "
                            "within the deadline of %g s (a rank is missing "
                            "or stalled); every NCCL communicator was aborted",
                            k->op, k->node, k->rank, call, k->deadline_s);
    nap = next_nap(it, nap);
  }
  if (rc == ncclSuccess)
    return CCG_STATUS_OK;
  return ccg__nccl_fail(N, k, CCG_STATUS_COMM,
                        "%s at node '%s' on rank %d: %s: %s (%s)", k->op,
                        k->node, k->rank, call,
                        ccg__nccl_fn.ncclGetErrorString(rc), last_error(comm));
}

/* One look at every communicator's asynchronous error. Lock held. */
static ccg_status poll_async(ccg__nccl *N, const ccg__coll *k) {
  for (size_t i = 0; i <= N->n_subs; i++) {
    ncclComm_t comm = i < N->n_subs ? N->subs[i].comm : N->world;
    ncclResult_t state = ncclSuccess;
    if (!comm)
      continue;
    ncclResult_t q = ccg__nccl_fn.ncclCommGetAsyncError(comm, &state);
    ncclResult_t rc = q != ncclSuccess ? q : state;
    if (rc != ncclSuccess && rc != ncclInProgress)
      return ccg__nccl_fail(N, k, CCG_STATUS_COMM,
                            "%s at node '%s' on rank %d: NCCL reported an "
                            "asynchronous error: %s (%s); every NCCL "
                            "communicator was aborted",
                            k->op, k->node, k->rank,
                            ccg__nccl_fn.ncclGetErrorString(rc),
                            last_error(comm));
  }
  return CCG_STATUS_OK;
}

/* One poll of the event and the communicators. *done once complete. */
static ccg_status poll_once(ccg__nccl *N, cudaEvent_t ev, const ccg__coll *k,
                            bool *done) {
  CCG_CHECK(ccg__nccl_check(N, k));
  cudaError_t q = cudaEventQuery(ev);
  if (q != cudaSuccess && q != cudaErrorNotReady)
    return ccg__nccl_fail(N, k, CCG_STATUS_COMM,
                          "%s at node '%s' on rank %d: cudaEventQuery: %s "
                          "(%s); every NCCL communicator was aborted",
                          k->op, k->node, k->rank, cudaGetErrorString(q),
                          cudaGetErrorName(q));
  CCG_CHECK(poll_async(N, k));
  *done = q == cudaSuccess;
  return CCG_STATUS_OK;
}

ccg_status ccg__nccl_wait_event(ccg__nccl *N, cudaEvent_t ev,
                                const ccg__coll *k) {
  double start = ccg__rdv_now(), nap = NAP_MIN;
  for (unsigned it = 0;; it++) {
    bool done = false;
    pthread_mutex_lock(&N->lock);
    ccg_status st = poll_once(N, ev, k, &done);
    if (st == CCG_STATUS_OK && !done && ccg__rdv_now() - start > k->deadline_s)
      st = ccg__nccl_fail(N, k, CCG_STATUS_TIMEOUT,
                          "%s at node '%s' on rank %d: not complete within "
                          "the deadline of %g s (a rank failed or stalled); "
                          "every NCCL communicator was aborted",
                          k->op, k->node, k->rank, k->deadline_s);
    pthread_mutex_unlock(&N->lock);
    if (st != CCG_STATUS_OK || done)
      return st;
    nap = next_nap(it, nap);
  }
}

ccg_status ccg__nccl_wait(ccg_comm *c, cudaEvent_t ev, const ccg__coll *k) {
  return ccg__nccl_wait_event((ccg__nccl *)c, ev, k);
}

void ccg__nccl_abort(ccg_comm *c, int rank, const char *msg) {
  ccg__nccl *N = (ccg__nccl *)c;
  pthread_mutex_lock(&N->lock);
  if (!N->failed) {
    snprintf(N->failed_msg, sizeof N->failed_msg, "rank %d failed: %s", rank,
             msg ? msg : "(no message)");
    N->failed = true;
    ccg__nccl_abort_all(N);
  }
  pthread_mutex_unlock(&N->lock);
}

/* ---- sub-communicators --------------------------------------------------- */

ccg_status ccg__nccl_comm_of(ccg__nccl *N, const ccg__coll *k,
                             ncclComm_t *out) {
  size_t bytes = (size_t)k->gsize * sizeof(int64_t);
  size_t *hit = &N->hit[k->key % CCG__NCCL_KEYS];
  for (size_t i = 0; k->group && i <= N->n_subs; i++) {
    size_t j = i == 0 ? *hit : i - 1;
    const ccg__nccl_sub *s = j < N->n_subs ? &N->subs[j] : NULL;
    if (s && s->gsize == k->gsize && memcmp(s->ranks, k->group, bytes) == 0) {
      *hit = j;
      *out = s->comm;
      return CCG_STATUS_OK;
    }
  }
  bool whole = k->group && k->gsize == N->base.nranks;
  for (int i = 0; whole && i < k->gsize; i++)
    whole = k->group[i] == i;
  if (whole) {
    *out = N->world;
    return CCG_STATUS_OK;
  }
  char who[256] = "no group";
  if (k->group)
    ccg__coll_format_group(k, who, sizeof who);
  return ccg__error(k->err, CCG_STATUS_INVALID_ARG,
                    "%s at node '%s' on rank %d: the nccl communicator has no "
                    "sub-communicator for %s (was the executor created with "
                    "this communicator?)",
                    k->op, k->node, k->rank, who);
}

/* Every rank's view of prepare (its rank check, the mesh shape) gathered
 * on the world communicator through the GPU. */
static ccg_status gather_views(ccg__nccl *N, const ccg__coll *k,
                               const int64_t *fp, int64_t *all) {
  size_t n = (size_t)N->base.nranks, bytes = NFP * sizeof(int64_t);
  int64_t *dev = NULL;
  cudaError_t e = cudaMalloc((void **)&dev, bytes * (n + 1));
  /* on the stream of the gather: a cudaMemcpy from pageable memory
   * returns before its copy is done, on a stream `own` does not wait for */
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(dev, fp, bytes, cudaMemcpyHostToDevice, N->own);
  if (e != cudaSuccess) {
    cudaFree(dev);
    return ccg__error(k->err, CCG_STATUS_BACKEND, "%s on rank %d: %s: %s",
                      k->op, k->rank, dev ? "cudaMemcpyAsync" : "cudaMalloc",
                      cudaGetErrorString(e));
  }
  pthread_mutex_lock(&N->lock);
  ccg_status st = ccg__nccl_check(N, k);
  double start = ccg__rdv_now();
  if (st == CCG_STATUS_OK)
    st = ccg__nccl_settle(N, N->world,
                          ccg__nccl_fn.ncclAllGather(
                              dev, dev + NFP, NFP, ncclInt64, N->world, N->own),
                          k, "ncclAllGather", start);
  if (st == CCG_STATUS_OK &&
      (e = cudaEventRecord(N->done, N->own)) != cudaSuccess)
    st =
        ccg__nccl_fail(N, k, CCG_STATUS_BACKEND, "%s on rank %d: %s: %s", k->op,
                       k->rank, "cudaEventRecord", cudaGetErrorString(e));
  pthread_mutex_unlock(&N->lock);
  if (st == CCG_STATUS_OK)
    st = ccg__nccl_wait_event(N, N->done, k);
  if (st == CCG_STATUS_OK &&
      (e = cudaMemcpy(all, dev + NFP, bytes * n, cudaMemcpyDeviceToHost)) !=
          cudaSuccess)
    st = ccg__error(k->err, CCG_STATUS_BACKEND, "%s on rank %d: %s: %s", k->op,
                    k->rank, "cudaMemcpy", cudaGetErrorString(e));
  cudaFree(dev);
  return st;
}

/* All ranks agree to split, or all fail: no rank is left inside
 * ncclCommSplit. A rank that never comes makes the others time out. */
static ccg_status agree(ccg__nccl *N, const ccg_mesh *mesh, int rank,
                        const ccg__coll *k) {
  int64_t fp[NFP];
  ccg__prepare_view(mesh, rank, N->base.rank, fp);
  int64_t *all = calloc((size_t)N->base.nranks * NFP, sizeof(int64_t));
  if (!all)
    return ccg__error(k->err, CCG_STATUS_OOM, "out of memory");
  ccg_status st = gather_views(N, k, fp, all);
  if (st == CCG_STATUS_OK)
    st = ccg__prepare_agree(all, N->base.nranks, fp, N->base.rank, mesh,
                            "its rank in the nccl communicator", k->err);
  free(all);
  return st;
}

/* One ncclCommSplit per mesh-axis mask with groups of two or more, in mask
 * order on every rank: the color is the smallest rank of the group, the
 * key the index in it. The mask of every axis needs none: its one group is
 * the world communicator (each NCCL communicator costs GPU memory). */
static ccg_status split_masks(ccg__nccl *N, const ccg_mesh *mesh,
                              const ccg__coll *k) {
  int self = N->base.rank;
  for (unsigned mask = 1; mask < (1u << mesh->ndims); mask++) {
    int64_t gsize = ccg_mesh_group_size(mesh, mask);
    if (gsize < 2)
      continue; /* one rank: never calls the communicator */
    if (mask == (1u << mesh->ndims) - 1)
      continue; /* every axis: the world in rank order, its own comm */
    int64_t *ranks = calloc((size_t)gsize, sizeof(int64_t));
    if (!ranks || !ccg__vec_reserve(NULL, (void **)&N->subs, &N->cap_subs,
                                    N->n_subs + 1, sizeof *N->subs)) {
      free(ranks);
      return ccg__error(k->err, CCG_STATUS_OOM, "out of memory");
    }
    int64_t color;
    int gidx;
    ccg__mesh_split_of(mesh, self, mask, ranks, &color, &gidx);
    pthread_mutex_lock(&N->lock);
    ccg_status st = ccg__nccl_check(N, k);
    if (st != CCG_STATUS_OK) {
      pthread_mutex_unlock(&N->lock);
      free(ranks);
      return st;
    }
    ncclConfig_t cfg = ccg__nccl_config();
    ncclComm_t sub = NULL;
    double start = ccg__rdv_now();
    ncclResult_t rc =
        ccg__nccl_fn.ncclCommSplit(N->world, (int)color, gidx, &sub, &cfg);
    /* registered first: a failure aborts it with the others */
    N->subs[N->n_subs++] = (ccg__nccl_sub){sub, (int)gsize, ranks};
    st = ccg__nccl_settle(N, sub ? sub : N->world, rc, k, "ncclCommSplit",
                          start);
    int got = -1, count = -1;
    if (st == CCG_STATUS_OK &&
        (ccg__nccl_fn.ncclCommUserRank(sub, &got) != ncclSuccess ||
         ccg__nccl_fn.ncclCommCount(sub, &count) != ncclSuccess ||
         got != gidx || count != gsize))
      st = ccg__nccl_fail(N, k, CCG_STATUS_INTERNAL,
                          "rank %d: sub-communicator of mask %u is rank %d of "
                          "%d, expected %d of %lld",
                          self, mask, got, count, gidx, (long long)gsize);
    pthread_mutex_unlock(&N->lock);
    CCG_CHECK(st);
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__nccl_prepare(ccg_comm *c, const ccg_mesh *mesh, int rank,
                             double deadline_s, ccg_ctx *err) {
  ccg__nccl *N = (ccg__nccl *)c;
  ccg__coll k = {"CommSplit",  "(sub-communicators)", c->rank,    NULL, 0, 0, 0,
                 CCG_DTYPE_U8, CCG_REDUCE_SUM,        deadline_s, err};
  pthread_mutex_lock(&N->lock);
  ccg_status st = ccg__nccl_check(N, &k);
  pthread_mutex_unlock(&N->lock);
  CCG_CHECK(st);
  bool known = !mesh;
  for (size_t i = 0; mesh && i < N->n_meshes && !known; i++)
    known = ccg__mesh_same_shape(&N->meshes[i], mesh);
  if (rank != c->rank && known)
    return ccg__error(err, CCG_STATUS_INVALID_ARG,
                      "options.rank is %d but this process is rank %d of "
                      "the nccl communicator (ccg_comm_rank)",
                      rank, c->rank);
  if (known)
    return CCG_STATUS_OK;
  cudaError_t e = cudaSetDevice(N->device);
  if (e != cudaSuccess)
    return ccg__error(err, CCG_STATUS_BACKEND,
                      "nccl communicator on rank %d: cudaSetDevice(%d): %s",
                      c->rank, N->device, cudaGetErrorString(e));
  CCG_CHECK(agree(N, mesh, rank, &k));
  if (!ccg__vec_reserve(NULL, (void **)&N->meshes, &N->cap_meshes,
                        N->n_meshes + 1, sizeof *N->meshes))
    return ccg__error(err, CCG_STATUS_OOM, "out of memory");
  N->meshes[N->n_meshes++] = *mesh;
  return split_masks(N, mesh, &k);
}
