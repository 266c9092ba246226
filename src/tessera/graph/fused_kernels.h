// Kernels of fused nodes (graph/passes.h, fusion): FuseNodes merges a
// producer `a` into its only consumer `b` (through value `v`) and returns the
// fused node, or nothing when the pair cannot be fused.
//   Linear + Add (residual), fp32: one GEMM whose epilogue adds the bias and
//     then the residual (ops/matmul/gemm.h) — bitwise the unfused result;
//   otherwise: the members run back to back inside one node, so the
//     intermediate never enters the executor's frame or the memory plan.
#pragma once

#include <optional>

#include "tessera/graph/ir.h"

namespace tessera::graph {

std::optional<Node> FuseNodes(const Graph& g, const Node& a, const Node& b, int v);

}  // namespace tessera::graph
