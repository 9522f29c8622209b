/* The `nccl` communicator's life: the bootstrap (the launch from options
 * and environment, the GPU, the NCCL unique id from rank 0 by MPI_Bcast or
 * the file/tcp rendezvous), the world communicator, and its end. nccl_wait.c
 * holds waits, failures and sub-communicators; nccl_coll.c the primitives.
 *
 * Every rank reports whether it could use its GPU before any rank waits
 * for NCCL: over MPI all agree first, over file/tcp rank 0's failure
 * travels with the id, so nobody waits out the timeout for a rank that
 * already knows it cannot come. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm/nccl_comm.h"
#include "exec/comm/rendezvous.h"
#ifdef CCG_HAVE_MPI
#include "exec/comm/mpi_comm.h"
#endif

/* What rank 0 hands out: the id, or why it cannot start. */
typedef struct boot_msg {
  unsigned char ok;
  ncclUniqueId id;
  char why[383];
} boot_msg;

bool ccg_comm_nccl_available(void) { return true; }

bool ccg__comm_is_nccl(const ccg_comm *c) {
  return c && c->vt == &ccg__nccl_vt;
}

int ccg__nccl_device(const ccg_comm *c) {
  return ((const ccg__nccl *)c)->device;
}

void ccg__nccl_set_stream(ccg_comm *c, cudaStream_t s) {
  ccg__nccl *N = (ccg__nccl *)c;
  pthread_mutex_lock(&N->lock);
  N->stream = s;
  pthread_mutex_unlock(&N->lock);
}

/* ---- bootstrap ----------------------------------------------------------- */

/* This rank's GPU, made current (the CUDA runtime loaded first, on the
 * first use). BACKEND with the CUDA error text. */
static ccg_status use_gpu(const ccg__launch *l) {
  if (ccg__cudart_load(NULL) != CCG_STATUS_OK)
    return ccg__error_prefix(NULL, "nccl communicator, rank %d", l->rank);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return ccg__error(NULL, CCG_STATUS_BACKEND,
                      "nccl communicator, rank %d: cudaGetDeviceCount: %s "
                      "(%s)",
                      l->rank, cudaGetErrorString(e), cudaGetErrorName(e));
  if (n == 0)
    return ccg__error(NULL, CCG_STATUS_BACKEND,
                      "nccl communicator, rank %d: no CUDA device", l->rank);
  if (l->local_rank >= n)
    return ccg__error(NULL, CCG_STATUS_BACKEND,
                      "nccl communicator, rank %d: local rank %d (%s) but "
                      "this machine has %d GPU(s)",
                      l->rank, l->local_rank, l->local_from, n);
  e = cudaSetDevice(l->local_rank);
  if (e != cudaSuccess)
    return ccg__error(NULL, CCG_STATUS_BACKEND,
                      "nccl communicator, rank %d: cudaSetDevice(%d): %s (%s)",
                      l->rank, l->local_rank, cudaGetErrorString(e),
                      cudaGetErrorName(e));
  return CCG_STATUS_OK;
}

/* Rank 0's part of the message: the id when its GPU can be used. */
static ccg_status make_id(const ccg__launch *l, boot_msg *m) {
  CCG_CHECK(use_gpu(l));
  CCG_CHECK(ccg__nccl_load(NULL)); /* NCCL itself, on first use */
  if (l->rank != 0)
    return CCG_STATUS_OK;
  ncclResult_t rc = ccg__nccl_fn.ncclGetUniqueId(&m->id);
  if (rc != ncclSuccess)
    return ccg__error(NULL, CCG_STATUS_COMM,
                      "nccl communicator, rank 0: ncclGetUniqueId: %s (%s)",
                      ccg__nccl_fn.ncclGetErrorString(rc),
                      ccg__nccl_fn.ncclGetLastError(NULL));
  m->ok = 1;
  return CCG_STATUS_OK;
}

/* After the exchange: this rank's own failure first, then rank 0's. */
static ccg_status outcome(const ccg__launch *l, ccg_status mine,
                          const char *my_msg, const boot_msg *m) {
  if (mine != CCG_STATUS_OK)
    return ccg__error(NULL, mine, "%s", my_msg);
  if (!m->ok)
    return ccg__error(NULL, CCG_STATUS_COMM,
                      "nccl communicator, rank %d: rank 0 could not start: %s",
                      l->rank, m->why);
  return CCG_STATUS_OK;
}

/* file: and tcp: (or none, for a world of one). */
static ccg_status boot_shared(ccg__launch *l, boot_msg *m, double deadline) {
  ccg_status mine = make_id(l, m);
  char my_msg[CCG__ERRMSG_MAX] = "";
  if (mine != CCG_STATUS_OK) {
    snprintf(my_msg, sizeof my_msg, "%s", ccg_last_error(NULL));
    size_t n = strnlen(my_msg, sizeof m->why - 1); /* cut to fit */
    if (l->rank == 0) {
      memcpy(m->why, my_msg, n);
      m->why[n] = '\0';
    }
  }
  if (l->world > 1) {
    double left = deadline - ccg__rdv_now();
    CCG_CHECK(ccg__rdv_share(&l->rdv, l->rank, l->world, m, sizeof *m,
                             left > 0 ? left : 1e-3, NULL));
  }
  return outcome(l, mine, my_msg, m);
}

#ifdef CCG_HAVE_MPI
/* Waits for one MPI request until the deadline. On TIMEOUT the request is
 * left to MPI (it cannot cancel a collective): its buffers must outlive
 * it. */
static ccg_status mpi_wait(MPI_Request *req, double deadline, const char *what,
                           int rank) {
  for (;;) {
    int flag = 0;
    if (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return ccg__error(NULL, CCG_STATUS_COMM,
                        "nccl communicator, rank %d: %s failed", rank, what);
    if (flag)
      return CCG_STATUS_OK;
    if (ccg__rdv_now() > deadline)
      return ccg__error(NULL, CCG_STATUS_TIMEOUT,
                        "nccl communicator, rank %d: %s did not complete in "
                        "time (does every rank call ccg_comm_nccl_new?)",
                        rank, what);
    ccg__rdv_nap(1e-3);
  }
}

/* The MPI part: MPI's rank and world, then every rank's readiness
 * (MPI_MINLOC names the first that cannot start), then the id. */
typedef struct mpi_boot {
  int in[2], out[2]; /* {ok, rank} */
  boot_msg m;
} mpi_boot;

static ccg_status check_mpi_launch(ccg__launch *l, int rank, int size) {
  if (l->world >= 0 && l->world != size)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "nccl communicator: world size %d (%s) but "
                      "MPI_COMM_WORLD has %d ranks",
                      l->world, l->world_from, size);
  if (l->rank >= 0 && l->rank != rank)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "nccl communicator: rank %d (%s) but this process is "
                      "rank %d of MPI_COMM_WORLD",
                      l->rank, l->rank_from, rank);
  l->rank = rank;
  l->world = size;
  l->rank_from = l->world_from = "MPI";
  return CCG_STATUS_OK;
}

static ccg_status boot_mpi(ccg__launch *l, boot_msg *m, double deadline) {
  int provided = 0, rank = 0, size = 0;
  if (ccg__mpi_init(&provided) != CCG_STATUS_OK)
    return ccg__error_prefix(NULL, "nccl communicator, rendezvous mpi");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* heap: a request that times out keeps its buffers (left, not freed) */
  mpi_boot *b = calloc(1, sizeof *b);
  if (!b)
    return ccg__error(NULL, CCG_STATUS_OOM, "nccl communicator: out of memory");
  ccg_status mine = check_mpi_launch(l, rank, size);
  if (mine == CCG_STATUS_OK)
    mine = make_id(l, &b->m);
  char my_msg[CCG__ERRMSG_MAX] = "";
  if (mine != CCG_STATUS_OK)
    snprintf(my_msg, sizeof my_msg, "%s", ccg_last_error(NULL));
  b->in[0] = mine == CCG_STATUS_OK;
  b->in[1] = rank;
  MPI_Request req;
  MPI_Iallreduce(b->in, b->out, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD, &req);
  ccg_status st = mpi_wait(&req, deadline, "MPI_Iallreduce", rank);
  if (st == CCG_STATUS_OK && b->out[0] && size > 1) {
    MPI_Ibcast(&b->m, (int)sizeof b->m, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    st = mpi_wait(&req, deadline, "MPI_Ibcast of the NCCL id", rank);
  }
  if (st == CCG_STATUS_TIMEOUT)
    return st; /* b stays with MPI */
  if (st == CCG_STATUS_OK && !b->out[0] && mine == CCG_STATUS_OK)
    st = ccg__error(NULL, CCG_STATUS_COMM,
                    "nccl communicator, rank %d: rank %d could not start "
                    "(see its error)",
                    rank, b->out[1]);
  if (st == CCG_STATUS_OK)
    st = outcome(l, mine, my_msg, &b->m);
  *m = b->m;
  free(b);
  return st;
}
#else
static ccg_status boot_mpi(ccg__launch *l, boot_msg *m, double deadline) {
  (void)l;
  (void)m;
  (void)deadline;
  return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                    "nccl communicator: the rendezvous 'mpi' needs MPI, and "
                    "this ccgraph was built without it (configure with "
                    "-DCCG_WITH_MPI=ON, or use file:PATH or tcp:HOST:PORT)");
}
#endif

/* ---- create and destroy -------------------------------------------------- */

static ccg_status new_comm(const ccg__launch *l, double timeout_s,
                           ccg__nccl **out) {
  ccg__nccl *N = calloc(1, sizeof *N);
  if (!N)
    return ccg__error(NULL, CCG_STATUS_OOM, "nccl communicator: out of memory");
  ccg__ctx_init(&N->base.ctx);
  N->base.vt = &ccg__nccl_vt;
  N->base.nranks = l->world;
  N->base.rank = l->rank;
  N->device = l->local_rank;
  N->timeout_s = timeout_s;
  pthread_mutex_init(&N->lock, NULL);
  *out = N;
  const char *call = "cudaStreamCreateWithFlags";
  cudaError_t e = cudaStreamCreateWithFlags(&N->own, cudaStreamNonBlocking);
  if (e == cudaSuccess) {
    call = "cudaEventCreateWithFlags";
    e = cudaEventCreateWithFlags(&N->done, cudaEventDisableTiming);
  }
  N->stream = N->own;
  if (e != cudaSuccess)
    return ccg__error(NULL, CCG_STATUS_BACKEND,
                      "nccl communicator, rank %d: %s: %s", l->rank, call,
                      cudaGetErrorString(e));
  return CCG_STATUS_OK;
}

ccg_status ccg_comm_nccl_new(const ccg_nccl_options *opts, ccg_comm **out) {
  if (!out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_comm_nccl_new: out is NULL");
  *out = NULL;
  ccg_nccl_options o = CCG_NCCL_OPTIONS_INIT;
  if (opts)
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  if (!(o.timeout_s > 0))
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_comm_nccl_new: options.timeout_s must be > 0 (got "
                      "%g)",
                      o.timeout_s);
  ccg__launch l;
  if (ccg__launch_resolve(o.rank, o.world_size, o.local_rank, o.rendezvous, &l,
                          NULL) != CCG_STATUS_OK)
    return ccg__error_prefix(NULL, "ccg_comm_nccl_new");
  double deadline = ccg__rdv_now() + o.timeout_s;
  boot_msg m;
  memset(&m, 0, sizeof m);
  CCG_CHECK(l.rdv.kind == CCG__RDV_MPI ? boot_mpi(&l, &m, deadline)
                                       : boot_shared(&l, &m, deadline));
  ccg__nccl *N = NULL;
  ccg_status st = new_comm(&l, o.timeout_s, &N);
  if (st == CCG_STATUS_OK) {
    ccg__coll k = {
        "CommInit",   "(communicator set-up)", l.rank,      NULL, 0, 0, 0,
        CCG_DTYPE_U8, CCG_REDUCE_SUM,          o.timeout_s, NULL};
    ncclConfig_t cfg = ccg__nccl_config();
    pthread_mutex_lock(&N->lock);
    double start = ccg__rdv_now();
    ncclResult_t rc = ccg__nccl_fn.ncclCommInitRankConfig(&N->world, l.world,
                                                          m.id, l.rank, &cfg);
    st = ccg__nccl_settle(N, N->world, rc, &k, "ncclCommInitRankConfig", start);
    pthread_mutex_unlock(&N->lock);
  }
  if (st != CCG_STATUS_OK) {
    if (N)
      ccg__nccl_destroy(&N->base);
    return st;
  }
  *out = &N->base;
  return CCG_STATUS_OK;
}

/* Finalizes every communicator (subs first) and destroys them; aborts them
 * all if one fails or the others do not finalize within timeout_s. */
static void finalize_all(ccg__nccl *N) {
  ccg_ctx quiet;
  ccg__ctx_init(&quiet);
  ccg__coll k = {
      "Finalize",   "(communicator destroy)", N->base.rank, NULL,  0, 0, 0,
      CCG_DTYPE_U8, CCG_REDUCE_SUM,           N->timeout_s, &quiet};
  double start = ccg__rdv_now();
  for (size_t i = 0; i <= N->n_subs && !N->failed; i++) {
    ncclComm_t comm = i < N->n_subs ? N->subs[i].comm : N->world;
    if (comm)
      (void)ccg__nccl_settle(N, comm, ccg__nccl_fn.ncclCommFinalize(comm), &k,
                             "ncclCommFinalize", start);
  }
  if (N->failed)
    return; /* settle aborted them all */
  for (size_t i = 0; i < N->n_subs; i++)
    if (N->subs[i].comm) {
      ccg__nccl_fn.ncclCommDestroy(N->subs[i].comm);
      N->subs[i].comm = NULL;
    }
  if (N->world) {
    ccg__nccl_fn.ncclCommDestroy(N->world);
    N->world = NULL;
  }
}

void ccg__nccl_destroy(ccg_comm *c) {
  ccg__nccl *N = (ccg__nccl *)c;
  pthread_mutex_lock(&N->lock);
  cudaSetDevice(N->device);
  if (N->failed)
    ccg__nccl_abort_all(N);
  else
    finalize_all(N);
  if (N->done)
    cudaEventDestroy(N->done);
  if (N->own)
    cudaStreamDestroy(N->own);
  for (size_t i = 0; i < N->n_subs; i++)
    free(N->subs[i].ranks);
  free(N->subs);
  free(N->meshes);
  pthread_mutex_unlock(&N->lock);
  pthread_mutex_destroy(&N->lock);
  free(N);
}
