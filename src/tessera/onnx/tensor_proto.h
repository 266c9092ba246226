// TensorProto <-> Array conversion (raw_data or the typed repeated fields,
// checked against dims and data_type). Internal to the loader; kept apart
// so the protobuf types stay out of every other header.
#pragma once

#include <onnx/onnx_pb.h>

#include "tessera/onnx/value.h"

namespace tessera::onnx {

// `what` names the tensor in errors ("initializer 'w' of model.onnx").
StatusOr<Array> ArrayFromProto(const ::onnx::TensorProto& t, const std::string& what);
void ArrayToProto(const Array& a, ::onnx::TensorProto* t);

}  // namespace tessera::onnx
