#include "tessera/graph/ir.h"

#include <unordered_map>

#include <fmt/format.h>

namespace tessera::graph {
namespace {

const char* KindName(ValueKind k) {
  switch (k) {
    case ValueKind::kInput: return "input";
    case ValueKind::kParam: return "param";
    case ValueKind::kConst: return "const";
    case ValueKind::kNode: return "value";
  }
  return "?";
}

bool SharesStorage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() && a.storage() == b.storage();
}

std::string ValueLabel(const Graph& g, int id) {
  if (id < 0) return "_";
  const Value& v = g.values[id];
  return v.name.empty() ? fmt::format("%{}", id) : fmt::format("%{}:{}", id, v.name);
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

int Graph::AddValue(Value v) {
  v.id = static_cast<int>(values.size());
  values.push_back(std::move(v));
  return values.back().id;
}

int Graph::forward_nodes() const {
  int n = 0;
  while (n < static_cast<int>(nodes.size()) && !nodes[n].backward) ++n;
  return n;
}

StatusOr<Graph> GraphFromTrace(const Trace& trace, const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs) {
  if (!trace.broken.empty()) return Status(StatusCode::kFailedPrecondition, trace.broken);
  Graph g;
  std::unordered_map<const TensorImpl*, int> value_of;
  auto add_leaf = [&](const Tensor& t, ValueKind kind, std::string name) {
    Value v;
    v.kind = kind;
    v.shape = t.shape();
    v.dtype = t.dtype();
    v.name = std::move(name);
    v.requires_grad = kind == ValueKind::kParam || (kind == ValueKind::kInput && t.requires_grad());
    if (kind == ValueKind::kParam) v.bound = t;
    if (kind == ValueKind::kConst) v.bound = t;  // by reference: buffers updated in place stay current
    const int id = g.AddValue(std::move(v));
    value_of[t.impl()] = id;
    return id;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) return Status(StatusCode::kInvalidArgument, fmt::format("input {} is undefined", i));
    if (value_of.count(inputs[i].impl())) {
      return Status(StatusCode::kInvalidArgument, fmt::format("input {} is the same tensor as an earlier input", i));
    }
    g.inputs.push_back(add_leaf(inputs[i], ValueKind::kInput, fmt::format("in{}", i)));
  }
  for (const TracedNode& tn : trace.nodes) {
    Node n;
    n.op = tn.spec.name;
    n.kind = tn.spec.kind;
    n.attrs = tn.spec.attrs;
    n.run = tn.forward;
    n.grad = tn.grad;
    n.saved_inputs = tn.spec.saved_inputs;
    n.saved_outputs = tn.spec.saved_outputs;
    n.visible = tn.spec.visible_outputs < 0 ? static_cast<int>(tn.outputs.size()) : tn.spec.visible_outputs;
    n.side_effects = tn.spec.side_effects;
    n.separable_grad = tn.spec.separable_grad;
    bool any_grad = false;
    for (const Tensor& t : tn.inputs) {
      if (!t.defined()) {
        n.inputs.push_back(-1);
        continue;
      }
      auto it = value_of.find(t.impl());
      int id;
      if (it != value_of.end()) {
        id = it->second;
      } else if (t.requires_grad()) {
        id = add_leaf(t, ValueKind::kParam, t.name().empty() ? fmt::format("param{}", g.params.size()) : t.name());
        g.params.push_back(id);
      } else {
        id = add_leaf(t, ValueKind::kConst, "");
      }
      any_grad = any_grad || g.values[id].requires_grad;
      n.inputs.push_back(id);
    }
    const int node_id = static_cast<int>(g.nodes.size());
    for (size_t o = 0; o < tn.outputs.size(); ++o) {
      const Tensor& t = tn.outputs[o];
      if (!t.defined()) {
        n.outputs.push_back(-1);
        continue;
      }
      Value v;
      v.kind = ValueKind::kNode;
      v.shape = t.shape();
      v.dtype = t.dtype();
      v.producer = node_id;
      v.requires_grad = any_grad && tn.grad && static_cast<int>(o) < n.visible && IsFloating(t.dtype());
      for (size_t i = 0; i < tn.inputs.size(); ++i) {
        if (SharesStorage(t, tn.inputs[i])) {
          const int base = n.inputs[i];
          v.alias_of = g.values[base].alias_of >= 0 ? g.values[base].alias_of : base;
          break;
        }
      }
      const int id = g.AddValue(std::move(v));
      value_of[t.impl()] = id;  // a later tensor with this impl (an op returning its input) maps here
      n.outputs.push_back(id);
    }
    g.nodes.push_back(std::move(n));
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    auto it = outputs[o].defined() ? value_of.find(outputs[o].impl()) : value_of.end();
    if (it == value_of.end()) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("output {} was not computed by a traced operator (made by Tensor methods or ops:: "
                                "calls outside graph:: functions?)",
                                o));
    }
    g.outputs.push_back(it->second);
  }
  // A constant that shares storage with a traced value is a view made
  // outside graph:: functions: its data would be stale on replay.
  for (const Value& c : g.values) {
    if (c.kind != ValueKind::kConst) continue;
    for (const TracedNode& tn : trace.nodes) {
      for (const Tensor& t : tn.outputs) {
        if (SharesStorage(t, c.bound)) {
          return Status(StatusCode::kFailedPrecondition,
                        "a view of a computed tensor was made outside graph:: functions (Tensor::Reshape, ...)");
        }
      }
    }
  }
  return g;
}

std::string Graph::ToText() const {
  std::string s;
  for (int id : inputs)
    s += fmt::format("input {} {} {}\n", ValueLabel(*this, id), DTypeName(values[id].dtype),
                     ShapeString(values[id].shape));
  for (int id : params)
    s += fmt::format("param {} {} {}\n", ValueLabel(*this, id), DTypeName(values[id].dtype),
                     ShapeString(values[id].shape));
  for (const Node& n : nodes) {
    std::string outs, ins;
    for (int o : n.outputs) outs += (outs.empty() ? "" : ", ") + ValueLabel(*this, o);
    for (int i : n.inputs) ins += (ins.empty() ? "" : ", ") + ValueLabel(*this, i);
    std::string shape =
        n.outputs.empty() || n.outputs[0] < 0
            ? ""
            : fmt::format(" : {} {}", DTypeName(values[n.outputs[0]].dtype), ShapeString(values[n.outputs[0]].shape));
    std::string fused;
    for (const std::string& f : n.fused) fused += (fused.empty() ? " fused[" : "+") + f;
    if (!fused.empty()) fused += "]";
    s += fmt::format("{}{} = {}({}){}{}{}{}\n", n.backward ? "  bwd " : "  ", outs, n.op, ins,
                     n.attrs.empty() ? "" : " {" + n.attrs + "}", shape, fused,
                     n.recompute_of >= 0 ? " (recompute)" : "");
  }
  std::string outs;
  for (int o : outputs) outs += (outs.empty() ? "" : ", ") + ValueLabel(*this, o);
  s += fmt::format("return {}\n", outs);
  for (size_t p = 0; p < param_grads.size(); ++p) {
    if (param_grads[p] >= 0)
      s += fmt::format("grad {} = {}\n", ValueLabel(*this, params[p]), ValueLabel(*this, param_grads[p]));
  }
  return s;
}

std::string Graph::ToDot() const {
  std::string s = "digraph tessera {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  for (const Value& v : values) {
    if (v.kind == ValueKind::kNode) continue;
    s += fmt::format("  v{} [shape=ellipse, label=\"{} {}\\n{} {}\"];\n", v.id, KindName(v.kind), Escape(v.name),
                     DTypeName(v.dtype), ShapeString(v.shape));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::string label = n.op;
    for (const std::string& f : n.fused) label += "\\n+" + f;
    s += fmt::format("  n{} [shape=box, style=filled, fillcolor=\"{}\", label=\"{}\"];\n", i,
                     n.backward ? "#f4d6d6" : (n.fused.empty() ? "#d6e4f4" : "#d6f4dc"), Escape(label));
    for (int in : n.inputs) {
      if (in < 0) continue;
      const Value& v = values[in];
      const std::string from = v.kind == ValueKind::kNode ? fmt::format("n{}", v.producer) : fmt::format("v{}", in);
      s += fmt::format("  {} -> n{} [label=\"{}\"];\n", from, i, ShapeString(v.shape));
    }
  }
  s += "}\n";
  return s;
}

GraphStats Stats(const Graph& g) {
  GraphStats st;
  for (const Node& n : g.nodes) {
    (n.backward ? st.backward_nodes : st.forward_nodes) += 1;
    if (n.fused.size() > 1) {
      st.fused_nodes += 1;
      st.fused_ops += static_cast<int>(n.fused.size());
    }
    if (n.recompute_of >= 0) st.recomputed_nodes += 1;
  }
  return st;
}

}  // namespace tessera::graph
