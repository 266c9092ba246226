// The static graph of graph mode: values (explicit inputs, parameters,
// constants, node outputs) and nodes in a topological order, built from a
// Trace (graph/trace.h), extended with its backward by graph/autodiff.h,
// rewritten by graph/passes.h, run by graph/compiled_function.h.
//
// A node runs `run(inputs) -> outputs`: for forward nodes the operator's
// forward function (graph/apply.h), for backward nodes an adapter around the
// operator's grad function. Undefined inputs/outputs have value id -1.
// Parameters (leaves requiring grad) are bound by reference: a replay reads
// their current data. Every other tensor that the traced function used but
// did not compute is a constant, also bound by reference (a buffer that an
// operator with effects updates in place, such as batch norm's running
// statistics, stays current); constant folding assumes the others do not
// change between calls, and the second call's check compares with eager.
// Views: an output that shares storage with an input (reshape, transpose,
// slice) records `alias_of`, so the memory planner keeps the base alive.
// Thread-safety: none (one thread builds and runs a graph at a time).
#pragma once

#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/graph/apply.h"
#include "tessera/graph/trace.h"

namespace tessera::graph {

enum class ValueKind { kInput, kParam, kConst, kNode };

struct Value {
  int id = -1;
  ValueKind kind = ValueKind::kNode;
  Shape shape;
  DType dtype = DType::kF32;
  std::string name;   // inputs, parameters, gradients
  int producer = -1;  // kNode: the producing node
  Tensor bound;       // kParam, kConst: the tensor (by reference)
  bool requires_grad = false;
  int alias_of = -1;     // shares the storage of this value (a view)
  bool is_grad = false;  // a gradient (backward part)
  int64_t bytes() const { return NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype)); }
};

struct Node {
  std::string op;
  OpKind kind = OpKind::kOpaque;
  std::string attrs;
  std::vector<int> inputs;
  std::vector<int> outputs;
  ForwardFn run;
  GradFn grad;  // forward nodes: the operator's grad function
  uint32_t saved_inputs = kSaveAll;
  uint32_t saved_outputs = kSaveNone;
  int visible = 0;
  bool side_effects = false;
  bool separable_grad = false;     // OpSpec::separable_grad
  bool backward = false;           // part of the backward pass
  std::vector<std::string> fused;  // ops folded into this node by fusion
  int recompute_of = -1;           // a copy of a forward node re-run in the backward (recompute planner)
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;   // topological order: forward nodes, then backward nodes
  std::vector<int> inputs;   // explicit inputs, in call order
  std::vector<int> outputs;  // forward outputs, in return order
  // Training graphs (graph/autodiff.h):
  std::vector<int> output_grads;  // per output: the seed gradient input (-1: not differentiable)
  std::vector<int> input_grads;   // per explicit input: its gradient (-1: none)
  std::vector<int> params;        // parameters, in first-use order
  std::vector<int> param_grads;   // per parameter: its gradient (-1: none)

  int AddValue(Value v);      // sets v.id
  int forward_nodes() const;  // nodes before the first backward node
  std::string ToText() const;
  std::string ToDot() const;
};

// Builds the forward graph of a traced call: `inputs` and `outputs` are the
// call's explicit inputs and results. Fails (with the trace's reason) when
// the trace is broken or an output was not computed by a traced operator.
StatusOr<Graph> GraphFromTrace(const Trace& trace, const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs);

// Counts for reports and tests.
struct GraphStats {
  int forward_nodes = 0;
  int backward_nodes = 0;
  int fused_nodes = 0;  // nodes holding more than one op
  int fused_ops = 0;    // ops inside them
  int recomputed_nodes = 0;
};
GraphStats Stats(const Graph& g);

}  // namespace tessera::graph
