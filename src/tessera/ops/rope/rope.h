// Rotary position embedding (RoFormer / GPT-NeoX "rotate half" layout) on
// x [B, H, T, Dh] with Dh even: for i < Dh/2 the pair (x_i, x_{i+Dh/2}) at
// position p = position_offset + t is rotated by angle p·base^(-2i/Dh).
// The backward is the rotation by the opposite angle. Any floating dtype,
// computed in fp32 (angles in double), rounded once. The optimized path
// reads cos/sin from a process-wide table cache (mutex-guarded, immutable
// tables shared by pointer); thread-safe. Rank != 4, odd Dh, base <= 0 or a
// negative offset throw OpError.
#pragma once

#include <cstdint>

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Rope(const Tensor& x, float base = 10000.0f, int64_t position_offset = 0);
Tensor RopeBackward(const Tensor& grad_out, float base = 10000.0f, int64_t position_offset = 0);

}  // namespace tessera::ops
