/* Private: the `mpi` communicator's state, shared by its lifecycle and
 * waits (mpi.c) and its primitives (mpi_coll.c). Built only with MPI. */
#ifndef CCG_EXEC_COMM_MPI_COMM_H
#define CCG_EXEC_COMM_MPI_COMM_H

#include <pthread.h>
#include <stdatomic.h>

#include "exec/comm/comm.h"
#include "exec/comm/mpi_dl.h"

#define CCG__MPI_NOTICE_MAX 512 /* bytes of a failure notice */
#define CCG__MPI_SENDS 64       /* Sends in flight before one must finish */
#define CCG__MPI_KEYS (1u << CCG_MAX_MESH_AXES)

/* One sub-communicator: the ranks of one mesh-axis group, in group order
 * (its MPI ranks are the group indices). */
typedef struct ccg__mpi_sub {
  MPI_Comm comm;
  int gsize;
  int64_t *ranks;
} ccg__mpi_sub;

typedef struct ccg__mpi {
  ccg_comm base; /* first; base.rank is this process's MPI rank */
  MPI_Comm coll; /* duplicates of MPI_COMM_WORLD: setup collectives, */
  MPI_Comm p2p;  /* Send/Recv of the graph, */
  MPI_Comm ctl;  /* and failure notices */
  int tag_ub;
  bool serialize; /* thread level below MULTIPLE: one MPI call at a time */
  pthread_mutex_t mpi_lock;
  pthread_mutex_t state_lock; /* the failure record */

  ccg__mpi_sub *subs;
  size_t n_subs, cap_subs;
  size_t hit[CCG__MPI_KEYS]; /* last sub found per mesh-axis mask */
  ccg_mesh *meshes;          /* mesh shapes whose subs exist */
  size_t n_meshes, cap_meshes;

  _Atomic int failed;
  int failed_rank;
  char failed_msg[CCG__MPI_NOTICE_MAX];
  bool told;     /* this rank has sent its own notice */
  bool stranded; /* a wait gave up on requests MPI cannot cancel */
  char notice[CCG__MPI_NOTICE_MAX];
  MPI_Request *notice_reqs; /* one per rank */

  MPI_Request sends[CCG__MPI_SENDS]; /* Issend of the graph's Sends */
  int send_peer[CCG__MPI_SENDS];
  int n_sends;

  int *counts;      /* 4 x nranks: send counts/displs, recv counts/displs */
  const void **ins; /* nranks pointers for ordered reductions */
  void *scratch;    /* receive space of reductions; grows, then stays */
  size_t scratch_bytes;
} ccg__mpi;

/* Locks around one MPI call when the thread level asks for it. */
static inline void ccg__mpi_lock(ccg__mpi *M) {
  if (M->serialize)
    pthread_mutex_lock(&M->mpi_lock);
}
static inline void ccg__mpi_unlock(ccg__mpi *M) {
  if (M->serialize)
    pthread_mutex_unlock(&M->mpi_lock);
}

/* A failure of MPI call `call` (rc): COMM naming the collective, node and
 * rank with MPI's text; the other ranks are told. */
ccg_status ccg__mpi_error(ccg__mpi *M, const ccg__coll *k, int rc,
                          const char *call);
/* COMM (naming k and the failed rank) if the communicator has failed or a
 * notice is waiting; checked before a call posts anything. */
ccg_status ccg__mpi_check(ccg__mpi *M, const ccg__coll *k);
/* Waits for n requests until k's deadline from `start`, watching for
 * failure notices. `peer` >= 0 names the rank that did not answer, -1 the
 * group of k. */
ccg_status ccg__mpi_wait(ccg__mpi *M, const ccg__coll *k, int n,
                         MPI_Request *reqs, int64_t peer, double start);
/* TIMEOUT naming k and `peer` (as ccg__mpi_wait); the others are told. */
ccg_status ccg__mpi_timeout(ccg__mpi *M, const ccg__coll *k, int64_t peer);
/* The sub-communicator of k's group (made by prepare). */
ccg_status ccg__mpi_sub_of(ccg__mpi *M, const ccg__coll *k, MPI_Comm *out);
/* At least `bytes` of scratch (kept for later calls). */
ccg_status ccg__mpi_scratch(ccg__mpi *M, const ccg__coll *k, size_t bytes,
                            char **out);
/* Tells every other rank that `rank` failed (once per communicator). */
void ccg__mpi_tell(ccg__mpi *M, int rank, const char *text);
double ccg__mpi_now(void);

/* MPI up (once per process, finalized at exit if this library started
 * it) with the best thread level it gives; *provided is that level. The
 * nccl communicator's "mpi" rendezvous starts MPI through it too. */
ccg_status ccg__mpi_init(int *provided);

/* mpi.c: the vtable's lifecycle entries; mpi_coll.c holds the table. */
void ccg__mpi_abort(ccg_comm *c, int rank, const char *msg);
void ccg__mpi_destroy(ccg_comm *c);
ccg_status ccg__mpi_prepare(ccg_comm *c, const ccg_mesh *mesh, int rank,
                            double deadline_s, ccg_ctx *err);
extern const ccg__comm_vt ccg__mpi_vt;

#endif
