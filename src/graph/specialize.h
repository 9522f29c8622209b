/* Private: a copy of a graph re-inferred under sizes and contents a run made
 * known (the executor's run-time specialization, docs/exec.md). */
#ifndef CCG_GRAPH_SPECIALIZE_H
#define CCG_GRAPH_SPECIALIZE_H

#include "graph/internal.h"

/* Nodes with more outputs than this are not copied (UNSUPPORTED). */
#define CCG__SPEC_MAX_OUT 64

/* What is known of value v of the source graph: a graph input's shape
 * (NULL: the graph's), and its contents (n_known >= 0 values, at most
 * CCG_MAX_RANK; an input's, or a node output's where its shape rule left
 * them unknown). */
typedef struct ccg__spec_value {
  ccg_value_id v;
  const ccg_shape *shape;
  int n_known;
  const int64_t *known;
} ccg__spec_value;

/* A new graph with src's values and nodes under the same ids and names,
 * every shape rule run again with what sv says. Initializer data (and
 * per-rank data) is borrowed from src, which must outlive the copy. Reads
 * src only (several threads may copy one graph at once). A shape rule that
 * refuses the new sizes fails here, the error on err naming the node. "new":
 * free with ccg_graph_free. */
ccg_status ccg__graph_specialize(const ccg_graph *src,
                                 const ccg__spec_value *sv, size_t n_sv,
                                 ccg_ctx *err, ccg_graph **out);

#endif
