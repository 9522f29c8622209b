/* Private: the state of one run of the shard pass, shared by shard.c (the
 * driver, values, weights, redistribution), shard_rules.c (propagation
 * through ordinary ops) and shard_styles.c (the plan's styles). */
#ifndef CCG_PASSES_SHARD_INTERNAL_H
#define CCG_PASSES_SHARD_INTERNAL_H

#include "ccgraph/ccgraph.h"
#include "core/arena.h"
#include "core/error.h"
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
} sh_val;

typedef struct sh_cache {
  ccg_value_id key; /* source value (weights) or sharded value (moves) */
  ccg_placement p;
  int blocks;
  int flags;
  ccg_value_id v;
  uint32_t next; /* the next entry of its hash chain; UINT32_MAX ends it */
} sh_cache;

#define SH_MAX_ULYSSES 64

enum { SH_MARKED = 1, SH_TRANSPOSED = 2, SH_VOCAB = 4, SH_MOVE = 8 };

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
  /* the node being sharded, for messages */
  ccg_node_id node;
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

/* The source value `gv` in the sharded graph placed `want` on the axis (in
 * `blocks` blocks): weights are split into per-rank data, computed values
 * redistributed (collectives from the mapping library, cached). `mark` asks
 * for a replicated float weight used beside sharded activations to be
 * marked as a sequence-parallel parameter (its gradient is all-reduced). */
ccg_status sh_get(shard *sh, ccg_value_id gv, ccg_placement want, int blocks,
                  bool mark, ccg_value_id *out);
/* A weight's data split on `dim` for every rank; transposed first when
 * `transpose` (a Gemm's transB weight). */
ccg_status sh_weight(shard *sh, ccg_value_id gv, ccg_placement p, int blocks,
                     bool transpose, bool mark, ccg_value_id *out);
/* Adds a weight whose group rank r holds chunks[r] (local dims), placed p on
 * the axis; every global rank gets its group rank's data. */
ccg_status sh_add_rank_weight(shard *sh, const char *name, ccg_dtype dt,
                              int rank, const int64_t *dims,
                              unsigned char *const *chunks, ccg_placement p,
                              ccg_value_id *out);
/* Redistributes the sharded value v from `from` to `to` on the axis. */
ccg_status sh_move(shard *sh, ccg_value_id v, ccg_placement from,
                   ccg_placement to, ccg_value_id *out);
/* Placement of a source value as it stands (weights and inputs: R). */
ccg_placement sh_cur(const shard *sh, ccg_value_id gv, int *blocks);
/* A weight: an initializer, or a view of one through Identity and 2-D
 * Transpose nodes (sh_weight_root gives the initializer and whether the
 * view is transposed; CCG_NONE for other values). A view's copies are made
 * per use, named after the view, never the node that makes it. */
bool sh_is_weight(const shard *sh, ccg_value_id gv);
ccg_value_id sh_weight_root(const shard *sh, ccg_value_id gv, bool *trans);
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

/* shard_rules.c: propagation through an op no plan entry claims. */
ccg_status sh_rule(shard *sh, ccg_node_id n);
/* Every input to Replicate, the output Replicate. */
ccg_status sh_replicate(shard *sh, ccg_node_id n);

/* shard_styles.c: the plan entry `e` applied to node n; *done false when the
 * style does not apply to this node (it then propagates). */
ccg_status sh_style(shard *sh, ccg_node_id n, const ccg_plan_entry *e,
                    size_t entry, const char *module, bool *done);

/* shard_prune.c: sh->s without the nodes and initializers no output
 * depends on (graph inputs and collectives stay). */
ccg_status sh_prune(shard *sh);

#endif
