/* Private to the passes: the module path of a node of an imported model, as
 * the shard pass matches plans on it and the plan proposal names entries by
 * it. */
#ifndef CCG_PASSES_MODULE_PATH_H
#define CCG_PASSES_MODULE_PATH_H

#include <stddef.h>

#include "ccgraph/graph.h"

/* The node metadata key of torch's dynamo exporter holding module paths. */
#define CCG__META_NAME_SCOPES "pkg.torch.onnx.name_scopes"

/* The module path of node n into buf ("" when it has none): from torch's
 * dynamo metadata where the node has it, else from its TorchScript name
 * ("/h.0/attn/q_proj/MatMul" is module "h.0.attn.q_proj"). Truncated to
 * size - 1 characters. */
void ccg__node_module(const ccg_graph *g, ccg_node_id n, char *buf,
                      size_t size);

#endif
