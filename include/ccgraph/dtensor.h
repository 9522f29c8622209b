/* ccgraph symbolic layer, PyTorch DTensor: placement redistribution, the
 * tensor-parallel styles (colwise, rowwise, sequence, pairwise), the old
 * make_input_* / make_output_* helpers, and parallel plans (JSON). Every
 * function that inserts nodes tags them with its mapping name
 * ("dtensor.redistribute", ...) and sets placements on the values it makes.
 * Calls on one graph are not thread-safe; two graphs never interfere. */
#ifndef CCGRAPH_DTENSOR_H
#define CCGRAPH_DTENSOR_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- placements --------------------------------------------------------- */

/* Parses DTensor's notation: "Replicate", "Shard(-1)", "Partial" (sum) or
 * "Partial(avg)". CCG_STATUS_PARSE (thread context) quoting the text. */
CCG_API ccg_status ccg_placement_parse(const char *text, ccg_placement *out);
/* Writes "Shard(1)" (snprintf semantics). */
CCG_API int ccg_placement_format(const ccg_placement *p, char *buf,
                                 size_t size);

/* ---- redistribute ------------------------------------------------------- */

/* Redistributes x from placements `from` to `to` (one per mesh axis of the
 * graph; from NULL = x's own placements), one mesh axis at a time: axes whose
 * source is Shard or Partial first, last axis first (innermost shards are
 * gathered first), then axes whose source is Replicate, first axis first.
 *   S(d)->R AllGather d; R->S(d) ShardSlice d; P->R AllReduce;
 *   P->S(d) ReduceScatter d; S(a)->S(b) AllToAll (split b, concat a);
 *   R->P(sum) divide by W locally (avg/max/min: unchanged).
 * S->P, P(a)->P(b) and R->P(prod) are CCG_STATUS_INVALID_ARG naming the mesh
 * axis and value. A dim that W does not divide is split as torch.chunk does
 * (ceil-sized chunks, the last ones smaller); its local size is then the
 * rank-dependent symbol "tp{3,3,3,1}", which later steps read back. W = 1 or
 * from == to inserts an Identity. The result carries `to`. The registry
 * entry "dtensor.redistribute" takes {"from", "to", "grad"}: its backward
 * sends the gradient (placed as "grad", default "to") back to "from" with
 * Partial read as Replicate. */
CCG_API ccg_status ccg_dtensor_redistribute(ccg_graph *g, ccg_value_id x,
                                            const ccg_placement *from,
                                            const ccg_placement *to,
                                            ccg_value_id *out);
/* ---- styles -------------------------------------------------------------- */
/* Each is ccg_mapping_apply of "dtensor.<style>" with the options as params
 * ({"mesh_axis", "input_layouts", "output_layouts", "use_local_output"};
 * sequence_parallel {"mesh_axis", "sequence_dim", "epsilon",
 * "use_local_output"}). Their backward rules (ccg_mapping_apply_backward)
 * recompute the input's redistribution (and pairwise's first Linear): a rule
 * sees inputs and output gradients only. */

/* Options of the Linear styles, on one mesh axis (placements of the other
 * axes are left as they are; a value without placements is Replicate
 * there). Layouts are DTensor placements on `mesh_axis`. */
typedef struct ccg_dtensor_style_options {
  size_t size;           /* sizeof(ccg_dtensor_style_options) */
  const char *mesh_axis; /* NULL = "tp" */
  bool has_input_layout; /* false: the style's default */
  ccg_placement input_layout;
  bool has_output_layout;
  ccg_placement output_layout;
  bool use_local_output; /* recorded in the tag; the graph keeps placements */
  int64_t sequence_dim;  /* sequence_parallel */
  float epsilon;         /* sequence_parallel's LayerNorm */
} ccg_dtensor_style_options;
#define CCG_DTENSOR_STYLE_OPTIONS_INIT                                         \
  {                                                                            \
    sizeof(ccg_dtensor_style_options), NULL, false, {0, 0, 0}, false,          \
        {0, 0, 0}, true, 1, 1e-5f                                              \
  }

/* Column-parallel Linear y = x @ w + b: w is this rank's column shard
 * [in, out/W] (Shard(1)), b (or CCG_NONE) its shard [out/W]. Input layout
 * (default Replicate) goes to Replicate first (an S(seq) input is gathered);
 * the output is Shard(-1), redistributed to the output layout (default
 * Shard(-1)). Backward: the input gradient is Partial and goes back to the
 * input layout (AllReduce, or ReduceScatter for S(seq)). */
CCG_API ccg_status ccg_dtensor_colwise_parallel(
    ccg_graph *g, ccg_value_id x, ccg_value_id w, ccg_value_id b,
    const ccg_dtensor_style_options *opt, ccg_value_id *y);
/* Row-parallel Linear: w is the row shard [in/W, out] (Shard(0)), b the
 * whole [out] (Replicate), added once after the reduction. Input layout
 * default Shard(-1); x @ w is Partial and goes to the output layout (default
 * Replicate: AllReduce; Shard(seq): ReduceScatter). */
CCG_API ccg_status ccg_dtensor_rowwise_parallel(
    ccg_graph *g, ccg_value_id x, ccg_value_id w, ccg_value_id b,
    const ccg_dtensor_style_options *opt, ccg_value_id *y);
/* Sequence parallel: LayerNorm over the last dim on the sequence shard
 * (x Shard(sequence_dim)), scale and bias Replicate; their gradients are
 * AllReduced over the mesh axis in the backward. */
CCG_API ccg_status ccg_dtensor_sequence_parallel(
    ccg_graph *g, ccg_value_id x, ccg_value_id scale, ccg_value_id bias,
    const ccg_dtensor_style_options *opt, ccg_value_id *y);
/* Pairwise parallel (old API): colwise (w1, b1) then rowwise (w2, b2);
 * x Replicate in, Replicate out. */
CCG_API ccg_status ccg_dtensor_pairwise_parallel(
    ccg_graph *g, ccg_value_id x, ccg_value_id w1, ccg_value_id b1,
    ccg_value_id w2, ccg_value_id b2, const ccg_dtensor_style_options *opt,
    ccg_value_id *y);

/* ---- the old helpers (torch.distributed.tensor.parallel) ----------------- */

/* Which helper; one registry entry each ("dtensor.make_input_shard_1d"). */
typedef enum ccg_dtensor_helper {
  CCG_DTENSOR_MAKE_INPUT_SHARD_1D,          /* -> S(dim) */
  CCG_DTENSOR_MAKE_INPUT_SHARD_1D_LAST_DIM, /* -> S(-1) */
  CCG_DTENSOR_MAKE_INPUT_REPLICATE_1D,      /* -> R */
  CCG_DTENSOR_MAKE_INPUT_RESHARD_REPLICATE, /* S(0) -> R */
  CCG_DTENSOR_MAKE_OUTPUT_SHARD_1D,         /* -> S(dim) */
  CCG_DTENSOR_MAKE_OUTPUT_REPLICATE_1D,     /* -> R */
  CCG_DTENSOR_MAKE_OUTPUT_TENSOR,           /* -> R, local */
  CCG_DTENSOR_MAKE_SHARDED_OUTPUT_TENSOR,   /* local, no communication */
  CCG_DTENSOR_MAKE_OUTPUT_RESHARD_TENSOR,   /* -> S(0), local */
  CCG_DTENSOR_HELPER_COUNT
} ccg_dtensor_helper;

/* "make_input_shard_1d", ...; NULL out of range. */
CCG_API const char *ccg_dtensor_helper_name(ccg_dtensor_helper h);

/* Applies a helper on `mesh_axis` (NULL = "tp"); dim is read by the *_1d
 * helpers that take one. As in PyTorch, an input helper given a value
 * without placements (a local tensor) takes it as already in the target
 * layout (no communication; make_input_reshard_replicate takes it as S(0));
 * an output helper needs a value with placements (INVALID_ARG naming it). */
CCG_API ccg_status ccg_dtensor_apply_helper(ccg_graph *g, ccg_dtensor_helper h,
                                            ccg_value_id x,
                                            const char *mesh_axis, int64_t dim,
                                            ccg_value_id *y);

/* ---- parallel plans ------------------------------------------------------ */

typedef enum ccg_plan_style {
  CCG_PLAN_COLWISE,
  CCG_PLAN_ROWWISE,
  CCG_PLAN_SEQUENCE_PARALLEL,
  CCG_PLAN_VOCAB_PARALLEL,
  CCG_PLAN_REPLICATE,
  CCG_PLAN_ULYSSES,
  CCG_PLAN_EXPERT_PARALLEL,
  CCG_PLAN_STYLE_COUNT
} ccg_plan_style;

/* "colwise", "rowwise", "sequence_parallel", "vocab_parallel", "replicate",
 * "ulysses", "expert_parallel"; NULL out of range. */
CCG_API const char *ccg_plan_style_name(ccg_plan_style s);

#define CCG_PLAN_MAX_LAYOUTS 8

/* A layout list: one per module input/output; `present[i]` false for a
 * null entry (a non-tensor argument). n == 0: the style's default. */
typedef struct ccg_plan_layouts {
  int n;
  bool present[CCG_PLAN_MAX_LAYOUTS];
  ccg_placement p[CCG_PLAN_MAX_LAYOUTS];
} ccg_plan_layouts;

/* One plan entry with the style's defaults filled in (DTensor's): colwise
 * R -> Shard(-1), rowwise Shard(-1) -> R, vocab_parallel R -> R,
 * use_local_output true except sequence_parallel, sequence_dim 1. */
typedef struct ccg_plan_entry {
  const char *pattern; /* borrowed from the plan */
  ccg_plan_style style;
  ccg_plan_layouts input_layouts;
  ccg_plan_layouts output_layouts;
  bool use_local_output;
  int64_t sequence_dim;
} ccg_plan_entry;

typedef struct ccg_plan ccg_plan;

/* Parses a plan: a JSON object {pattern: style}, a style being its name or
 * {"style": name, options...} (schemas/plan.schema.json). Errors go to the
 * thread's context (ccg_last_error(NULL)) as CCG_STATUS_PARSE and name the
 * offending key ("plan key 'fc1': option 'sequence_dim' is not one of
 * style 'colwise'"). "new": free with ccg_plan_free. */
CCG_API ccg_status ccg_plan_parse(const char *json_text, ccg_plan **out);
/* The same from a file; CCG_STATUS_IO naming the file if unreadable, and
 * parse errors prefixed with the file name. */
CCG_API ccg_status ccg_plan_load(const char *path, ccg_plan **out);
CCG_API void ccg_plan_free(ccg_plan *plan);

/* Entries in file order (borrowed; NULL past the end). */
CCG_API size_t ccg_plan_num_entries(const ccg_plan *plan);
CCG_API const ccg_plan_entry *ccg_plan_entry_at(const ccg_plan *plan, size_t i);
/* True if `name` matches `pattern` segment by segment (split at '.'), each
 * segment with fnmatch wildcards (* ? [..]); the segment counts must be
 * equal, so '*' never spans a dot. */
CCG_API bool ccg_plan_match(const char *pattern, const char *name);
/* The first entry (file order) whose pattern matches `name`, or whose
 * pattern matches the module of a parameter name (all but its last
 * segment: "layers.0.fc1" for "layers.0.fc1.weight"); NULL if none. */
CCG_API const ccg_plan_entry *ccg_plan_lookup(const ccg_plan *plan,
                                              const char *name);

#ifdef __cplusplus
}
#endif
#endif
