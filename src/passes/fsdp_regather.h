/* Private: the backward pass's ZeRO 3 step (fsdp_regather.c). */
#ifndef CCG_PASSES_FSDP_REGATHER_H
#define CCG_PASSES_FSDP_REGATHER_H

#include "ccgraph/ccgraph.h"

/* Every fsdp.all_gather_param instance before node `first` (the forward)
 * with reshard_after_forward whose output a node from `first` on (the
 * backward) reads gets a second AllGather, tagged as its backward, which
 * those nodes read instead. */
ccg_status ccg__fsdp_regather(ccg_graph *g, size_t first);

#endif
