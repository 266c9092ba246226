// The in-memory form of an ONNX model, free of protobuf: graphs of nodes
// with typed attributes, initializers as Arrays, subgraphs (If / Loop /
// Scan bodies) as nested Graphs, and the model's opset imports. Built by
// model_loader.h; read by the interpreter and the kernels. Immutable once
// loaded (safe to share across threads).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/onnx/value.h"

namespace tessera::onnx {

struct Graph;

struct Attribute {
  enum class Type {
    kUndefined,
    kFloat,
    kInt,
    kString,
    kTensor,
    kGraph,
    kFloats,
    kInts,
    kStrings,
    kTensors,
    kGraphs,
    kTypeProto
  };
  Type type = Type::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Array t;
  std::shared_ptr<const Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Array> tensors;
  std::vector<std::shared_ptr<const Graph>> graphs;
  ElemType type_proto_elem = ElemType::kUndefined;  // kTypeProto: the tensor / sequence element type
  bool type_proto_is_sequence = false;
  // Inside a model-local function: take the value of the calling node's
  // attribute of this name (AttributeProto.ref_attr_name).
  std::string ref_attr_name;
};

struct Node {
  std::string name;  // may be empty
  std::string op_type;
  std::string domain;                // "" = ai.onnx
  std::vector<std::string> inputs;   // "" = optional input left out
  std::vector<std::string> outputs;  // "" = optional output not wanted
  std::map<std::string, Attribute> attrs;

  bool Has(const std::string& attr) const { return attrs.count(attr) > 0; }
  // Typed attribute reads with defaults; a present attribute of the wrong
  // type is an error.
  StatusOr<int64_t> Int(const std::string& attr, int64_t dflt) const;
  StatusOr<float> Float(const std::string& attr, float dflt) const;
  StatusOr<std::string> String(const std::string& attr, const std::string& dflt) const;
  StatusOr<std::vector<int64_t>> Ints(const std::string& attr, const std::vector<int64_t>& dflt) const;
  StatusOr<std::vector<float>> Floats(const std::string& attr, const std::vector<float>& dflt) const;
  StatusOr<std::vector<std::string>> Strings(const std::string& attr, const std::vector<std::string>& dflt) const;
  // Null when absent.
  const Array* Tensor(const std::string& attr) const;
  const Graph* Subgraph(const std::string& attr) const;
  std::string Describe() const;  // "node 'name' (Op)"
};

// Declared type of a graph input / output.
struct ValueInfo {
  std::string name;
  enum class Kind { kTensor, kSequence, kOptional, kUnknown } kind = Kind::kTensor;
  ElemType elem = ElemType::kUndefined;  // tensor element type (of the sequence's / optional's tensors)
  bool optional_of_sequence = false;     // kOptional holding a sequence
  std::vector<int64_t> dims;             // -1 = symbolic / unknown
  bool has_shape = false;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;  // topologically sorted (ONNX requires it; the loader checks)
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::map<std::string, Array> initializers;
};

// A model-local function (ModelProto.functions): a body graph whose inputs /
// outputs bind positionally to a calling node's.
struct Function {
  std::string name, domain;
  std::vector<std::string> inputs, outputs, attribute_names;
  std::vector<Node> nodes;
};

struct Model {
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
  std::string producer;
  Graph graph;
  std::map<std::string, Function> functions;  // by "domain:name"
};

}  // namespace tessera::onnx
