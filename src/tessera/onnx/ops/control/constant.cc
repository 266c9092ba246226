// Constant: a tensor from exactly one of its value attributes.
#include "tessera/onnx/ops/control/control_util.h"

namespace tessera::onnx::control {

Status ConstantKernel(OpContext& ctx) {
  const Node& node = ctx.node();
  static const char* const kNames[] = {"value",      "value_float",  "value_floats",  "value_int",
                                       "value_ints", "value_string", "value_strings", "sparse_value"};
  int set = 0;
  for (const char* name : kNames) set += node.Has(name) ? 1 : 0;
  if (set != 1) return ctx.Error("exactly one value attribute must be set, found {}", set);
  if (node.Has("sparse_value")) return ctx.Error("sparse_value constants are not supported");
  if (node.Has("value")) {
    const Array* t = node.Tensor("value");
    if (t == nullptr) return ctx.Error("attribute 'value' must be a tensor");
    ctx.set_output(0, *t);
  } else if (node.Has("value_float")) {
    TESSERA_ASSIGN_OR_RETURN(float v, node.Float("value_float", 0));
    ctx.set_output(0, Array::Scalar<float>(v));
  } else if (node.Has("value_floats")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> v, node.Floats("value_floats", {}));
    ctx.set_output(0, Array::Vector<float>(v));
  } else if (node.Has("value_int")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t v, node.Int("value_int", 0));
    ctx.set_output(0, Array::Scalar<int64_t>(v));
  } else if (node.Has("value_ints")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.Ints("value_ints", {}));
    ctx.set_output(0, Array::Vector<int64_t>(v));
  } else if (node.Has("value_string")) {
    TESSERA_ASSIGN_OR_RETURN(std::string v, node.String("value_string", ""));
    ctx.set_output(0, Array::Scalar<std::string>(v));
  } else {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> v, node.Strings("value_strings", {}));
    ctx.set_output(0, Array::Vector<std::string>(v));
  }
  return Status::Ok();
}

}  // namespace tessera::onnx::control
