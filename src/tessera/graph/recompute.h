// The recompute planner of graph mode: chooses forward activations that the
// backward reads and recomputes them in the backward instead of keeping them
// from the forward, under a memory budget.
//
// Candidates are cheap nodes (element-wise, injective, reductions such as
// norms; never GEMMs, attention, communication or nodes with effects) that
// own their outputs (not views) and whose inputs the backward keeps anyway
// (graph inputs, parameters, constants, or values a backward node reads):
// recomputing them frees their outputs for the whole forward-to-backward
// interval at the cost of one more cheap kernel. A candidate whose inputs are
// not kept is taken only if keeping them instead costs fewer bytes.
// Largest savings first, until the bytes kept for the backward are at most
// `budget_bytes` (0: take every candidate that saves memory). The copy runs
// right before its first backward reader and gives bitwise the same values.
#pragma once

#include <cstdint>

#include "tessera/graph/ir.h"

namespace tessera::graph {

struct RecomputeReport {
  int recomputed = 0;              // nodes copied into the backward
  int64_t saved_before_bytes = 0;  // kept from forward to backward, before
  int64_t saved_after_bytes = 0;   // and after
};

// Bytes of node-computed values (view roots) produced in the forward and read
// in the backward, i.e. what the graph keeps from one to the other.
int64_t BytesKeptForBackward(const Graph& g);

RecomputeReport PlanRecompute(Graph& g, int64_t budget_bytes);

}  // namespace tessera::graph
