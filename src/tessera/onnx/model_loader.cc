#include "tessera/onnx/model_loader.h"

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "tessera/base/file_io.h"
#include "tessera/onnx/tensor_proto.h"

namespace tessera::onnx {
namespace {

constexpr int kMaxGraphDepth = 32;  // nested If / Loop / Scan bodies

StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return IoError("cannot read '{}'", path);
  return s.str();
}

ValueInfo ConvertValueInfo(const ::onnx::ValueInfoProto& v) {
  ValueInfo info;
  info.name = v.name();
  const ::onnx::TypeProto* t = &v.type();
  auto tensor_of = [&info](const ::onnx::TypeProto_Tensor& tt) {
    info.elem = static_cast<ElemType>(tt.elem_type());
    if (tt.has_shape()) {
      info.has_shape = true;
      for (const auto& d : tt.shape().dim()) info.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
  };
  if (t->has_tensor_type()) {
    info.kind = ValueInfo::Kind::kTensor;
    tensor_of(t->tensor_type());
  } else if (t->has_sequence_type()) {
    info.kind = ValueInfo::Kind::kSequence;
    if (t->sequence_type().elem_type().has_tensor_type()) tensor_of(t->sequence_type().elem_type().tensor_type());
  } else if (t->has_optional_type()) {
    info.kind = ValueInfo::Kind::kOptional;
    const ::onnx::TypeProto& e = t->optional_type().elem_type();
    if (e.has_tensor_type()) {
      tensor_of(e.tensor_type());
    } else if (e.has_sequence_type()) {
      info.optional_of_sequence = true;
      if (e.sequence_type().elem_type().has_tensor_type()) tensor_of(e.sequence_type().elem_type().tensor_type());
    }
  } else {
    info.kind = ValueInfo::Kind::kUnknown;
  }
  return info;
}

class Converter {
 public:
  explicit Converter(std::string what) : what_(std::move(what)) {}

  // `outer`: names visible from enclosing graphs.
  StatusOr<std::shared_ptr<Graph>> ConvertGraph(const ::onnx::GraphProto& gp, const std::set<std::string>& outer,
                                                int depth) {
    if (depth > kMaxGraphDepth) return InvalidArgument("{}: subgraphs nested deeper than {}", what_, kMaxGraphDepth);
    auto g = std::make_shared<Graph>();
    g->name = gp.name();
    std::set<std::string> defined = outer;
    for (const auto& t : gp.initializer()) {
      TESSERA_ASSIGN_OR_RETURN(Array a, ArrayFromProto(t, fmt::format("{}: initializer '{}'", what_, t.name())));
      g->initializers[t.name()] = std::move(a);
      defined.insert(t.name());
    }
    if (gp.sparse_initializer_size() > 0) return Unimplemented("{}: sparse initializers are not supported", what_);
    for (const auto& v : gp.input()) {
      g->inputs.push_back(ConvertValueInfo(v));
      defined.insert(v.name());
    }
    for (const auto& v : gp.output()) g->outputs.push_back(ConvertValueInfo(v));
    for (const auto& np : gp.node()) {
      TESSERA_ASSIGN_OR_RETURN(Node n, ConvertNode(np, defined, depth));
      for (const std::string& in : n.inputs) {
        if (!in.empty() && !defined.count(in)) {
          return InvalidArgument("{}: {} reads '{}', which no input, initializer or earlier node defines", what_,
                                 n.Describe(), in);
        }
      }
      for (const std::string& out : n.outputs) {
        if (!out.empty()) defined.insert(out);
      }
      g->nodes.push_back(std::move(n));
    }
    for (const ValueInfo& o : g->outputs) {
      if (!defined.count(o.name)) return InvalidArgument("{}: graph output '{}' is never defined", what_, o.name);
    }
    return g;
  }

  StatusOr<Node> ConvertNode(const ::onnx::NodeProto& np, const std::set<std::string>& defined, int depth) {
    Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (n.op_type.empty()) return InvalidArgument("{}: a node (name '{}') has no op_type", what_, n.name);
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& ap : np.attribute()) {
      TESSERA_ASSIGN_OR_RETURN(Attribute a, ConvertAttribute(ap, n, defined, depth));
      n.attrs[ap.name()] = std::move(a);
    }
    return n;
  }

  StatusOr<Attribute> ConvertAttribute(const ::onnx::AttributeProto& ap, const Node& n,
                                       const std::set<std::string>& defined, int depth) {
    Attribute a;
    a.ref_attr_name = ap.ref_attr_name();
    const std::string where = fmt::format("{}: {} attribute '{}'", what_, n.Describe(), ap.name());
    // Subgraphs see every name defined so far in the enclosing graphs.
    auto graph = [&](const ::onnx::GraphProto& gp) { return ConvertGraph(gp, defined, depth + 1); };
    using A = ::onnx::AttributeProto;
    switch (ap.type()) {
      case A::FLOAT:
        a.type = Attribute::Type::kFloat;
        a.f = ap.f();
        break;
      case A::INT:
        a.type = Attribute::Type::kInt;
        a.i = ap.i();
        break;
      case A::STRING:
        a.type = Attribute::Type::kString;
        a.s = ap.s();
        break;
      case A::TENSOR: {
        a.type = Attribute::Type::kTensor;
        TESSERA_ASSIGN_OR_RETURN(a.t, ArrayFromProto(ap.t(), where));
        break;
      }
      case A::GRAPH: {
        a.type = Attribute::Type::kGraph;
        TESSERA_ASSIGN_OR_RETURN(a.g, graph(ap.g()));
        break;
      }
      case A::FLOATS:
        a.type = Attribute::Type::kFloats;
        a.floats.assign(ap.floats().begin(), ap.floats().end());
        break;
      case A::INTS:
        a.type = Attribute::Type::kInts;
        a.ints.assign(ap.ints().begin(), ap.ints().end());
        break;
      case A::STRINGS:
        a.type = Attribute::Type::kStrings;
        a.strings.assign(ap.strings().begin(), ap.strings().end());
        break;
      case A::TENSORS:
        a.type = Attribute::Type::kTensors;
        for (const auto& t : ap.tensors()) {
          TESSERA_ASSIGN_OR_RETURN(Array x, ArrayFromProto(t, where));
          a.tensors.push_back(std::move(x));
        }
        break;
      case A::GRAPHS:
        a.type = Attribute::Type::kGraphs;
        for (const auto& gp : ap.graphs()) {
          TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, graph(gp));
          a.graphs.push_back(std::move(g));
        }
        break;
      case A::TYPE_PROTO: {
        a.type = Attribute::Type::kTypeProto;
        const ::onnx::TypeProto& tp = ap.tp();
        if (tp.has_tensor_type()) {
          a.type_proto_elem = static_cast<ElemType>(tp.tensor_type().elem_type());
        } else if (tp.has_sequence_type() && tp.sequence_type().elem_type().has_tensor_type()) {
          a.type_proto_is_sequence = true;
          a.type_proto_elem = static_cast<ElemType>(tp.sequence_type().elem_type().tensor_type().elem_type());
        }
        break;
      }
      case A::SPARSE_TENSOR:
      case A::SPARSE_TENSORS: return Unimplemented("{}: sparse tensor attributes are not supported", where);
      default:
        // Attributes written without a type (old exporters): infer from the set field.
        if (ap.has_f()) {
          a.type = Attribute::Type::kFloat;
          a.f = ap.f();
        } else if (ap.has_i()) {
          a.type = Attribute::Type::kInt;
          a.i = ap.i();
        } else if (ap.has_s()) {
          a.type = Attribute::Type::kString;
          a.s = ap.s();
        } else if (!a.ref_attr_name.empty()) {
          a.type = Attribute::Type::kUndefined;
        } else
          return InvalidArgument("{}: attribute type {} is unknown", where, static_cast<int>(ap.type()));
    }
    return a;
  }

  StatusOr<Function> ConvertFunction(const ::onnx::FunctionProto& fp) {
    Function f;
    f.name = fp.name();
    f.domain = fp.domain();
    f.inputs.assign(fp.input().begin(), fp.input().end());
    f.outputs.assign(fp.output().begin(), fp.output().end());
    f.attribute_names.assign(fp.attribute().begin(), fp.attribute().end());
    std::set<std::string> defined(f.inputs.begin(), f.inputs.end());
    for (const auto& np : fp.node()) {
      TESSERA_ASSIGN_OR_RETURN(Node n, ConvertNode(np, defined, 1));
      for (const std::string& out : n.outputs) defined.insert(out);
      f.nodes.push_back(std::move(n));
    }
    return f;
  }

 private:
  std::string what_;
};

}  // namespace

StatusOr<Model> ParseModel(const std::string& bytes, const std::string& what) {
  ::onnx::ModelProto mp;
  if (bytes.empty()) return InvalidArgument("{}: empty file, not an ONNX model", what);
  if (!mp.ParseFromString(bytes))
    return InvalidArgument("{}: not a valid ONNX ModelProto (protobuf parse failed)", what);
  if (!mp.has_graph()) return InvalidArgument("{}: the model has no graph", what);
  Model m;
  m.ir_version = mp.ir_version();
  m.producer = mp.producer_name();
  for (const auto& os : mp.opset_import()) m.opsets[os.domain() == "ai.onnx" ? "" : os.domain()] = os.version();
  if (m.opsets.empty()) m.opsets[""] = 1;  // IR v3 and older imported opset 1 implicitly
  Converter c(what);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, c.ConvertGraph(mp.graph(), {}, 0));
  m.graph = std::move(*g);
  for (const auto& fp : mp.functions()) {
    TESSERA_ASSIGN_OR_RETURN(Function f, c.ConvertFunction(fp));
    m.functions[f.domain + ":" + f.name] = std::move(f);
  }
  return m;
}

StatusOr<Model> LoadModelFile(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(path));
  return ParseModel(bytes, path);
}

StatusOr<Value> LoadTensorFile(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(path));
  ::onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) return InvalidArgument("{}: not a valid TensorProto", path);
  TESSERA_ASSIGN_OR_RETURN(Array a, ArrayFromProto(t, path));
  return Value::Tensor(std::move(a));
}

namespace {

StatusOr<Value> SequenceFromProto(const ::onnx::SequenceProto& s, const std::string& path, ElemType elem) {
  if (s.elem_type() != ::onnx::SequenceProto::TENSOR && s.elem_type() != ::onnx::SequenceProto::UNDEFINED) {
    return Unimplemented("{}: sequences of non-tensors are not supported", path);
  }
  std::vector<Array> items;
  for (const auto& t : s.tensor_values()) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ArrayFromProto(t, path));
    items.push_back(std::move(a));
  }
  if (!items.empty()) elem = items[0].type();
  return Value::Sequence(std::move(items), elem);
}

}  // namespace

StatusOr<Value> LoadValueFile(const std::string& path, const ValueInfo& expected) {
  if (expected.kind == ValueInfo::Kind::kTensor || expected.kind == ValueInfo::Kind::kUnknown) {
    TESSERA_ASSIGN_OR_RETURN(Value v, LoadTensorFile(path));
    // ONNX's test data (numpy has no bfloat16) stores bfloat16 tensors as
    // their uint16 bit patterns: take the bits as the declared type.
    if (expected.elem == ElemType::kBFloat16 && v.tensor.type() == ElemType::kUint16) {
      Array bits(ElemType::kBFloat16, v.tensor.shape());
      if (bits.nbytes() > 0) std::memcpy(bits.raw(), v.tensor.raw(), bits.nbytes());
      v.tensor = std::move(bits);
    }
    return v;
  }
  TESSERA_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(path));
  if (expected.kind == ValueInfo::Kind::kSequence) {
    ::onnx::SequenceProto s;
    if (!s.ParseFromString(bytes)) return InvalidArgument("{}: not a valid SequenceProto", path);
    return SequenceFromProto(s, path, expected.elem);
  }
  ::onnx::OptionalProto o;
  if (!o.ParseFromString(bytes)) return InvalidArgument("{}: not a valid OptionalProto", path);
  if (o.has_tensor_value()) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ArrayFromProto(o.tensor_value(), path));
    return Value::Optional(std::make_shared<Value>(Value::Tensor(std::move(a))));
  }
  if (o.has_sequence_value()) {
    TESSERA_ASSIGN_OR_RETURN(Value s, SequenceFromProto(o.sequence_value(), path, expected.elem));
    return Value::Optional(std::make_shared<Value>(std::move(s)));
  }
  return Value::Optional(nullptr);
}

Status SaveTensorFile(const Array& a, const std::string& name, const std::string& path) {
  ::onnx::TensorProto t;
  ArrayToProto(a, &t);
  t.set_name(name);
  std::ofstream out(path, std::ios::binary);
  if (!out || !t.SerializeToOstream(&out)) return IoError("cannot write '{}'", path);
  return Status::Ok();
}

Status SaveModelWithInitializers(const std::string& in_path, const std::map<std::string, Array>& initializers,
                                 const std::string& out_path) {
  TESSERA_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(in_path));
  ::onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return InvalidArgument("{}: not a valid ONNX model", in_path);
  std::set<std::string> written;
  for (::onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    auto it = initializers.find(t.name());
    if (it == initializers.end()) continue;
    const std::string what = fmt::format("initializer '{}' of {}", t.name(), in_path);
    TESSERA_ASSIGN_OR_RETURN(Array old, ArrayFromProto(t, what));
    if (old.type() != it->second.type() || old.shape() != it->second.shape()) {
      return InvalidArgument("{}: new value is {} {}, the model has {} {}", what, ElemName(it->second.type()),
                             it->second.ShapeString(), ElemName(old.type()), old.ShapeString());
    }
    const std::string name = t.name();
    t.Clear();
    ArrayToProto(it->second, &t);
    t.set_name(name);
    written.insert(name);
  }
  for (const auto& [name, a] : initializers) {
    if (!written.count(name)) return InvalidArgument("{} has no initializer '{}'", in_path, name);
  }
  std::string out;
  if (!m.SerializeToString(&out)) return Internal("cannot serialize the model of {}", in_path);
  return WriteFileAtomic(out_path, out);
}

}  // namespace tessera::onnx
