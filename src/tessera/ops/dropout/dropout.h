// Dropout with a counter-based mask: element i (row-major) is kept iff
// UniformAt(seed, offset + i) >= p, and kept values are scaled by 1/(1-p).
// The mask is never stored: the backward regenerates it from (seed, offset),
// so results are identical for any thread count and across recompute.
// p must be in [0, 1] (p = 1 drops everything); otherwise OpError.
#pragma once

#include <cstdint>

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset = 0);
Tensor DropoutBackward(const Tensor& grad_out, float p, uint64_t seed, uint64_t offset = 0);

}  // namespace tessera::ops
