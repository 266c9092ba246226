// The loss family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/loss/kernels.h"

namespace tessera::onnx {

void RegisterLossOps(OpRegistry& r) {
  r.Register("NegativeLogLikelihoodLoss", NegativeLogLikelihoodLossKernel);
  r.Register("SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLossKernel);
}

}  // namespace tessera::onnx
