/* ccgraph: parallel model graphs with explicit collectives. One header for
 * the whole public API. */
#ifndef CCGRAPH_CCGRAPH_H
#define CCGRAPH_CCGRAPH_H

#include "ccgraph/core.h"
#include "ccgraph/graph.h"
#include "ccgraph/exec.h"
#include "ccgraph/onnx.h"
#include "ccgraph/symbolic.h"
#include "ccgraph/colossal.h"
#include "ccgraph/dtensor.h"
#include "ccgraph/autodiff.h"
#include "ccgraph/verify.h"
#include "ccgraph/shard.h"
#include "ccgraph/pipeline.h"
#include "ccgraph/lower.h"

#endif
