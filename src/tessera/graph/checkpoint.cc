#include "tessera/graph/checkpoint.h"

#include <utility>

#include "tessera/base/check.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

// Re-runs fn on detached copies of `inputs` with recording on, backpropagates
// `grad_outputs` (one per entry of `recorded`, the indices of fn's outputs the
// checkpoint entry recorded) and returns the inputs' gradients.
std::vector<Tensor> Recompute(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                              const std::vector<size_t>& recorded, const std::vector<Tensor>& grad_outputs,
                              const std::vector<bool>& needs_grad) {
  std::vector<Tensor> detached(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    detached[i] = Detach(inputs[i]);
    if (needs_grad[i]) detached[i].set_requires_grad(true);
  }
  Tape tape;
  std::vector<Tensor> outputs;
  {
    TapeScope scope(tape);
    GradModeGuard grad_on(true);
    outputs = fn(detached);
  }
  std::vector<Tensor> roots;
  std::vector<Tensor> seeds;
  for (size_t k = 0; k < recorded.size(); ++k) {
    TESSERA_CHECK(recorded[k] < outputs.size(),
                  "Checkpoint: the recompute returned {} outputs but the forward returned more (fn must be "
                  "deterministic)",
                  outputs.size());
    const Tensor& out = outputs[recorded[k]];
    TESSERA_CHECK(out.defined() && out.shape() == grad_outputs[k].shape(),
                  "Checkpoint: recomputed output {} has shape {} but the forward's had {} (fn must be deterministic)",
                  recorded[k], out.defined() ? ShapeString(out.shape()) : "undefined",
                  ShapeString(grad_outputs[k].shape()));
    if (!out.requires_grad()) continue;  // depends on nothing differentiable
    roots.push_back(out);
    seeds.push_back(grad_outputs[k]);
  }
  if (!roots.empty()) tape.Backward(roots, seeds);
  std::vector<Tensor> grad_inputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (needs_grad[i] && detached[i].defined()) grad_inputs[i] = detached[i].grad();
  }
  return grad_inputs;
}

}  // namespace

std::vector<Tensor> Checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  if (!GradEnabled()) return outputs;
  std::vector<size_t> recorded;
  std::vector<Tensor> recorded_outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.defined() || !IsFloating(out.dtype())) continue;
    for (const Tensor& in : inputs) {
      // An output that is an input (fn returned it as is) gets its own
      // handle, so recording it does not turn the input into a non-leaf.
      if (in.defined() && in.impl() == out.impl()) {
        out = Detach(out);
        break;
      }
    }
    recorded.push_back(i);
    recorded_outputs.push_back(out);
  }
  if (recorded.empty()) return outputs;
  Record("Checkpoint", inputs, std::move(recorded_outputs),
         [fn, inputs, recorded](const std::vector<Tensor>& grad_outputs, const std::vector<bool>& needs_grad) {
           return Recompute(fn, inputs, recorded, grad_outputs, needs_grad);
         });
  return outputs;
}

}  // namespace tessera::graph
