/* ccgraph passes: static checks and cost of a program's communication. A
 * program is the graphs that the ranks of one mesh run together: one SPMD
 * graph run on every rank, one graph per rank (as exported per rank), or one
 * SPMD graph per pipeline stage. Each rank's collectives are replayed in the
 * executor's order (ccg_graph_topo_order); nothing runs. docs/verify.md
 * describes the model and every message. Calls on different graphs may run
 * concurrently; a graph may not be changed during a call that reads it. */
#ifndef CCGRAPH_VERIFY_H
#define CCGRAPH_VERIFY_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a program's ranks disagree on: X(NAME, short name). */
#define CCG_VERIFY_KIND_LIST(X)                                                \
  X(OK, "ok")                                                                  \
  X(OP, "op")                                                                  \
  X(GROUP, "group")                                                            \
  X(DTYPE, "dtype")                                                            \
  X(COUNT, "count")                                                            \
  X(SHAPE, "shape")                                                            \
  X(ROOT, "root")                                                              \
  X(REDUCE_OP, "reduce_op")                                                    \
  X(AXIS, "axis")                                                              \
  X(SPLITS, "splits")                                                          \
  X(TAG, "tag")                                                                \
  X(MISSING, "missing")                                                        \
  X(UNMATCHED_SEND, "unmatched_send")                                          \
  X(UNMATCHED_RECV, "unmatched_recv")                                          \
  X(DEADLOCK, "deadlock")                                                      \
  X(PLACEMENT, "placement")

/* clang-format off */
typedef enum ccg_verify_kind {
#define CCG__VERIFY_KIND_ENUM(name, str) CCG_VERIFY_##name,
  CCG_VERIFY_KIND_LIST(CCG__VERIFY_KIND_ENUM)
#undef CCG__VERIFY_KIND_ENUM
  CCG_VERIFY_KIND_COUNT
} ccg_verify_kind;
/* clang-format on */

/* "op", "deadlock", ...; "invalid" out of range. Static string. */
CCG_API const char *ccg_verify_kind_name(ccg_verify_kind k);

typedef struct ccg_verify_options {
  size_t size; /* sizeof(ccg_verify_options) */
  /* Set: graphs[i] is the SPMD graph of stage i along this mesh axis, run by
   * every rank whose coordinate on it is i. NULL: one graph (SPMD, run by
   * every rank of its mesh) or one graph per rank of the mesh. */
  const char *stage_axis;
  /* Sends a rank may have posted to one peer and not yet received before its
   * next Send to that peer blocks: 16 (the default) is the local
   * communicator's bound; 0 makes every Send wait for its Recv (rendezvous,
   * the strictest model). */
  int p2p_buffer;
  /* Values of named dims ("batch" = 8), applied on every rank before shapes
   * are compared; dims left symbolic compare as written. */
  const char *const *dim_names;
  const int64_t *dim_values;
  size_t n_dims;
} ccg_verify_options;
#define CCG_VERIFY_OPTIONS_INIT                                                \
  { sizeof(ccg_verify_options), NULL, 16, NULL, NULL, 0 }

/* The first disagreement found, or kind OK. rank_a/node_a is the rank that
 * the check started from (the first of a group, the sender, the waiting
 * rank), rank_b/node_b the one that disagrees or that it waits for (-1 / ""
 * when none). `position` counts from 0: the collective's place in the
 * sequence its group issues, or the message's place on its sender->receiver
 * channel. */
typedef struct ccg_verify_report {
  ccg_verify_kind kind;
  int rank_a, rank_b;
  char node_a[128], node_b[128];
  int64_t position;
  char group[96]; /* "tp [0 1]" for a collective, "0->1" for a message */
  size_t n_calls; /* communication calls replayed, all ranks together */
  char message[1024];
} ccg_verify_report;

/* Replays every rank's communication (collectives, Send/Recv) under blocking
 * semantics and checks that the ranks of each group issue the same
 * collectives in the same order with matching op, group, dtype, shapes,
 * reduce_op, root, axes and split sizes; that every Send meets a Recv of the
 * same tag, dtype and shape; and that no rank waits forever. CCG_STATUS_OK
 * when everything matches; CCG_STATUS_COMM for a disagreement (the message,
 * naming both ranks, nodes and the position, goes to the thread's context
 * and to *report); CCG_STATUS_INVALID_ARG for a program that cannot be
 * replayed (meshes differ, wrong number of graphs, a cycle). report may be
 * NULL; opts may be NULL. The graphs are borrowed. */
CCG_API ccg_status ccg_verify_program(ccg_graph *const *graphs, size_t n,
                                      const ccg_verify_options *opts,
                                      ccg_verify_report *report);

/* The placements g declares (Replicate / Shard(d) / Partial per mesh axis,
 * ccg_value_placements) against what its nodes do to them: each
 * collective's input and output on the axes of its group must be a move it
 * makes (AllReduce: Partial -> Replicate; AllGather(d): Shard(d) ->
 * Replicate; ReduceScatter(d): Partial -> Shard(d); ShardSlice(d):
 * Replicate -> Shard(d); AllToAll: Shard(concat) -> Shard(split)), and
 * elementwise unary ops keep them. Values without placements are not
 * judged. CCG_STATUS_OK when every declared pair fits; else
 * CCG_STATUS_INVALID_ARG with kind CCG_VERIFY_PLACEMENT, the node in
 * node_a, the mesh axis in group and the message (naming node, op, axis,
 * both values and placements, and what the node does) in *report and the
 * thread's context. report may be NULL. g is borrowed. */
CCG_API ccg_status ccg_verify_placements(ccg_graph *g,
                                         ccg_verify_report *report);

/* ---- cost ---------------------------------------------------------------- */

/* One collective of the program, counted once per group (Send once, on its
 * sender). `bytes` is the message size S as nccl-tests defines it (the
 * buffer of AllReduce, Broadcast, Reduce, Send, CollectivePermute; the whole
 * gathered output of AllGather; the whole input of ReduceScatter; the send
 * buffer of AllToAll; the largest over the group's ranks where they differ);
 * bus_bytes = bytes * bus_factor; time_s = bus_bytes / link bandwidth. */
typedef struct ccg_cost_item {
  ccg_op op;
  const char *node; /* borrowed from the graph */
  int first_rank;   /* the group's first rank (the sender for Send) */
  int group_size;
  double bytes, bus_factor, bus_bytes, time_s;
  unsigned axes; /* mesh-axis mask of the group (bit i: axis i) */
} ccg_cost_item;

typedef struct ccg_cost_report {
  size_t n_items;
  ccg_cost_item *items; /* in the order the first rank issues them */
  int n_ranks;
  double *rank_bytes;     /* per rank: sum of its calls' bytes */
  double *rank_bus_bytes; /* per rank: sum of bus bytes */
  double step_bus_bytes;  /* the largest rank_bus_bytes */
  double step_time_s;     /* step_bus_bytes / link bandwidth */
  double link_bytes_per_s;
  /* Per mesh axis (n_axes of them, the mesh's order): the bytes and bus
   * bytes of the busiest rank's calls whose group is that axis alone (a
   * data-parallel axis: its gradient reductions). Calls over several axes
   * are in multi_axis_bus_bytes. */
  int n_axes;
  double axis_bytes[CCG_MAX_MESH_AXES];
  double axis_bus_bytes[CCG_MAX_MESH_AXES];
  double multi_axis_bus_bytes;
} ccg_cost_report;

/* The communication cost of one step of a program (the forms, stage axis
 * and named dims of ccg_verify_program; opts may be NULL) at a link
 * bandwidth of link_gbps gigabits per second (1e9 bits), the bus bandwidth
 * of nccl-tests. Every dim must be a number on every rank (rank-dependent
 * dims are evaluated per rank, named ones bound through opts); a symbolic
 * dim is CCG_STATUS_SHAPE naming it and the node. "new": free with
 * ccg_cost_report_free. Errors go to the thread's context. */
CCG_API ccg_status ccg_cost_program(ccg_graph *const *graphs, size_t n,
                                    const ccg_verify_options *opts,
                                    double link_gbps, ccg_cost_report **out);
CCG_API void ccg_cost_report_free(ccg_cost_report *r);
/* The nccl-tests bus-bandwidth factor of a collective over n ranks:
 * AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n;
 * Broadcast, Reduce, Send, Recv, CollectivePermute 1; 0 for other ops. */
CCG_API double ccg_cost_bus_factor(ccg_op op, int n);

#ifdef __cplusplus
}
#endif
#endif
