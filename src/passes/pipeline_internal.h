/* Private: the state of one pipeline split, shared by pipeline.c (layers,
 * stage assignment, balancing) and pipeline_build.c (the stage graphs). */
#ifndef CCG_PASSES_PIPELINE_INTERNAL_H
#define CCG_PASSES_PIPELINE_INTERNAL_H

#include "ccgraph/ccgraph.h"
#include "core/error.h"
#include "graph/internal.h"

#define PP_NAME_MAX 256

typedef struct pp_plan {
  ccg_graph *g;
  const ccg_pipeline_options *o;
  ccg_mesh mesh;
  const char *axis;
  int64_t p, M;
  size_t nv, nn;
  ccg_node_id *order; /* g's topological order */
  int *node_stage;    /* -1: computed from constants, copied where used;
                         -2: not needed for any output */
  int *layer_of;      /* per node: its layer index, or -1 */
  bool *is_const;     /* per value: computed from Constant nodes only */
  bool *batch;        /* per value: depends on an input carrying the batch */
  bool *data;         /* per value: depends on such an input's contents, not
                         only on its shape (through Shape, Size) */
  bool *needed;       /* per value: some graph output depends on it */
  int *avail;         /* per value: the stage computing (or owning) it; -1
                         for graph inputs and constants */
  int *last_use;      /* per value: the last stage using it (-1: none) */
  int64_t batch_size; /* dim 0 of the inputs carrying the batch; 0: none */
  /* layers: module paths in order of first use */
  char (*layers)[PP_NAME_MAX];
  size_t n_layers;
  int *layer_stage; /* per layer */
  /* the shape and dtype each carried value has on its sender, per
   * microbatch (index m * nv + v; the shared entry is m = 0) */
  ccg_shape *sent_shape;
  ccg_dtype *sent_dtype;
  /* small int values (shape arithmetic) whose contents the sender knows:
   * the receiver makes them a Constant instead of receiving them, so its
   * shapes stay numbers */
  struct pp_known {
    bool known;
    int n;
    int64_t v[CCG_MAX_RANK];
  } * sent_known;
  uint32_t max_instance; /* largest mapping instance of g */
  size_t n_sends;
} pp_plan;

/* One stage graph being built (pipeline_build.c). */
typedef struct pp_build {
  pp_plan *pl;
  ccg_graph *g, *d;
  int64_t s;
  ccg_value_id *vmap; /* [M][nv]: microbatch m's value; shared ones at 0 */
  int m;              /* the microbatch being copied; -1: the shared part */
  /* [M][nv]: microbatch m's weight of the weighted mean made by source
   * value v (ccg__pp_mb_weight); CCG_NONE elsewhere; NULL: none recorded,
   * a weighted mean combined as a mean of means */
  ccg_value_id *mb_weight;
  int64_t slot, grad_slot;
  size_t mark; /* nodes before it have their slots */
} pp_build;

/* The failure recorded on b->d, on the source graph (naming the stage). */
ccg_status ccg__pp_from_d(pp_build *b);

/* pipeline_microbatch.c: node n copied for microbatch m (M > 1), its
 * inputs `in` (stage values) rewritten where they were made for the whole
 * batch (a fixed Reshape/Expand target, a mask or table that a microbatch
 * broadcasts against or scatters into). */
ccg_status ccg__pp_mb_inputs(pp_build *b, ccg_node_id n, int m,
                             ccg_value_id *in);
/* An error when microbatch m's copy dv of source value v (an output of n)
 * still has the whole batch on dim 0. */
ccg_status ccg__pp_check_mb_dim(pp_build *b, ccg_node_id n, ccg_value_id v,
                                ccg_value_id dv, int m);
/* Node n copied for microbatch m (M > 1) where it makes a weighted mean
 * (a loss with ignore_index or class weights, a scalar ratio of two sums):
 * records the microbatch's weight in b->mb_weight and rewrites the copy
 * (the loss's attrs, *na of them, to reduction "sum"; the ratio's
 * denominator in `in` to 1 where it is 0). Nothing for other nodes. */
ccg_status ccg__pp_mb_weight(pp_build *b, ccg_node_id n, int m,
                             ccg_value_id *in, ccg_attr *attrs, size_t *na);
/* After ccg__pp_mb_weight: *y, the loss copy's sum, becomes the mean (the
 * sum over the weight, 1 where it is 0), which takes the copy's name. */
ccg_status ccg__pp_mb_mean(pp_build *b, ccg_node_id n, int m, ccg_value_id *y);
/* Scalar output o of the last stage from its microbatches' values parts:
 * their sum, or their mean when o averages over the batch (weighted by
 * the microbatches' weights for a weighted mean made on this stage); an
 * error for a scalar that is neither. */
ccg_status ccg__pp_combine_scalar(pp_build *b, ccg_value_id o,
                                  const ccg_value_id *parts, ccg_value_id *y);

/* Builds stage s's graph into *out ("new"). Errors on pl->g. */
ccg_status ccg__pp_build_stage(pp_plan *pl, int64_t s, ccg_graph **out);

#endif
