// Operator kernels of the ONNX runtime and their registry.
//
// A kernel is a function of an OpContext: it reads the node's inputs and
// attributes, checks them (a wrong dtype, rank or attribute is a Status
// naming what and where, never a crash), and sets the node's outputs.
// Kernels are registered by operator family (ops/<family>/, one
// Register<Family>Ops function each, listed in registry.cc) under their ONNX
// domain and op type; `opset` tells a kernel which version of the operator
// the model imports (e.g. Slice-1 takes attributes, Slice-10 inputs).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/onnx/graph.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx {

class Interpreter;
struct Scope;

class OpContext {
 public:
  OpContext(const Node& node, int64_t opset, std::vector<const Value*> inputs, Interpreter* interp, const Scope* scope);

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }

  // Inputs: a missing optional input (left out or named "") reads as absent.
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Value& input(size_t i) const;  // TESSERA_CHECK(has_input(i))
  // The i-th input as a tensor; an error naming the node when absent or not a tensor.
  StatusOr<Array> tensor(size_t i) const;
  // The i-th input as a tensor or `dflt` when absent.
  StatusOr<Array> tensor_or(size_t i, Array dflt) const;

  // Outputs: num_outputs() slots (the node's outputs); unwanted ("") ones
  // may be left unset.
  size_t num_outputs() const { return outputs_.size(); }
  bool output_wanted(size_t i) const;
  void set_output(size_t i, Array a) { set_value(i, Value::Tensor(std::move(a))); }
  void set_value(size_t i, Value v);
  std::vector<Value>& outputs() { return outputs_; }

  // Runs a subgraph (If branch, Loop / Scan body) with `inputs` bound to its
  // inputs in order; it also sees every value visible to this node.
  StatusOr<std::vector<Value>> RunSubgraph(const Graph& g, const std::vector<Value>& inputs) const;

  // The interpreter's random generator (seeded once per Interpreter);
  // kernels whose node has a `seed` attribute seed a generator of their own.
  std::mt19937_64& rng() const;

  // An error tagged with the node (use as `return ctx.Error("...", args)`).
  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgument("{}: {}", node_.Describe(), fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  const Node& node_;
  int64_t opset_;
  std::vector<const Value*> inputs_;
  std::vector<Value> outputs_;
  Interpreter* interp_;
  const Scope* scope_;
};

using Kernel = std::function<Status(OpContext&)>;

class OpRegistry {
 public:
  // Every built-in kernel (registry.cc calls each family's Register*Ops).
  static const OpRegistry& Global();

  // One kernel per (domain, op type) serves every opset version; it reads
  // OpContext::opset() where versions differ.
  void Register(const std::string& op_type, Kernel kernel, const std::string& domain = "");
  const Kernel* Find(const std::string& domain, const std::string& op_type) const;
  // "Op" or "domain:Op", sorted.
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, Kernel> kernels_;  // "domain:op"
};

// The families (ops/<family>/); each registers its kernels.
void RegisterElementwiseOps(OpRegistry& r);  // unary/binary math, logic, comparison, activations, Cast, Clip, Where
void RegisterReduceOps(OpRegistry& r);       // Reduce*, ArgMax/Min, CumSum, Hardmax/Softmax/LogSoftmax, TopK
void RegisterShapeOps(
    OpRegistry& r);  // Reshape, Shape, Size, Transpose, Concat, Split, Slice, Squeeze, Pad, Tile, Expand, ...
void RegisterIndexOps(OpRegistry& r);    // Gather*, Scatter*, OneHot, NonZero, Compress, Unique, Trilu, Range, ...
void RegisterNnOps(OpRegistry& r);       // Conv*, pooling, normalizations, Gemm, MatMul, Dropout, Resize, LRN, ...
void RegisterRnnOps(OpRegistry& r);      // RNN, LSTM, GRU
void RegisterQuantOps(OpRegistry& r);    // QuantizeLinear, DequantizeLinear, QLinear*, *Integer, DynamicQuantizeLinear
void RegisterControlOps(OpRegistry& r);  // If, Loop, Scan, Constant, Identity, sequences, optionals
void RegisterRandomOps(OpRegistry& r);   // RandomUniform/Normal(Like), Bernoulli, Multinomial
void RegisterLossOps(OpRegistry& r);     // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void RegisterMiscOps(OpRegistry& r);     // signal (DFT, STFT, windows), NMS, RoiAlign, Einsum, Det, training ops, ...

}  // namespace tessera::onnx
