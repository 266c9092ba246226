// An ONNX model on Tessera's differentiable operators, so that it can be
// trained (fine-tuned) and captured by graph mode.
//
// The interpreter (interpreter.h) runs every ONNX operator on every element
// type, forward only. A TrainableModel instead maps each node of the main
// graph onto the graph:: functions the training runtime uses
// (graph/functional*.h): the model's float32 initializers become trainable
// parameters (BatchNormalization's mean and variance become buffers), a
// call records the backward on the tape like any eager Tessera code, and a
// graph::GraphFunction wrapped around Forward captures it as a static graph
// (passes, memory plan, replay). The trained values go back into the .onnx
// file with SaveModelWithInitializers (model_loader.h).
//
// Static values — constants, Shape's output and whatever is computed from
// them alone (the shape arithmetic exporters emit: Shape → Gather →
// Unsqueeze → Concat → Reshape) — are folded on each call by the
// interpreter's own kernels, any operator; the tensors the model computes
// go through the lowerings.
//
// Scope: float32 data (int64 indices for Gather), the operators listed by
// TrainableOps() at the opsets Debian's ONNX defines. Inputs that give a
// shape or axes (Reshape's shape, Unsqueeze's axes, Slice's starts, ...)
// must be static. Anything else is a Status naming the node: "node 'y'
// (Sin): no differentiable Tessera operator for Sin (tessera onnx run
// executes it, forward only)".
// Thread-safety: Forward may run on one thread at a time (it records on
// that thread's tape).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tessera/graph/module.h"
#include "tessera/onnx/graph.h"
#include "tessera/onnx/lower/lower.h"
#include "tessera/tensor/tensor.h"

namespace tessera::onnx {

struct TrainableOptions {
  // Training mode: BatchNormalization normalizes with the batch's
  // statistics and updates its running mean and variance; off, it uses the
  // running statistics (inference) — except in nodes whose training_mode
  // attribute is 1, which always use the batch's, as ONNX defines.
  bool training = true;
  // Float initializers kept as constants (no gradient, never updated).
  std::set<std::string> frozen;
  // One-element float initializers (an epsilon, a scale an exporter wrote
  // as an initializer) are constants unless this is set.
  bool train_scalars = false;
  // Graph inputs given fixed values (shape or axes tensors that an exporter
  // left as inputs): they become constants and leave input_names().
  std::map<std::string, Array> constant_inputs;
  // Rewrites exporters' decomposed LayerNorms (ReduceMean, Sub, Pow, ...)
  // into one LayerNormalization (onnx/lower/fuse_patterns.h).
  bool fuse_layer_norm = true;
};

class TrainableModel {
 public:
  // Fuses exported LayerNorms, decides how each node of the main graph runs
  // (folded when its inputs are static, else through a lowering: the first
  // node with neither names itself) and makes the parameters. The model is
  // copied; nothing refers to `model` afterwards.
  static StatusOr<std::unique_ptr<TrainableModel>> Create(const Model& model, const TrainableOptions& options = {});

  // Graph inputs that are not initializers, in the model's order: the
  // tensors Forward takes.
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Trainable parameters (float initializers of more than one element read
  // as data, not frozen), in initializer-name order; each requires grad.
  const std::vector<graph::NamedTensor>& parameters() const { return parameters_; }
  // BatchNormalization's running statistics (updated in training mode).
  const std::vector<graph::NamedTensor>& buffers() const { return buffers_; }
  // Nodes that run through a lowering (the rest are Constant, Shape or folded).
  int lowered_nodes() const { return static_cast<int>(std::count(steps_.begin(), steps_.end(), Step::kLower)); }
  int fused_layer_norms() const { return fused_layer_norms_; }
  void set_training(bool training) { options_.training = training; }
  bool training() const { return options_.training; }

  // Runs the main graph on `inputs` (input_names() order) with graph::
  // functions; returns the graph outputs in order. Differentiable with
  // respect to the parameters and to inputs that require grad. On an error
  // the tape is cleared if it was empty before the call (a step's forward);
  // a caller that recorded before it abandons the step with ClearTape().
  StatusOr<std::vector<Tensor>> Forward(const std::vector<Tensor>& inputs) const;

  // Every initializer with its current value (parameters and buffers as
  // trained, the rest as loaded): what SaveModelWithInitializers writes.
  std::map<std::string, Array> Initializers() const;

 private:
  TrainableModel() = default;
  int64_t ModelOpset() const;                       // the ai.onnx opset the model imports
  bool IsTrainable(const std::string& name) const;  // a parameter or a buffer
  // Shape: the input's (static) dims; a folded node: its interpreter kernel
  // on constant inputs. Both write `folded`.
  Status RunShape(const Node& node, const lower::LowerContext::TensorLookup& tensor_of,
                  const lower::LowerContext::ConstantLookup& constant_of, std::map<std::string, Array>& folded) const;
  Status RunFolded(const Node& node, const lower::LowerContext::ConstantLookup& constant_of,
                   std::map<std::string, Array>& folded) const;
  enum class Step { kConstant, kShape, kFold, kLower };
  Model model_;
  TrainableOptions options_;
  std::vector<std::string> input_names_, output_names_;
  std::vector<graph::NamedTensor> parameters_, buffers_;
  std::set<std::string> trainable_names_;             // parameters and buffers
  std::map<std::string, Tensor> tensors_;             // parameters, buffers, other initializers and Constant outputs
  std::map<std::string, Array> constants_;            // Constant nodes' values
  std::vector<std::vector<std::string>> drop_after_;  // per node: values it reads last
  std::vector<Step> steps_;                           // per node: how it runs
  int fused_layer_norms_ = 0;
};

// The ONNX operator types TrainableModel runs on computed tensors (sorted):
// the lowerings, plus Constant and Shape.
std::vector<std::string> TrainableOps();

// float32 Array <-> Tensor (copies; int64 Arrays become int64 Tensors).
StatusOr<Tensor> TensorFromArray(const Array& a, const std::string& what);
Array ArrayFromTensor(const Tensor& t);

}  // namespace tessera::onnx
