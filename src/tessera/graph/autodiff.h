// Reverse-mode differentiation of a captured forward graph, on the graph:
// appends one backward node per forward node that has a gradient to pass on
// (running the operator's grad function, graph/apply.h), an accumulation node
// wherever a value feeds several consumers, and fills Graph::output_grads
// (the seed inputs), input_grads and param_grads. The backward reads only
// the inputs/outputs each operator declares saved, so liveness analysis
// (graph/memory_plan.h) sees exactly which activations the backward keeps.
// The result computes what the eager tape computes, op for op.
#pragma once

#include "tessera/graph/ir.h"

namespace tessera::graph {

void AddBackward(Graph& g);

}  // namespace tessera::graph
