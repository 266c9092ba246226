// The reduce family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/reduce/kernels.h"

namespace tessera::onnx {

void RegisterReduceOps(OpRegistry& r) {
  r.Register("ReduceSum", ReduceSumKernel);
  r.Register("ReduceMean", ReduceMeanKernel);
  r.Register("ReduceProd", ReduceProdKernel);
  r.Register("ReduceMax", ReduceMaxKernel);
  r.Register("ReduceMin", ReduceMinKernel);
  r.Register("ReduceL1", ReduceL1Kernel);
  r.Register("ReduceL2", ReduceL2Kernel);
  r.Register("ReduceSumSquare", ReduceSumSquareKernel);
  r.Register("ReduceLogSum", ReduceLogSumKernel);
  r.Register("ReduceLogSumExp", ReduceLogSumExpKernel);
  r.Register("ArgMax", ArgMaxKernel);
  r.Register("ArgMin", ArgMinKernel);
  r.Register("CumSum", CumSumKernel);
  r.Register("Softmax", SoftmaxKernel);
  r.Register("LogSoftmax", LogSoftmaxKernel);
  r.Register("Hardmax", HardmaxKernel);
  r.Register("TopK", TopKKernel);
}

}  // namespace tessera::onnx
