/* ccgraph passes: the shard pass. Applies a DTensor-style parallel plan
 * (ccg_plan, dtensor.h) to an unsharded model on a device mesh and gives the
 * SPMD graph every rank runs: collectives inserted by the mapping library
 * (tagged, so the backward pass derives their gradients), local shapes, and
 * each rank's weight shards as per-rank initializer data. docs/shard.md
 * describes the styles, the propagation rules and the head-count rewrite. */
#ifndef CCGRAPH_SHARD_H
#define CCGRAPH_SHARD_H

#include "ccgraph/dtensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ccg_shard_options {
  size_t size;            /* sizeof(ccg_shard_options) */
  const char *mesh_axis;  /* the plan's mesh axis; NULL = "tp" */
  bool sequence_parallel; /* Megatron-style: LayerNorms the plan does not
                             name run on sequence shards, rowwise and
                             vocab_parallel outputs default to
                             Shard(sequence_dim) */
  int64_t sequence_dim;   /* of [batch, seq, hidden] activations; 1 */
} ccg_shard_options;
#define CCG_SHARD_OPTIONS_INIT                                                 \
  { sizeof(ccg_shard_options), NULL, false, 1 }

/* What the pass did. */
typedef struct ccg_shard_report {
  size_t n_sharded_params;   /* initializers split across the axis */
  size_t n_collectives;      /* collective nodes inserted */
  size_t n_reshape_rewrites; /* Reshape targets divided by the group size */
} ccg_shard_report;

/* Builds the sharded graph of `g` (unchanged; its shapes are the global
 * ones) on `mesh` (copied; it must have the plan's axis). Plan patterns
 * match module paths (from torch.onnx.export's scoped node names:
 * "/h.0/mlp/fc1/MatMul" is module "h.0.mlp.fc1") and parameter names. Every
 * graph output of the result is Replicate, under its original name. Errors
 * (on g) name the plan entry that matches nothing, the value and dim that
 * the group size does not divide, or the node that cannot be sharded.
 * "new": *out is freed with ccg_graph_free. report may be NULL. */
CCG_API ccg_status ccg_shard_apply(ccg_graph *g, const ccg_plan *plan,
                                   const ccg_mesh *mesh,
                                   const ccg_shard_options *opts,
                                   ccg_graph **out, ccg_shard_report *report);

#ifdef __cplusplus
}
#endif
#endif
