// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011). The
// value of element i depends only on (seed, offset + i), never on how many
// threads fill the tensor or in which order, so every run, parallel layout
// and thread count sees the same numbers. Stateless; thread-safe.
#pragma once

#include <array>
#include <cstdint>

#include "tessera/tensor/tensor.h"

namespace tessera {

// Four 32-bit random words for (key, counter).
std::array<uint32_t, 4> Philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

// Uniform float in [0, 1) for stream element `index`.
float UniformAt(uint64_t seed, uint64_t index);
// Standard normal for stream element `index` (Box-Muller on two uniforms).
float NormalAt(uint64_t seed, uint64_t index);

// Fill a floating tensor (any layout) in row-major element order, element i
// taking stream index `offset + i`.
void FillUniform(Tensor& t, uint64_t seed, float low, float high, uint64_t offset = 0);
void FillNormal(Tensor& t, uint64_t seed, float mean, float stddev, uint64_t offset = 0);

// Derives an independent seed for a named stream (e.g. per-parameter init).
uint64_t DeriveSeed(uint64_t seed, uint64_t stream);

}  // namespace tessera
