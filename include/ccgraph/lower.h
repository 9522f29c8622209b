/* ccgraph passes: lowering. Rewrites one rank's view of a graph so that
 * every collective is one the target runtime has, with the same result:
 * for ONNX Runtime's com.microsoft ops (AllReduce, AllGather, AllToAll over
 * every rank), a ShardSlice becomes a Slice with this rank's constant
 * bounds and a ReduceScatter an AllReduce followed by that Slice.
 * docs/onnx.md. */
#ifndef CCGRAPH_LOWER_H
#define CCGRAPH_LOWER_H

#include "ccgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ccg_lower_target {
  CCG_LOWER_ORT, /* ONNX Runtime's com.microsoft collectives */
  CCG_LOWER_TARGET_COUNT
} ccg_lower_target;

/* A new graph: g as global rank `rank` of its mesh runs it (its per-rank
 * initializer data becomes the data; 0 without a mesh), with the rewrites
 * of `target`. Everything else is copied: inputs, outputs, names, shapes,
 * mesh, placements, mapping tags. Collectives the target cannot express
 * even so (a reduce-scatter over a part of the mesh, say) are kept: the
 * export names them. "new": free with ccg_graph_free. Errors go to g. */
CCG_API ccg_status ccg_lower(ccg_graph *g, int64_t rank,
                             ccg_lower_target target, ccg_graph **out);

#ifdef __cplusplus
}
#endif
#endif
