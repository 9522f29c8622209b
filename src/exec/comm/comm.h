/* Private: the communicator interface. The executor packs every collective
 * into flat buffers (rank-major chunks), so an implementation moves and
 * reduces contiguous elements only: `local` (threads), later `mpi` and
 * `nccl` map these one-to-one onto their own calls. */
#ifndef CCG_EXEC_COMM_H
#define CCG_EXEC_COMM_H

#include "ccgraph/exec.h"
#include "core/alloc.h"
#include "core/error.h"

/* One call: who takes part and what to name in messages. Counts are in
 * elements of `dtype`; per-rank lists have gsize entries in group order. */
typedef struct ccg__coll {
  const char *op;   /* "AllReduce", ... */
  const char *node; /* the node's name */
  int rank;         /* this rank (global) */
  const int64_t *group;
  int gsize, gidx;
  unsigned key; /* the group's mesh-axis mask: one group per key per rank */
  ccg_dtype dtype;
  ccg_reduce_op rop;
  double deadline_s;
  ccg_ctx *err; /* failures are recorded here */
} ccg__coll;

typedef struct ccg__comm_vt {
  const char *name;
  ccg_status (*all_reduce)(ccg_comm *c, const ccg__coll *k, const void *in,
                           void *out, size_t count);
  /* out = the ranks' inputs concatenated in group order. */
  ccg_status (*all_gatherv)(ccg_comm *c, const ccg__coll *k, const void *in,
                            void *out, const size_t *counts);
  /* in = gsize chunks of counts[r]; out = the reduction of chunk gidx. */
  ccg_status (*reduce_scatterv)(ccg_comm *c, const ccg__coll *k, const void *in,
                                void *out, const size_t *counts);
  /* chunk r of in (send_counts[r]) goes to group rank r; out receives
   * recv_counts[r] from each r, in group order. */
  ccg_status (*all_to_allv)(ccg_comm *c, const ccg__coll *k, const void *in,
                            const size_t *send_counts, void *out,
                            const size_t *recv_counts);
  ccg_status (*broadcast)(ccg_comm *c, const ccg__coll *k, const void *in,
                          void *out, size_t count, int root);
  /* Root's out gets the reduction; the others' out a copy of their in. */
  ccg_status (*reduce)(ccg_comm *c, const ccg__coll *k, const void *in,
                       void *out, size_t count, int root);
  /* Every group rank sends `in` to group rank dst (or none, -1) and
   * receives into out from group rank src (or none, -1: out untouched). */
  ccg_status (*shift)(ccg_comm *c, const ccg__coll *k, const void *in, int dst,
                      void *out, int src, size_t count);
  /* Point-to-point with a global peer. A send may return before the
   * receiver has copied; `in` must stay valid until flush returns. */
  ccg_status (*send)(ccg_comm *c, const ccg__coll *k, const void *in,
                     size_t count, int peer, int64_t tag);
  ccg_status (*recv)(ccg_comm *c, const ccg__coll *k, void *out, size_t count,
                     int peer, int64_t tag);
  /* Waits until every send of this rank has been received. */
  ccg_status (*flush)(ccg_comm *c, const ccg__coll *k);
  /* Tells every rank that `rank` failed (message kept for theirs). */
  void (*abort)(ccg_comm *c, int rank, const char *msg);
  void (*destroy)(ccg_comm *c);
  /* Optional (NULL: nothing to do). Called by ccg_exec_create before
   * anything that may differ between ranks: readies the communicator for
   * the graph's mesh (NULL: no mesh) and checks that `rank` is one it can
   * serve. May be collective across every rank (mpi: sub-communicators). */
  ccg_status (*prepare)(ccg_comm *c, const ccg_mesh *mesh, int rank,
                        double deadline_s, ccg_ctx *err);
  /* Optional (NULL: nothing to keep). Called by ccg_exec_create for every
   * all-reduce, reduce-scatter and reduce it will issue (count: elements
   * of the input; counts: per group rank, reduce-scatter only; root:
   * reduce only): readies the space the call will need, so that runs
   * allocate nothing. */
  ccg_status (*reserve)(ccg_comm *c, const ccg__coll *k, ccg_op op,
                        size_t count, const size_t *counts, int root);
} ccg__comm_vt;

struct ccg_comm {
  ccg_ctx ctx;
  const ccg__comm_vt *vt;
  int nranks;
  int rank; /* the rank this process holds; -1: every rank (local) */
};

/* "the group of ranks 0,2,4" for messages about k's group. */
void ccg__coll_format_group(const ccg__coll *k, char *buf, size_t size);
/* True if two meshes have the same axis sizes (names do not matter). */
bool ccg__mesh_same_shape(const ccg_mesh *a, const ccg_mesh *b);
/* The group over `mask` of `rank` as a split makes it: its global ranks in
 * group order (ccg_mesh_group_size entries), the smallest of them (the
 * split's color) and rank's index in it (its key). */
void ccg__mesh_split_of(const ccg_mesh *mesh, int rank, unsigned mask,
                        int64_t *ranks, int64_t *color, int *key);

/* What a rank shows the others before its first split for a mesh shape
 * (mpi, nccl), so that all split or all fail: its rank check (-1: this
 * process holds `rank`) and the mesh's axis sizes. */
#define CCG__VIEW_LEN (2 + CCG_MAX_MESH_AXES)
void ccg__prepare_view(const ccg_mesh *mesh, int rank, int self,
                       int64_t view[CCG__VIEW_LEN]);
/* Every rank's view (rank-major) against this rank's `mine`:
 * INVALID_ARG on err naming the first rank that differs; `must` says what
 * options.rank must be ("its MPI rank"). */
ccg_status ccg__prepare_agree(const int64_t *all, int nranks,
                              const int64_t *mine, int self,
                              const ccg_mesh *mesh, const char *must,
                              ccg_ctx *err);

/* One step of a spin wait: a pause instruction where there is one. */
static inline void ccg__cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Reduces n inputs (pointers, in group order) elementwise into out, always
 * in that order: deterministic, the same on every rank. */
void ccg__reduce_ordered(ccg_dtype dt, ccg_reduce_op op, const void *const *ins,
                         int n, size_t off, size_t count, void *out);
/* The same, written to element off of each of n_outs outputs (at most
 * 64); large results bypass the cache. */
void ccg__reduce_ordered_to(ccg_dtype dt, ccg_reduce_op op,
                            const void *const *ins, int n, size_t off,
                            size_t count, void *const *outs, int n_outs);

#endif
