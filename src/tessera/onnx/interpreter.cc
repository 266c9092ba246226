#include "tessera/onnx/interpreter.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera::onnx {

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    auto it = s->values.find(name);
    if (it != s->values.end()) return &it->second;
  }
  return nullptr;
}

OpContext::OpContext(const Node& node, int64_t opset, std::vector<const Value*> inputs, Interpreter* interp,
                     const Scope* scope)
    : node_(node),
      opset_(opset),
      inputs_(std::move(inputs)),
      outputs_(node.outputs.size()),
      interp_(interp),
      scope_(scope) {}

const Value& OpContext::input(size_t i) const {
  TESSERA_CHECK(has_input(i), "{}: input {} read but absent", node_.Describe(), i);
  return *inputs_[i];
}

StatusOr<Array> OpContext::tensor(size_t i) const {
  if (!has_input(i)) return Error("input {} is required", i);
  const Value& v = *inputs_[i];
  if (v.kind == Value::Kind::kOptional && v.optional && v.optional->is_tensor()) return v.optional->tensor;
  if (!v.is_tensor()) return Error("input {} must be a tensor, got {}", i, v.Describe());
  return v.tensor;
}

StatusOr<Array> OpContext::tensor_or(size_t i, Array dflt) const {
  if (!has_input(i)) return dflt;
  return tensor(i);
}

bool OpContext::output_wanted(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }

void OpContext::set_value(size_t i, Value v) {
  TESSERA_CHECK(i < outputs_.size(), "{}: output {} of {}", node_.Describe(), i, outputs_.size());
  outputs_[i] = std::move(v);
}

StatusOr<std::vector<Value>> OpContext::RunSubgraph(const Graph& g, const std::vector<Value>& inputs) const {
  return interp_->RunGraph(g, inputs, scope_);
}

std::mt19937_64& OpContext::rng() const { return interp_->rng(); }

Interpreter::Interpreter(const Model& model, uint64_t seed)
    : model_(model), registry_(OpRegistry::Global()), rng_(seed) {}

int64_t Interpreter::OpsetOf(const std::string& domain) const {
  auto it = model_.opsets.find(domain == "ai.onnx" ? "" : domain);
  return it == model_.opsets.end() ? 1 : it->second;
}

StatusOr<std::vector<Value>> Interpreter::Run(const std::map<std::string, Value>& inputs) {
  Scope scope;
  for (const auto& [name, a] : model_.graph.initializers) scope.values[name] = Value::Tensor(a);
  for (const ValueInfo& in : model_.graph.inputs) {
    auto it = inputs.find(in.name);
    if (it != inputs.end()) {
      scope.values[in.name] = it->second;
    } else if (!scope.values.count(in.name)) {
      return InvalidArgument("graph input '{}' was not given", in.name);
    }
  }
  for (const auto& [name, v] : inputs) {
    if (!scope.values.count(name)) return InvalidArgument("'{}' is not an input of the graph", name);
  }
  TESSERA_RETURN_IF_ERROR(RunNodes(model_.graph.nodes, model_.graph.outputs, scope, /*track_live=*/true));
  std::vector<Value> out;
  for (const ValueInfo& o : model_.graph.outputs) {
    const Value* v = scope.Find(o.name);
    if (v == nullptr) return Internal("graph output '{}' was not produced", o.name);
    out.push_back(*v);
  }
  return out;
}

StatusOr<std::vector<Value>> Interpreter::RunGraph(const Graph& g, const std::vector<Value>& inputs,
                                                   const Scope* outer) {
  if (inputs.size() > g.inputs.size()) {
    return InvalidArgument("subgraph '{}' takes {} inputs, got {}", g.name, g.inputs.size(), inputs.size());
  }
  Scope scope;
  scope.parent = outer;
  for (const auto& [name, a] : g.initializers) scope.values[name] = Value::Tensor(a);
  for (size_t i = 0; i < inputs.size(); ++i) scope.values[g.inputs[i].name] = inputs[i];
  TESSERA_RETURN_IF_ERROR(RunNodes(g.nodes, g.outputs, scope));
  std::vector<Value> out;
  for (const ValueInfo& o : g.outputs) {
    const Value* v = scope.Find(o.name);
    if (v == nullptr) return InvalidArgument("subgraph '{}' output '{}' was not produced", g.name, o.name);
    out.push_back(*v);
  }
  return out;
}

namespace {

// Every name `g` (and the subgraphs inside it) reads.
void CollectReads(const Graph& g, std::set<std::string>* reads) {
  for (const Node& n : g.nodes) {
    reads->insert(n.inputs.begin(), n.inputs.end());
    for (const auto& [name, attr] : n.attrs) {
      if (attr.g) CollectReads(*attr.g, reads);
      for (const auto& sub : attr.graphs) CollectReads(*sub, reads);
    }
  }
  for (const ValueInfo& o : g.outputs) reads->insert(o.name);
}

}  // namespace

const std::vector<std::vector<std::string>>& Interpreter::LastUses(const std::vector<Node>& nodes,
                                                                   const std::vector<ValueInfo>& keep) {
  auto it = last_uses_.find(&nodes);
  if (it != last_uses_.end()) return it->second;
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<std::string> reads(nodes[i].inputs.begin(), nodes[i].inputs.end());
    for (const auto& [name, attr] : nodes[i].attrs) {
      if (attr.g) CollectReads(*attr.g, &reads);
      for (const auto& sub : attr.graphs) CollectReads(*sub, &reads);
    }
    for (const std::string& r : reads) {
      if (!r.empty()) last[r] = i;
    }
  }
  // Outputs nobody reads go right after their node.
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const std::string& out : nodes[i].outputs) {
      if (!out.empty()) last.emplace(out, i);
    }
  }
  for (const ValueInfo& k : keep) last.erase(k.name);
  std::vector<std::vector<std::string>> drop(nodes.size());
  for (const auto& [name, i] : last) drop[i].push_back(name);
  return last_uses_.emplace(&nodes, std::move(drop)).first->second;
}

namespace {

int64_t LiveBytes(const Scope& scope) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  auto count = [&](const Array& a) {
    if (a.defined() && seen.insert(a.raw()).second) bytes += static_cast<int64_t>(a.nbytes());
  };
  for (const auto& [name, v] : scope.values) {
    if (v.is_tensor()) count(v.tensor);
    for (const Array& a : v.sequence) count(a);
    if (v.optional && v.optional->is_tensor()) count(v.optional->tensor);
  }
  return bytes;
}

}  // namespace

Status Interpreter::RunNodes(const std::vector<Node>& nodes, const std::vector<ValueInfo>& keep, Scope& scope,
                             bool track_live) {
  const std::vector<std::vector<std::string>>& drop = LastUses(nodes, keep);
  for (size_t i = 0; i < nodes.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(RunNode(nodes[i], scope));
    if (track_live) peak_live_bytes_ = std::max(peak_live_bytes_, LiveBytes(scope));
    // Only this scope's own values: outer ones belong to the enclosing graph.
    for (const std::string& name : drop[i]) scope.values.erase(name);
  }
  return Status::Ok();
}

Status Interpreter::RunNode(const Node& node, Scope& scope) {
  std::vector<const Value*> inputs;
  for (const std::string& name : node.inputs) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    const Value* v = scope.Find(name);
    if (v == nullptr)
      return InvalidArgument("{} reads '{}', which no earlier node or input defines", node.Describe(), name);
    inputs.push_back(v);
  }
  // Trailing absent inputs are the same as fewer inputs.
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  const Kernel* kernel = registry_.Find(node.domain, node.op_type);
  if (kernel == nullptr) {
    auto fn = model_.functions.find(node.domain + ":" + node.op_type);
    if (fn != model_.functions.end()) return RunFunction(fn->second, node, scope);
    return Unimplemented("{}: operator {}{}{} is not supported", node.Describe(), node.domain,
                         node.domain.empty() ? "" : ":", node.op_type);
  }
  OpContext ctx(node, OpsetOf(node.domain), std::move(inputs), this, &scope);
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  try {
    st = (*kernel)(ctx);
  } catch (const std::bad_alloc&) {
    st = ResourceExhausted("out of memory");
  } catch (const std::exception& e) {
    st = InvalidArgument("{}", e.what());
  }
  if (profile_ != nullptr) {
    OpProfile& p = (*profile_)[node.op_type];
    p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++p.calls;
  }
  if (!st.ok()) {
    if (st.message().find(node.Describe()) != std::string::npos) return st;
    return Status(st.code(), fmt::format("{}: {}", node.Describe(), st.message()));
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i].empty()) continue;
    if (ctx.outputs()[i].kind == Value::Kind::kNone) {
      return Internal("{}: the kernel did not set output {} ('{}')", node.Describe(), i, node.outputs[i]);
    }
    scope.values[node.outputs[i]] = std::move(ctx.outputs()[i]);
  }
  return Status::Ok();
}

// A model-local function: its body runs in a fresh scope holding the
// caller's inputs under the function's input names; attribute references
// (ref_attr_name) take the calling node's values.
Status Interpreter::RunFunction(const Function& fn, const Node& call, Scope& scope) {
  Scope inner;
  for (size_t i = 0; i < fn.inputs.size() && i < call.inputs.size(); ++i) {
    if (call.inputs[i].empty()) continue;
    const Value* v = scope.Find(call.inputs[i]);
    if (v == nullptr) return InvalidArgument("{} reads '{}', which is undefined", call.Describe(), call.inputs[i]);
    inner.values[fn.inputs[i]] = *v;
  }
  for (const Node& n : fn.nodes) {
    Node bound = n;
    for (auto it = bound.attrs.begin(); it != bound.attrs.end();) {
      if (it->second.ref_attr_name.empty()) {
        ++it;
        continue;
      }
      auto given = call.attrs.find(it->second.ref_attr_name);
      if (given == call.attrs.end()) {
        it = bound.attrs.erase(it);  // not set by the caller: the op's default
      } else {
        it->second = given->second;
        ++it;
      }
    }
    TESSERA_RETURN_IF_ERROR(RunNode(bound, inner));
  }
  for (size_t i = 0; i < fn.outputs.size() && i < call.outputs.size(); ++i) {
    if (call.outputs[i].empty()) continue;
    const Value* v = inner.Find(fn.outputs[i]);
    if (v == nullptr) return InvalidArgument("function {} did not produce '{}'", fn.name, fn.outputs[i]);
    scope.values[call.outputs[i]] = *v;
  }
  return Status::Ok();
}

}  // namespace tessera::onnx
