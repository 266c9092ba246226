// GraphFunction: graph mode for one function of tensors.
//
//   GraphFunction f("block0", [&](const std::vector<Tensor>& in) { return ...graph:: ops...; });
//   std::vector<Tensor> out = f({x});   // as calling the function eagerly
//
// Per input signature (shapes, dtypes, requires_grad):
//   call 1  runs the function eagerly while tracing it (graph/trace.h),
//           builds the forward graph, differentiates it (graph/autodiff.h),
//           optimizes it (graph/passes.h) and plans its memory
//           (graph/memory_plan.h);
//   call 2  runs it eagerly again and the graph beside it, and compares the
//           outputs: a function whose result depends on something the trace
//           cannot see (data read on the host, tensors made outside graph::
//           functions) is caught here;
//   call 3+ replays the graph: the forward nodes now, and, when grad mode is
//           on and an input or parameter requires grad, one tape entry
//           (graph/tape.h) whose backward runs the backward nodes with the
//           activations the forward kept for them. Parameters' gradients
//           reach their .grad() through the tape as in eager mode.
// A trace that cannot be captured (a "graph break") or fails the check makes
// the function eager for that signature, with the reason logged once and
// kept in fallback_reason().
// Thread-safety: one thread calls a GraphFunction at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/graph/inter_op.h"
#include "tessera/graph/ir.h"
#include "tessera/graph/memory_plan.h"
#include "tessera/graph/passes.h"

namespace tessera::graph {

struct GraphOptions {
  PassOptions passes;
  bool verify = true;    // call 2 compares the graph with eager
  bool inter_op = true;  // independent operators side by side (graph/inter_op.h)
};

// One captured signature: the graph before and after the passes and its plan.
struct CompiledGraph {
  Graph unoptimized;  // forward + backward as captured
  Graph graph;        // after the passes
  PassReport report;
  std::vector<int> last_use;          // per value: last node reading it (-1: none)
  std::vector<int> last_use_forward;  // the same, counting forward nodes only (inference)
  std::vector<bool> pinned;           // outputs and gradients: never dropped while the nodes run
  std::vector<int> planned_values;    // values with a buffer in the plan
  MemoryPlan plan;                    // forward + backward of one call
  int64_t eager_saved_bytes = 0;      // what the eager tape keeps after the forward
  int64_t graph_saved_bytes = 0;      // what the graph keeps after the forward
  // Replay schedules (graph/inter_op.h); their measurements are updated by
  // the replays. The forward has one for training (values the backward
  // reads stay) and one for inference.
  InterOpSchedule forward_train, forward_infer, backward;
};

class GraphFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  GraphFunction(std::string name, Fn fn, GraphOptions options = {});
  explicit GraphFunction(std::string name, GraphOptions options = {})
      : GraphFunction(std::move(name), nullptr, options) {}
  ~GraphFunction();

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) { return Call(fn_, inputs); }
  // The same with the function given per call (callers whose closure holds
  // per-call state for the eager runs; a replay does not call `fn`).
  std::vector<Tensor> Call(const Fn& fn, const std::vector<Tensor>& inputs);

  // One captured input signature (shapes, dtypes, requires_grad, grad mode).
  struct SignatureInfo {
    std::string signature;  // "grad=1;fp32[4, 40, 128]g;"
    bool training = false;  // captured with grad mode on
    int calls = 0;
    int replays = 0;
    std::string fallback;  // non-empty: eager, and why
    const CompiledGraph* compiled = nullptr;
  };
  std::vector<SignatureInfo> signatures() const;

  const std::string& name() const { return name_; }
  // The compiled graph of the last call's signature (null: eager or not yet).
  const CompiledGraph* compiled() const;
  // Why the last call's signature runs eagerly ("" when it does not).
  std::string fallback_reason() const;
  int replays() const { return replays_; }

 private:
  struct Entry;
  std::vector<Tensor> Replay(Entry& e, const std::vector<Tensor>& inputs);

  std::string name_;
  Fn fn_;
  GraphOptions options_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  Entry* last_ = nullptr;
  int replays_ = 0;
};

// Compiles a captured forward graph: autodiff, passes, liveness, memory plan.
// `inter_op` false: the schedules are planned for one thread, so no step
// runs its chains side by side.
std::unique_ptr<CompiledGraph> Compile(Graph forward, const PassOptions& options, bool inter_op = true);

}  // namespace tessera::graph
