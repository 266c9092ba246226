#include "tessera/graph/tape.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tessera/base/check.h"
#include "tessera/ops/elementwise/elementwise.h"

namespace tessera::graph {
namespace {

struct TapeEntry {
  const char* op = nullptr;
  std::vector<Tensor> inputs;
  std::vector<bool> input_is_leaf;
  std::vector<Tensor> outputs;
  BackwardFn backward;
};

struct Tape {
  std::vector<TapeEntry> entries;
  // Impls produced by recorded ops. The entries hold strong references to
  // them, so an address in this set cannot be reused while it is there.
  std::unordered_set<const TensorImpl*> produced;

  void Clear() {
    entries.clear();
    produced.clear();
  }
};

thread_local bool g_grad_enabled = true;

Tape& ThreadTape() {
  thread_local Tape tape;
  return tape;
}

// Adds `grad` into leaf.grad() (created on first use), in the leaf's dtype.
void AccumulateLeaf(const Tensor& leaf, const Tensor& grad) {
  Tensor existing = leaf.grad();
  if (!existing.defined()) {
    // Always a fresh buffer: `grad` may alias another tensor's gradient.
    Tensor fresh = Tensor::Empty(leaf.shape(), leaf.dtype());
    fresh.CopyFrom(grad);
    Tensor handle = leaf;
    handle.set_grad(fresh);
    return;
  }
  TESSERA_CHECK(existing.shape() == leaf.shape(), "leaf '{}' has a gradient of shape {} but its shape is {}",
                leaf.name(), ShapeString(existing.shape()), ShapeString(leaf.shape()));
  if (existing.dtype() == DType::kF32 || existing.dtype() == grad.dtype()) {
    ops::AddInPlace(existing, grad);
  } else {
    ops::AddInPlace(existing, grad.To(existing.dtype()));
  }
}

// Clears the tape when Backward leaves, normally or by exception.
struct ClearOnExit {
  Tape& tape;
  ~ClearOnExit() { tape.Clear(); }
};

}  // namespace

bool GradEnabled() { return g_grad_enabled; }

NoGradGuard::NoGradGuard() : saved_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = saved_; }

GradModeGuard::GradModeGuard(bool enabled) : saved_(g_grad_enabled) { g_grad_enabled = enabled; }
GradModeGuard::~GradModeGuard() { g_grad_enabled = saved_; }

bool ShouldRecord(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void Record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardFn backward) {
  Tape& tape = ThreadTape();
  TapeEntry entry;
  entry.op = op;
  entry.input_is_leaf.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    entry.input_is_leaf[i] = t.defined() && t.requires_grad() && !tape.produced.count(t.impl());
  }
  for (Tensor& out : outputs) {
    TESSERA_CHECK(out.defined(), "{}: recorded an undefined output", op);
    out.set_requires_grad(true);
    tape.produced.insert(out.impl());
  }
  entry.inputs = std::move(inputs);
  entry.outputs = std::move(outputs);
  entry.backward = std::move(backward);
  tape.entries.push_back(std::move(entry));
}

void Backward(const Tensor& loss, const Tensor& grad) {
  Tape& tape = ThreadTape();
  ClearOnExit clear_on_exit{tape};
  TESSERA_CHECK(loss.defined(), "Backward of an undefined tensor");
  TESSERA_CHECK(loss.requires_grad(),
                "Backward of a tensor that does not require grad (computed under NoGradGuard, or from inputs "
                "none of which requires grad)");
  Tensor seed;
  if (grad.defined()) {
    TESSERA_CHECK(grad.shape() == loss.shape(), "Backward: grad shape {} differs from loss shape {}",
                  ShapeString(grad.shape()), ShapeString(loss.shape()));
    seed = grad;
  } else {
    seed = Tensor::Full(loss.shape(), 1.0, loss.dtype());
  }
  NoGradGuard no_grad;
  if (!tape.produced.count(loss.impl())) {
    AccumulateLeaf(loss, seed);  // the loss is itself a leaf
    return;
  }

  std::unordered_map<const TensorImpl*, Tensor> grads;
  grads.emplace(loss.impl(), seed);
  for (size_t idx = tape.entries.size(); idx-- > 0;) {
    TapeEntry entry = std::move(tape.entries[idx]);  // released at the end of this iteration
    std::vector<Tensor> grad_outputs(entry.outputs.size());
    bool any = false;
    for (size_t o = 0; o < entry.outputs.size(); ++o) {
      auto it = grads.find(entry.outputs[o].impl());
      if (it == grads.end()) continue;
      grad_outputs[o] = std::move(it->second);
      grads.erase(it);
      any = true;
    }
    if (!any) continue;
    for (size_t o = 0; o < entry.outputs.size(); ++o) {
      if (!grad_outputs[o].defined()) {
        grad_outputs[o] = Tensor::Zeros(entry.outputs[o].shape(), entry.outputs[o].dtype());
      } else if (!grad_outputs[o].is_contiguous()) {
        grad_outputs[o] = grad_outputs[o].Contiguous();  // gradients of views may be strided
      }
    }
    std::vector<bool> needs(entry.inputs.size());
    for (size_t i = 0; i < entry.inputs.size(); ++i) {
      needs[i] = entry.inputs[i].defined() && entry.inputs[i].requires_grad();
    }
    std::vector<Tensor> grad_inputs = entry.backward(grad_outputs, needs);
    TESSERA_CHECK(grad_inputs.size() == entry.inputs.size(), "{}: backward returned {} gradients for {} inputs",
                  entry.op, grad_inputs.size(), entry.inputs.size());
    for (size_t i = 0; i < entry.inputs.size(); ++i) {
      Tensor& g = grad_inputs[i];
      if (!needs[i] || !g.defined()) continue;
      const Tensor& input = entry.inputs[i];
      TESSERA_CHECK(g.shape() == input.shape(), "{}: gradient of input {} has shape {} but the input has shape {}",
                    entry.op, i, ShapeString(g.shape()), ShapeString(input.shape()));
      if (entry.input_is_leaf[i]) {
        AccumulateLeaf(input, g);
        continue;
      }
      if (g.dtype() != input.dtype()) g = g.To(input.dtype());
      auto [it, inserted] = grads.try_emplace(input.impl(), g);
      if (!inserted) it->second = ops::Add(it->second, g);
    }
  }
}

void ClearTape() { ThreadTape().Clear(); }

size_t TapeSize() { return ThreadTape().entries.size(); }

}  // namespace tessera::graph
