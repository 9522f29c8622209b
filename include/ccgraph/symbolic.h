/* ccgraph symbolic layer: the mapping library. A mapping is a named entry
 * ("megatron.copy_to_tensor_model_parallel_region") with parameters, a
 * forward rule that inserts its nodes into a graph and a backward rule that
 * inserts the nodes of its gradient. docs/mappings.md lists every entry.
 *
 * Groups are mesh axes of the graph's mesh, named as a comma-separated list
 * ("tp", "dp,tp"); W is the group's size. W = 1 inserts no communication
 * (an Identity, or the reshapes the mapping needs) but is tagged the same.
 * Every node a mapping inserts carries a ccg_tag: the mapping's name, the
 * instance (one per application; its backward nodes get the same instance
 * and backward = true) and the canonical parameters (a JSON object with every
 * key, defaults filled in), so that a pass can run the backward rule from a
 * node's tag alone. A failed call changes nothing in the graph; its message
 * (ccg_last_error(g)) names the mapping and the key, dim or value at fault. */
#ifndef CCGRAPH_SYMBOLIC_H
#define CCGRAPH_SYMBOLIC_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the registry ------------------------------------------------------ */

typedef struct ccg_mapping ccg_mapping;

/* Number of registry entries, and the i-th one (NULL past the end). The
 * order is stable: system by system, each in its table's order. Entries are
 * static: borrowed for the life of the process. Thread-safe. */
CCG_API size_t ccg_mapping_count(void);
CCG_API const ccg_mapping *ccg_mapping_at(size_t i);

/* The entry called `name`. CCG_STATUS_UNSUPPORTED (thread context,
 * ccg_last_error(NULL)) naming `name` when there is none. */
CCG_API ccg_status ccg_mapping_find(const char *name, const ccg_mapping **out);

/* Static strings: the name, and one line each saying what the forward and
 * the backward rule insert. */
CCG_API const char *ccg_mapping_name(const ccg_mapping *m);
CCG_API const char *ccg_mapping_forward_doc(const ccg_mapping *m);
CCG_API const char *ccg_mapping_backward_doc(const ccg_mapping *m);
/* Inputs the forward takes (min..max, -1 = unbounded) and the most outputs
 * it gives. */
CCG_API void ccg_mapping_arity(const ccg_mapping *m, int *min_in, int *max_in,
                               int *max_out);
/* Parameters: the i-th key (NULL past the end), its default as JSON text
 * (NULL when the key is required) and a one-line description. Static. */
CCG_API size_t ccg_mapping_num_params(const ccg_mapping *m);
CCG_API const char *ccg_mapping_param_info(const ccg_mapping *m, size_t i,
                                           const char **default_json,
                                           const char **doc);

/* The canonical form of `params` (a JSON object text; NULL or "" = all
 * defaults) for mapping `name`: every key in declaration order, defaults
 * filled in, compact. "new": free with free(). Errors (thread context) name
 * the mapping and the offending key: CCG_STATUS_PARSE for text that is not a
 * JSON object, CCG_STATUS_INVALID_ARG for an unknown or missing key or a
 * value of the wrong kind. */
CCG_API ccg_status ccg_mapping_canonical_params(const char *name,
                                                const char *params, char **out);

/* ---- applying mappings ------------------------------------------------- */

/* Inserts the forward nodes of mapping `name` with `params` (JSON object
 * text; NULL = defaults) after `inputs`. `outputs` has room for *n_outputs
 * values (at least the mapping's max_out); on success *n_outputs is the
 * number written. */
CCG_API ccg_status ccg_mapping_apply(ccg_graph *g, const char *name,
                                     const char *params,
                                     const ccg_value_id *inputs,
                                     size_t n_inputs, ccg_value_id *outputs,
                                     size_t *n_outputs);

/* What a backward rule needs: the forward's parameters and instance (from
 * its tag), its inputs and outputs, and the gradients of its outputs
 * (CCG_NONE where an output has none). */
typedef struct ccg_mapping_grad_args {
  size_t size;                      /* sizeof(ccg_mapping_grad_args) */
  const char *params;               /* the forward's params; NULL = defaults */
  uint32_t instance;                /* the forward's instance; 0 = a new one */
  const ccg_value_id *inputs;       /* forward inputs */
  size_t n_inputs;                  /* */
  const ccg_value_id *outputs;      /* forward outputs */
  size_t n_outputs;                 /* */
  const ccg_value_id *grad_outputs; /* n_outputs entries */
} ccg_mapping_grad_args;
#define CCG_MAPPING_GRAD_ARGS_INIT                                             \
  { sizeof(ccg_mapping_grad_args), NULL, 0, NULL, 0, NULL, 0, NULL }

/* Inserts the backward nodes of mapping `name`: grad_inputs (n_inputs
 * entries) receives the gradient of each forward input, CCG_NONE where an
 * input gets none. The nodes are tagged with backward = true. */
CCG_API ccg_status ccg_mapping_apply_backward(ccg_graph *g, const char *name,
                                              const ccg_mapping_grad_args *args,
                                              ccg_value_id *grad_inputs);

/* The forward inputs and outputs of application `instance` in g, found
 * from the tags of its forward nodes (what a backward pass needs to call
 * ccg_mapping_apply_backward for a tagged node): inputs are the values
 * those nodes read and none of them produced, in order of first use;
 * outputs are the values they produced and none of them reads, in order of
 * creation. `inputs` and `outputs` have room for *n_inputs and *n_outputs
 * values; on success those hold the counts. CCG_STATUS_INVALID_ARG (on g)
 * naming the instance when no forward node carries it or the room is too
 * small. The name of its mapping is in the tags (ccg_node_tag). */
CCG_API ccg_status ccg_mapping_instance_io(ccg_graph *g, uint32_t instance,
                                           ccg_value_id *inputs,
                                           size_t *n_inputs,
                                           ccg_value_id *outputs,
                                           size_t *n_outputs);

/* ---- Megatron-LM (core.tensor_parallel.mappings) ----------------------- */
/* Each is ccg_mapping_apply of "megatron.<function>" with the parameters
 * given; `group` NULL means "tp". Split-size lists hold one entry per rank
 * of the group (NULL, 0 = even). */

CCG_API ccg_status ccg_megatron_copy_to_tensor_model_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_reduce_from_tensor_model_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_scatter_to_tensor_model_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_gather_from_tensor_model_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_scatter_to_sequence_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_gather_from_sequence_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group,
    bool tensor_parallel_output_grad, const int64_t *output_split_sizes,
    size_t n_sizes, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_reduce_scatter_to_sequence_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group,
    const int64_t *input_split_sizes, size_t n_sizes, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_all_gather_last_dim_from_tensor_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status
ccg_megatron_reduce_scatter_last_dim_to_tensor_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_all_to_all(ccg_graph *g, ccg_value_id x,
                                           const char *group,
                                           const int64_t *output_split_sizes,
                                           size_t n_out,
                                           const int64_t *input_split_sizes,
                                           size_t n_in, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_all_to_all_sp2hp(ccg_graph *g, ccg_value_id x,
                                                 const char *group,
                                                 ccg_value_id *out);
CCG_API ccg_status ccg_megatron_all_to_all_hp2sp(ccg_graph *g, ccg_value_id x,
                                                 const char *group,
                                                 ccg_value_id *out);
/* The private helpers (_reduce, _split_along_last_dim, ...). */
CCG_API ccg_status ccg_megatron_reduce(ccg_graph *g, ccg_value_id x,
                                       const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_split_along_last_dim(ccg_graph *g,
                                                     ccg_value_id x,
                                                     const char *group,
                                                     ccg_value_id *out);
CCG_API ccg_status ccg_megatron_split_along_first_dim(ccg_graph *g,
                                                      ccg_value_id x,
                                                      const char *group,
                                                      ccg_value_id *out);
CCG_API ccg_status ccg_megatron_gather_along_last_dim(ccg_graph *g,
                                                      ccg_value_id x,
                                                      const char *group,
                                                      ccg_value_id *out);
CCG_API ccg_status ccg_megatron_gather_along_first_dim(
    ccg_graph *g, ccg_value_id x, const char *group,
    const int64_t *output_split_sizes, size_t n_sizes, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_reduce_scatter_along_last_dim(
    ccg_graph *g, ccg_value_id x, const char *group, ccg_value_id *out);
CCG_API ccg_status ccg_megatron_reduce_scatter_along_first_dim(
    ccg_graph *g, ccg_value_id x, const char *group,
    const int64_t *input_split_sizes, size_t n_sizes, ccg_value_id *out);

/* Marks a parameter as replicated across a sequence-parallel group
 * (Megatron's `param.sequence_parallel = True`: LayerNorm weights, biases
 * after a reduce-scatter). Inserts an Identity tagged
 * "megatron.sequence_parallel_param" whose backward all-reduces (sum) the
 * gradient over `group` (NULL = "tp"): each rank's gradient covers only its
 * sequence shard. Use *out in place of `param`. */
CCG_API ccg_status ccg_mark_sequence_parallel_param(ccg_graph *g,
                                                    ccg_value_id param,
                                                    const char *group,
                                                    ccg_value_id *out);

/* Data parallelism (docs/parallelism.md). DistributedDataParallel's
 * gradient hook: an Identity tagged "ddp.all_reduce_grad" whose backward
 * all-reduces the gradient over `group` (NULL = "dp"), averaged unless
 * `sum`. Use *out in place of `param`. */
CCG_API ccg_status ccg_ddp_all_reduce_grad(ccg_graph *g, ccg_value_id param,
                                           const char *group, bool sum,
                                           ccg_value_id *out);
/* A value whole on every rank (built with the global batch) of which each
 * data-parallel rank needs its chunk along `dim`: ShardSlice over `group`
 * (NULL = "dp"), "ddp.batch_chunk". Its backward puts the gradient in the
 * rank's chunk and zeros elsewhere, without communication: each rank's
 * loss covers its chunk, and the parameters' reduction adds the parts. */
CCG_API ccg_status ccg_ddp_batch_chunk(ccg_graph *g, ccg_value_id x,
                                       const char *group, int64_t dim,
                                       ccg_value_id *out);
/* FSDP's unshard (ZeRO): `shard` is this rank's chunk of a parameter along
 * `dim`; *out is the whole parameter (AllGather over `group`, NULL = "dp").
 * The backward reduce-scatters the gradient along `dim`, averaged unless
 * `sum`, so each rank gets the gradient of its shard. With
 * `reshard_after_forward` (FSDP's option; ZeRO 3) ccg_backward gathers the
 * parameter again for the gradient rules that read it, so the forward's
 * copy is not kept alive through the backward. */
CCG_API ccg_status ccg_fsdp_all_gather_param(ccg_graph *g, ccg_value_id shard,
                                             const char *group, int64_t dim,
                                             bool sum,
                                             bool reshard_after_forward,
                                             ccg_value_id *out);

/* Megatron's tensor-parallel linear layers, built from the mappings above
 * and a MatMul with this rank's weight shard (weights are MatMul's right
 * operand, [in, out]). Mapping nodes are tagged; the MatMul and bias Add are
 * plain ops. A failure leaves the graph unchanged. */
typedef struct ccg_megatron_linear_options {
  size_t size;            /* sizeof(ccg_megatron_linear_options) */
  const char *group;      /* tensor-parallel mesh axes; NULL = "tp" */
  bool sequence_parallel; /* activations sharded on the first dim */
  bool gather_output;     /* column: all-gather the output's last dim */
  bool input_is_parallel; /* row: x is already split on its last dim */
} ccg_megatron_linear_options;
#define CCG_MEGATRON_LINEAR_OPTIONS_INIT                                       \
  { sizeof(ccg_megatron_linear_options), NULL, false, false, true }

/* ColumnParallelLinear: x [.., in] (under sequence_parallel [S/W, .., in]),
 * weight [in, out/W], bias [out/W] or CCG_NONE. The input goes through
 * copy_to_tensor_model_parallel_region, or under sequence_parallel
 * gather_from_sequence_parallel_region; the output [.., out/W] (with
 * gather_output: gather_from_tensor_model_parallel_region to [.., out]).
 * gather_output with sequence_parallel is INVALID_ARG, as in Megatron. */
CCG_API ccg_status ccg_megatron_column_parallel_linear(
    ccg_graph *g, ccg_value_id x, ccg_value_id weight, ccg_value_id bias,
    const ccg_megatron_linear_options *opts, ccg_value_id *out);

/* RowParallelLinear: x [.., in/W] (input_is_parallel) or [.., in]
 * (scatter_to_tensor_model_parallel_region first), weight [in/W, out],
 * bias [out] or CCG_NONE. The partial product is all-reduced
 * (reduce_from_tensor_model_parallel_region) or under sequence_parallel
 * reduce-scattered on the first dim (reduce_scatter_to_sequence_parallel_
 * region); the bias is added after the reduction, and under
 * sequence_parallel it is marked with ccg_mark_sequence_parallel_param so
 * that its gradient is all-reduced. sequence_parallel without
 * input_is_parallel is INVALID_ARG, as in Megatron. */
CCG_API ccg_status ccg_megatron_row_parallel_linear(
    ccg_graph *g, ccg_value_id x, ccg_value_id weight, ccg_value_id bias,
    const ccg_megatron_linear_options *opts, ccg_value_id *out);

/* A Megatron GPT layer: x + Attention(LN1(x)), then h + MLP(LN2(h)), with
 * activations [S, B, H] (S and B may be symbolic) and parameters as this
 * rank's shards: ln*_scale/bias [H]; qkv_weight [H, 3*H/W] holding this
 * rank's query, key and value columns side by side ([q_r | k_r | v_r], each
 * heads/W heads of `head` columns), qkv_bias [3*H/W]; proj_weight [H/W, H],
 * proj_bias [H]; fc1_weight [H, F/W], fc1_bias [F/W]; fc2_weight [F/W, H],
 * fc2_bias [H]. attn_mask (or CCG_NONE) is added to the [B, heads/W, S, S]
 * scores before Softmax (a causal mask: 0 on and below the diagonal, a
 * large negative number above). The linear layers are
 * ccg_megatron_column/row_parallel_linear over `group`; under
 * sequence_parallel x and the output are [S/W, B, H] and the LayerNorm
 * parameters are marked (ccg_mark_sequence_parallel_param). A failure
 * leaves the graph unchanged and names the block and the cause. */
typedef struct ccg_megatron_gpt_block_params {
  ccg_value_id ln1_scale, ln1_bias, qkv_weight, qkv_bias, proj_weight,
      proj_bias, ln2_scale, ln2_bias, fc1_weight, fc1_bias, fc2_weight,
      fc2_bias, attn_mask;
} ccg_megatron_gpt_block_params;

typedef struct ccg_megatron_gpt_block_options {
  size_t size;            /* sizeof(ccg_megatron_gpt_block_options) */
  const char *group;      /* tensor-parallel mesh axes; NULL = "tp" */
  bool sequence_parallel; /* activations sharded on dim 0 (S) */
  int64_t heads;          /* attention heads in all (divisible by W) */
  float epsilon;          /* LayerNorm epsilon (default 1e-5) */
  bool gelu_tanh;         /* Gelu's tanh form (default: erf form) */
} ccg_megatron_gpt_block_options;
#define CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT                                    \
  { sizeof(ccg_megatron_gpt_block_options), NULL, false, 0, 1e-5f, false }

CCG_API ccg_status ccg_megatron_gpt_block(
    ccg_graph *g, ccg_value_id x, const ccg_megatron_gpt_block_params *params,
    const ccg_megatron_gpt_block_options *opts, ccg_value_id *out);

/* ---- Open-Sora (acceleration.communications) --------------------------- */
/* `group` NULL means "sp". */

/* Gradient scaling of split_forward_gather_backward and
 * gather_forward_split_backward: "up" multiplies by W, "down" divides by W,
 * a factor multiplies by that number (1 = unscaled). */
typedef enum ccg_grad_scale_kind {
  CCG_GRAD_SCALE_FACTOR,
  CCG_GRAD_SCALE_UP,
  CCG_GRAD_SCALE_DOWN,
  CCG_GRAD_SCALE_KIND_COUNT
} ccg_grad_scale_kind;

typedef struct ccg_grad_scale {
  ccg_grad_scale_kind kind;
  double factor; /* CCG_GRAD_SCALE_FACTOR */
} ccg_grad_scale;
#define CCG_GRAD_SCALE_NONE ((ccg_grad_scale){CCG_GRAD_SCALE_FACTOR, 1.0})

CCG_API ccg_status ccg_opensora_all_to_all(ccg_graph *g, ccg_value_id x,
                                           const char *group,
                                           int64_t scatter_dim,
                                           int64_t gather_dim,
                                           ccg_value_id *out);
CCG_API ccg_status ccg_opensora_split_forward_gather_backward(
    ccg_graph *g, ccg_value_id x, const char *group, int64_t dim,
    ccg_grad_scale grad_scale, ccg_value_id *out);
CCG_API ccg_status ccg_opensora_gather_forward_split_backward(
    ccg_graph *g, ccg_value_id x, const char *group, int64_t dim,
    ccg_grad_scale grad_scale, ccg_value_id *out);

#ifdef __cplusplus
}
#endif
#endif
