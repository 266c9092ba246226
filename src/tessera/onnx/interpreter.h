// Runs a loaded ONNX model node by node on the registered kernels.
//
// Values live in scopes: a graph's scope holds its initializers, inputs and
// every node output; a subgraph's scope (If / Loop / Scan body) chains to the
// scope of the node that runs it, as ONNX's outer-scope visibility says.
// A value is dropped once no later node (or subgraph of one) reads it, so
// activations live only as long as they are needed. An error
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

  // The largest total size of the tensors held in the main graph's scope
  // after any node of any Run so far (initializers and inputs included;
  // storage shared by several values counted once): the runtime's peak of
  // live tensor memory, subgraph scopes aside.
  int64_t peak_live_bytes() const { return peak_live_bytes_; }
  std::mt19937_64& rng() { return rng_; }
  const Model& model() const { return model_; }

 private:
  // Runs `nodes` in order; after each node, drops from `scope` the values
  // it was the last reader of (never `keep`: the graph's outputs).
  Status RunNodes(const std::vector<Node>& nodes, const std::vector<ValueInfo>& keep, Scope& scope,
                  bool track_live = false);
  // For each node index, the names whose last reader it is (inputs of the
  // node and of its subgraphs, which read outer values); cached per graph.
  const std::vector<std::vector<std::string>>& LastUses(const std::vector<Node>& nodes,
                                                        const std::vector<ValueInfo>& keep);
  Status RunNode(const Node& node, Scope& scope);
  Status RunFunction(const Function& fn, const Node& call, Scope& scope);

  const Model& model_;
  const OpRegistry& registry_;
  std::mt19937_64 rng_;
  std::map<std::string, OpProfile>* profile_ = nullptr;
  int64_t peak_live_bytes_ = 0;
  std::map<const std::vector<Node>*, std::vector<std::vector<std::string>>> last_uses_;
};

}  // namespace tessera::onnx
