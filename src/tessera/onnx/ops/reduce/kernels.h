// Kernels of the reduce family (Reduce*, ArgMax/ArgMin, CumSum, Softmax /
// LogSoftmax / Hardmax, TopK), declared for register.cc and the unit tests.
#pragma once

#include "tessera/onnx/op.h"

namespace tessera::onnx {

// reduce.cc
Status ReduceSumKernel(OpContext& ctx);
Status ReduceMeanKernel(OpContext& ctx);
Status ReduceProdKernel(OpContext& ctx);
Status ReduceMaxKernel(OpContext& ctx);
Status ReduceMinKernel(OpContext& ctx);
Status ReduceL1Kernel(OpContext& ctx);
Status ReduceL2Kernel(OpContext& ctx);
Status ReduceSumSquareKernel(OpContext& ctx);
Status ReduceLogSumKernel(OpContext& ctx);
Status ReduceLogSumExpKernel(OpContext& ctx);

// arg.cc
Status ArgMaxKernel(OpContext& ctx);
Status ArgMinKernel(OpContext& ctx);

// cumsum.cc
Status CumSumKernel(OpContext& ctx);

// softmax.cc
Status SoftmaxKernel(OpContext& ctx);
Status LogSoftmaxKernel(OpContext& ctx);
Status HardmaxKernel(OpContext& ctx);

// topk.cc
Status TopKKernel(OpContext& ctx);

}  // namespace tessera::onnx
