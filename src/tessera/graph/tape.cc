#include "tessera/graph/tape.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/graph/apply.h"
#include "tessera/graph/trace.h"
#include "tessera/ops/elementwise/elementwise.h"

namespace tessera::graph {
namespace {

thread_local bool g_grad_enabled = true;

thread_local Tape* g_current_tape = nullptr;

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

Tape& DefaultTape() {
  thread_local Tape tape;
  return tape;
}

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

Tape::Tape() = default;
Tape::~Tape() = default;
Tape::Tape(Tape&&) noexcept = default;
Tape& Tape::operator=(Tape&&) noexcept = default;

void Tape::Clear() {
  entries_.clear();
  produced_.clear();
}

bool Tape::Produced(const Tensor& t) const { return t.defined() && produced_.count(t.impl()) > 0; }

void Tape::Record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardFn backward) {
  if (!InsideApply() && ActiveTrace() != nullptr) {
    BreakTrace(fmt::format("operator '{}' is recorded without graph::Apply, so its forward is unknown", op));
  }
  TapeEntry entry;
  entry.op = op;
  entry.input_is_leaf.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    entry.input_is_leaf[i] = t.defined() && t.requires_grad() && !produced_.count(t.impl());
  }
  for (Tensor& out : outputs) {
    TESSERA_CHECK(out.defined(), "{}: recorded an undefined output", op);
    out.set_requires_grad(true);
    produced_.insert(out.impl());
  }
  entry.inputs = std::move(inputs);
  entry.outputs = std::move(outputs);
  entry.backward = std::move(backward);
  entries_.push_back(std::move(entry));
}

void Tape::Backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  ClearOnExit clear_on_exit{*this};
  TESSERA_CHECK(grads.size() == roots.size(), "Backward: {} gradients for {} roots", grads.size(), roots.size());
  std::unordered_map<const TensorImpl*, Tensor> grad_of;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& loss = roots[r];
    const Tensor& grad = grads[r];
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
    if (!produced_.count(loss.impl())) {
      AccumulateLeaf(loss, seed);  // the root is itself a leaf
      continue;
    }
    if (seed.dtype() != loss.dtype()) seed = seed.To(loss.dtype());
    auto [it, inserted] = grad_of.try_emplace(loss.impl(), seed);
    if (!inserted) it->second = ops::Add(it->second, seed);
  }
  if (grad_of.empty()) return;
  NoGradGuard no_grad;
  for (size_t idx = entries_.size(); idx-- > 0;) {
    TapeEntry entry = std::move(entries_[idx]);  // released at the end of this iteration
    std::vector<Tensor> grad_outputs(entry.outputs.size());
    bool any = false;
    for (size_t o = 0; o < entry.outputs.size(); ++o) {
      auto it = grad_of.find(entry.outputs[o].impl());
      if (it == grad_of.end()) continue;
      grad_outputs[o] = std::move(it->second);
      grad_of.erase(it);
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
      auto [it, inserted] = grad_of.try_emplace(input.impl(), g);
      if (!inserted) it->second = ops::Add(it->second, g);
    }
  }
}

void Backward(const Tensor& loss, const Tensor& grad) { CurrentTape().Backward(loss, grad); }

void Record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardFn backward) {
  CurrentTape().Record(op, std::move(inputs), std::move(outputs), std::move(backward));
}

Tape& CurrentTape() { return g_current_tape != nullptr ? *g_current_tape : DefaultTape(); }

TapeScope::TapeScope(Tape& tape) : saved_(g_current_tape) { g_current_tape = &tape; }
TapeScope::~TapeScope() { g_current_tape = saved_; }

void ClearTape() { CurrentTape().Clear(); }

size_t TapeSize() { return CurrentTape().size(); }

}  // namespace tessera::graph
