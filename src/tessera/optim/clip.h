// Gradient clipping by global L2 norm (as torch.nn.utils.clip_grad_norm_).
// The norm is taken over the gradients of all given tensors together
// (tensors without a gradient are ignored), accumulated in double. If it
// exceeds max_norm, every gradient is scaled in place by
// max_norm / (norm + 1e-6). A non-finite norm (inf/NaN gradients) is
// returned without scaling anything, so the caller can skip the step.
// Thread-safety: the caller must not mutate the gradients concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::optim {

// Global L2 norm of the gradients (no scaling).
double GradNorm(const std::vector<Tensor>& params);
// Returns the pre-clip global norm.
double ClipGradNorm(const std::vector<Tensor>& params, double max_norm);
// Sum of x[i]^2 over n floats, accumulated in double (vectorized).
// Single-threaded.
double SumOfSquares(const float* x, int64_t n);

}  // namespace tessera::optim
