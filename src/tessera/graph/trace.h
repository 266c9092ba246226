// Graph capture by tracing: while a TraceScope is active on a thread, every
// operator run through Apply (graph/apply.h) on that thread is appended to
// the scope's Trace with its input and output tensors and its forward/grad
// functions; graph/ir.h turns a Trace into a Graph.
//
// A computation that cannot be replayed from its operators alone is marked
// `broken` with the reason, and capture falls back to eager (a "graph break"):
//   - a tape entry recorded by code that does not go through Apply (its
//     forward is not known to the trace);
//   - a host read of tensor data (Item, ToIntVector, ToFloatVector) inside
//     the traced function: what the code does next may depend on the data
//     (MoE routing, data-dependent shapes), so a replay could be wrong.
// The trace keeps every tensor it saw alive until it is destroyed.
// Thread-safety: a Trace belongs to the thread whose scope records it.
#pragma once

#include <string>
#include <vector>

#include "tessera/graph/apply.h"

namespace tessera::graph {

struct TracedNode {
  OpSpec spec;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;  // all outputs, visible ones first
  ForwardFn forward;
  GradFn grad;
};

struct Trace {
  std::vector<TracedNode> nodes;
  std::string broken;  // empty: capturable; else why not (the first reason seen)
};

// Makes `trace` this thread's active trace for the scope's lifetime (nests:
// the previous one is restored; only the innermost records).
class TraceScope {
 public:
  explicit TraceScope(Trace& trace);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace* saved_;
};

// This thread's active trace, or null.
Trace* ActiveTrace();

// Marks the active trace (if any) as not capturable, keeping the first reason.
void BreakTrace(const std::string& why);

// Held by graph::Apply while an operator's own forward function runs: a
// host read of tensor data there is the kernel reading its inputs (batch
// norm's reference statistics), which the replay repeats, not a graph break.
class KernelScope {
 public:
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
};

}  // namespace tessera::graph
