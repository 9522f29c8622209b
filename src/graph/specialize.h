/* Private: a copy of a graph re-inferred under sizes and contents a run made
 * known (the executor's run-time specialization, docs/exec.md). */
#ifndef CCG_GRAPH_SPECIALIZE_H
#define CCG_GRAPH_SPECIALIZE_H

#include "graph/internal.h"

/* What is known of value v of the source graph: a graph input's shape
 * (NULL: the graph's); its contents (n_known >= 0 values, at most
 * CCG_MAX_RANK; an input's, or a node output's where its shape rule left
 * them unknown); a node output's dim `dim` (-1: none) is `size` where its
 * shape rule left a symbol (a count only data gives, NonZero's); a small
 * float input's fed data (NULL: none), which the copy holds as that
 * input's data (it stays an input) for shape rules that read float
 * contents (Range's bounds, Resize's scales, OneHot's depth). */
typedef struct ccg__spec_value {
  ccg_value_id v;
  const ccg_shape *shape;
  int n_known;
  const int64_t *known;
  int dim;
  int64_t size;
  const ccg_tensor *data;
} ccg__spec_value;

/* Which part of the source to copy: keep[n] says whether node n is copied
 * (NULL: every node; then values and nodes keep their ids) and `outputs`
 * (n_outputs of them, used only with keep) are the copy's graph outputs
 * instead of src's. Inputs and initializers are always copied. */
typedef struct ccg__spec_part {
  const bool *keep;
  const ccg_value_id *outputs;
  size_t n_outputs;
} ccg__spec_part;

/* A new graph with src's values and nodes (all, or part's) under the same
 * names, every shape rule run again with what sv says. Initializer data
 * (and per-rank data) is borrowed from src, which must outlive the copy;
 * sv's float data is copied.
 * Reads src only (several threads may copy one graph at once). A shape
 * rule that refuses the new sizes fails here, the error on err naming the
 * node. "new": free with ccg_graph_free. */
ccg_status ccg__graph_specialize(const ccg_graph *src,
                                 const ccg__spec_value *sv, size_t n_sv,
                                 const ccg__spec_part *part, ccg_ctx *err,
                                 ccg_graph **out);

#endif
