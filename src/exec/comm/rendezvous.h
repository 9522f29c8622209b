/* Private: how the processes of one launch find each other before a
 * communicator exists. A launch is rank, world size and local rank, from
 * options or from the environment as launchers set it (torchrun-style
 * RANK/WORLD_SIZE/LOCAL_RANK, mpirun), plus a rendezvous spec: "mpi",
 * "file:PATH" or "tcp:HOST:PORT". Over file and tcp, rank 0 hands one blob
 * (the NCCL unique id) to every other rank within a deadline. Pure C and
 * POSIX, always built (docs/gpu.md). */
#ifndef CCG_EXEC_COMM_RENDEZVOUS_H
#define CCG_EXEC_COMM_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define CCG__RDV_PATH_MAX 4096
#define CCG__RDV_HOST_MAX 256
#define CCG__RDV_SPEC_MAX (CCG__RDV_PATH_MAX + 8)

typedef enum ccg__rdv_kind {
  CCG__RDV_NONE, /* no spec: only a world of one needs none */
  CCG__RDV_MPI,
  CCG__RDV_FILE,
  CCG__RDV_TCP,
} ccg__rdv_kind;

typedef struct ccg__rdv {
  ccg__rdv_kind kind;
  char path[CCG__RDV_PATH_MAX]; /* file */
  char host[CCG__RDV_HOST_MAX]; /* tcp */
  int port;                     /* tcp: 1..65535 */
} ccg__rdv;

/* Parses "mpi", "file:PATH" (PATH not empty) or "tcp:HOST:PORT" (HOST may
 * be "[v6addr]"). INVALID_ARG on err naming the spec and what is wrong. */
ccg_status ccg__rdv_parse(const char *spec, ccg__rdv *out, ccg_ctx *err);

/* One process's place in the launch. -1: not known (yet). */
typedef struct ccg__launch {
  int rank, world, local_rank;
  ccg__rdv rdv;
  /* where each came from, for messages: "options.rank", "RANK", ... */
  const char *rank_from, *world_from, *local_from;
} ccg__launch;

/* Completes a launch whose fields come from options (rank, world,
 * local_rank: -1 unset; spec: NULL unset) with the environment: RANK,
 * WORLD_SIZE, LOCAL_RANK (else OMPI_COMM_WORLD_LOCAL_RANK or
 * MPI_LOCALRANKID under mpirun, else 0), CCG_RENDEZVOUS, else MASTER_ADDR
 * and MASTER_PORT (tcp), else "mpi" under mpirun (OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE or PMIX_RANK set). With "mpi", rank and world may stay -1 (MPI
 * knows them); otherwise both must be known, except that a process with
 * nothing set is rank 0 of a world of one. INVALID_ARG on err naming the
 * option or variable at fault (not a number, out of range). */
ccg_status ccg__launch_resolve(int rank, int world, int local_rank,
                               const char *spec, ccg__launch *out,
                               ccg_ctx *err);

/* Rank 0 of `world` gives `bytes` bytes of blob to every other rank, whose
 * blob is overwritten with them; every rank returns once it holds the
 * blob (rank 0: once every other rank has taken it). file: rank 0 writes
 * PATH (temp file, then linked into place: atomic, and refused if PATH
 * already exists), each other rank R reads it and writes PATH.ack.R; rank
 * 0 waits for every ack, then removes PATH and the acks. tcp: rank 0
 * listens on PORT, each other rank connects to HOST:PORT (retrying until
 * the deadline) and says its rank and world; rank 0 answers every one
 * once all have come. A world size that differs from rank 0's or a rank
 * claimed twice fails on rank 0 and on that rank (INVALID_ARG naming the
 * rank and both sizes); TIMEOUT names who did not come within timeout_s;
 * IO names the file or address. Files and sockets are closed on every
 * path. Not for CCG__RDV_MPI or NONE (INVALID_ARG). */
ccg_status ccg__rdv_share(const ccg__rdv *r, int rank, int world, void *blob,
                          size_t bytes, double timeout_s, ccg_ctx *err);

/* Little-endian words of the transports' messages. */
static inline void ccg__rdv_put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t ccg__rdv_get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}

/* Seconds on a monotonic clock. */
double ccg__rdv_now(void);
/* Sleeps `s` seconds (short polls between looks). */
void ccg__rdv_nap(double s);

/* The two transports of ccg__rdv_share (rendezvous_file.c,
 * rendezvous_tcp.c); arguments checked by it. */
ccg_status ccg__rdv_share_file(const ccg__rdv *r, int rank, int world,
                               void *blob, size_t bytes, double deadline,
                               ccg_ctx *err);
ccg_status ccg__rdv_share_tcp(const ccg__rdv *r, int rank, int world,
                              void *blob, size_t bytes, double deadline,
                              ccg_ctx *err);

#endif
