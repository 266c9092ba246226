// The nn family's kernels (see op.h for the list this family covers); each
// kernel file registers its own operators (kernels.h).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/nn/kernels.h"

namespace tessera::onnx {

void RegisterNnOps(OpRegistry& r) {
  nn::RegisterConvKernels(r);
  nn::RegisterPoolKernels(r);
  nn::RegisterNormKernels(r);
  nn::RegisterLocalNormKernels(r);
  nn::RegisterGemmKernels(r);
  nn::RegisterDropoutKernels(r);
  nn::RegisterResizeKernels(r);
  nn::RegisterSampleKernels(r);
}

}  // namespace tessera::onnx
