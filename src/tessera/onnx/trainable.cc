#include "tessera/onnx/trainable.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>

#include "tessera/graph/tape.h"
#include "tessera/onnx/lower/fuse_patterns.h"
#include "tessera/onnx/lower/lower.h"
#include "tessera/onnx/op.h"

namespace tessera::onnx {
namespace lower {

StatusOr<Tensor> LowerContext::tensor(size_t i) const {
  if (!has_input(i)) return Error("input {} is missing", i);
  const Tensor* t = tensor_of_(node_.inputs[i]);
  if (t == nullptr) return Error("input '{}' has no value a differentiable operator can read", node_.inputs[i]);
  return *t;
}

StatusOr<Tensor> LowerContext::float_tensor(size_t i) const {
  TESSERA_ASSIGN_OR_RETURN(Tensor t, tensor(i));
  if (t.dtype() != DType::kF32)
    return Error("input '{}' is {}, expected float32", node_.inputs[i], DTypeName(t.dtype()));
  return t;
}

StatusOr<Array> LowerContext::constant(size_t i) const {
  if (!has_input(i)) return Error("input {} is missing", i);
  const Array* a = constant_of_(node_.inputs[i]);
  if (a == nullptr) {
    return Error("input '{}' must be a constant (an initializer or a Constant node) to train this model",
                 node_.inputs[i]);
  }
  return *a;
}

StatusOr<std::vector<int64_t>> LowerContext::ints(size_t i) const {
  TESSERA_ASSIGN_OR_RETURN(Array a, constant(i));
  if (a.type() != ElemType::kInt64 && a.type() != ElemType::kInt32) {
    return Error("input '{}' must hold integers, got {}", node_.inputs[i], ElemName(a.type()));
  }
  return a.ToInts();
}

StatusOr<std::vector<int64_t>> LowerContext::ints_attr_or_input(const std::string& attr, size_t i, int64_t input_since,
                                                                const std::vector<int64_t>& dflt) const {
  if (opset_ < input_since) return node_.Ints(attr, dflt);
  if (!has_input(i)) return dflt;
  return ints(i);
}

StatusOr<int> Axis(const LowerContext& ctx, int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return ctx.Error("axis {} is out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

const LoweringTable& Lowerings() {
  static const LoweringTable table = [] {
    LoweringTable t;
    AddMathLowerings(t);
    AddShapeLowerings(t);
    AddNnLowerings(t);
    return t;
  }();
  return table;
}

}  // namespace lower

namespace {

// Input positions whose value is read on the host as a shape, axes, bounds
// or a flag: a float initializer read only there is not a parameter.
bool IsConstantInput(const std::string& op, size_t i) {
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Split" || op == "ReduceSum" ||
      op == "ReduceMean") {
    return i == 1;
  }
  if (op == "Slice") return i >= 1;
  if (op == "Dropout") return i >= 1;
  if (op == "Pow" || op == "Expand") return i == 1;
  if (op == "Clip") return i >= 1;
  return false;
}

bool IsBufferInput(const std::string& op, size_t i) { return op == "BatchNormalization" && (i == 3 || i == 4); }

// A Constant node's value (value, value_float(s), value_int(s)).
StatusOr<Array> ConstantValue(const Node& node) {
  if (const Array* t = node.Tensor("value")) return *t;
  if (node.Has("value_float")) {
    TESSERA_ASSIGN_OR_RETURN(float f, node.Float("value_float", 0));
    return Array::Scalar<float>(f);
  }
  if (node.Has("value_int")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t v, node.Int("value_int", 0));
    return Array::Scalar<int64_t>(v);
  }
  if (node.Has("value_floats")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> v, node.Floats("value_floats", {}));
    return Array::Vector<float>(v);
  }
  if (node.Has("value_ints")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.Ints("value_ints", {}));
    return Array::Vector<int64_t>(v);
  }
  return InvalidArgument("{}: only tensor, float and int values are supported", node.Describe());
}

// Whether a node can run on its interpreter kernel outside an Interpreter
// (no subgraphs, no random generator).
bool Foldable(const Node& node) {
  static const std::set<std::string> kNot{"If",
                                          "Loop",
                                          "Scan",
                                          "Dropout",
                                          "RandomNormal",
                                          "RandomUniform",
                                          "Bernoulli",
                                          "Multinomial",
                                          "RandomNormalLike",
                                          "RandomUniformLike"};
  if (kNot.count(node.op_type)) return false;
  for (const auto& [name, attr] : node.attrs) {
    if (attr.type == Attribute::Type::kGraph || attr.type == Attribute::Type::kGraphs) return false;
  }
  return true;
}

}  // namespace

bool TrainableModel::IsTrainable(const std::string& name) const { return trainable_names_.count(name) > 0; }

StatusOr<Tensor> TensorFromArray(const Array& a, const std::string& what) {
  DType dtype;
  switch (a.type()) {
    case ElemType::kFloat: dtype = DType::kF32; break;
    case ElemType::kInt64: dtype = DType::kI64; break;
    case ElemType::kInt32: dtype = DType::kI32; break;
    default:
      return InvalidArgument("{} is {}: a trainable model holds float32 data and int32 / int64 indices", what,
                             ElemName(a.type()));
  }
  Tensor t = Tensor::Empty(a.shape(), dtype);
  if (a.numel() > 0) std::memcpy(t.raw_data(), a.raw(), a.nbytes());
  return t;
}

Array ArrayFromTensor(const Tensor& t) {
  const Tensor c = t.Contiguous();
  ElemType type = ElemType::kFloat;
  if (c.dtype() == DType::kI64) type = ElemType::kInt64;
  if (c.dtype() == DType::kI32) type = ElemType::kInt32;
  const Tensor src = type == ElemType::kFloat ? c.To(DType::kF32).Contiguous() : c;
  Array a(type, src.shape());
  if (a.numel() > 0) std::memcpy(a.raw(), src.raw_data(), a.nbytes());
  return a;
}

std::vector<std::string> TrainableOps() {
  std::vector<std::string> names{"Constant", "Shape"};
  for (const auto& [name, fn] : lower::Lowerings()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<std::unique_ptr<TrainableModel>> TrainableModel::Create(const Model& model, const TrainableOptions& options) {
  std::unique_ptr<TrainableModel> m(new TrainableModel());
  m->model_ = model;
  m->options_ = options;
  // Constant nodes: evaluated once.
  for (const Node& node : m->model_.graph.nodes) {
    if (node.op_type != "Constant") continue;
    TESSERA_ASSIGN_OR_RETURN(Array a, ConstantValue(node));
    if (node.outputs.size() != 1) return InvalidArgument("{}: expected one output", node.Describe());
    m->constants_[node.outputs[0]] = a;
    StatusOr<Tensor> t = TensorFromArray(a, node.Describe());
    if (t.ok()) m->tensors_[node.outputs[0]] = *t;
  }
  if (options.fuse_layer_norm) {
    try {
      m->fused_layer_norms_ = lower::FuseLayerNorm(m->model_.graph, m->constants_);
    } catch (const std::exception& e) {  // a malformed node (e.g. without outputs)
      return InvalidArgument("LayerNorm fusion: {}", e.what());
    }
  }
  const Graph& g = m->model_.graph;
  const auto& table = lower::Lowerings();
  // Classify the float initializers by how they are read.
  std::map<std::string, int> role;  // 1 data (parameter), 2 buffer; absent: constant only
  for (const Node& node : g.nodes) {
    if (!node.domain.empty() && node.domain != "ai.onnx") {
      return Unimplemented("{}: operators of domain '{}' cannot be trained", node.Describe(), node.domain);
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& name = node.inputs[i];
      if (name.empty() || !g.initializers.count(name) || g.initializers.at(name).type() != ElemType::kFloat) continue;
      if (IsBufferInput(node.op_type, i)) {
        role[name] = 2;
      } else if (!IsConstantInput(node.op_type, i) && role[name] != 2) {
        role[name] = 1;
      }
    }
  }
  for (const auto& [name, array] : g.initializers) {
    StatusOr<Tensor> converted = TensorFromArray(array, name);
    if (!converted.ok()) continue;  // a constant of another type: read through constant() only
    Tensor t = *converted;
    auto r = role.find(name);
    const bool scalar = array.numel() == 1 && !options.train_scalars;  // eps, scales: constants by default
    if (r != role.end() && r->second == 1 && !options.frozen.count(name) && !scalar) {
      t.set_requires_grad(true);
      m->parameters_.emplace_back(name, t);
      m->trainable_names_.insert(name);
    } else if (r != role.end() && r->second == 2) {
      m->buffers_.emplace_back(name, t);
      m->trainable_names_.insert(name);
    }
    m->tensors_[name] = t;
  }
  for (const std::string& name : options.frozen) {
    if (!g.initializers.count(name)) return InvalidArgument("frozen initializer '{}' is not in the model", name);
  }
  for (const auto& [name, value] : options.constant_inputs) {
    bool found = false;
    for (const ValueInfo& in : g.inputs) found = found || in.name == name;
    if (!found) return InvalidArgument("constant input '{}' is not an input of the model", name);
    m->constants_[name] = value;
    StatusOr<Tensor> t = TensorFromArray(value, name);
    if (t.ok()) m->tensors_[name] = *t;
  }
  for (const ValueInfo& in : g.inputs) {
    if (!g.initializers.count(in.name) && !options.constant_inputs.count(in.name)) {
      m->input_names_.push_back(in.name);
    }
  }
  for (const ValueInfo& out : g.outputs) m->output_names_.push_back(out.name);
  // How each node runs. Static values (constants, Shape outputs, and what
  // is computed from them alone — the shape arithmetic exporters emit) are
  // folded on the interpreter's kernels; the rest must lower.
  std::set<std::string> statics;
  for (const auto& [name, a] : g.initializers) {
    if (!m->IsTrainable(name)) statics.insert(name);
  }
  for (const auto& [name, a] : m->constants_) statics.insert(name);
  const OpRegistry& registry = OpRegistry::Global();
  for (const Node& node : g.nodes) {
    bool all_static = true;
    for (const std::string& in : node.inputs) all_static = all_static && (in.empty() || statics.count(in));
    Step step;
    if (node.op_type == "Constant") {
      step = Step::kConstant;
    } else if (node.op_type == "Shape") {
      step = Step::kShape;
    } else if (all_static && Foldable(node) && registry.Find("", node.op_type) != nullptr) {
      step = Step::kFold;
    } else if (table.count(node.op_type)) {
      step = Step::kLower;
    } else {
      return Unimplemented("{}: no differentiable Tessera operator for {} (tessera onnx run executes it, forward only)",
                           node.Describe(), node.op_type);
    }
    m->steps_.push_back(step);
    if (step != Step::kLower) statics.insert(node.outputs.begin(), node.outputs.end());
  }
  // The last node reading each value (graph outputs are never dropped).
  std::map<std::string, size_t> last;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const std::string& name : g.nodes[k].inputs) last[name] = k;
  }
  for (const std::string& name : m->output_names_) last.erase(name);
  m->drop_after_.assign(g.nodes.size(), {});
  for (const auto& [name, k] : last) m->drop_after_[k].push_back(name);
  return m;
}

StatusOr<std::vector<Tensor>> TrainableModel::Forward(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != input_names_.size()) {
    return InvalidArgument("the model takes {} inputs, got {}", input_names_.size(), inputs.size());
  }
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[input_names_[i]] = inputs[i];
  std::map<std::string, Array> folded;  // this call's static values (Shape outputs, folded nodes)
  auto tensor_of = [&](const std::string& name) -> const Tensor* {
    if (auto it = values.find(name); it != values.end()) return &it->second;
    if (auto it = tensors_.find(name); it != tensors_.end()) return &it->second;
    if (auto it = folded.find(name); it != folded.end()) {
      StatusOr<Tensor> t = TensorFromArray(it->second, name);
      if (t.ok()) return &(values[name] = *t);
    }
    return nullptr;
  };
  auto constant_of = [&](const std::string& name) -> const Array* {
    if (auto it = folded.find(name); it != folded.end()) return &it->second;
    if (auto it = constants_.find(name); it != constants_.end()) return &it->second;
    auto it = model_.graph.initializers.find(name);
    return it != model_.graph.initializers.end() && !IsTrainable(name) ? &it->second : nullptr;
  };
  const Graph& g = model_.graph;
  // A failed call abandons what it recorded when the tape was empty before it
  // (a training step's forward); otherwise the caller abandons the step.
  const bool tape_was_empty = graph::TapeSize() == 0;
  auto failed = [&](Status s) {
    if (tape_was_empty) graph::ClearTape();
    return s;
  };
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    Status s = Status::Ok();
    try {
      switch (steps_[k]) {
        case Step::kConstant: break;
        case Step::kShape: s = RunShape(node, tensor_of, constant_of, folded); break;
        case Step::kFold: s = RunFolded(node, constant_of, folded); break;
        case Step::kLower: {
          lower::LowerContext ctx(node, ModelOpset(), options_.training, tensor_of, constant_of);
          s = lower::Lowerings().at(node.op_type)(ctx);
          for (size_t i = 0; s.ok() && i < node.outputs.size(); ++i) {
            if (node.outputs[i].empty()) continue;
            if (!ctx.outputs()[i].defined()) {
              s = Internal("{}: output {} was not produced", node.Describe(), i);
            } else {
              values[node.outputs[i]] = ctx.outputs()[i];
            }
          }
          break;
        }
      }
    } catch (const std::exception& e) {
      s = InvalidArgument("{}: {}", node.Describe(), e.what());
    }
    if (!s.ok()) return failed(s);
    for (const std::string& name : drop_after_[k]) {
      values.erase(name);
      folded.erase(name);
    }
  }
  std::vector<Tensor> out;
  for (const std::string& name : output_names_) {
    const Tensor* t = tensor_of(name);
    if (t == nullptr) return failed(InvalidArgument("graph output '{}' has no tensor value", name));
    out.push_back(*t);
  }
  return out;
}

Status TrainableModel::RunShape(const Node& node, const lower::LowerContext::TensorLookup& tensor_of,
                                const lower::LowerContext::ConstantLookup& constant_of,
                                std::map<std::string, Array>& folded) const {
  std::vector<int64_t> dims;
  if (const Tensor* t = node.inputs.empty() ? nullptr : tensor_of(node.inputs[0])) {
    dims = t->shape();
  } else if (const Array* a = node.inputs.empty() ? nullptr : constant_of(node.inputs[0])) {
    dims = a->shape();
  } else {
    return InvalidArgument("{}: its input has no value", node.Describe());
  }
  // Opset 15: the dims [start, end) (negative counts from the end, clamped).
  TESSERA_ASSIGN_OR_RETURN(int64_t start, node.Int("start", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t end, node.Int("end", static_cast<int64_t>(dims.size())));
  const int64_t rank = static_cast<int64_t>(dims.size());
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = std::max(start, clamp(end));
  folded[node.outputs.at(0)] = Array::Vector<int64_t>({dims.begin() + start, dims.begin() + end});
  return Status::Ok();
}

Status TrainableModel::RunFolded(const Node& node, const lower::LowerContext::ConstantLookup& constant_of,
                                 std::map<std::string, Array>& folded) const {
  std::vector<Value> held;
  held.reserve(node.inputs.size());
  std::vector<const Value*> ins;
  for (const std::string& name : node.inputs) {
    if (name.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    const Array* a = constant_of(name);
    if (a == nullptr) return Internal("{}: static input '{}' has no value", node.Describe(), name);
    held.push_back(Value::Tensor(*a));
    ins.push_back(&held.back());
  }
  OpContext ctx(node, ModelOpset(), std::move(ins), nullptr, nullptr);
  TESSERA_RETURN_IF_ERROR((*OpRegistry::Global().Find("", node.op_type))(ctx));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i].empty()) continue;
    if (!ctx.outputs()[i].is_tensor()) return InvalidArgument("{}: output {} is not a tensor", node.Describe(), i);
    folded[node.outputs[i]] = ctx.outputs()[i].tensor;
  }
  return Status::Ok();
}

int64_t TrainableModel::ModelOpset() const {
  for (const char* domain : {"", "ai.onnx"}) {
    if (auto it = model_.opsets.find(domain); it != model_.opsets.end()) return it->second;
  }
  return 1;
}

std::map<std::string, Array> TrainableModel::Initializers() const {
  std::map<std::string, Array> out = model_.graph.initializers;
  for (const auto* list : {&parameters_, &buffers_}) {
    for (const auto& [name, t] : *list) out[name] = ArrayFromTensor(t);
  }
  return out;
}

}  // namespace tessera::onnx
