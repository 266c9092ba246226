// Runs a loaded ONNX model node by node on the registered kernels.
//
// Values live in scopes: a graph's scope holds its initializers, inputs and
// every node output; a subgraph's scope (If / Loop / Scan body) chains to the
// scope of the node that runs it, as ONNX's outer-scope visibility says.
// Values no later node reads are dropped as soon as possible. An error
// names the failing node and op. One Interpreter runs one call at a time.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "tessera/onnx/graph.h"
#include "tessera/onnx/op.h"

namespace tessera::onnx {

struct Scope {
  const Scope* parent = nullptr;
  std::map<std::string, Value> values;
  const Value* Find(const std::string& name) const;
};

class Interpreter {
 public:
  explicit Interpreter(const Model& model, uint64_t seed = 0);

  // Runs the main graph with `inputs` bound by name (initializers may be
  // overridden, as ONNX allows); returns the graph outputs in order.
  StatusOr<std::vector<Value>> Run(const std::map<std::string, Value>& inputs);

  // Runs `g` with `inputs` bound positionally to its inputs, in a scope
  // chained to `outer` (used by OpContext::RunSubgraph).
  StatusOr<std::vector<Value>> RunGraph(const Graph& g, const std::vector<Value>& inputs, const Scope* outer);

  int64_t OpsetOf(const std::string& domain) const;

  // Per-op-type kernel time, accumulated over every Run while set (null:
  // off). Keys are op types; values {seconds, calls}.
  struct OpProfile {
    double seconds = 0;
    int64_t calls = 0;
  };
  void SetProfile(std::map<std::string, OpProfile>* profile) { profile_ = profile; }
  std::mt19937_64& rng() { return rng_; }
  const Model& model() const { return model_; }

 private:
  Status RunNodes(const std::vector<Node>& nodes, Scope& scope);
  Status RunNode(const Node& node, Scope& scope);
  Status RunFunction(const Function& fn, const Node& call, Scope& scope);

  const Model& model_;
  const OpRegistry& registry_;
  std::mt19937_64 rng_;
  std::map<std::string, OpProfile>* profile_ = nullptr;
};

}  // namespace tessera::onnx
