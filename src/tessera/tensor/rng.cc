#include "tessera/tensor/rng.h"

#include <cmath>
#include <vector>

namespace tessera {

std::array<uint32_t, 4> Philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0;
    uint32_t n1 = lo1;
    uint32_t n2 = hi0 ^ c3 ^ k1;
    uint32_t n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

float UniformAt(uint64_t seed, uint64_t index) {
  auto r = Philox4x32(seed, 0, index);
  return static_cast<float>(r[0] >> 8) * (1.0f / 16777216.0f);
}

float NormalAt(uint64_t seed, uint64_t index) {
  auto r = Philox4x32(seed, 1, index);
  // u1 in (0, 1], u2 in [0, 1).
  double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967296.0;
  double u2 = static_cast<double>(r[1]) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  auto r = Philox4x32(seed, 2, stream);
  return (static_cast<uint64_t>(r[0]) << 32) | r[1];
}

namespace {
template <typename Gen>
void FillWith(Tensor& t, Gen&& gen) {
  TESSERA_CHECK(IsFloating(t.dtype()), "random fill of a {} tensor", DTypeName(t.dtype()));
  int64_t n = t.numel();
  std::vector<float> values(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) values[i] = gen(static_cast<uint64_t>(i));
  Tensor src = Tensor::FromVector(values, t.shape(), DType::kF32);
  t.CopyFrom(src);
}
}  // namespace

void FillUniform(Tensor& t, uint64_t seed, float low, float high, uint64_t offset) {
  FillWith(t, [&](uint64_t i) { return low + (high - low) * UniformAt(seed, offset + i); });
}

void FillNormal(Tensor& t, uint64_t seed, float mean, float stddev, uint64_t offset) {
  FillWith(t, [&](uint64_t i) { return mean + stddev * NormalAt(seed, offset + i); });
}

}  // namespace tessera
