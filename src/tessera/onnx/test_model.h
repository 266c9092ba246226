// Test helper: an empty opset-17 ModelProto whose graph has one float input
// "x", for tests that build small models node by node.
#pragma once

#include <onnx/onnx_pb.h>

namespace tessera::onnx::testing {

inline ::onnx::GraphProto* NewModelWithFloatInput(::onnx::ModelProto* m) {
  m->set_ir_version(8);
  m->add_opset_import()->set_version(17);
  ::onnx::GraphProto* g = m->mutable_graph();
  ::onnx::ValueInfoProto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  return g;
}

}  // namespace tessera::onnx::testing
