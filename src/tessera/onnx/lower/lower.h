// Internal to TrainableModel (onnx/trainable.h): the lowering of one ONNX
// node onto graph:: functions. A Lowering reads the node's attributes and
// inputs through a LowerContext and sets its outputs; every error is a
// Status naming the node. Lowerings by family: lower_math.cc (arithmetic,
// activations, MatMul / Gemm, softmax, reductions), lower_shape.cc (shape
// and indexing), lower_nn.cc (convolution, pooling, normalization).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/onnx/graph.h"
#include "tessera/tensor/tensor.h"

namespace tessera::onnx::lower {

class LowerContext {
 public:
  // `tensor_of(name)` finds a computed value, parameter, buffer or float
  // constant; `constant_of(name)` an initializer or Constant output.
  using TensorLookup = std::function<const Tensor*(const std::string&)>;
  using ConstantLookup = std::function<const Array*(const std::string&)>;
  LowerContext(const Node& node, int64_t opset, bool training, TensorLookup tensor_of, ConstantLookup constant_of)
      : node_(node),
        opset_(opset),
        training_(training),
        tensor_of_(std::move(tensor_of)),
        constant_of_(std::move(constant_of)),
        outputs_(node.outputs.size()) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  bool training() const { return training_; }

  bool has_input(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  // Input i as a tensor (float32 data, or integer indices where the operator
  // takes them); an error when absent.
  StatusOr<Tensor> tensor(size_t i) const;
  // The same, checked to be float32.
  StatusOr<Tensor> float_tensor(size_t i) const;
  // Input i as a constant (an initializer or a Constant node's output): the
  // inputs that give shapes, axes or slice bounds.
  StatusOr<Array> constant(size_t i) const;
  StatusOr<std::vector<int64_t>> ints(size_t i) const;  // constant integer input
  // Integer list from the attribute (opsets before `input_since`) or from
  // input i (from `input_since` on); `dflt` when absent.
  StatusOr<std::vector<int64_t>> ints_attr_or_input(const std::string& attr, size_t i, int64_t input_since,
                                                    const std::vector<int64_t>& dflt) const;

  size_t num_outputs() const { return outputs_.size(); }
  bool output_wanted(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  void set_output(size_t i, Tensor t) { outputs_.at(i) = std::move(t); }
  std::vector<Tensor>& outputs() { return outputs_; }

  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgument("{}: {}", node_.Describe(), fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  const Node& node_;
  int64_t opset_;
  bool training_;
  TensorLookup tensor_of_;
  ConstantLookup constant_of_;
  std::vector<Tensor> outputs_;
};

using Lowering = std::function<Status(LowerContext&)>;
using LoweringTable = std::map<std::string, Lowering>;  // by ONNX op type (domain ai.onnx)

void AddMathLowerings(LoweringTable& t);
void AddShapeLowerings(LoweringTable& t);
void AddNnLowerings(LoweringTable& t);

// Every lowering (built once).
const LoweringTable& Lowerings();

// Maps a possibly negative axis into [0, rank).
StatusOr<int> Axis(const LowerContext& ctx, int64_t axis, int rank);

}  // namespace tessera::onnx::lower
