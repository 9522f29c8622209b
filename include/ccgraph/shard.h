/* ccgraph passes: the shard pass. Applies a DTensor-style parallel plan
 * (ccg_plan, dtensor.h) to an unsharded model on a device mesh and gives the
 * SPMD graph every rank runs: collectives inserted by the mapping library
 * (tagged, so the backward pass derives their gradients), local shapes, and
 * each rank's weight shards as per-rank initializer data. docs/shard.md
 * describes the styles, the propagation rules and the head-count rewrite.
 * ccg_plan_propose finds such a plan for a transformer-shaped model. */
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
  /* Data parallelism (docs/parallelism.md): a mesh axis named dp_axis has
   * the data role. The graph inputs carrying the batch enter Shard(batch_dim)
   * over it, every rank runs the model on its batch chunk, and every float
   * initializer is synchronised over it in the backward. */
  const char *dp_axis;   /* NULL = "dp"; absent from the mesh: no dp */
  int zero;              /* 0: gradients all-reduced (DDP); 1 and 3: each
                            parameter stored as its dp shard, all-gathered
                            for use, its gradient reduce-scattered (3 also
                            gathers again in the backward) */
  bool dp_sum;           /* gradients summed over dp; false: averaged */
  int64_t dp_batch_dim;  /* the batch dim of the inputs carrying it; 0 */
  const char *dp_inputs; /* comma-separated names of the inputs carrying
                            the batch; NULL = every input whose batch dim
                            equals the first input's */
} ccg_shard_options;
#define CCG_SHARD_OPTIONS_INIT                                                 \
  { sizeof(ccg_shard_options), NULL, false, 1, NULL, 0, false, 0, NULL }

/* What the pass did. */
typedef struct ccg_shard_report {
  size_t n_sharded_params;   /* initializers split across the axis */
  size_t n_collectives;      /* collective nodes inserted */
  size_t n_reshape_rewrites; /* Reshape targets divided by the group size */
  size_t n_dp_inputs;        /* graph inputs split on the batch over dp */
  size_t n_dp_params;        /* parameters synchronised over dp */
  size_t n_dp_sharded;       /* of those, stored as dp shards (ZeRO 1, 3) */
} ccg_shard_report;

/* The sharded graph's metadata key (ccg_graph_meta, exported as ONNX
 * metadata_props) that says, for every rank, which source parameter each
 * of its weights holds and which part: JSON, docs/shard.md "Provenance". */
#define CCG_SHARD_PROVENANCE "ccgraph.shard.provenance"

/* Builds the sharded graph of `g` (unchanged; its shapes are the global
 * ones) on `mesh` (copied; it must have the plan's axis, unless it has the
 * data axis and `plan` is NULL: data parallelism alone; NULL without a
 * data axis is an error). Plan patterns
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

/* ---- plan proposal --------------------------------------------------------
 */

typedef struct ccg_plan_propose_options {
  size_t size;            /* sizeof(ccg_plan_propose_options) */
  const char *mesh_axis;  /* the axis the plan shards over; NULL = "tp" */
  bool sequence_parallel; /* LayerNorms sequence_parallel as well */
} ccg_plan_propose_options;
#define CCG_PLAN_PROPOSE_OPTIONS_INIT                                          \
  { sizeof(ccg_plan_propose_options), NULL, false }

/* One finding of the proposal: a plan entry (in plan order), or a module
 * left out of the plan and why. Strings are borrowed from the report. */
typedef struct ccg_plan_note {
  const char *pattern;  /* the plan key; for one left out, its module */
  ccg_plan_style style; /* proposed, or what it would have been */
  bool proposed;        /* false: left out (`why` says why) */
  const char *role;     /* "attention input projection", "MLP output
                           projection", "word embeddings", ... */
  const char *why;      /* the nodes that matched, or what does not fit */
} ccg_plan_note;

typedef struct ccg_plan_report ccg_plan_report;

/* Proposes a Megatron-style plan for a transformer-shaped model on `mesh`
 * (which must have the axis): attention input projections (separate q/k/v
 * or one fused) colwise and the output projection rowwise, an MLP's first
 * projections (up/gate) colwise and its last rowwise, word embeddings
 * vocab_parallel and a separate or tied LM head colwise (output Replicate),
 * LayerNorms sequence_parallel when asked. Found by structure: MatMul/Gemm
 * with 2-D weights; attention is the projections feeding Softmax through
 * MatMul, the MLP the projections around an activation. Keys are module
 * paths (as the shard pass reads them) with layer indices generalized to
 * '*' where every layer agrees. Parts whose heads, widths or vocabulary the
 * axis size does not divide are left out, with a note naming the dim.
 * "new": *plan (ccg_plan_free) and *report (ccg_plan_report_free); *report
 * is set whenever the model was analyzed, *plan only when something is
 * proposed. Errors (on g): CCG_STATUS_UNSUPPORTED when the model is not
 * transformer-shaped (no attention, MLP or embedding found), CCG_STATUS_SHAPE
 * when everything found is left out (the message names why), INVALID_ARG
 * for a mesh without the axis. */
CCG_API ccg_status ccg_plan_propose(ccg_graph *g, const ccg_mesh *mesh,
                                    const ccg_plan_propose_options *opts,
                                    ccg_plan **plan, ccg_plan_report **report);
/* Notes in order: the plan's entries, then what was left out (borrowed;
 * NULL past the end). */
CCG_API size_t ccg_plan_report_num_notes(const ccg_plan_report *r);
CCG_API const ccg_plan_note *ccg_plan_report_note(const ccg_plan_report *r,
                                                  size_t i);
/* The proposed plan as JSON text (schemas/plan.schema.json; "{}" when
 * nothing is proposed), and a one-line summary of what was found
 * ("2 attention blocks (4 heads), 2 MLPs (ffn 256), ..."). Borrowed. */
CCG_API const char *ccg_plan_report_json(const ccg_plan_report *r);
CCG_API const char *ccg_plan_report_summary(const ccg_plan_report *r);
CCG_API void ccg_plan_report_free(ccg_plan_report *r);

#ifdef __cplusplus
}
#endif
#endif
