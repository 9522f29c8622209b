/* Private: the state of one run of the shard pass, shared by shard.c (the
 * driver), shard_values.c (values, caches, redistribution), shard_weights.c
 * (weights' per-rank data), shard_rules*.c (propagation
 * through ordinary ops) and shard_styles.c (the plan's styles). */
#ifndef CCG_PASSES_SHARD_INTERNAL_H
#define CCG_PASSES_SHARD_INTERNAL_H

#include <jansson.h>

#include "ccgraph/ccgraph.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/jtext.h"
#include "core/strmap.h"
#include "passes/module_path.h"

/* A value of the source graph as the sharded graph holds it: its value
 * there and its placement on the plan's axis. A Shard in `blocks` > 1
 * blocks holds chunk r of each of the blocks (a fused projection's output
 * before its Split). */
typedef struct sh_val {
  ccg_value_id v; /* in the sharded graph; CCG_NONE until emitted */
  ccg_placement p;
  int blocks;
  int ulysses; /* index+1 of the ulysses module that produced it, or 0 */
  /* Grouped-query attention's key/value heads, fewer than W: with rep > 1
   * the Shard holds chunk r / rep of W / rep chunks (each chunk on the rep
   * ranks that share it); with merged > 1 the Shard lies on dims d and d+1
   * together (an Expand repeating each such chunk: rank r holds chunk r of
   * the pair, dim d+1 divided by `merged`). 1 otherwise. */
  int rep;
  int merged;
  /* the local run: made from positions within each dp rank's batch chunk
   * (data_parallel_routing.c); written Replicate, used only there */
  bool chunk_local;
} sh_val;

/* A weight of the sharded graph and the source weight (view) it holds a part
 * of: its data is the view's, transposed first when `transpose`, cut on
 * that tensor's `dim` (-1: whole); group rank r holds, in order, the
 * `n_ranges` ranges [ranges[2(r n_ranges + i)], ranges[2(r n_ranges + i)
 * + 1]) of that dim (docs/shard.md, "Provenance"). */
typedef struct sh_origin {
  ccg_value_id v;  /* in the sharded graph (before pruning) */
  ccg_value_id gv; /* the source weight or view */
  bool transpose;
  int dim;
  int n_ranges;
  int64_t *ranges; /* W * n_ranges pairs; NULL when whole */
  /* W source weights, one per group rank, when the ranks hold different
   * parameters in one weight (an expert slot); NULL: gv on every rank */
  ccg_value_id *params;
} sh_origin;

typedef struct sh_cache {
  ccg_value_id key; /* source value (weights) or sharded value (moves) */
  ccg_placement p;
  int blocks;
  int flags;
  ccg_value_id v;
  uint32_t next; /* the next entry of its hash chain; UINT32_MAX ends it */
} sh_cache;

#define SH_MAX_ULYSSES 64

enum {
  SH_MARKED = 1,
  SH_TRANSPOSED = 2,
  SH_VOCAB = 4,
  SH_MOVE = 8,
  SH_GROUPED = 16, /* rep << 8 beside it */
  SH_SUMMED = 32   /* a replicated activation whose gradient is summed */
};

typedef struct shard {
  ccg_graph *g; /* source, global shapes */
  ccg_graph *s; /* result */
  const ccg_plan *plan;
  ccg_mesh mesh;
  int axis;  /* mesh axis index */
  int nd;    /* mesh ndims */
  int64_t W; /* group size on the axis */
  const char *axis_name;
  bool sp;
  int64_t seq_dim;
  sh_val *vals; /* per source value */
  size_t n_vals;
  /* per source value, sh_weight_root's answer once asked (shard_weights.c):
   * 0 not yet, 1 none, else 2 + (root << 1 | transposed); NULL: none kept */
  uint32_t *roots;
  bool *used; /* per plan entry */
  bool *is_output;
  sh_cache *cache;
  size_t n_cache, cap_cache;
  uint32_t *cache_heads; /* cap_cache * 2 hash chains */
  /* the plan entry of each module path looked up so far (entry + 1, 0 for
   * none); the nodes of a module share it. Keys live in entry_keys. */
  ccg_strmap entry_of;
  ccg_arena entry_keys;
  char ulysses_mods[SH_MAX_ULYSSES][256];
  int ulysses_seq[SH_MAX_ULYSSES];
  int n_ulysses;
  int cur_ulysses; /* index+1 of the node's ulysses module, or 0 */
  ccg_shard_report rep;
  struct sh_origin *origins; /* where each per-rank weight comes from */
  size_t n_origins, cap_origins;
  /* the node being sharded, for messages */
  ccg_node_id node;
  /* data parallelism (data_parallel.c): the dp axis (-1: none), its size
   * and options. `local` is the first of the two runs: the axis is the dp
   * axis, batch inputs enter Shard(batch dim), weights are plain values and
   * no node communicates (each rank computes on its batch chunk). `no_plan`:
   * the mesh has no plan axis; the second run then places nothing. */
  int dp;
  int64_t dp_W;
  const char *dp_name;
  const ccg_shard_options *opts;
  bool local;
  bool no_plan;
  /* rep and merged of the grouped inputs of the node being sharded (see
   * sh_val): its Shard outputs get them */
  int cur_rep, cur_merged;
  /* expert_parallel (shard_experts.c): each source value's expert (-1
   * none), and the last module's expert count */
  int *ep_tag;
  char ep_module[512];
  int64_t ep_experts;
} shard;

static inline ccg_placement sh_R(void) {
  return (ccg_placement){CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
}
static inline ccg_placement sh_S(int d) {
  return (ccg_placement){CCG_PLACEMENT_SHARD, d, CCG_REDUCE_SUM};
}
static inline ccg_placement sh_P(void) {
  return (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM};
}
bool sh_same(ccg_placement a, ccg_placement b);

/* Records a failure on the source graph, prefixed with the node. */
ccg_status sh_fail(shard *sh, ccg_status st, const char *fmt, ...)
    CCG_PRINTF(3, 4);
/* A failure recorded on the sharded graph (its last error), moved to the
 * source graph; SH_S returns it from a failed call on the sharded graph. */
ccg_status sh_from_s(shard *sh, ccg_status st);
#define SH_S(sh, call)                                                         \
  do {                                                                         \
    ccg_status st__ = (call);                                                  \
    if (st__ != CCG_STATUS_OK)                                                 \
      return sh_from_s((sh), st__);                                            \
  } while (0)
/* shard.c: the scopes of node n's torch-style name ("/h.0/attn/MatMul" ->
 * "h.0", "attn") pushed on the sharded graph; returns how many to pop. */
int sh_push_scopes(shard *sh, ccg_node_id n);
void sh_pop_scopes(shard *sh, int n);
/* Whether a value or node of the sharded graph has the name. */
bool sh_name_taken(shard *sh, const char *name);

/* The source value `gv` in the sharded graph placed `want` on the axis (in
 * `blocks` blocks): weights are split into per-rank data, computed values
 * redistributed (collectives from the mapping library, cached). `mark` says
 * the node has sharded inputs: a replicated float weight is then marked as
 * a sequence-parallel parameter, and a replicated float activation goes
 * through copy_to_tensor_model_parallel_region (both identity forward,
 * AllReduce (sum) of the gradient: each rank's covers its shards only). */
ccg_status sh_get(shard *sh, ccg_value_id gv, ccg_placement want, int blocks,
                  bool mark, ccg_value_id *out);
/* A weight's data split on `dim` for every rank; transposed first when
 * `transpose` (a Gemm's transB weight). */
ccg_status sh_weight(shard *sh, ccg_value_id gv, ccg_placement p, int blocks,
                     bool transpose, bool mark, ccg_value_id *out);
/* Copies the `r`-th of W chunks of each of `blocks` blocks of dim d of t
 * into dst. */
void sh_slice_chunk(const ccg_tensor *t, int d, int blocks, int64_t W,
                    int64_t r, unsigned char *dst);
/* A weight's chunk for grouped-query attention: dim p.dim split into W/rep
 * chunks, rank r holding chunk r / rep, as a view whose gradient is summed
 * over the rep ranks sharing it (docs/shard.md, "Grouped-query
 * attention"). */
ccg_status sh_weight_grouped(shard *sh, ccg_value_id gv, ccg_placement p,
                             int rep, bool transpose, ccg_value_id *out);
/* Adds a weight whose group rank r holds chunks[r] (local dims), placed p on
 * the axis; every global rank gets its group rank's data. */
ccg_status sh_add_rank_weight(shard *sh, const char *name, ccg_dtype dt,
                              int rank, const int64_t *dims,
                              unsigned char *const *chunks, ccg_placement p,
                              ccg_value_id *out);
/* Records that sharded weight v is the part (dim, blocks; dim -1: whole) of
 * source weight gv (transposed first when `transpose`) that
 * sh_add_rank_weight's chunks hold: group rank r chunk r of each block. */
ccg_status sh_origin_add(shard *sh, ccg_value_id v, ccg_value_id gv,
                         bool transpose, int dim, int blocks);
/* The same for any layout: group rank r holds the n_ranges ranges
 * ranges[r * n_ranges .. (r + 1) * n_ranges) ([start, end) pairs, copied)
 * of dim `dim`, as when ranks share key/value heads. */
ccg_status sh_origin_add_ranges(shard *sh, ccg_value_id v, ccg_value_id gv,
                                bool transpose, int dim, int n_ranges,
                                const int64_t (*ranges)[2]);
/* The last origin added holds on group rank r the source weight
 * params[r] (W of them, copied) in place of its gv: an expert slot. */
ccg_status sh_origin_set_params(shard *sh, const ccg_value_id *params);
/* shard_values.c: the full placements (every mesh axis) of sharded value
 * v with `on_axis` on the plan's axis, the others v's own or Replicate. */
void sh_full_placements(shard *sh, ccg_value_id v, ccg_placement on_axis,
                        ccg_placement *p);
/* The cache of weights (key: source value) and moves (key: sharded value)
 * already made: the entry with that identity, or NULL; a new entry. */
sh_cache *sh_cache_find(shard *sh, ccg_value_id key, ccg_placement p,
                        int blocks, int flags);
ccg_status sh_cache_put(shard *sh, ccg_value_id key, ccg_placement p,
                        int blocks, int flags, ccg_value_id v);
/* Redistributes the sharded value v from `from` to `to` on the axis. */
ccg_status sh_move(shard *sh, ccg_value_id v, ccg_placement from,
                   ccg_placement to, ccg_value_id *out);
/* sh_move whose backward takes the gradient as Partial when `partial_grad`
 * (the value feeds a node whose other inputs are sharded). */
ccg_status sh_move_grad(shard *sh, ccg_value_id v, ccg_placement from,
                        ccg_placement to, bool partial_grad, ccg_value_id *out);
/* Placement of a source value as it stands (weights and inputs: R). */
ccg_placement sh_cur(const shard *sh, ccg_value_id gv, int *blocks);
/* A weight: an initializer, or a view of one through Identity and 2-D
 * Transpose nodes (sh_weight_root gives the initializer and whether the
 * view is transposed; CCG_NONE for other values). A view's copies are made
 * per use, named after the view, never the node that makes it. */
bool sh_is_weight(const shard *sh, ccg_value_id gv);
ccg_value_id sh_weight_root(const shard *sh, ccg_value_id gv, bool *trans);
/* One step of a weight view towards its initializer (*trans flips on a
 * Transpose); CCG_NONE where gv is no view. */
ccg_value_id sh_view_step(const shard *sh, ccg_value_id gv, bool *trans);
/* Whether node n makes a weight view (its copy is left out). */
bool sh_is_weight_view(const shard *sh, ccg_node_id n);
/* A weight's data as its view has it (transposed into *mem, which the
 * caller frees, where it is); NULL on OOM. */
const ccg_tensor *sh_weight_data(const shard *sh, ccg_value_id gv,
                                 ccg_tensor *buf, void **mem);

/* Emits a copy of source node n reading `inputs` (sharded values), with
 * `attrs` replacing its attributes when non-NULL; records its outputs placed
 * `outp` (one for all outputs) in `blocks`. */
ccg_status sh_emit(shard *sh, ccg_node_id n, const ccg_value_id *inputs,
                   const ccg_attr *attrs, size_t n_attrs, ccg_placement outp,
                   int blocks);
/* Records source value gv as the sharded value v, placed p; sets v's
 * placements in the sharded graph. */
ccg_status sh_set(shard *sh, ccg_value_id gv, ccg_value_id v, ccg_placement p,
                  int blocks);

/* Global shape of a source value. */
const ccg_shape *sh_gshape(const shard *sh, ccg_value_id gv);

/* Placement tests and a source value's rank, dims and axes, as the rules
 * (shard_rules*.c) read them. */
static inline bool sh_is_shard(ccg_placement p) {
  return p.kind == CCG_PLACEMENT_SHARD;
}
static inline bool sh_is_partial(ccg_placement p) {
  return p.kind == CCG_PLACEMENT_PARTIAL;
}
static inline int sh_rank_of(const shard *sh, ccg_value_id gv) {
  return sh_gshape(sh, gv)->rank;
}
static inline int sh_norm_axis(int64_t a, int rank) {
  return (int)(a < 0 ? a + rank : a);
}
/* Size of dim d of a source value (-1 when symbolic). */
static inline int64_t sh_gdim(const shard *sh, ccg_value_id gv, int d) {
  ccg_dim x = sh_gshape(sh, gv)->dims[d];
  return ccg_dim_is_sym(x) ? -1 : x.size;
}
static inline bool sh_any_sharded(const ccg_placement *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (sh_is_shard(p[i]))
      return true;
  return false;
}

/* shard_rules.c: propagation through an op no plan entry claims. */
ccg_status sh_rule(shard *sh, ccg_node_id n);
/* Every input to Replicate, the output Replicate. */
ccg_status sh_replicate(shard *sh, ccg_node_id n);
/* Fetches every input of n as `want` (in `blocks`; NULL: 1) says and copies
 * n with `attrs`, its outputs placed `outp` in `out_blocks`. */
ccg_status sh_fetch_emit(shard *sh, ccg_node_id n, const ccg_placement *want,
                         const int *blocks, const ccg_attr *attrs,
                         size_t n_attrs, ccg_placement outp, int out_blocks);

/* shard_rules_reshape.c: the rules of the ops that rewrite a target shape
 * (sh_rule_data_expand: the local run's Expand). */
ccg_status sh_rule_shape(shard *sh, ccg_node_id n);
ccg_status sh_rule_reshape(shard *sh, ccg_node_id n);
ccg_status sh_rule_data_expand(shard *sh, ccg_node_id n);
bool sh_slice_keeps_dim(const shard *sh, ccg_node_id n, int d, int rank);
/* Slice n's known start, end and step on dim d of its input (rank
 * `rank`): 1; 0 when d is not among its axes; -1 when not known. */
int sh_slice_range(const shard *sh, ccg_node_id n, int d, int rank,
                   int64_t *start, int64_t *end, int64_t *step);
ccg_status sh_rule_slice(shard *sh, ccg_node_id n);
ccg_status sh_rule_expand(shard *sh, ccg_node_id n);
/* Known numeric contents of source value v (at most n), or -1. */
int sh_known_ints(const shard *sh, ccg_value_id v, int64_t *out, int n);

/* shard_rules_ops.c: the rules of the ops that compute across a dim
 * (sh_rule_gemm: the local run's Gemm). */
ccg_status sh_rule_softmax(shard *sh, ccg_node_id n);
ccg_status sh_rule_layer_norm(shard *sh, ccg_node_id n);
ccg_status sh_rule_attention(shard *sh, ccg_node_id n);
ccg_status sh_rule_matmul(shard *sh, ccg_node_id n);
ccg_status sh_rule_reduce(shard *sh, ccg_node_id n);
ccg_status sh_rule_gather(shard *sh, ccg_node_id n);
ccg_status sh_rule_select_axis(shard *sh, ccg_node_id n);
ccg_status sh_rule_elements(shard *sh, ccg_node_id n);
ccg_status sh_rule_gather_nd(shard *sh, ccg_node_id n);
ccg_status sh_rule_loss(shard *sh, ccg_node_id n);
ccg_status sh_rule_window(shard *sh, ccg_node_id n);
ccg_status sh_rule_data_keep(shard *sh, ccg_node_id n);
ccg_status sh_rule_onehot(shard *sh, ccg_node_id n);
ccg_status sh_rule_einsum(shard *sh, ccg_node_id n);
ccg_status sh_rule_gemm(shard *sh, ccg_node_id n);

/* shard_styles.c: the plan entry `e` applied to node n; *done false when the
 * style does not apply to this node (it then propagates). */
ccg_status sh_style(shard *sh, ccg_node_id n, const ccg_plan_entry *e,
                    size_t entry, const char *module, bool *done);

/* data_parallel.c. Whether graph input gv carries the batch (local run). */
ccg_status sh_dp_is_batch_input(shard *sh, ccg_value_id gv, bool *batch);
/* The parameter *w (a float initializer just added to the sharded graph) as
 * the dp axis needs it: wrapped in ddp.all_reduce_grad (ZeRO 0), or stored
 * as its dp shard under the same name and all-gathered by
 * fsdp.all_gather_param (ZeRO 1, 3). *w becomes the value to use. */
ccg_status sh_dp_param(shard *sh, ccg_value_id *w);
/* The local run's move of sharded value v: a value the same on every rank
 * to a shard is each rank's chunk (ddp.batch_chunk: no communication; the
 * gradient is the chunk's); anything else would mix the ranks' batches (an
 * error naming v). */
ccg_status sh_dp_local_move(shard *sh, ccg_value_id v, ccg_placement from,
                            ccg_placement to, ccg_value_id *out);
/* Whether source node n is the local run's ddp.batch_chunk, which the
 * second run applies again (sh_dp_chunk_copy) so the backward has its
 * rule. */
bool sh_dp_local_slice(const shard *sh, ccg_node_id n);
ccg_status sh_dp_chunk_copy(shard *sh, ccg_node_id n);
/* data_parallel_routing.c. The local run's node n when it starts or uses
 * positions within each rank's batch chunk (NonZero of a chunk): copied as
 * it is, *done true; an error where it could combine them. *done false for
 * any other node. */
ccg_status sh_dp_routing(shard *sh, ccg_node_id n, bool *done);
/* An error when the local run's output gv is such positions. */
ccg_status sh_dp_routing_output(shard *sh, ccg_value_id gv);
/* Both runs (sh set up by ccg_shard_apply with sh->dp >= 0). */
ccg_status sh_dp_apply(shard *sh, ccg_graph **out);
/* One run of the pass over sh->g as sh is set up. "new": *out. */
ccg_status sh_pass(shard *sh, ccg_graph **out);
/* shard_loss.c: a SoftmaxCrossEntropyLoss whose logits are sharded on the
 * vocabulary, computed on the shards (Megatron's vocab-parallel cross
 * entropy); *done false when it does not apply (weights, log_prob read,
 * logits not [N, V] Shard(1)). */
ccg_status sh_vocab_parallel_loss(shard *sh, ccg_node_id n, bool *done);

/* shard_experts.c: node n of module `mod` under an expert_parallel entry
 * (docs/shard.md, "Mixture of experts"); *done false where `mod` has no
 * experts. */
ccg_status sh_expert_parallel(shard *sh, ccg_node_id n, const char *mod,
                              bool *done);
/* shard_origin.c: the sharded weights' origins as JSON text, one entry
 * per origin (none when there are none), taken before pruning; then, on
 * the pruned graph, its "ccgraph.shard.provenance" metadata from the
 * entries whose weight is still there. sh_otext_free releases the
 * entries (also after a failure). */
typedef struct sh_otext {
  ccg__jtext t;      /* the document up to its last entry, commas between */
  size_t head;       /* where the first entry starts */
  size_t *end;       /* entry i is t.p[i ? end[i - 1] + 1 : head, end[i]) */
  const char **name; /* the weight entry i names (in sh->s's arena) */
  size_t n;
} sh_otext;
ccg_status sh_origin_text(shard *sh, sh_otext *out);
/* Drops the entries of pruned weights from o->t in place and ends it. */
ccg_status sh_origin_meta(shard *sh, sh_otext *o);
void sh_otext_free(sh_otext *o);

/* shard_prune.c: sh->s without the nodes and initializers no output
 * depends on (graph inputs and collectives stay). */
ccg_status sh_prune(shard *sh);

#endif
