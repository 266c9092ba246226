#include "tessera/onnx/lower/fuse_patterns.h"

#include <set>
#include <vector>

namespace tessera::onnx::lower {
namespace {

class Matcher {
 public:
  Matcher(const Graph& g, const std::map<std::string, Array>& constants) : g_(g), constants_(constants) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const std::string& in : g.nodes[i].inputs) {
        if (!in.empty()) readers_[in].push_back(i);
      }
      if (g.nodes[i].op_type == "Identity" && g.nodes[i].inputs.size() == 1 && g.nodes[i].outputs.size() == 1) {
        identity_of_[g.nodes[i].outputs[0]] = g.nodes[i].inputs[0];
      }
    }
    for (const ValueInfo& out : g.outputs) graph_outputs_.insert(out.name);
  }

  const Array* Constant(const std::string& name) const {
    if (auto it = constants_.find(name); it != constants_.end()) return &it->second;
    auto it = g_.initializers.find(name);
    return it != g_.initializers.end() ? &it->second : nullptr;
  }
  bool IsScalar(const std::string& name, double* value) const {
    const Array* a = Constant(name);
    if (a == nullptr || a->numel() != 1 || a->type() != ElemType::kFloat) return false;
    *value = a->GetDouble(0);
    return true;
  }
  // The one node reading `value` (which is no graph output), of type `op`.
  const Node* SoleReader(const std::string& value, const char* op, size_t* index) const {
    auto it = readers_.find(value);
    if (graph_outputs_.count(value) || it == readers_.end() || it->second.size() != 1) return nullptr;
    const Node& n = g_.nodes[it->second[0]];
    if (n.op_type != op || !n.domain.empty()) return nullptr;
    *index = it->second[0];
    return &n;
  }
  size_t Readers(const std::string& value) const {
    auto it = readers_.find(value);
    return graph_outputs_.count(value) ? 0 : (it == readers_.end() ? 0 : it->second.size());
  }
  // ReduceMean over the last axis, keeping it (axes an attribute, or from
  // opset 18 a constant input).
  bool MeanOverLastAxis(const Node& n) const {
    if (n.op_type != "ReduceMean" || n.outputs.size() != 1) return false;
    StatusOr<int64_t> keep = n.Int("keepdims", 1);
    if (!keep.ok() || *keep != 1) return false;
    std::vector<int64_t> axes;
    if (n.inputs.size() >= 2 && !n.inputs[1].empty()) {
      const Array* a = Constant(n.inputs[1]);
      if (a == nullptr) return false;
      axes = a->ToInts();
    } else {
      StatusOr<std::vector<int64_t>> attr = n.Ints("axes", {});
      if (!attr.ok()) return false;
      axes = *attr;
    }
    return axes == std::vector<int64_t>{-1};
  }
  // The operand of a two-input node that is not `value` (either order).
  static const std::string* Other(const Node& n, const std::string& value) {
    if (n.inputs.size() != 2) return nullptr;
    if (n.inputs[0] == value) return &n.inputs[1];
    if (n.inputs[1] == value) return &n.inputs[0];
    return nullptr;
  }
  // A float initializer or Constant output, possibly through Identity nodes
  // (exporters share equal initializers that way: gamma = Identity(w)).
  bool FloatConstant(const std::string& name) const {
    std::string n = name;
    for (int hops = 0; hops < 8; ++hops) {
      if (const Array* a = Constant(n)) return a->type() == ElemType::kFloat;
      auto it = identity_of_.find(n);
      if (it == identity_of_.end()) return false;
      n = it->second;
    }
    return false;
  }

 private:
  const Graph& g_;
  const std::map<std::string, Array>& constants_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::set<std::string> graph_outputs_;
  std::map<std::string, std::string> identity_of_;  // Identity output -> its input
};

}  // namespace

int FuseLayerNorm(Graph& g, const std::map<std::string, Array>& constants) {
  const Matcher mt(g, constants);
  std::set<size_t> removed;
  std::map<size_t, Node> replaced;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mean = g.nodes[i];
    if (removed.count(i) || !mt.MeanOverLastAxis(mean) || mean.inputs.empty()) continue;
    const std::string& x = mean.inputs[0];
    size_t i_sub = 0, i_pow = 0, i_var = 0, i_add = 0, i_sqrt = 0, i_div = 0, i_mul = 0, i_bias = 0;
    const Node* sub = mt.SoleReader(mean.outputs[0], "Sub", &i_sub);
    if (sub == nullptr || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) continue;
    const std::string& d = sub->outputs.at(0);
    if (mt.Readers(d) != 2) continue;
    // d feeds Pow(d, 2) and Div(d, s), in either order of the readers.
    const Node* pow = nullptr;
    const Node* div = nullptr;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& n = g.nodes[k];
      if (n.inputs.size() == 2 && n.inputs[0] == d && n.op_type == "Pow") pow = &n, i_pow = k;
      if (n.inputs.size() == 2 && n.inputs[0] == d && n.op_type == "Div") div = &n, i_div = k;
    }
    double two = 0, eps = 0;
    if (pow == nullptr || div == nullptr || !mt.IsScalar(pow->inputs[1], &two) || two != 2.0) continue;
    const Node* var = mt.SoleReader(pow->outputs.at(0), "ReduceMean", &i_var);
    if (var == nullptr || !mt.MeanOverLastAxis(*var)) continue;
    const Node* add = mt.SoleReader(var->outputs.at(0), "Add", &i_add);
    const std::string* eps_name = add ? Matcher::Other(*add, var->outputs[0]) : nullptr;
    if (eps_name == nullptr || !mt.IsScalar(*eps_name, &eps)) continue;
    const Node* sqrt = mt.SoleReader(add->outputs.at(0), "Sqrt", &i_sqrt);
    size_t i_div2 = 0;
    if (sqrt == nullptr || mt.SoleReader(sqrt->outputs.at(0), "Div", &i_div2) != div ||
        div->inputs[1] != sqrt->outputs[0]) {
      continue;
    }
    const Node* mul = mt.SoleReader(div->outputs.at(0), "Mul", &i_mul);
    const std::string* gamma = mul ? Matcher::Other(*mul, div->outputs[0]) : nullptr;
    if (gamma == nullptr || !mt.FloatConstant(*gamma)) continue;
    const Node* bias = mt.SoleReader(mul->outputs.at(0), "Add", &i_bias);
    const std::string* beta = bias ? Matcher::Other(*bias, mul->outputs[0]) : nullptr;
    if (beta == nullptr || !mt.FloatConstant(*beta)) continue;
    const std::set<size_t> members{i, i_sub, i_pow, i_var, i_add, i_sqrt, i_div, i_mul, i_bias};
    bool overlaps = false;
    for (size_t k : members) overlaps = overlaps || removed.count(k) || replaced.count(k);
    if (overlaps) continue;
    Node ln;
    ln.name = bias->name.empty() ? bias->outputs[0] : bias->name;
    ln.op_type = "LayerNormalization";
    ln.inputs = {x, *gamma, *beta};
    ln.outputs = {bias->outputs[0]};
    ln.attrs["epsilon"].type = Attribute::Type::kFloat;
    ln.attrs["epsilon"].f = static_cast<float>(eps);
    ln.attrs["axis"].type = Attribute::Type::kInt;
    ln.attrs["axis"].i = -1;
    for (size_t k : members) removed.insert(k);
    removed.erase(i_bias);
    replaced[i_bias] = std::move(ln);
  }
  if (replaced.empty()) return 0;
  std::vector<Node> nodes;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (auto it = replaced.find(k); it != replaced.end()) {
      nodes.push_back(std::move(it->second));
    } else if (!removed.count(k)) {
      nodes.push_back(std::move(g.nodes[k]));
    }
  }
  g.nodes = std::move(nodes);
  return static_cast<int>(replaced.size());
}

}  // namespace tessera::onnx::lower
