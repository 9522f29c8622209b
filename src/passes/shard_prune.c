/* The shard pass's last step: the sharded graph without the nodes and
 * initializers no graph output depends on. Copies of the source's nodes
 * that a rewrite replaced (a head reshape's old target, the Concat of a
 * dynamic one) are left behind by propagation; an export should not carry
 * them (ONNX Runtime warns about every unused initializer). Graph inputs
 * stay, used or not, and so does every collective (all ranks must issue
 * the same ones). They are removed in place (ccg__graph_compact): names,
 * attributes, tags, metadata, placements and per-rank data stay as they
 * are, and the values are numbered as a graph built afresh numbers them. */
#include <stdlib.h>

#include "graph/internal.h"
#include "passes/shard_internal.h"

/* Marks the live nodes (nodes are in the order they were added, each after
 * its inputs' producers) and the values they read; true if all are. */
static bool mark_live(ccg_graph *s, bool *used, bool *live) {
  bool all = true;
  for (size_t i = 0; i < ccg_graph_num_outputs(s); i++)
    used[ccg_graph_output(s, i)] = true;
  for (size_t k = ccg_graph_num_nodes(s); k-- > 0;) {
    ccg_node_id n = (ccg_node_id)k;
    size_t no = ccg_node_num_outputs(s, n);
    bool l = no == 0 || ccg_op_is_collective(ccg_node_op(s, n));
    for (size_t i = 0; i < no && !l; i++) {
      ccg_value_id o = ccg_node_output(s, n, i);
      l = o != CCG_NONE && used[o];
    }
    live[k] = l;
    all = all && l;
    for (size_t i = 0; l && i < ccg_node_num_inputs(s, n); i++)
      if (ccg_node_input(s, n, i) != CCG_NONE)
        used[ccg_node_input(s, n, i)] = true;
  }
  for (size_t i = 0; i < ccg_graph_num_initializers(s); i++)
    all = all && used[ccg_graph_initializer(s, i)];
  return all;
}

ccg_status sh_prune(shard *sh) {
  size_t nv = ccg_graph_num_values(sh->s), nn = ccg_graph_num_nodes(sh->s);
  bool *used = calloc(nv + 1, sizeof *used);
  bool *live = calloc(nn + 1, sizeof *live);
  ccg_status st = CCG_STATUS_OK;
  if (!used || !live)
    st = sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  else if (!mark_live(sh->s, used, live) &&
           ccg__graph_compact(sh->s, live, used) != CCG_STATUS_OK)
    st = sh_from_s(sh, ccg_last_status(sh->s));
  free(used);
  free(live);
  return st;
}
