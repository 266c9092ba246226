// The quant family's kernels (see op.h for the list this family covers); each
// kernel file registers its own operators (kernels.h).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/quant/kernels.h"

namespace tessera::onnx {

void RegisterQuantOps(OpRegistry& r) {
  quant::RegisterQuantizeKernels(r);
  quant::RegisterQLinearKernels(r);
}

}  // namespace tessera::onnx
