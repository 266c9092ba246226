#include "tessera/graph/autodiff.h"

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/ops/elementwise/elementwise.h"

namespace tessera::graph {
namespace {

int NewGradValue(Graph& g, int of) {
  Value v;
  v.kind = ValueKind::kNode;
  v.shape = g.values[of].shape;
  v.dtype = g.values[of].dtype;
  v.is_grad = true;
  v.name = g.values[of].name.empty() ? "" : "d" + g.values[of].name;
  return g.AddValue(std::move(v));
}

// Adds node `n` (filling its output values' producer) and returns its index.
int Push(Graph& g, Node n) {
  const int id = static_cast<int>(g.nodes.size());
  for (int o : n.outputs) {
    if (o >= 0) g.values[o].producer = id;
  }
  g.nodes.push_back(std::move(n));
  return id;
}

// Appends the backward node of forward node `fwd` computing the gradients
// of its inputs `targets` (`needs` marks exactly those) and returns their
// new values. `part` is added to the attributes of a split node.
std::vector<int> AddBackwardNode(Graph& g, const Node& fwd, const std::vector<bool>& needs,
                                 const std::vector<int>& targets, const std::string& part, std::vector<int>& grad_of) {
  Node bwd;
  bwd.op = fwd.op + "Grad";
  bwd.kind = OpKind::kOpaque;
  if (fwd.kind == OpKind::kCommunication) {
    // The backward of a collective is a collective (or may be): every rank
    // must run it, in the same order.
    bwd.kind = OpKind::kCommunication;
    bwd.side_effects = true;
  }
  bwd.attrs = part.empty() ? fwd.attrs : fwd.attrs.empty() ? part : fwd.attrs + " " + part;
  bwd.backward = true;
  // Inputs: the visible outputs' gradients, the saved inputs, the saved outputs.
  std::vector<Shape> out_shapes;
  std::vector<DType> out_dtypes;
  for (int o = 0; o < fwd.visible; ++o) {
    const int v = fwd.outputs[o];
    bwd.inputs.push_back(v >= 0 ? grad_of[v] : -1);
    out_shapes.push_back(v >= 0 ? g.values[v].shape : Shape{});
    out_dtypes.push_back(v >= 0 ? g.values[v].dtype : DType::kF32);
  }
  const size_t n_in = fwd.inputs.size(), n_out = fwd.outputs.size();
  for (size_t i = 0; i < n_in; ++i) {
    bwd.inputs.push_back(i < 32 && (fwd.saved_inputs & SaveBit(static_cast<int>(i))) ? fwd.inputs[i] : -1);
  }
  for (size_t o = 0; o < n_out; ++o) {
    bwd.inputs.push_back(o < 32 && (fwd.saved_outputs & SaveBit(static_cast<int>(o))) ? fwd.outputs[o] : -1);
  }
  for (int t : targets) bwd.outputs.push_back(NewGradValue(g, fwd.inputs[t]));
  grad_of.resize(g.values.size(), -1);
  std::vector<Shape> in_shapes(n_in);
  std::vector<DType> in_dtypes(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    if (fwd.inputs[i] < 0) continue;
    in_shapes[i] = g.values[fwd.inputs[i]].shape;
    in_dtypes[i] = g.values[fwd.inputs[i]].dtype;
  }
  const int visible = fwd.visible;
  bwd.run = [grad = fwd.grad, visible, n_in, n_out, needs, targets, out_shapes, out_dtypes, in_shapes, in_dtypes,
             op = fwd.op](const std::vector<Tensor>& in) {
    std::vector<Tensor> go(in.begin(), in.begin() + visible);
    for (int o = 0; o < visible; ++o) {
      if (!go[o].defined()) {
        go[o] = Tensor::Zeros(out_shapes[o], out_dtypes[o]);
      } else if (!go[o].is_contiguous()) {
        go[o] = go[o].Contiguous();
      }
    }
    std::vector<Tensor> ins(in.begin() + visible, in.begin() + visible + static_cast<std::ptrdiff_t>(n_in));
    std::vector<Tensor> outs(in.begin() + visible + static_cast<std::ptrdiff_t>(n_in),
                             in.begin() + visible + static_cast<std::ptrdiff_t>(n_in + n_out));
    std::vector<Tensor> grads = grad(go, ins, outs, needs);
    TESSERA_CHECK(grads.size() == n_in, "{}: backward returned {} gradients for {} inputs", op, grads.size(), n_in);
    std::vector<Tensor> result;
    for (int i : targets) {
      Tensor gi = grads[i];
      if (!gi.defined()) gi = Tensor::Zeros(in_shapes[i], in_dtypes[i]);
      TESSERA_CHECK(gi.shape() == in_shapes[i], "{}: gradient of input {} has shape {} but the input has shape {}", op,
                    i, ShapeString(gi.shape()), ShapeString(in_shapes[i]));
      if (gi.dtype() != in_dtypes[i]) gi = gi.To(in_dtypes[i]);
      result.push_back(gi);
    }
    return result;
  };
  const std::vector<int> outs = bwd.outputs;
  Push(g, std::move(bwd));
  return outs;
}

}  // namespace

void AddBackward(Graph& g) {
  const int forward_count = static_cast<int>(g.nodes.size());
  std::vector<int> grad_of(g.values.size(), -1);
  auto accumulate = [&](int value, int grad) {
    if (grad_of[value] < 0) {
      grad_of[value] = grad;
      return;
    }
    Node add;
    add.op = "AccumulateGrad";
    add.kind = OpKind::kElementwise;
    add.backward = true;
    add.inputs = {grad_of[value], grad};
    const int out = NewGradValue(g, value);
    grad_of.resize(g.values.size(), -1);
    add.outputs = {out};
    add.run = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::Add(in[0], in[1])}; };
    Push(g, std::move(add));
    grad_of[value] = out;
  };
  // Seeds: one gradient input per differentiable output.
  for (int out : g.outputs) {
    if (!g.values[out].requires_grad) {
      g.output_grads.push_back(-1);
      continue;
    }
    Value seed;
    seed.kind = ValueKind::kInput;
    seed.shape = g.values[out].shape;
    seed.dtype = g.values[out].dtype;
    seed.is_grad = true;
    seed.name = fmt::format("seed{}", g.output_grads.size());
    const int id = g.AddValue(std::move(seed));
    grad_of.resize(g.values.size(), -1);
    g.output_grads.push_back(id);
    accumulate(out, id);
  }
  for (int ni = forward_count - 1; ni >= 0; --ni) {
    const Node fwd = g.nodes[ni];  // copied: Push may reallocate
    if (!fwd.grad) continue;
    bool any_grad = false;
    for (int o = 0; o < fwd.visible; ++o) any_grad = any_grad || (fwd.outputs[o] >= 0 && grad_of[fwd.outputs[o]] >= 0);
    std::vector<bool> needs(fwd.inputs.size());
    bool any_need = false;
    for (size_t i = 0; i < fwd.inputs.size(); ++i) {
      needs[i] = fwd.inputs[i] >= 0 && g.values[fwd.inputs[i]].requires_grad;
      any_need = any_need || needs[i];
    }
    if (!any_grad || !any_need) continue;
    // Forward inputs that receive a gradient: one backward node for all of
    // them, or one each when the operator computes each alone at no extra
    // cost (OpSpec::separable_grad), so that graph mode can run them side
    // by side (a Linear's dx and dW).
    std::vector<int> all_targets;
    for (size_t i = 0; i < fwd.inputs.size(); ++i) {
      if (needs[i]) all_targets.push_back(static_cast<int>(i));
    }
    std::vector<std::vector<int>> groups;
    if (fwd.separable_grad && all_targets.size() >= 2) {
      for (int t : all_targets) groups.push_back({t});
    } else {
      groups.push_back(all_targets);
    }
    std::vector<std::pair<int, int>> produced;  // (forward input, its gradient value)
    for (const std::vector<int>& targets : groups) {
      std::vector<bool> part_needs(fwd.inputs.size(), false);
      for (int t : targets) part_needs[t] = true;
      const std::string part = groups.size() > 1 ? fmt::format("grad_of=in{}", targets[0]) : "";
      const std::vector<int> outs = AddBackwardNode(g, fwd, part_needs, targets, part, grad_of);
      for (size_t t = 0; t < targets.size(); ++t) produced.emplace_back(fwd.inputs[targets[t]], outs[t]);
    }
    for (auto [input, grad] : produced) accumulate(input, grad);
  }
  g.input_grads.clear();
  for (int in : g.inputs) g.input_grads.push_back(grad_of[in]);
  g.param_grads.clear();
  for (int p : g.params) g.param_grads.push_back(grad_of[p]);
}

}  // namespace tessera::graph
