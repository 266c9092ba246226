// Reads ONNX files (protobuf, via Debian's libonnx / onnx_proto) into the
// runtime's own structures: ModelProto -> Model, TensorProto / SequenceProto
// / OptionalProto (.pb test data) -> Value. Every malformed input — a
// truncated file, a tensor whose data does not match its dims, an unknown
// element type, a node reading an undefined value — is a Status naming the
// file and what is wrong; nothing here aborts on bad bytes.
#pragma once

#include <map>
#include <string>

#include "tessera/onnx/graph.h"

namespace tessera::onnx {

StatusOr<Model> LoadModelFile(const std::string& path);
StatusOr<Model> ParseModel(const std::string& bytes, const std::string& what);

// A .pb holding a TensorProto, SequenceProto or OptionalProto; `expected`
// (the graph input / output it binds to) says which.
StatusOr<Value> LoadValueFile(const std::string& path, const ValueInfo& expected);
StatusOr<Value> LoadTensorFile(const std::string& path);

// Writes a tensor as a TensorProto .pb file (for `tessera onnx run` outputs).
Status SaveTensorFile(const Array& a, const std::string& name, const std::string& path);

// Writes the model of `in_path` to `out_path` (atomically; it may be the
// same file) with its main graph's initializers replaced by `initializers`
// (by name). Each must exist in the model with the same element type and
// shape; otherwise nothing is written and the error names it.
Status SaveModelWithInitializers(const std::string& in_path, const std::map<std::string, Array>& initializers,
                                 const std::string& out_path);

}  // namespace tessera::onnx
