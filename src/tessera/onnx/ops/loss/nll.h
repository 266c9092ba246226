// The negative log-likelihood loss shared by NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss: attributes, checks and the computation over
// (N, C, d1..dk) log-probabilities.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx {

struct NllOptions {
  enum class Reduction { kNone, kSum, kMean } reduction = Reduction::kMean;
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
};

// Reads `reduction` (none / sum / mean, default mean) and `ignore_index`.
StatusOr<NllOptions> ReadNllOptions(const OpContext& ctx);

// loss[n, d...] = -input[n, target[n, d...], d...] * weight[target] (0 where
// target == ignore_index), then reduced: none keeps target's shape, sum adds
// everything, mean divides the sum by the sum of the applied weights.
// `input` holds `in_shape` (rank >= 2) row-major; `weight` may be null (all
// ones). The result has element type `out_type`.
StatusOr<Array> NllLoss(const OpContext& ctx, const std::vector<double>& input, const std::vector<int64_t>& in_shape,
                        const Array& target, const Array* weight, const NllOptions& opts, ElemType out_type);

}  // namespace tessera::onnx
