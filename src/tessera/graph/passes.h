// Graph passes of graph mode (run by graph/compiled_function.h in this order):
//   dead-code elimination  nodes none of whose outputs reaches a graph
//                          output or a gradient, unless they have effects;
//   constant folding       nodes whose inputs are all constants run once at
//                          compile time and become constants;
//   common subexpressions  a node with the op, attributes and inputs of an
//                          earlier one (no effects) reuses its outputs;
//   fusion                 chains of element-wise nodes (TVM's "injective"
//                          patterns: each link's output read only by the next
//                          link) and an element-wise consumer of a GEMM
//                          (out-fusable + element-wise, e.g. Linear + residual
//                          Add) become one node; the intermediate values are
//                          never kept in the frame, and the GEMM epilogue case
//                          runs as one kernel;
//   recompute planning     cheap activations the backward reads are
//                          recomputed there instead of kept (graph/recompute.h).
// Each pass keeps the graph's results bit-for-bit except fusion into a GEMM
// epilogue, which is bitwise too for fp32 (ops/matmul/matmul.h).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/graph/ir.h"

namespace tessera::graph {

struct PassOptions {
  bool dce = true;
  bool constant_folding = true;
  bool cse = true;
  bool fusion = true;
  // Recompute planner (graph/recompute.h): -1 off (the default); 0 recompute
  // every cheap activation that saves memory; > 0 stop once the bytes kept
  // for the backward are at most this.
  int64_t recompute_budget_bytes = -1;
};

struct PassReport {
  int removed_dead = 0;
  int folded = 0;
  int merged_common = 0;
  int fused_groups = 0;
  int fused_ops = 0;
  int recomputed = 0;
  int64_t kept_before_recompute_bytes = 0;
  int64_t kept_after_recompute_bytes = 0;
  std::string ToString() const;
};

PassReport RunPasses(Graph& g, const PassOptions& options);

// The individual passes (tests).
int EliminateDeadCode(Graph& g);
int FoldConstants(Graph& g);
int EliminateCommonSubexpressions(Graph& g);
int FuseElementwise(Graph& g, int* fused_ops);

}  // namespace tessera::graph
