// The elementwise family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/elementwise/elementwise_ops.h"

namespace tessera::onnx {

void RegisterElementwiseOps(OpRegistry& r) {
  elementwise::RegisterUnaryMathOps(r);
  elementwise::RegisterActivationOps(r);
  elementwise::RegisterBinaryMathOps(r);
  elementwise::RegisterLogicOps(r);
  elementwise::RegisterVariadicOps(r);
  elementwise::RegisterCastOps(r);
}

}  // namespace tessera::onnx
