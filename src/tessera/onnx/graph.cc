#include "tessera/onnx/graph.h"

#include <fmt/format.h>

namespace tessera::onnx {
namespace {

const char* TypeName(Attribute::Type t) {
  switch (t) {
    case Attribute::Type::kFloat: return "float";
    case Attribute::Type::kInt: return "int";
    case Attribute::Type::kString: return "string";
    case Attribute::Type::kTensor: return "tensor";
    case Attribute::Type::kGraph: return "graph";
    case Attribute::Type::kFloats: return "floats";
    case Attribute::Type::kInts: return "ints";
    case Attribute::Type::kStrings: return "strings";
    case Attribute::Type::kTensors: return "tensors";
    case Attribute::Type::kGraphs: return "graphs";
    case Attribute::Type::kTypeProto: return "type_proto";
    default: return "undefined";
  }
}

}  // namespace

#define TESSERA_ONNX_ATTR(T, kind, field, Name)                                                                    \
  StatusOr<T> Node::Name(const std::string& attr, const T& dflt) const {                                           \
    auto it = attrs.find(attr);                                                                                    \
    if (it == attrs.end()) return dflt;                                                                            \
    if (it->second.type != Attribute::Type::kind) {                                                                \
      return InvalidArgument("{}: attribute '{}' is {}, expected {}", Describe(), attr, TypeName(it->second.type), \
                             TypeName(Attribute::Type::kind));                                                     \
    }                                                                                                              \
    return it->second.field;                                                                                       \
  }

StatusOr<int64_t> Node::Int(const std::string& attr, int64_t dflt) const {
  auto it = attrs.find(attr);
  if (it == attrs.end()) return dflt;
  if (it->second.type != Attribute::Type::kInt) {
    return InvalidArgument("{}: attribute '{}' is {}, expected int", Describe(), attr, TypeName(it->second.type));
  }
  return it->second.i;
}

StatusOr<float> Node::Float(const std::string& attr, float dflt) const {
  auto it = attrs.find(attr);
  if (it == attrs.end()) return dflt;
  if (it->second.type == Attribute::Type::kInt) return static_cast<float>(it->second.i);
  if (it->second.type != Attribute::Type::kFloat) {
    return InvalidArgument("{}: attribute '{}' is {}, expected float", Describe(), attr, TypeName(it->second.type));
  }
  return it->second.f;
}

TESSERA_ONNX_ATTR(std::string, kString, s, String)
TESSERA_ONNX_ATTR(std::vector<int64_t>, kInts, ints, Ints)
TESSERA_ONNX_ATTR(std::vector<float>, kFloats, floats, Floats)
TESSERA_ONNX_ATTR(std::vector<std::string>, kStrings, strings, Strings)
#undef TESSERA_ONNX_ATTR

const Array* Node::Tensor(const std::string& attr) const {
  auto it = attrs.find(attr);
  return it != attrs.end() && it->second.type == Attribute::Type::kTensor ? &it->second.t : nullptr;
}

const Graph* Node::Subgraph(const std::string& attr) const {
  auto it = attrs.find(attr);
  return it != attrs.end() && it->second.type == Attribute::Type::kGraph ? it->second.g.get() : nullptr;
}

std::string Node::Describe() const {
  return fmt::format("node '{}' ({}{}{})", name.empty() && !outputs.empty() ? outputs[0] : name, domain,
                     domain.empty() ? "" : ":", op_type);
}

}  // namespace tessera::onnx
