/* Private: the `nccl` communicator's state, shared by its life (nccl.c:
 * bootstrap, create, destroy), its waits and sub-communicators
 * (nccl_wait.c) and its primitives (nccl_coll.c). Built only with CUDA. */
#ifndef CCG_EXEC_COMM_NCCL_COMM_H
#define CCG_EXEC_COMM_NCCL_COMM_H

#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "exec/comm/nccl.h"
#include "exec/cuda/dynlib.h"

#define CCG__NCCL_SENDS 64 /* sends held back to pair with a recv */
#define CCG__NCCL_KEYS (1u << CCG_MAX_MESH_AXES)
#define CCG__NCCL_MSG_MAX 512

/* One sub-communicator: the ranks of one mesh-axis group, in group order
 * (its NCCL ranks are the group indices). */
typedef struct ccg__nccl_sub {
  ncclComm_t comm;
  int gsize;
  int64_t *ranks;
} ccg__nccl_sub;

/* A send not yet given to NCCL (see nccl_coll.c: sends wait for the next
 * recv so that an exchange cannot block both streams). */
typedef struct ccg__nccl_send {
  const void *buf;
  size_t count;
  ncclDataType_t type;
  int peer;
  cudaStream_t stream;
} ccg__nccl_send;

typedef struct ccg__nccl {
  ccg_comm base; /* first; base.rank is this process's rank */
  ncclComm_t world;
  int device;           /* the GPU (local rank) */
  double timeout_s;     /* set-up and finalize */
  cudaStream_t stream;  /* where calls enqueue (ccg__nccl_set_stream) */
  cudaStream_t own;     /* the communicator's stream: set-up, default */
  cudaEvent_t done;     /* flush and prepare wait on it */
  pthread_mutex_t lock; /* every entry; waits take it per poll */

  ccg__nccl_sub *subs;
  size_t n_subs, cap_subs;
  size_t hit[CCG__NCCL_KEYS]; /* last sub found per mesh-axis mask */
  ccg_mesh *meshes;           /* mesh shapes whose subs exist */
  size_t n_meshes, cap_meshes;

  ccg__nccl_send sends[CCG__NCCL_SENDS];
  int n_sends;

  bool failed; /* under lock: every communicator has been aborted */
  char failed_msg[CCG__NCCL_MSG_MAX];
} ccg__nccl;

/* ---- nccl_wait.c --------------------------------------------------------- */

/* Records the failure on k->err (st, message from fmt), keeps it as the
 * communicator's, aborts every NCCL communicator. Lock held. */
ccg_status ccg__nccl_fail(ccg__nccl *N, const ccg__coll *k, ccg_status st,
                          const char *fmt, ...) CCG_PRINTF(4, 5);
/* COMM naming k if the communicator failed before. Lock held. */
ccg_status ccg__nccl_check(ccg__nccl *N, const ccg__coll *k);
/* After an NCCL call on `comm` that returned rc: waits while the
 * non-blocking communicator reports ncclInProgress (until k's deadline
 * from `start`), then fails naming `call` unless it succeeded. Lock held. */
ccg_status ccg__nccl_settle(ccg__nccl *N, ncclComm_t comm, ncclResult_t rc,
                            const ccg__coll *k, const char *call, double start);
/* Polls `ev` and every communicator's asynchronous error until the event
 * completes or k's deadline passes. Takes the lock per poll. */
ccg_status ccg__nccl_wait_event(ccg__nccl *N, cudaEvent_t ev,
                                const ccg__coll *k);
/* The communicator of k's group: a sub-communicator made by prepare, or
 * the world one for the whole world in rank order. Lock held. */
ccg_status ccg__nccl_comm_of(ccg__nccl *N, const ccg__coll *k, ncclComm_t *out);
/* ncclCommAbort on every communicator (subs first). Lock held. */
void ccg__nccl_abort_all(ccg__nccl *N);
/* A config for non-blocking communicators. */
ncclConfig_t ccg__nccl_config(void);

/* vtable entries kept outside nccl_coll.c */
void ccg__nccl_abort(ccg_comm *c, int rank, const char *msg);
void ccg__nccl_destroy(ccg_comm *c);
ccg_status ccg__nccl_prepare(ccg_comm *c, const ccg_mesh *mesh, int rank,
                             double deadline_s, ccg_ctx *err);
extern const ccg__comm_vt ccg__nccl_vt;

#endif
